"""Fetch what the suite's tests would otherwise fetch on first use, all at once, while the
suite starts: the real hosts (Codex CLI, Claude Code: about 660 MB of npm packages), the MCP
conformance suite with its node, the newer glibc and the published originals of the
differential tests (a venv each). bin/test starts it in the background on a
whole-suite run. Each fetch is the tests' own function, under the tests' own lock: a test that
needs a package meanwhile waits for it, then finds it installed. A fetch that fails here is only
logged; the test that needs it tries again and reports the failure as it always has.

    .venv/bin/python tests/support/prefetch.py
"""

from __future__ import annotations

import importlib.util
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
DIFFERENTIAL = TESTS / "tools" / "profiles" / "differential"
for d in (
    TESTS / "support",
    TESTS / "hosts",
    TESTS / "hosts" / "claude",
    TESTS / "hosts" / "codex",
    DIFFERENTIAL,
):
    sys.path.insert(0, str(d))


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (a dataclass looks its module up there)
    spec.loader.exec_module(module)
    return module


def codex() -> Any:
    import codex_exec

    hosts = load("hosts_conftest", TESTS / "hosts" / "conftest.py")
    return hosts.npm_install_pinned(
        "codex", codex_exec.PACKAGE, codex_exec.VERSION, codex_exec.BINARY_GLOB
    )


def claude() -> Any:
    import claude_host

    return claude_host.install()


def conformance() -> Any:
    return load("conformance", TESTS / "conformance" / "test_mcp_conformance.py").install()


def glibc() -> Any:
    import newer_glibc

    return newer_glibc.glibc_dir()


def original(module: str) -> Callable[[], Any]:
    def fetch() -> Any:
        from harness import original_venv

        return original_venv(*load(module, DIFFERENTIAL / f"{module}.py").ORIGINAL)

    return fetch


FETCHES: dict[str, Callable[[], Any]] = {
    "codex": codex,
    "claude": claude,
    "conformance": conformance,
    "glibc": glibc,
    "tfbash-mcp": original("test_tfbash_diff"),
    "ai-device-bash": original("test_ai_device_bash_diff"),
}


def fetch(name: str) -> str:
    t0 = time.monotonic()
    try:
        FETCHES[name]()
        outcome = "ready"
    except BaseException:  # (a test's skip is a BaseException): the test reports it
        outcome = "failed (the tests that need it will say why):\n" + traceback.format_exc()
    return f"{name}: {outcome} ({time.monotonic() - t0:.1f} s)"


def main() -> None:
    with ThreadPoolExecutor(len(FETCHES)) as pool:
        for line in pool.map(fetch, FETCHES):
            print(line, flush=True)


if __name__ == "__main__":
    main()
