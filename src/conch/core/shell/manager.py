"""The runtime's shells and PTY jobs: open, exec, close, list; one place that owns them all."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conch.core.env import CALLER_SESSION_VAR, check_env
from conch.core.jobs.job import new_id
from conch.core.jobs.ready import ReadySpec
from conch.core.shell.pty_job import PtyProcess
from conch.core.shell.session import Shell, ShellJob
from conch.errors import ConchError

if TYPE_CHECKING:
    from conch.core.runtime import Runtime

KINDS = ("bash", "zsh")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,63}$")
_ACLOSE_LIMIT_S = 2.0


def _find(kind: str) -> str | None:
    for d in ("/bin", "/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"):
        p = os.path.join(d, kind)
        if os.access(p, os.X_OK):
            return p
    return shutil.which(kind)


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
    """Persistent shells (SPEC §4) and one-shot PTY jobs (SPEC §3 ``pty``) of one runtime."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self._shells: dict[str, Shell] = {}
        self._pty: dict[str, PtyProcess] = {}
        self._available: list[dict[str, Any]] | None = None
        self._closed = False

    # -- discovery ---------------------------------------------------------------------------

    def available(self) -> list[dict[str, Any]]:
        """Installed shells: ``[{name, path, version, version_line}]`` (cached)."""
        if self._available is None:
            found = []
            for kind in KINDS:
                path = _find(kind)
                if path:
                    version, line = _version_output(path)
                    found.append(
                        {"name": kind, "path": path, "version": version, "version_line": line}
                    )
            self._available = found
        return list(self._available)

    def _pick(self, shell: str | None) -> tuple[str, str, str]:
        want = shell or self.rt.config.shell or "bash"
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
        if sh is None or sh.state == "closed":
            raise ConchError("not_found", f"no shell {shell_id!r}")
        return sh

    def summaries(self) -> list[dict[str, Any]]:
        return [s.summary() for s in self._shells.values() if s.state != "closed"]

    # -- open / close ------------------------------------------------------------------------

    async def open(
        self,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        shell: str | None = None,
        startup_command: str | None = None,
        name: str | None = None,
        echo: bool = True,
    ) -> dict[str, Any]:
        """Open a shell. ``echo=False``: its terminal does not echo what ``write`` sends (a
        password prompt or ``read`` shows nothing typed, as on a terminal with ``stty -echo``)."""
        if self._closed:
            raise ConchError("closed", "the runtime is closing")
        env = check_env(env)
        if name is not None:
            if not isinstance(name, str) or not _NAME.match(name):
                raise ConchError(
                    "invalid_argument",
                    "name must start with a letter and use letters, digits, . _ -",
                )
            if any(s.name == name or s.shell_id == name for s in self._shells.values()):
                raise ConchError("invalid_argument", f"a shell named {name!r} is already open")
        if startup_command is not None and (
            not isinstance(startup_command, str) or "\x00" in startup_command
        ):
            raise ConchError("invalid_argument", "startup_command must be a string without NUL")
        run_cwd = self.rt.resolve_cwd(cwd)
        if self._available is None:
            await asyncio.to_thread(self.available)
        kind, path, version = self._pick(shell)
        if len(self._shells) >= self.rt.config.max_shells:
            raise ConchError("capacity", f"at most {self.rt.config.max_shells} shells can be open")
        shell_id = new_id("s")
        sh = Shell(
            self.rt,
            shell_id=shell_id,
            name=name,
            kind=kind,
            path=path,
            version=version,
            cwd=run_cwd,
            env=env,
            startup_command=startup_command,
            echo=echo,
        )
        self._shells[shell_id] = sh  # holds the capacity slot while it starts
        try:
            await sh.start()
        except BaseException:
            self._shells.pop(shell_id, None)
            with contextlib.suppress(Exception):
                await asyncio.shield(sh.close(0.5))
            raise
        self.rt._changed(None)
        return {
            "shell_id": shell_id,
            "name": name,
            "shell": kind,
            "version": version,
            "cwd": sh.cwd,
            "state": sh.state,
        }

    async def close(self, shell_id: str) -> dict[str, Any]:
        sh = self.get(shell_id)
        if sh.state == "closing":
            raise ConchError("not_found", f"shell {shell_id!r} is already closing")
        ok = await asyncio.shield(sh.close(self.rt.config.close_timeout_ms / 1000))
        self._shells.pop(sh.shell_id, None)
        self.rt._changed(None)
        return {"shell_id": sh.shell_id, "state": "closed", "cleanup_complete": ok}

    async def aclose(self) -> None:
        """Close every shell and PTY job in parallel, bounded in time."""
        self._closed = True
        limit = min(_ACLOSE_LIMIT_S, self.rt.config.close_timeout_ms / 1000)
        work: list[Any] = [s.close(limit * 0.9) for s in self._shells.values()]
        grace = min(self.rt.config.kill_grace_ms / 1000, limit * 0.4)
        work += [d.aclose(grace) for d in self._pty.values()]
        if work:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*work, return_exceptions=True), limit + 1)
        self._shells.clear()
        self._pty.clear()

    # -- exec --------------------------------------------------------------------------------

    async def exec(
        self,
        shell_id: str,
        *,
        command: str,
        env: Mapping[str, str],
        timeout_ms: int,
        yield_ms: int,
        budget: int,
        output_format: str,
        ready: ReadySpec | None,
        name: str | None,
        shell_env: Mapping[str, str],
        caller_session_id: str,
    ) -> dict[str, Any]:
        sh = self.get(shell_id)
        if not isinstance(command, str) or "\x00" in command:
            raise ConchError("invalid_argument", "command must be a string without NUL")
        if sh.busy:
            raise ConchError(
                "shell_busy",
                f"shell {sh.shell_id} is running "
                f"{sh.job.job_id if sh.job else 'something'}; "
                "wait for it, or signal it",
            )
        restarted = False
        if sh.state == "exited":
            sh.state = "starting"  # holds the shell against a concurrent exec
            try:
                await sh.restart()
            except BaseException:
                sh.state = "exited"
                raise
            restarted = True
        job = self.rt.new_job(
            mode="shell", cwd=sh.cwd, name=name, shell_id=sh.shell_id, output_format=output_format
        )
        job.restarted = restarted
        job.driver = ShellJob(sh, job)
        assign = {**env, **shell_env}
        if caller_session_id or assign:
            assign[CALLER_SESSION_VAR] = caller_session_id
        try:
            sh.run(job, command, assign)
        except BaseException:
            sh.job = None
            if sh.state == "busy":
                sh.state = "ready"
            job.finish("cancelled")
            job.log.close_writer()
            raise
        self.rt._deadline(job, timeout_ms)
        result = await self.rt.settle(job, yield_ms=yield_ms, budget=budget, ready=ready)
        result["shell_id"] = sh.shell_id
        result["cwd"] = job.cwd
        return result

    async def exec_pty(
        self,
        args: list[str],
        *,
        mode: str,
        cwd: str,
        env: Mapping[str, str],
        stdin: str | None,
        timeout_ms: int,
        yield_ms: int,
        budget: int,
        stdin_open: bool = True,
        output_format: str,
        ready: ReadySpec | None,
        name: str | None,
        shell_env: Mapping[str, str],
        caller_session_id: str,
        script_text: str | None,
    ) -> dict[str, Any]:
        if self._closed:
            raise ConchError("closed", "the runtime is closing")
        for job_id in [
            j
            for j, d in self._pty.items()
            if d.job.terminal and not d.stdin_open and d.job.log.closed and not d.job.lingering_pids
        ]:
            del self._pty[job_id]  # finished and released: nothing left to close at shutdown
        job = self.rt.new_job(mode="pty", cwd=cwd, name=name, output_format=output_format)
        try:
            if script_text is not None:
                job.mode = "script" if mode == "script" else job.mode
                args = await self.rt.prepare_script(job, script_text, cwd)
                job.mode = "pty"
            child_env = self.rt.child_env(
                env=env,
                shell_env=shell_env,
                caller_session_id=caller_session_id,
                pty=True,
                job_id=job.job_id,
            )
            driver = PtyProcess(job, self.rt.reaper, on_output_limit=self.rt._output_limit)
            driver.start(
                args,
                cwd=cwd,
                env=child_env,
                stdin=stdin.encode("utf-8") if stdin is not None else None,
                # typed input given and stdin not kept open: the program then reads EOF
                eof_after_stdin=stdin is not None and not stdin_open,
            )
        except BaseException:
            self.rt.jobs._drop(job)
            raise
        job.driver = driver
        self._pty[job.job_id] = driver
        self.rt._deadline(job, timeout_ms)
        return await self.rt.settle(job, yield_ms=yield_ms, budget=budget, ready=ready)
