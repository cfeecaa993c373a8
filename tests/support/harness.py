"""Differential harness: the published original and a Conch profile, side by side.

Both servers are driven by the official MCP client over real stdio with the same call
sequence, in the same working directory with the same environment; the results are recorded,
volatile values (ids, pids, temp paths, times) are normalized, and every remaining difference
must be on the profile's allow-list, each entry citing a listed seed bug or a SPEC sentence.

Shared by every profile's differential test (tests/tools/profiles/differential/).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[2]
ORIGINALS = REPO / ".venv-originals"  # gitignored by `.venv-*/`
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")))


class HarnessError(AssertionError):
    """The differential setup itself failed (an interpreter or package is missing)."""


# -- the originals' interpreters and virtual environments ------------------------------------------


def _version_key(path: str) -> tuple[int, ...]:
    m = re.search(r"versions/(\d+(?:\.\d+)*)", path)
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def original_python(version: str) -> str:
    """A CPython ``version`` (e.g. ``"3.12"``) interpreter from pyenv: the newest
    ``$PYENV_ROOT/versions/<version>.*/bin/python``, else ``pyenv which``. Fails (never skips)
    when there is none, since CI machines have pyenv's 3.10–3.13."""
    found = glob.glob(str(PYENV_ROOT / "versions" / f"{version}.*" / "bin" / "python"))
    found += glob.glob(str(PYENV_ROOT / "versions" / version / "bin" / "python"))
    found = [p for p in found if os.access(p, os.X_OK)]
    if found:
        return max(found, key=_version_key)
    pyenv = shutil.which("pyenv") or str(PYENV_ROOT / "bin" / "pyenv")
    if os.access(pyenv, os.X_OK):
        for candidate in _pyenv_versions(pyenv, version):
            r = subprocess.run(
                [pyenv, "which", "python"],
                capture_output=True,
                text=True,
                env={**os.environ, "PYENV_VERSION": candidate},
            )
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout.strip()
    raise HarnessError(
        f"differential tests need Python {version} (pyenv: {PYENV_ROOT}/versions/{version}.*); "
        f"install it with `pyenv install {version}`"
    )


def _pyenv_versions(pyenv: str, version: str) -> list[str]:
    r = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True)
    names = [v.strip() for v in r.stdout.splitlines() if v.strip()]
    return sorted(
        (v for v in names if v == version or v.startswith(version + ".")),
        key=lambda v: _version_key("versions/" + v),
        reverse=True,
    )


def original_venv(name: str, python_version: str, requirement: str) -> Path:
    """A virtual environment ``.venv-originals/<name>`` with ``requirement`` installed by pip,
    created once and reused (a marker records what was installed). Safe when several pytest
    processes race: creation holds an exclusive lock on ``.venv-originals/<name>.lock``."""
    ORIGINALS.mkdir(parents=True, exist_ok=True)
    target = ORIGINALS / name
    marker = target / ".conch-installed"
    want = f"{python_version} {requirement}\n"
    with open(ORIGINALS / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if marker.exists() and marker.read_text() == want and _venv_python(target).exists():
                return target
            python = original_python(python_version)
            shutil.rmtree(target, ignore_errors=True)
            r = subprocess.run([python, "-m", "venv", str(target)], capture_output=True, text=True)
            if r.returncode != 0:
                raise HarnessError(f"venv for {name} failed: {r.stderr[-2000:]}")
            pip = [str(_venv_python(target)), "-m", "pip", "--disable-pip-version-check", "-q"]
            r = subprocess.run(
                [*pip, "install", requirement], capture_output=True, text=True, timeout=900
            )
            if r.returncode != 0:
                shutil.rmtree(target, ignore_errors=True)
                raise HarnessError(f"pip install {requirement} failed: {r.stderr[-4000:]}")
            marker.write_text(want)
            return target
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _venv_python(target: Path) -> Path:
    return target / "bin" / "python"


def venv_script(target: Path, script: str) -> str:
    """The path of a console script installed in a venv (fails if it is not there)."""
    path = target / "bin" / script
    if not path.exists():
        raise HarnessError(f"{script} is not installed in {target}")
    return str(path)


# -- a server under test ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """How to start one side: command line, environment and working directory."""

    label: str
    command: str
    args: Sequence[str]
    env: Mapping[str, str]
    cwd: str

    @staticmethod
    def conch(profile: str, cwd: str, env: Mapping[str, str], *extra: str) -> Server:
        """``python -m conch serve --profile <profile>`` from this checkout's interpreter."""
        return Server(
            f"conch --profile {profile}",
            sys.executable,
            ["-m", "conch", "serve", "--profile", profile, *extra],
            env,
            cwd,
        )


def shared_env(tmp: Path, **extra: str) -> dict[str, str]:
    """One environment for both sides: the test's own minus what differs per interpreter or
    per project (virtualenv activation, Python paths), a fixed HOME, LANG and TERM."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "VIRTUAL_ENV", "PYTHON", "UV_", "CONCH_"))
        and k not in ("PWD", "OLDPWD")
    }
    env.update({"HOME": str(tmp), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "xterm-256color"})
    env["CONCH_DATA_DIR"] = str(tmp / ".conch-data")
    env.update(extra)
    return env


@dataclass
class Session:
    """An initialized client session and what the server said at initialize."""

    client: Client
    initialize: dict[str, Any]
    server: Server
    stderr_path: Path | None = None
    notes: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def open_session(server: Server, stderr_path: Path | None = None) -> AsyncIterator[Session]:
    """An official MCP client session over stdio to ``server`` (the handshake era, which every
    original speaks), yielding the session and the initialize result as a plain dict."""
    params = StdioServerParameters(
        command=server.command, args=list(server.args), env=dict(server.env), cwd=server.cwd
    )
    errlog = open(stderr_path or os.devnull, "w")  # noqa: SIM115 (closed below)
    try:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            init = _dump(await client.session.initialize())  # the cached handshake result
            yield Session(client, init, server, stderr_path)
    finally:
        errlog.close()


def _dump(obj: Any) -> Any:
    if obj is None:
        return None
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    return obj


# -- running a sequence ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One request of a sequence. ``method`` is ``tools/call`` (``name`` + ``arguments``),
    ``tools/list``, ``resources/list``, ``resources/templates/list``, or ``resources/read``,
    ``resources/subscribe``, ``resources/unsubscribe`` (``uri``). ``key`` names the recorded
    entry (default ``name``/method); placeholders in ``arguments`` (``"$key.path.to.field"``)
    are fields of earlier results; ``until``, when given, repeats the call (up to
    ``attempts`` times) until it holds."""

    name: str = ""
    arguments: Mapping[str, Any] | None = None
    method: str = "tools/call"
    uri: str = ""
    key: str = ""
    until: Callable[[dict[str, Any]], bool] | None = None
    attempts: int = 50
    raw_arguments: Any = None  # sent as-is (for non-object arguments)
    # with ``until``: the structuredContent field (e.g. ``output``) whose values are joined
    # over the attempts, so the entry does not depend on how the server split them in time
    accumulate: str | None = None

    @property
    def label(self) -> str:
        return self.key or self.name or self.method


def _resolve(value: Any, recorded: Mapping[str, dict[str, Any]]) -> Any:
    """``"$label.path"`` is a field of an earlier result; ``"$a.x|$b.y"`` the first that
    exists (e.g. the previous attempt's ``next_cursor``, else the exec's)."""
    if isinstance(value, str) and value.startswith("$") and "." in value:
        for alternative in value.split("|"):
            key, _, path = alternative[1:].partition(".")
            if key not in recorded:
                continue
            cur: Any = recorded[key]
            try:
                for part in path.split("."):
                    cur = cur[int(part)] if isinstance(cur, list) else cur[part]
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            return cur
        return value
    if isinstance(value, Mapping):
        return {k: _resolve(v, recorded) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, recorded) for v in value]
    return value


async def run_sequence(session: Session, calls: Iterable[Call]) -> list[dict[str, Any]]:
    """Run ``calls`` in order and record, for each: ``isError``, ``structuredContent``, the
    text blocks (JSON-decoded when they are JSON), ``_meta`` and, for a protocol error, the
    JSON-RPC ``error`` (``code``, ``message``). Results are addressable by label for ``bind``."""
    recorded: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for call in calls:
        entry: dict[str, Any] = {}
        joined: list[Any] = []
        for _ in range(max(1, call.attempts if call.until else 1)):
            entry = await _one(session.client, call, recorded)
            sc = entry.get("structuredContent")
            if call.accumulate and isinstance(sc, dict) and call.accumulate in sc:
                joined.append(sc[call.accumulate])
            if isinstance(sc, dict):
                recorded[call.label] = sc  # the next attempt may bind to this one
            if call.until is None or call.until(entry):
                break
        if call.accumulate and joined and isinstance(entry.get("structuredContent"), dict):
            entry["structuredContent"] = {
                **entry["structuredContent"],
                call.accumulate: "".join(map(str, joined)),
            }
            entry["content"] = [{"accumulated": call.accumulate}]
        entry = {"call": call.label, **entry}
        recorded[call.label] = entry.get("structuredContent") or entry
        out.append(entry)
    return out


async def _one(
    client: Client, call: Call, recorded: Mapping[str, dict[str, Any]]
) -> dict[str, Any]:
    try:
        if call.method == "tools/call":
            args = (
                call.raw_arguments
                if call.raw_arguments is not None
                else _resolve(dict(call.arguments or {}), recorded)
            )
            try:
                r = await client.call_tool(call.name, args)
            except RuntimeError as e:  # the client rejected the result (e.g. its output schema)
                return {"client_error": str(e)}
            return _tool_result(r)
        if call.method == "tools/list":
            return {"result": _dump(await client.list_tools())}
        if call.method == "resources/list":
            return {"result": _dump(await client.list_resources())}
        if call.method == "resources/templates/list":
            return {"result": _dump(await client.list_resource_templates())}
        if call.method == "resources/read":
            return {"result": _dump(await client.read_resource(_resolve(call.uri, recorded)))}
        if call.method == "resources/subscribe":
            return {"result": _dump(await client.subscribe_resource(call.uri))}
        if call.method == "resources/unsubscribe":
            return {"result": _dump(await client.unsubscribe_resource(call.uri))}
        raise HarnessError(f"unknown method {call.method}")
    except MCPError as e:
        return {"error": {"code": e.error.code, "message": e.error.message}}


def _tool_result(r: Any) -> dict[str, Any]:
    texts: list[Any] = []
    for block in r.content:
        if getattr(block, "type", None) == "text":
            try:
                value = json.loads(block.text)
            except ValueError:
                texts.append({"text": block.text})
                continue
            compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            texts.append({"json": value, "layout": "compact" if block.text == compact else "other"})
        else:
            texts.append({"block": _dump(block)})
    entry: dict[str, Any] = {
        "isError": bool(r.is_error),
        "structuredContent": r.structured_content,
        "content": texts,
    }
    meta = getattr(r, "meta", None)
    if meta:
        entry["_meta"] = dict(meta)
    return entry


# -- normalizing volatile values -------------------------------------------------------------------

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(shell|exec)_[0-9a-f]+_[0-9a-f]{32}\b"), r"<\1_id>"),
    (re.compile(r"\b\d+ ms\b"), "<n> ms"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<time>"),
]
VOLATILE_KEYS = {
    "duration_ms": "<ms>",
    "created_at_ms": "<epoch_ms>",
    "pid": "<pid>",
    "background_pid": "<pid>",
    "started_at": "<time>",
    "finished_at": "<time>",
}


@dataclass
class Normalizer:
    """Replaces volatile values only: ids seen in results (numbered in order of first
    appearance, so equal ids stay equal), pids, durations, timestamps and the given paths
    (the shared temp cwd, HOME, the interpreter's prefix)."""

    paths: Mapping[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)

    def __call__(self, obj: Any, key: str = "") -> Any:
        if isinstance(obj, Mapping):
            return {k: self(v, k) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self(v, key) for v in obj]
        if key in VOLATILE_KEYS and isinstance(obj, (int, float, str)) and obj is not True:
            return VOLATILE_KEYS[key]
        if isinstance(obj, str):
            return self.text(obj, key)
        return obj

    def _id(self, kind: str, raw: str) -> str:
        if raw not in self.ids:
            n = sum(1 for v in self.ids.values() if v.startswith(f"<{kind}#"))
            self.ids[raw] = f"<{kind}#{n + 1}>"
        return self.ids[raw]

    def text(self, s: str, key: str = "") -> str:
        if key in ("shell_id", "active_exec_id") and s:
            return self._id("shell" if key == "shell_id" else "exec", s)
        if key == "exec_id" and s:
            return self._id("exec", s)
        for raw, placeholder in self.ids.items():
            if raw in s:
                s = s.replace(raw, placeholder)
        for path, placeholder in sorted(self.paths.items(), key=lambda kv: -len(kv[0])):
            if path:
                s = s.replace(path, placeholder)
        for pat, repl in _PATTERNS:
            s = pat.sub(repl, s)
        return s


def normalize(obj: Any, paths: Mapping[str, str] | None = None) -> Any:
    """One-shot normalization (a fresh id table); use a ``Normalizer`` per side to keep ids
    consistent across a whole sequence."""
    return Normalizer(dict(paths or {}))(obj)


# -- comparing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Allowed:
    """A difference that is accepted: ``call`` (a recorded entry's label, ``*`` for any) and
    ``path`` (a regular expression over the JSON path inside the entry, e.g.
    ``structuredContent\\.output``), with the ``reason`` citing a listed seed bug
    (seed-contracts.md) or a SPEC sentence. ``check(original, ours)``, when given, narrows
    the entry: the difference is allowed only if it holds (e.g. "equal once the seed's
    terminal noise is removed")."""

    call: str
    path: str
    reason: str
    check: Callable[[Any, Any], bool] | None = None

    def matches(self, call: str, path: str, original: Any = None, ours: Any = None) -> bool:
        if self.call != "*" and re.fullmatch(self.call, call) is None:
            return False
        if re.fullmatch(self.path, path) is None:
            return False
        return self.check is None or bool(self.check(original, ours))


def diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every difference between two JSON values as (path, a's value, b's value)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out: list[tuple[str, Any, Any]] = []
        for k in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{k}" if path else str(k)
            if k not in a:
                out.append((sub, "<absent>", b[k]))
            elif k not in b:
                out.append((sub, a[k], "<absent>"))
            else:
                out += diff(a[k], b[k], sub)
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        for i in range(max(len(a), len(b))):
            sub = f"{path}[{i}]"
            if i >= len(a):
                out.append((sub, "<absent>", b[i]))
            elif i >= len(b):
                out.append((sub, a[i], "<absent>"))
            else:
                out += diff(a[i], b[i], sub)
        return out
    if a != b or type(a) is not type(b):
        return [(path, a, b)]
    return []


def compare(
    original: Sequence[Mapping[str, Any]],
    ours: Sequence[Mapping[str, Any]],
    allowed: Iterable[Allowed] = (),
) -> list[tuple[str, str, Allowed]]:
    """Fails listing every difference (by call and JSON path) not on ``allowed``; returns the
    allowed differences that were seen, with the entry that allowed each."""
    allowed = list(allowed)
    for entry in allowed:
        if not entry.reason.strip():
            raise HarnessError(f"allow-list entry without a reason: {entry}")
    bad: list[str] = []
    used: list[tuple[str, str, Allowed]] = []
    if len(original) != len(ours):
        bad.append(f"sequence length: original {len(original)}, ours {len(ours)}")
    for a, b in zip(original, ours, strict=False):
        label = str(a.get("call", "?"))
        for path, va, vb in diff(a, b):
            hit = next((e for e in allowed if e.matches(label, path, va, vb)), None)
            if hit is None:
                bad.append(
                    f"{label}: {path}\n    original: {_short(va)}\n    conch:    {_short(vb)}"
                )
            else:
                used.append((label, path, hit))
    if bad:
        raise AssertionError(f"{len(bad)} difference(s) not on the allow-list:\n" + "\n".join(bad))
    return used


def _short(v: Any, limit: int = 600) -> str:
    s = json.dumps(v, ensure_ascii=False, sort_keys=True) if not isinstance(v, str) else repr(v)
    return s if len(s) <= limit else s[:limit] + f"... ({len(s)} chars)"


async def reap_adopted_orphans(limit_s: float = 8.0) -> None:
    """The original leaves escaped processes behind (a `setsid` daemon, a background subshell
    holding stdout). When this test process is a child subreaper (an in-process Conch runtime
    earlier in the session made it one) they are re-parented here once the original's shell
    exits: wait for these short sleeps to end and reap them; kill what outlives the limit."""
    deadline = time.monotonic() + limit_s
    while True:
        kids = psutil.Process().children()
        for kid in kids:
            with contextlib.suppress(psutil.NoSuchProcess, ChildProcessError):
                if kid.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(kid.pid, os.WNOHANG)
        if not psutil.Process().children():
            return
        if time.monotonic() > deadline:
            for kid in psutil.Process().children():
                with contextlib.suppress(psutil.NoSuchProcess):
                    kid.kill()
            await anyio.sleep(0.1)
            for kid in kids:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(kid.pid, os.WNOHANG)
            return
        await anyio.sleep(0.05)
