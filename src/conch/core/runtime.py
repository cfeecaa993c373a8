"""The runtime: owns jobs, shells and the search engine; every front end calls into it."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import re
import signal as signal_mod
import time
from collections.abc import Callable, Mapping
from typing import Any

from conch.config import Config
from conch.core.datadir import DataDir, LogPool
from conch.core.env import build_env, check_env
from conch.core.jobs import launch
from conch.core.jobs.job import Job, new_id
from conch.core.jobs.ready import ReadySpec, parse_ready, wait_ready
from conch.core.jobs.snapshot import STREAMS, snapshot, summary
from conch.core.jobs.table import JobTable
from conch.core.output import window as win
from conch.core.output.log import JobLog
from conch.core.process import hygiene, procfs
from conch.core.process.pipes import PipeProcess
from conch.errors import ConchError, RuntimeClosedError

SIGNALS = {
    "interrupt": "SIGINT",
    "terminate": "SIGTERM",
    "kill": "SIGKILL",
    "hangup": "SIGHUP",
    "quit": "SIGQUIT",
    "stop": "SIGSTOP",
    "continue": "SIGCONT",
    "usr1": "SIGUSR1",
    "usr2": "SIGUSR2",
}
_HOUSEKEEPING_S = 0.5
_SHUTDOWN_GRACE_S = 1.0
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,63}$")


class Runtime:
    """Conch's engine, usable in-process: ``async with Runtime(Config()) as rt: ...``."""

    def __init__(self, config: Config | None = None, *, owns_process: bool = False) -> None:
        self.config = config or Config()
        self._owns_process = owns_process
        self._started = False
        self._start_task: asyncio.Task[None] | None = None
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._listeners: list[Callable[[str | None], None]] = []
        self.instance = ""
        self.data = DataDir(self.config.resolved_data_dir)
        self.log_pool = LogPool(self.data, lambda: new_id("j"))
        self.reaper = hygiene.Reaper(reap_all=owns_process)
        self.jobs = JobTable(
            max_running=self.config.max_running,
            max_jobs=self.config.max_jobs,
            retention_s=self.config.retention_s,
            on_evict=self._evicted,
        )
        self._drivers: dict[str, PipeProcess] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._housekeeping: asyncio.Task[None] | None = None
        self.bash = launch.find_bash()
        self._shells: Any = None  # conch.core.shell.manager.ShellManager, made on first use
        self.searcher: Any = None
        self.orphans_killed: list[int] = []

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Prepare the data dir, reap what a dead server left, start housekeeping (once, even
        when several calls race to it)."""
        if self._closed:
            raise RuntimeClosedError()
        if self._start_task is None:
            self._start_task = asyncio.ensure_future(self._start())
        await asyncio.shield(self._start_task)

    async def _start(self) -> None:
        self.data.prepare()
        self.data.remove_expired(self.config.log_ttl_s)
        hygiene.enable_subreaper()
        self.instance = hygiene.instance_id()
        self.orphans_killed = await asyncio.to_thread(hygiene.kill_orphans_of_dead_servers)
        self._attach_optional_parts()
        self._housekeeping = asyncio.ensure_future(self._housekeep())
        self._started = True
        self._refill_logs()

    def _attach_optional_parts(self) -> None:
        try:
            from conch.core.search import Searcher
        except ImportError:
            self.searcher = None
        else:
            self.searcher = Searcher(self.config.resolved_default_cwd)

    @property
    def shells(self) -> Any:
        """The persistent-shell manager (conch.core.shell), made on first use: a server that
        never opens a shell does not pay for importing it at startup."""
        if self._shells is None and not self._closed and self._started:
            from conch.core.shell.manager import ShellManager

            self._shells = ShellManager(self)
        return self._shells

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError()
        if not self._started:
            raise RuntimeError("Runtime not started: use `async with Runtime(...)` or start()")

    async def _open(self) -> None:
        """Every public call: refuse after close; start on first use if nobody did."""
        if self._closed:
            raise RuntimeClosedError()
        if not self._started:
            await self.start()

    async def _housekeep(self) -> None:
        while True:
            await asyncio.sleep(_HOUSEKEEPING_S)
            self.reaper.sweep()
            self.jobs.evict()

    async def aclose(self) -> None:
        """Stop every job and shell, reap everything; idempotent and safe to call concurrently."""
        if self._close_task is None:
            self._closed = True
            self._close_task = asyncio.ensure_future(self._aclose())
        task = self._close_task
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            # finish cleanup even when the caller is cancelled, then let the cancel through
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), 5.0)
            raise

    async def _aclose(self) -> None:
        if self._housekeeping:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
        grace = min(self.config.kill_grace_ms / 1000, _SHUTDOWN_GRACE_S)
        drivers = list(self._drivers.values())
        for d in drivers:
            d.begin_shutdown()
        # one sweep over everything this runtime started (each job's session and group, and
        # every process carrying this instance's tag), however many jobs are retained
        live = [d.pid for d in drivers if d.pid and (not d.job.terminal or d.pipes_open)]
        sids = {str(p) for p in live}
        prefix = f"{self.instance}/".encode()

        def collect() -> set[int]:
            return procfs.scan_instance(hygiene.TAG_VAR.encode(), prefix, sids)

        work: list[Any] = [hygiene.terminate_tree(collect, live, grace, self.reaper)]
        if self._shells is not None:
            work.append(self._shells.aclose())
        await asyncio.gather(*work, return_exceptions=True)
        await asyncio.gather(*(d.end_shutdown() for d in drivers), return_exceptions=True)
        for t in list(self._tasks):
            t.cancel()
        self.log_pool.close()
        for job in self.jobs:
            job.log.close()
        for _ in range(20):
            if not self.reaper.sweep(final=True):
                break
        self._drivers.clear()

    # -- change listeners (MCP resources, dashboard) ---------------------------------------------

    def add_listener(self, fn: Callable[[str | None], None]) -> Callable[[], None]:
        """fn(job_id or None) is called on every job/shell change. Returns an unsubscribe."""
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def _changed(self, job: Job | None) -> None:
        for fn in list(self._listeners):
            with contextlib.suppress(Exception):
                fn(job.job_id if job else None)

    def _evicted(self, job: Job) -> None:
        self._drivers.pop(job.job_id, None)
        launch.remove_tmp_files(job)  # a job that never started (spawn failure, syntax error)
        job.log.unlink()
        self._changed(None)

    def _spawn_task(self, coro: Any) -> asyncio.Task[Any]:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    # -- helpers -------------------------------------------------------------------------------

    def resolve_cwd(self, cwd: str | None) -> str:
        base = self.config.resolved_default_cwd
        if cwd is None or cwd == "":
            path = base
        else:
            if "\x00" in cwd:
                raise ConchError("invalid_argument", "cwd must not contain NUL")
            path = os.path.normpath(os.path.join(base, os.path.expanduser(cwd)))
        if not os.path.isdir(path):
            raise ConchError("cwd_not_found", f"working directory does not exist: {path}")
        return path

    def _refill_logs(self) -> None:
        if self.log_pool.needs_refill():
            self._spawn_task(asyncio.to_thread(self.log_pool.refill))

    def new_log(self) -> tuple[str, JobLog]:
        """A fresh job id and its log file."""
        job_id, path, fd = self.log_pool.take()
        self._refill_logs()
        return job_id, JobLog(path, fd, self.config.max_log_bytes)

    def child_env(
        self,
        *,
        env: Mapping[str, str] | None,
        shell_env: Mapping[str, str] | None,
        caller_session_id: str,
        pty: bool,
        job_id: str,
        inherit_not: tuple[str, ...] = (),
    ) -> dict[str, str]:
        secrets = tuple(s for s in (self.config.auth_token, self.config.caller_context_token) if s)
        return build_env(
            agent_env=self.config.agent_env,
            pty=pty,
            secrets=secrets,
            env=env,
            shell_env=shell_env,
            caller_session_id=caller_session_id,
            tag=(hygiene.TAG_VAR, f"{self.instance}/{job_id}"),
            inherit_not=inherit_not,
        )

    def new_job(
        self,
        *,
        mode: str,
        cwd: str,
        name: str | None,
        shell_id: str | None = None,
        output_format: str = "text",
    ) -> Job:
        """Admit and register a job (used by every execution mode, shells included)."""
        if name is not None and not _NAME.match(name):
            raise ConchError(
                "invalid_argument", "name must start with a letter and use letters, digits, . _ -"
            )
        self.jobs.admit(name)
        job_id, log = self.new_log()
        job = Job(
            job_id=job_id,
            mode=mode,
            cwd=cwd,
            log=log,
            name=name,
            shell_id=shell_id,
            output_format=output_format,
            on_change=self._changed,
            on_finish=self.jobs.finished,
        )
        self.jobs.add(job)
        return job

    def job(self, job_id: str) -> Job:
        self._check_open()
        if not isinstance(job_id, str) or not job_id:
            raise ConchError("invalid_argument", "job_id must be a non-empty string")
        return self.jobs.get(job_id)

    def _deadline(self, job: Job, timeout_ms: int) -> None:
        if timeout_ms <= 0:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            if not job.terminal and job.driver is not None:
                self._spawn_task(job.driver.stop("timed_out", self.config.kill_grace_ms / 1000))

        handle = loop.call_later(timeout_ms / 1000, fire)
        job.on_finish(lambda _job: handle.cancel())

    def _output_limit(self, job: Job) -> None:
        if not job.terminal and job.driver is not None and job.kill_reason is None:
            self._spawn_task(job.driver.stop("output_limit", self.config.kill_grace_ms / 1000))

    # -- exec ----------------------------------------------------------------------------------

    async def exec(
        self,
        *,
        command: str | None = None,
        argv: list[str] | None = None,
        script: str | None = None,
        shell_id: str | None = None,
        stdin: str | None = None,
        stdin_open: bool = False,
        pty: bool = False,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
        yield_ms: int | None = None,
        max_output_bytes: int | None = None,
        output_format: str = "text",
        ready: Mapping[str, Any] | None = None,
        name: str | None = None,
        shell_env: Mapping[str, str] | None = None,
        caller_session_id: str = "",
        inherit_not: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """Run a command, argv or script (or a command in a shell) as a job; see SPEC §3.
        ``inherit_not``: server variables a one-shot pipe job must not inherit (profiles)."""
        await self._open()
        cfg = self.config
        given = [
            k
            for k, v in (("command", command), ("argv", argv), ("script", script))
            if v is not None
        ]
        if len(given) != 1:
            raise ConchError("invalid_argument", "give exactly one of command, argv or script")
        yield_ms = cfg.default_yield_ms if yield_ms is None else yield_ms
        timeout_ms = cfg.default_timeout_ms if timeout_ms is None else timeout_ms
        budget = cfg.default_max_output_bytes if max_output_bytes is None else max_output_bytes
        if not 0 <= yield_ms <= 120_000:
            raise ConchError("invalid_argument", "yield_ms must be between 0 and 120000")
        if timeout_ms < 0:
            raise ConchError("invalid_argument", "timeout_ms must be >= 0 (0 = no deadline)")
        if not 0 <= budget <= 1024 * 1024:
            raise ConchError("invalid_argument", "max_output_bytes must be between 0 and 1048576")
        if output_format not in ("text", "json", "jsonl", "auto"):
            raise ConchError("invalid_argument", "output_format must be text, json, jsonl or auto")
        env = check_env(env)
        shell_env = check_env(shell_env, "_meta.shell_env")
        ready_spec = parse_ready(ready)
        # what shell and PTY jobs take alike (they are created by the shell manager)
        job_args: dict[str, Any] = dict(
            env=env,
            timeout_ms=timeout_ms,
            yield_ms=yield_ms,
            budget=budget,
            output_format=output_format,
            ready=ready_spec,
            name=name,
            shell_env=shell_env,
            caller_session_id=caller_session_id,
        )
        if shell_id is not None:
            if self.shells is None:
                raise ConchError("invalid_argument", "persistent shells are not available")
            if command is None:
                raise ConchError("invalid_argument", "a shell runs `command` (not argv or script)")
            if stdin is not None or stdin_open or pty:
                raise ConchError(
                    "invalid_argument",
                    "stdin, stdin_open and pty do not apply to shell jobs; use write",
                )
            return await self.shells.exec(shell_id, command=command, **job_args)
        run_cwd = self.resolve_cwd(cwd)
        mode, args, script_text = launch.plan(self.bash, command, argv, script)
        if pty:
            if self.shells is None:
                raise ConchError("invalid_argument", "pty jobs are not available")
            return await self.shells.exec_pty(
                args,
                mode=mode,
                cwd=run_cwd,
                stdin=stdin,
                stdin_open=stdin_open,
                script_text=script_text,
                **job_args,
            )
        job = self.new_job(mode=mode, cwd=run_cwd, name=name, output_format=output_format)
        try:
            if script_text is not None:
                args = await self.prepare_script(job, script_text, run_cwd)
            child_env = self.child_env(
                env=env,
                shell_env=shell_env,
                caller_session_id=caller_session_id,
                pty=False,
                job_id=job.job_id,
                inherit_not=inherit_not,
            )
            driver = PipeProcess(job, self.reaper, on_output_limit=self._output_limit)
            driver.start(
                args,
                cwd=run_cwd,
                env=child_env,
                stdin=stdin.encode("utf-8") if stdin is not None else None,
                stdin_open=stdin_open,
            )
        except BaseException:
            self.jobs._drop(job)
            raise
        job.driver = driver
        self._drivers[job.job_id] = driver
        self._deadline(job, timeout_ms)
        return await self.settle(job, yield_ms=yield_ms, budget=budget, ready=ready_spec)

    async def prepare_script(self, job: Job, text: str, cwd: str) -> list[str]:
        """The argv that runs ``text`` from a private file (checked with `bash -n` first for
        script jobs); the file goes when the job ends."""
        return await launch.prepare_script(self.data, self.bash, job, text, cwd)

    async def settle(
        self, job: Job, *, yield_ms: int, budget: int, ready: ReadySpec | None
    ) -> dict[str, Any]:
        """Wait up to yield_ms for the job to end (or become ready); the exec result."""
        try:
            if ready is not None:
                job.ready = await wait_ready(job, ready, yield_ms / 1000)
                if job.ready is None:
                    job.ready = False if job.terminal else None
            else:
                await job.wait_until(lambda: job.terminal, yield_ms / 1000)
        except asyncio.CancelledError:
            # the caller gave up on the exec (e.g. MCP cancellation): the job goes with it
            if not job.terminal and job.driver is not None:
                await asyncio.shield(
                    self._spawn_task(job.driver.stop("cancelled", self.config.kill_grace_ms / 1000))
                )
            raise
        w = win.preview(job.log, budget, final=job.terminal)
        job.read_cursor[None] = w.next_cursor
        return snapshot(job, w)

    # -- read / write / signal -------------------------------------------------------------------

    async def read(
        self,
        job_id: str,
        *,
        cursor: int | None = None,
        max_bytes: int | None = None,
        wait_ms: int = 0,
        until: str | Mapping[str, str] = "change",
        stream: str | None = None,
        raw: bool = False,
        tail: bool = False,
    ) -> dict[str, Any]:
        await self._open()
        job = self.job(job_id)
        budget = self.config.default_max_output_bytes if max_bytes is None else max_bytes
        if not 1 <= budget <= 1024 * 1024:
            raise ConchError("invalid_argument", "max_bytes must be between 1 and 1048576")
        if not 0 <= wait_ms <= 120_000:
            raise ConchError("invalid_argument", "wait_ms must be between 0 and 120000")
        if stream not in STREAMS:
            raise ConchError("invalid_argument", "stream must be stdout or stderr")
        if stream is not None and job.mode in ("pty", "shell"):
            raise ConchError("invalid_argument", "pty and shell jobs have a single stream")
        sidx = STREAMS[stream]
        if cursor is not None and (not isinstance(cursor, int) or cursor < 0):
            raise ConchError("invalid_argument", "cursor must be a non-negative integer")
        pattern = None
        if isinstance(until, Mapping):
            try:
                pattern = re.compile(str(until.get("pattern", "")))
            except re.error as e:
                raise ConchError(
                    "invalid_argument", f"until.pattern is not a valid regex: {e}"
                ) from None
        elif until not in ("change", "exit"):
            raise ConchError("invalid_argument", "until must be change, exit or {pattern}")
        start = job.read_cursor.get(stream, 0) if cursor is None else cursor
        total = job.log.size(sidx)
        if start > total:
            raise ConchError("invalid_argument", f"cursor {start} is past the end ({total} bytes)")
        if wait_ms > 0:
            if until == "exit":
                await job.wait_until(lambda: job.terminal, wait_ms / 1000)
            elif pattern is not None:
                since = start if stream is None else job.log.size()
                await wait_ready(job, ReadySpec(pattern=pattern), wait_ms / 1000, since=since)
            else:
                # a finished job may still get output from processes it left running
                await job.wait_until(
                    lambda: job.log.size(sidx) > start or (job.terminal and job.log.closed),
                    wait_ms / 1000,
                )
        total = job.log.size(sidx)
        if tail:
            w = win.backward(
                job.log, start if cursor is not None else 0, total, budget, stream=sidx, raw=raw
            )
            w = win.Window(
                w.text, w.cursor, w.next_cursor, truncated=w.cursor > 0, omitted_bytes=w.cursor
            )
        else:
            w = win.forward(job.log, start, total, budget, stream=sidx, raw=raw, final=job.terminal)
            w = win.Window(
                w.text,
                w.cursor,
                w.next_cursor,
                truncated=w.truncated,
                omitted_bytes=total - w.next_cursor,
            )
        job.read_cursor[stream] = w.next_cursor
        return snapshot(job, w, stream=stream)

    async def write(
        self,
        job_id: str,
        *,
        text: str | None = None,
        keys: list[str] | None = None,
        eof: bool = False,
        yield_ms: int = 1000,
    ) -> dict[str, Any]:
        await self._open()
        job = self.job(job_id)
        if not 0 <= yield_ms <= 120_000:
            raise ConchError("invalid_argument", "yield_ms must be between 0 and 120000")
        if text is None and not keys and not eof:
            raise ConchError("invalid_argument", "give text, keys or eof")
        data = b""
        if job.terminal or job.driver is None:
            raise ConchError("not_running", f"job {job.job_id} is {job.state}; nothing to write to")
        if text is not None:
            data += text.encode("utf-8")
        if keys:
            from conch.core.keys import encode_keys

            if job.mode in ("pty", "shell"):
                data += encode_keys(keys)
            else:
                # a pipe has no terminal: keys mean what they would mean to a person
                for key in keys:
                    k = key.strip().lower()
                    if k in ("enter", "return"):
                        data += b"\n"
                    elif k in ("ctrl-c", "c-c"):
                        job.driver.send_signal(signal_mod.SIGINT)
                    elif k in ("ctrl-d", "c-d"):
                        eof = True
                    elif k in ("ctrl-\\",):
                        job.driver.send_signal(signal_mod.SIGQUIT)
                    else:
                        data += encode_keys([key])
        before = job.log.size()
        if data:
            await job.driver.write(data)
        if eof:
            await job.driver.close_stdin()
        await self._settle_output(job, yield_ms / 1000)
        w = win.forward(
            job.log,
            before,
            job.log.size(),
            self.config.default_max_output_bytes,
            stream=None,
            raw=False,
            final=job.terminal,
        )
        w = win.Window(
            w.text,
            w.cursor,
            w.next_cursor,
            truncated=w.truncated,
            omitted_bytes=job.log.size() - w.next_cursor,
        )
        job.read_cursor[None] = w.next_cursor
        return snapshot(job, w)

    async def _settle_output(self, job: Job, limit_s: float, quiet_s: float = 0.05) -> None:
        """Wait until output went quiet for quiet_s after some arrived, the job ended, or limit."""
        deadline = time.monotonic() + limit_s
        start_size = job.log.size()
        while not job.terminal:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if job.log.size() > start_size:
                changed = await job.wait_change(job.version, min(quiet_s, remaining))
                if not changed:
                    return
            else:
                await job.wait_change(job.version, remaining)

    async def signal(
        self, job_id: str, signal: str = "terminate", *, wait_ms: int = 2000
    ) -> dict[str, Any]:
        import signal as sigmod

        await self._open()
        job = self.job(job_id)
        if signal not in SIGNALS:
            raise ConchError("invalid_argument", f"signal must be one of {', '.join(SIGNALS)}")
        if not 0 <= wait_ms <= 120_000:
            raise ConchError("invalid_argument", "wait_ms must be between 0 and 120000")
        driver = job.driver
        if driver is None:
            raise ConchError("not_running", f"job {job.job_id} has no process")
        grace = self.config.kill_grace_ms / 1000
        if job.terminal:
            # finished: the only thing left to stop is what it left behind
            if job.lingering_pids or driver.lingering():
                await driver.kill_lingering()
                job.lingering_pids = []
                job.notify()
            w = win.Window("", job.read_cursor.get(None, 0), job.read_cursor.get(None, 0))
            return snapshot(job, w)
        if signal in ("terminate", "kill"):
            task = self._spawn_task(driver.stop("cancelled", 0.0 if signal == "kill" else grace))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), wait_ms / 1000)
        else:
            driver.send_signal(getattr(sigmod, SIGNALS[signal]))
            if signal not in ("stop", "continue"):
                await job.wait_until(lambda: job.terminal, wait_ms / 1000)
        start = job.read_cursor.get(None, 0)
        w = win.forward(
            job.log,
            start,
            job.log.size(),
            self.config.default_max_output_bytes,
            stream=None,
            raw=False,
            final=job.terminal,
        )
        job.read_cursor[None] = w.next_cursor
        return snapshot(job, w)

    # -- list / info ---------------------------------------------------------------------------

    async def list(self, state: str = "all") -> dict[str, Any]:
        await self._open()
        if state not in ("all", "running"):
            raise ConchError("invalid_argument", "state must be running or all")
        self.jobs.evict()
        jobs = [summary(j) for j in self.jobs if state == "all" or not j.terminal]
        shells = self.shells.summaries() if self.shells is not None else []
        return {"jobs": jobs, "shells": shells}

    async def info(self) -> dict[str, Any]:
        await self._open()
        import platform
        import sys

        from conch import __version__

        cfg = self.config
        shells = self.shells.available() if self.shells is not None else []
        return {
            "version": __version__,
            "python": platform.python_version(),
            "platform": sys.platform,
            "machine": platform.machine(),
            "pid": os.getpid(),
            "default_cwd": cfg.resolved_default_cwd,
            "data_dir": str(self.data.root),
            "bash": self.bash,
            "shells": shells,
            "rg": self.searcher.info()
            if self.searcher is not None
            else {"path": None, "version": None},
            "containment": hygiene.containment_level(),
            "limits": {
                "max_running": cfg.max_running,
                "max_jobs": cfg.max_jobs,
                "retention_s": cfg.retention_s,
                "max_log_bytes": cfg.max_log_bytes,
                "kill_grace_ms": cfg.kill_grace_ms,
                "max_shells": cfg.max_shells,
                "close_timeout_ms": cfg.close_timeout_ms,
                "default_yield_ms": cfg.default_yield_ms,
                "default_timeout_ms": cfg.default_timeout_ms,
                "default_max_output_bytes": cfg.default_max_output_bytes,
            },
            "running_jobs": self.jobs.running,
            "retained_jobs": len(self.jobs),
            "profiles": list(cfg.profiles),
            "transports": ["embedded", "stdio", "streamable-http", "sse", "http-invoke"],
        }

    # -- shells and search (delegated) -----------------------------------------------------------

    async def shell_open(self, **kwargs: Any) -> dict[str, Any]:
        await self._open()
        if self.shells is None:
            raise ConchError("invalid_argument", "persistent shells are not available")
        result: dict[str, Any] = await self.shells.open(**kwargs)
        return result

    async def shell_close(self, shell_id: str) -> dict[str, Any]:
        await self._open()
        if self.shells is None:
            raise ConchError("not_found", f"no shell {shell_id!r}")
        result: dict[str, Any] = await self.shells.close(shell_id)
        return result

    async def search(self, **kwargs: Any) -> dict[str, Any]:
        await self._open()
        if self.searcher is None:
            raise ConchError("rg_not_found", "search is not available in this installation")
        result: dict[str, Any] = await self.searcher.search(**kwargs)
        return result

    # -- the tool catalogue ------------------------------------------------------------------------

    def tools(self) -> builtins.list[dict[str, Any]]:
        from conch.tools.catalogue import catalogue

        return [t.describe(self.config) for t in catalogue(self.config.profiles)]

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, context: Any = None
    ) -> dict[str, Any]:
        """Call a tool by name; returns its structured result or ``{"error": {...}}``."""
        if not self._closed and not self._started:
            await self.start()
        from conch.tools.dispatch import call_tool

        return await call_tool(self, name, arguments, context)
