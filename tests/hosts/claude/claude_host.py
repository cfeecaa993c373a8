"""The real Claude Code as the MCP host of this checkout's ``bin/conch serve``, run offline
against the scripted fake model of ``fake_messages.py``.

:func:`install` puts the pinned CLI into ``.cache/hosts/claude/`` (npm, once; later runs find
the binary there). :func:`run` starts ``claude -p`` with a fresh config dir, the fake model as
``ANTHROPIC_BASE_URL`` and Conch as its only MCP server, waits for it to finish and kills
whatever of it is left. Conch is started through a small wrapper in the test's tmp dir that
copies both directions of its stdio to files, so a test can read what the host sent it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from claude_offline import Offline
from fake_messages import FakeMessages, Step
from procs import reap_zombie_children

VERSION = "2.1.197"
PACKAGES = (
    f"@anthropic-ai/claude-code@{VERSION}",
    f"@anthropic-ai/claude-code-linux-x64@{VERSION}",
)
REPO = Path(__file__).resolve().parents[3]
CONCH = REPO / "bin" / "conch"
CACHE = REPO / ".cache" / "hosts" / "claude"
# the platform package's native binary; the npm wrapper's postinstall only links it
BINARY = CACHE / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"

# what every run sets (see /work/shared/reference/hosts.md): no login, no side traffic, and
# IS_SANDBOX=1, without which --dangerously-skip-permissions is refused as root
FIXED_ENV = {
    "ANTHROPIC_API_KEY": "dummy",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "IS_SANDBOX": "1",
    # -p waits only 2 s for MCP servers by default and then starts without their tools; this
    # makes it wait for Conch (uv takes a while to start it on a busy machine)
    "MCP_CONNECTION_NONBLOCKING": "0",
    "MCP_CONNECT_TIMEOUT_MS": "60000",
}
# what is passed on from the test's own environment: nothing of a developer's ANTHROPIC_* or
# CLAUDE_* settings may reach the host
PASSED_ENV = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "UV_CACHE_DIR", "XDG_CACHE_HOME")

# set in the environment of Conch's wrapper, so teardown finds the server even once it has left
# the host's process tree (Conch's jobs, in sessions of their own, do not inherit it: they are
# found as the server's descendants)
RUN_MARK = "CONCH_CLAUDE_HOST_RUN"
WRAPPER = """#!/usr/bin/env bash
# {conch} serve, with what the host sends and what Conch answers copied to files
export {mark}={run}
tee -- {to_conch} | {conch} serve --data-dir {data}{args} 2>>{stderr} | tee -- {from_conch}
"""


class InstallError(Exception):
    pass


def _installed() -> bool:
    try:
        manifest = json.loads((BINARY.parent / "package.json").read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("version") == VERSION and BINARY.is_file()


def install() -> Path:
    """The path of the pinned ``claude`` binary, installing it first if it is not there."""
    if _installed():
        return BINARY
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm is not on PATH")
    CACHE.mkdir(parents=True, exist_ok=True)
    # one installer at a time: the test workers may all get here at once
    with open(CACHE.parent / "claude.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed():
            cmd = [npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund"]
            cmd += ["--no-save", "--ignore-scripts", "--loglevel=error", *PACKAGES]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            except subprocess.TimeoutExpired as e:
                raise InstallError(f"`{shlex.join(cmd)}` took over {e.timeout:.0f} s") from e
            if r.returncode != 0 or not _installed():
                tail = (r.stderr or r.stdout).strip().splitlines()[-5:]
                raise InstallError(f"`{shlex.join(cmd)}` failed: " + " | ".join(tail))
    return BINARY


def jsonl(path: Path) -> list[Any]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


@dataclass
class Run:
    """One finished ``claude -p`` run."""

    fake: FakeMessages
    returncode: int | None
    seconds: float
    events: list[Any]  # the stream-json lines on the host's stdout
    stderr: str
    dir: Path  # the run's files: the config dir, Conch's traffic and data dir

    def results(self) -> list[dict[str, Any] | None]:
        return self.fake.tool_results()

    def to_conch(self) -> list[Any]:
        """The JSON-RPC messages the host sent to Conch."""
        return jsonl(self.dir / "to-conch.jsonl")

    def from_conch(self) -> list[Any]:
        return jsonl(self.dir / "from-conch.jsonl")

    def diagnostics(self) -> str:
        tail = "\n".join(json.dumps(e)[:400] for e in self.events[-5:])
        conch_err = (self.dir / "conch.stderr").read_text(errors="replace")[-2000:]
        return (
            f"claude exited {self.returncode} after {self.seconds:.1f} s\n"
            f"--- last stream-json events\n{tail}\n--- claude stderr\n{self.stderr[-2000:]}\n"
            f"--- conch stderr\n{conch_err}"
        )


def _of_run(proc: subprocess.Popen[bytes], workdir: Path) -> list[psutil.Process]:
    """The host's session, the processes marked with the run's RUN_MARK, and their descendants."""
    roots: dict[int, psutil.Process] = {}
    if proc.returncode is None:  # not reaped yet, so the pid is still the host's
        with contextlib.suppress(psutil.Error):
            roots[proc.pid] = psutil.Process(proc.pid)
    mark = f"{RUN_MARK}={workdir}".encode()
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(p.pid) == proc.pid:
                roots[p.pid] = p
                continue
            with open(f"/proc/{p.pid}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    roots[p.pid] = p
    found = dict(roots)
    for p in roots.values():
        with contextlib.suppress(psutil.Error):
            found |= {c.pid: c for c in p.children(recursive=True)}
    found.pop(proc.pid, None)  # the host itself is reaped through proc
    return list(found.values())


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill_tree(proc: subprocess.Popen[bytes], workdir: Path) -> None:
    """Kill the host and everything it started, Conch's jobs included, and reap the host."""
    deadline = time.monotonic() + 5
    while True:
        left = [p for p in _of_run(proc, workdir) if _alive(p)]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(left, timeout=1)
        if proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(1)
        if (not left and proc.poll() is not None) or time.monotonic() > deadline:
            reap_zombie_children(0.5)
            return


def _conch_wrapper(workdir: Path, conch_args: tuple[str, ...] = ()) -> Path:
    wrapper = workdir / "conch-tee.sh"
    q = {
        key: shlex.quote(str(workdir / name))
        for key, name in (
            ("to_conch", "to-conch.jsonl"),
            ("from_conch", "from-conch.jsonl"),
            ("data", "conch-data"),
            ("stderr", "conch.stderr"),
        )
    }
    run = shlex.quote(str(workdir))
    args = "".join(" " + shlex.quote(a) for a in conch_args)
    wrapper.write_text(
        WRAPPER.format(conch=shlex.quote(str(CONCH)), mark=RUN_MARK, run=run, args=args, **q)
    )
    wrapper.chmod(0o755)
    (workdir / "conch.stderr").touch()
    return wrapper


def _interrupt_on_call(proc: subprocess.Popen[bytes], workdir: Path, tool: str) -> None:
    """Once Conch has been running a ``tool`` call for a second, interrupt the host as a person
    would (SIGINT, Ctrl-C)."""
    while proc.poll() is None:
        calls = [m for m in jsonl(workdir / "to-conch.jsonl") if m.get("method") == "tools/call"]
        if any(m["params"].get("name") == tool for m in calls):
            time.sleep(1)
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
            return
        time.sleep(0.1)


def run(
    binary: Path,
    script: list[Step],
    workdir: Path,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    interrupt_on: str | None = None,
    conch_args: tuple[str, ...] = (),
    prepare: Callable[[Path], None] | None = None,
) -> tuple[Run, Offline]:
    """Run ``claude -p "do it"`` in ``workdir`` with Conch as its MCP server and the fake model
    playing ``script``. ``env`` adds variables (``MCP_TOOL_TIMEOUT``, say); ``interrupt_on``
    names a Conch tool whose call a person interrupts; ``conch_args`` are added to
    ``conch serve`` (``--profile claude-code``, say). With ``prepare``, no Conch server is
    given on the command line: ``prepare(config_dir)`` registers one in the host's own config
    (``CLAUDE_CONFIG_DIR``) before it starts."""
    config, tmp = workdir / "config", workdir / "tmp"
    project = workdir / "project"  # the host's cwd: no CLAUDE.md or .mcp.json of this repo
    for d in (config, tmp, project):
        d.mkdir(parents=True, exist_ok=True)
    cmd = [str(binary), "-p", "do it", "--dangerously-skip-permissions"]
    cmd += ["--output-format", "stream-json", "--verbose"]
    if prepare is None:
        mcp_config = workdir / "mcp.json"
        server = {"command": str(_conch_wrapper(workdir, conch_args))}
        mcp_config.write_text(json.dumps({"mcpServers": {"conch": server}}))
        cmd += ["--mcp-config", str(mcp_config), "--strict-mcp-config"]
    else:
        (workdir / "conch.stderr").touch()
        prepare(config)
    out_path, err_path = workdir / "claude.stdout", workdir / "claude.stderr"

    offline = Offline()
    try:
        fake = offline.call(lambda: FakeMessages(script))
        try:
            full_env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
            full_env |= FIXED_ENV | offline.proxy_env
            full_env |= {
                "ANTHROPIC_BASE_URL": fake.url,
                "CLAUDE_CONFIG_DIR": str(config),
                "CLAUDE_CODE_TMPDIR": str(tmp),
                "TERM": "dumb",
            }
            full_env |= env or {}
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                start = time.monotonic()
                proc = offline.call(
                    lambda: subprocess.Popen(
                        cmd,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                        cwd=project,
                        env=full_env,
                        start_new_session=True,
                    )
                )
                try:
                    if interrupt_on:
                        args = (proc, workdir, interrupt_on)
                        threading.Thread(target=_interrupt_on_call, args=args, daemon=True).start()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=timeout)
                    seconds = time.monotonic() - start
                    returncode = proc.poll()
                finally:
                    _kill_tree(proc, workdir)
        finally:
            fake.close()
    finally:
        offline.close()
    with open(workdir / "model-requests.jsonl", "w") as log:
        for r in fake.requests:
            log.write(json.dumps({"method": r.method, "path": r.path, "body": r.body}) + "\n")
    result = Run(
        fake=fake,
        returncode=returncode,
        seconds=seconds,
        events=jsonl(out_path),
        stderr=err_path.read_text(errors="replace"),
        dir=workdir,
    )
    return result, offline
