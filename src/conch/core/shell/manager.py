"""The runtime's persistent shells: discovery, open, close, lookup, list — one owner of them all.

Commands run in a shell through :meth:`Shell.claim` + :meth:`Shell.run` (called by the engine,
which owns jobs); PTY one-shot jobs are the engine's own drivers (core/jobs/pty.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess

from conch.core.jobs.job import new_id
from conch.core.jobs.launch import find_shell
from conch.core.requests import ShellOpenRequest
from conch.core.results import ShellAvailable, ShellClosed, ShellOpened, ShellSummary
from conch.core.shell.session import Shell
from conch.core.shell.state import ShellState
from conch.core.spawn import SpawnContext
from conch.errors import ConchError

KINDS = ("bash", "zsh")


def _version(path: str) -> str:
    return _version_output(path)[0]


def _version_output(path: str) -> tuple[str, str]:
    """``(version, first line of --version)`` of a shell, e.g. ``("5.2.15(1)-release",
    "GNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)")``; empty when it does not run."""
    try:
        out = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=5,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "")},
        )
    except (OSError, subprocess.SubprocessError):
        return "", ""
    line = out.stdout.strip().split("\n")[0]
    m = re.search(r"version (\S+)|zsh (\S+)", out.stdout)
    return ((m.group(1) or m.group(2)) if m else line[:80]), line


class ShellManager:
    """Persistent shells (docs/spec.md §4) of one runtime."""

    def __init__(self, ctx: SpawnContext) -> None:
        self.ctx = ctx
        self._shells: dict[str, Shell] = {}
        self._available: list[ShellAvailable] | None = None
        self._closed = False

    # -- discovery ---------------------------------------------------------------------------

    def available(self) -> list[ShellAvailable]:
        """Installed shells: ``[{name, path, version, version_line}]`` (cached)."""
        if self._available is None:
            found: list[ShellAvailable] = []
            for kind in KINDS:
                path = find_shell(kind)
                if path:
                    version, line = _version_output(path)
                    found.append(
                        {"name": kind, "path": path, "version": version, "version_line": line}
                    )
            self._available = found
        return list(self._available)

    def _pick(self, shell: str | None) -> tuple[str, str, str]:
        want = shell or self.ctx.config.shell or "bash"
        if not isinstance(want, str):
            raise ConchError("invalid_argument", "shell must be a string")
        if os.path.isabs(want):
            kind = next((k for k in KINDS if os.path.basename(want).startswith(k)), None)
            if kind is None:
                raise ConchError("invalid_argument", "shell must be bash or zsh")
            if not os.access(want, os.X_OK):
                raise ConchError("spawn_failed", f"shell not found: {want}")
            known = {a["path"]: a["version"] for a in self.available()}
            return kind, want, known.get(want) or _version(want)
        if want not in KINDS:
            raise ConchError("invalid_argument", "shell must be bash or zsh (or a path to one)")
        for a in self.available():
            if a["name"] == want:
                return want, a["path"], a["version"]
        raise ConchError("spawn_failed", f"{want} is not installed")

    # -- lookup ------------------------------------------------------------------------------

    def get(self, shell_id: str) -> Shell:
        if not isinstance(shell_id, str) or not shell_id:
            raise ConchError("invalid_argument", "shell_id must be a non-empty string")
        sh = self._shells.get(shell_id)
        if sh is None:
            sh = next((s for s in self._shells.values() if s.name == shell_id), None)
        if sh is None or sh.state is ShellState.CLOSED:
            raise ConchError("not_found", f"no shell {shell_id!r}")
        return sh

    def sandboxed(self) -> list[tuple[str, int, set[int]]]:
        """(shell id, leader pid, the processes of its cgroup) of every running shell with a
        sandbox."""
        return [
            (s.shell_id, s.pid, s.cgroup_pids())
            for s in self._shells.values()
            if s.pid is not None and s.sandboxed and s.state is not ShellState.CLOSED
        ]

    def summaries(self) -> list[ShellSummary]:
        return [s.summary() for s in self._shells.values() if s.state is not ShellState.CLOSED]

    # -- open / close ------------------------------------------------------------------------

    async def open(self, req: ShellOpenRequest) -> ShellOpened:
        """Open a shell (docs/spec.md §4)."""
        if self._closed:
            raise ConchError("closed", "the runtime is closing")
        env = req.checked()
        name = req.name
        if name is not None and any(
            s.name == name or s.shell_id == name for s in self._shells.values()
        ):
            raise ConchError(
                "invalid_argument", f"a shell named {name!r} is already open", field="name"
            )
        run_cwd = self.ctx.resolve_cwd(req.cwd)
        fence_args = req.fence
        self.ctx.check_fence(**fence_args)  # before anything runs
        if self._available is None:
            await asyncio.to_thread(self.available)
        kind, path, version = self._pick(req.shell)
        if len(self._shells) >= self.ctx.config.max_shells:
            raise ConchError("capacity", f"at most {self.ctx.config.max_shells} shells can be open")
        shell_id = new_id("s")
        sh = Shell(
            self.ctx,
            shell_id=shell_id,
            name=name,
            kind=kind,
            path=path,
            version=version,
            cwd=run_cwd,
            env=env,
            startup_command=req.startup_command,
            fence_args=fence_args,
            echo=req.echo,
            size=req.size,
        )
        self._shells[shell_id] = sh  # holds the capacity slot while it starts
        try:
            await sh.start()
        except BaseException:
            self._shells.pop(shell_id, None)
            with contextlib.suppress(Exception):
                await asyncio.shield(sh.close(0.5))
            raise
        self.ctx.on_change(None)
        return {
            "shell_id": shell_id,
            "name": name,
            "shell": kind,
            "version": version,
            "cwd": sh.cwd,
            "state": sh.state.value,
        }

    async def close(self, shell_id: str) -> ShellClosed:
        sh = self.get(shell_id)
        if sh.state is ShellState.CLOSING:
            raise ConchError("not_found", f"shell {shell_id!r} is already closing")
        ok = await asyncio.shield(sh.close(self.ctx.config.close_timeout_ms / 1000))
        self._shells.pop(sh.shell_id, None)
        self.ctx.on_change(None)
        return {"shell_id": sh.shell_id, "state": "closed", "cleanup_complete": ok}

    async def aclose(self, limit_s: float) -> None:
        """Close every shell in parallel within limit_s: each kills its own tree (the shell,
        the command it runs, what it left in the background) and ends its job."""
        self._closed = True
        work = [s.close(limit_s * 0.9) for s in self._shells.values()]
        if work:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*work, return_exceptions=True), limit_s)
        self._shells.clear()
