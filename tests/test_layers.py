"""docs/spec.md §1's layering holds: import-linter's contracts (pyproject.toml) are kept, and the
import graph rebuilt from the source — function-level and TYPE_CHECKING imports counted, which
import-linter does not all see — has no cycle and no edge pointing up a layer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# lowest first: a module may import only its own layer or lower ones
LAYERS = [
    "conch._version",
    "conch.errors",
    "conch.config",
    "conch.core",
    "conch.tools",
    "conch.runtime",
    "conch.dialects",
    "conch.fleet",
    "conch.mcp",
    "conch.http",
    "conch.cli",
]


def modules() -> dict[str, Path]:
    out = {}
    for p in (SRC / "conch").rglob("*.py"):
        name = ".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        out[name] = p
    return out


def _resolve(target: str, mods: dict[str, Path]) -> str | None:
    while target and target not in mods:
        target = target.rpartition(".")[0]
    return target or None


def _kind(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return "typing"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return "lazy"
    return "top"


def import_graph() -> dict[str, dict[str, set[str]]]:
    """module -> imported module -> kinds (top / lazy / typing)."""
    mods = modules()
    edges: dict[str, dict[str, set[str]]] = {m: {} for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")[: -node.level or None]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = node.module or ""
                if not module.startswith("conch"):
                    continue
                targets = [f"{module}.{a.name}" for a in node.names] + [module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("conch")]
            else:
                continue
            for t in targets:
                r = _resolve(t, mods)
                if r is None or r == name:
                    continue
                edges[name].setdefault(r, set()).add(_kind(node, parents))
    return edges


def _layer(module: str) -> int | None:
    for i, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            return i
    return None  # the package root and __main__: for users, above everything


def _cycles(edges: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_import_linter_contracts_are_kept():
    exe = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run(
        [str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "broken" not in r.stdout.lower().replace("0 broken", "")


def test_no_import_cycle_counting_lazy_and_type_only_imports():
    assert _cycles(import_graph()) == []


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for a, targets in import_graph().items():
        la = _layer(a)
        if la is None:
            continue
        for b, kinds in targets.items():
            lb = _layer(b)
            if lb is None or lb > la:
                upward.append(f"{a} -> {b} [{','.join(sorted(kinds))}]")
    assert upward == []


def test_inside_core_nothing_imports_the_engine():
    importers = [
        a
        for a, targets in import_graph().items()
        if a.startswith("conch.core.")  # (conch.core itself is the surface: it shows it)
        and a != "conch.core.engine"
        and "conch.core.engine" in targets
    ]
    assert importers == []


def test_the_graph_sees_lazy_and_type_only_imports():
    """The checks above would miss what they cannot see: the parser must report a function-level
    and a TYPE_CHECKING import as edges."""
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from conch.tools.tool import Tool\n"
        "def f():\n    from conch.runtime import Runtime\n"
    )
    tree = ast.parse(src)
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    kinds = sorted(
        _kind(n, parents)
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("conch")
    )
    assert kinds == ["lazy", "typing"]


# inside core, lowest first: each part may import its own or a lower one (the surface,
# conch/core/__init__.py, stands above them all)
CORE_LAYERS = [
    {"output", "datadir", "env", "pattern", "results", "netaddr", "once"},
    {"process"},
    {"containment"},
    {"jobs", "changes"},
    {"spawn", "requests"},
    {"shell", "search", "start", "ops"},
    {"shutdown"},
    {"engine"},
]


def _core_part(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["conch", "core"] else None


def _core_level(part: str) -> int | None:
    return next((i for i, names in enumerate(CORE_LAYERS) if part in names), None)


def test_inside_core_each_part_imports_only_its_own_level_or_lower_ones():
    """Issue 19: `jobs <-> process` was a package cycle no contract saw. Collapsed to core's
    parts (packages and top-level modules), lazy and TYPE_CHECKING imports counted, the graph
    is layered: no part imports one above it, so no cycle between parts can form."""
    parts = {_core_part(m) for m in modules()} - {None}
    assert {p for p in parts if _core_level(p) is None} == set(), "a core part has no level"
    upward = []
    for a, targets in import_graph().items():
        pa = _core_part(a)
        if pa is None:
            continue
        for b in targets:
            pb = _core_part(b)
            if pb is None or pb == pa:
                continue
            if _core_level(pb) > _core_level(pa):
                upward.append(f"{a} -> {b}")
    assert upward == []
    collapsed: dict[str, dict[str, set[str]]] = {}
    for a, targets in import_graph().items():
        pa = _core_part(a)
        if pa is None:
            continue
        for b, kinds in targets.items():
            pb = _core_part(b)
            if pb is not None and pb != pa:
                collapsed.setdefault(pa, {}).setdefault(pb, set()).update(kinds)
    assert _cycles(collapsed) == []


def test_above_the_core_only_its_surface_is_imported():
    """Issue 19: the layers above the core import ``conch.core`` (its __init__, the surface)
    and none of its modules, lazy and TYPE_CHECKING imports counted."""
    inside = [
        f"{a} -> {b}"
        for a, targets in import_graph().items()
        if not a.startswith("conch.core")
        for b in targets
        if b.startswith("conch.core.")
    ]
    assert inside == []


def _imports(path: Path) -> set[str]:
    """The top-level modules ``path`` imports (a relative import: ``.name``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            out |= {"." + (node.module or a.name) for a in node.names}
    return out


def test_the_standalone_scripts_and_the_filter_assembler_import_the_standard_library_only():
    """lockdown.py (the fork server) and shim.py (the bwrap broker's shim) run on their own
    (``python -I -S``), so they import the standard library and, the shim, lockdown.py, and
    nothing of Conch; the seccomp filters are pure: their assembler and the syscall tables,
    no ctypes, nothing else of Conch either."""
    here = SRC / "conch" / "core" / "containment" / "landlock"
    lockdown, seccomp = _imports(here / "lockdown.py"), _imports(here / "seccomp.py")
    bpf, syscalls = _imports(here / "bpf.py"), _imports(here / "syscalls.py")
    shim = _imports(here / "shim.py")
    stdlib = sys.stdlib_module_names | {"__future__"}
    assert lockdown - stdlib == set()
    assert shim - stdlib == {".lockdown"}
    assert seccomp - stdlib == {"conch"}
    conch_modules = {
        n.module
        for n in ast.walk(ast.parse((here / "seccomp.py").read_text()))
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("conch")
    }
    assert conch_modules == {
        "conch.core.containment.landlock.bpf",
        "conch.core.containment.landlock.syscalls",
    }
    assert bpf - stdlib == set()
    assert syscalls - stdlib == set()
    assert "ctypes" not in seccomp | bpf | syscalls
