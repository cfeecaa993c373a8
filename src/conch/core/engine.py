"""The engine: owns jobs, every driver (pipe, PTY, shell command), the shells and search.

It knows nothing of tools, profiles or transports: the embedded façade ``conch.Runtime``
(conch/runtime.py) adds those on top. What the objects it owns need from it they get through
one :class:`~conch.core.spawn.SpawnContext`, never the engine itself.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import platform
import signal as signal_mod
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from conch._version import __version__
from conch.config import Config
from conch.core.containment.fence import Containment, SpawnFence
from conch.core.containment.sandbox import Policy
from conch.core.datadir import DataDir, LogPool
from conch.core.env import CALLER_SESSION_VAR
from conch.core.jobs import launch
from conch.core.jobs import warm as warm_start
from conch.core.jobs.driver import ProcessDriver
from conch.core.jobs.job import Job, new_id
from conch.core.jobs.pipes import PipeDriver
from conch.core.jobs.pty import PtyDriver
from conch.core.jobs.ready import ReadySpec, wait_ready
from conch.core.jobs.snapshot import STREAMS, observe, snapshot, summary
from conch.core.jobs.table import JobTable
from conch.core.output import window as win
from conch.core.output.log import JobLog
from conch.core.process import hygiene, peer, procfs
from conch.core.process.keys import encode_keys
from conch.core.requests import (
    ExecRequest,
    check_name,
    exec_request,
    list_request,
    read_request,
    signal_request,
    write_request,
)
from conch.core.results import (
    InfoResult,
    JobSnapshot,
    ListResult,
    SearchResult,
    ShellClosed,
    ShellOpened,
)
from conch.core.search import Searcher
from conch.core.shell.manager import ShellManager
from conch.core.spawn import SpawnContext
from conch.errors import ConchError, RuntimeClosedError

_HOUSEKEEPING_S = 0.5
# shutdown (SPEC §2: at most 3 s whatever the jobs do): shells, then drivers, then the sweep
_SHUTDOWN_LIMIT_S = 2.6
_SHELLS_LIMIT_S = 1.0
_DRIVERS_GRACE_S = 1.0
_KILL_S = 0.3  # a KILLed tree is gone and reaped
_END_LIMIT_S = 0.5  # a killed leader's exit status, at the most
_SWEEP_RESERVE_S = 0.3


async def _within(work: Awaitable[object], deadline: float) -> None:
    """Await work until the loop's clock reaches deadline (then cancel it); never raises but
    for the caller's own cancellation."""
    limit = max(0.05, deadline - asyncio.get_running_loop().time())
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(work, limit)


class Engine:
    """Conch's engine, usable in-process: ``async with Engine(Config()) as engine: ...``.

    Users want ``conch.Runtime`` (the same methods plus the tool catalogue)."""

    def __init__(self, config: Config | None = None, *, owns_process: bool = False) -> None:
        self.config = config or Config()
        self._started = False
        self._start_task: asyncio.Task[None] | None = None
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._listeners: list[Callable[[str | None], None]] = []
        self.data = DataDir(self.config.resolved_data_dir)
        self.log_pool = LogPool(self.data, lambda: new_id("j"))
        self.reaper = hygiene.Reaper(reap_all=owns_process)
        # a server process (its environment no longer changes) starts its warm processes as it
        # starts, so its first command finds them ready; an embedding runtime on first use
        self._warm_at_start = owns_process
        self.spawn = SpawnContext(self.config, self.data, self.reaper, on_change=self._changed)
        self.jobs = JobTable(
            max_running=self.config.max_running,
            max_jobs=self.config.max_jobs,
            retention_s=self.config.retention_s,
            on_evict=self._evicted,
        )
        # every one-shot driver (pipe and PTY); shell commands belong to their shell
        self._drivers: dict[str, ProcessDriver] = {}
        self._housekeeping: asyncio.Task[None] | None = None
        self.bash = launch.find_bash()
        self._shells: ShellManager | None = None
        self.searcher: Searcher | None = None
        self.orphans_killed: list[int] = []
        self._default_cwd: str | None = None
        self._refill_pending = False
        self._warm: warm_start.Warm | None = None  # a bash for `command` jobs
        self._warm_sh: warm_start.Warm | None = None  # a sh that execs `argv` jobs

    @property
    def closed(self) -> bool:
        """True once ``aclose()`` was called: every call after it raises RuntimeClosedError."""
        return self._closed

    @property
    def started(self) -> bool:
        return self._started

    @property
    def default_cwd(self) -> str:
        """Where jobs run unless told otherwise (resolved once)."""
        if self._default_cwd is None:
            self._default_cwd = self.config.resolved_default_cwd
        return self._default_cwd

    @property
    def instance(self) -> str:
        """This runtime's tag prefix (set at start)."""
        return self.spawn.instance

    def sandboxed_caller(self, client: tuple[str, int], server: tuple[str, int]) -> str | None:
        """The sandboxed job or shell that holds the client end of a loopback connection to
        ``server`` (its id), or None: a request from inside a sandbox must not get more than
        its fence (SPEC §9a). Every process of a sandboxed job descends from its leader (a PID
        namespace: orphans go to its init), so its tree is searched, whatever the level."""
        units = [
            (job_id, d.pid)
            for job_id, d in self._drivers.items()
            if d.pid is not None
            and d.fence is not None
            and d.fence.sandbox is not None
            and not d.job.terminal
        ]
        if self._shells is not None:
            units += self._shells.sandboxed()
        if not units:
            return None
        inode = peer.socket_inode(client, server)
        if inode is None:
            return None
        for unit, leader in units:
            if peer.holders(inode, {leader} | procfs.descendants({leader})):
                return unit
        return None

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> Engine:
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
        self.spawn.instance = hygiene.instance_id()
        self.orphans_killed = await asyncio.to_thread(hygiene.kill_orphans_of_dead_servers)
        cfg = self.config
        containment = Containment(
            instance=self.spawn.instance,
            use_cgroups=cfg.cgroup != "off",
            policy=Policy(cfg.sandbox, cfg.network),
            limits={"memory_max": cfg.memory_max, "pids_max": cfg.pids_max},
            workspace=cfg.resolved_default_cwd,
            data_dir=str(self.data.root),
            bwrap=cfg.bwrap,
            private_files=(cfg.env_file,),
        )
        await asyncio.to_thread(containment.start)
        self.spawn.containment = containment
        self.searcher = Searcher(self.config.resolved_default_cwd, env=self._search_env)
        self._housekeeping = asyncio.ensure_future(self._housekeep())
        if self.config.warm_bash:
            hooks = dict(spawn=self._spawn_warm, discard=self._discard_warm)
            if self.bash:
                self._warm = warm_start.warm_bash(self.bash, self.default_cwd, **hooks)
            # an argv job at the cgroup level is a mkdir and a cgroup-entering sh before its
            # program: there a warm sh saves both; elsewhere one vfork of the program is quicker
            # (where the spawn starts a program in its cgroup itself, there is no sh to save)
            if (
                containment.level == "cgroup"
                and not containment.places_itself
                and warm_start.sh_is_dash()
            ):
                self._warm_sh = warm_start.warm_sh(self.default_cwd, **hooks)
        self._started = True
        self._refill_logs()
        if self._warm_at_start:
            for w in (self._warm, self._warm_sh):
                if w is not None:
                    w.fill_soon()

    def _search_env(self) -> dict[str, str]:
        return self.spawn.child_env("search", pty=False)

    @property
    def shells(self) -> ShellManager | None:
        """The persistent-shell manager, made on first use (None once closed)."""
        if self._shells is None and not self._closed and self._started:
            self._shells = ShellManager(self.spawn)
        return self._shells

    def _shell_manager(self) -> ShellManager:
        shells = self.shells
        if shells is None:
            raise ConchError("closed", "the runtime is closing")
        return shells

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
            self._watch_cgroups()
            await self._remove_retired_cgroups()

    async def _remove_retired_cgroups(self) -> None:
        """rmdir the empty cgroups of finished jobs, in a worker thread (never on a call's
        path); what could not go yet is tried again next time."""
        c = self.spawn.containment
        cgroups = c.cgroups if c is not None else None
        if cgroups is None or not cgroups.retired:
            return
        batch, cgroups.retired = cgroups.retired, []
        cgroups.retired += await asyncio.to_thread(cgroups.remove_retired, batch)

    def _watch_cgroups(self) -> None:
        """Cgroup level: end jobs the kernel hit for their memory limit; remove the cgroups
        of finished jobs once what they left running is gone."""
        for d in list(self._drivers.values()):
            cg = d.cgroup
            if cg is None:
                continue
            if d.job.terminal:
                d.release_cgroup()
            elif cg.memory_dir is not None:
                d.check_limits()

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
        """Shutdown, one owner per thing and in order, within _SHUTDOWN_LIMIT_S whatever the
        jobs do: the shells (each kills its own tree and ends its command's job), then every
        pipe and PTY driver in one sweep over their trees, then one sweep over this
        instance's tag for whatever escaped both (a search's rg, a shell's runaway)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _SHUTDOWN_LIMIT_S
        if self._start_task is not None and not self._start_task.done():
            # a start still under way (a server answers its handshake meanwhile) ends first,
            # so nothing it starts outlives the close
            with contextlib.suppress(BaseException):
                await _within(asyncio.shield(self._start_task), deadline)
        for warm in (self._warm, self._warm_sh):
            if warm is not None:
                await _within(warm.aclose(), deadline)
        if self._housekeeping:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
        if self._shells is not None:
            limit = min(_SHELLS_LIMIT_S, self.config.close_timeout_ms / 1000)
            await self._shells.aclose(limit)
        await self._stop_drivers(deadline - _SWEEP_RESERVE_S)
        await _within(self._sweep_instance(), deadline)
        for t in list(self.spawn.tasks):
            t.cancel()
        self.log_pool.close()
        for job in self.jobs:
            job.log.close()
        self.data.close()
        for _ in range(20):
            if not self.reaper.sweep(final=True):
                break
        self._drivers.clear()
        if self.spawn.containment is not None:
            await asyncio.to_thread(self.spawn.containment.close)

    async def _stop_drivers(self, deadline: float) -> None:
        """Every pipe and PTY job's tree in one sweep (TERM, grace, KILL), however many jobs
        are retained: their sessions where a process may still live, and their tags; then
        each driver records how its job ended and closes its files (all by ``deadline``)."""
        drivers = list(self._drivers.values())
        sids: set[str] = set()
        tags: set[bytes] = set()
        for d in drivers:
            sid, tag = d.begin_shutdown()
            if sid is not None:
                sids.add(sid)
            if tag:
                tags.add(tag)
        cgroups = [d.cgroup for d in drivers if d.cgroup is not None]
        key = hygiene.TAG_VAR.encode()

        def collect() -> set[int]:
            pids = procfs.scan_jobs(key, sids, tags)
            for cg in cgroups:
                pids |= cg.pids()
            return pids

        if sids or tags or cgroups:
            # the grace fits what is left, so the KILL after it is still sent in time
            left = deadline - asyncio.get_running_loop().time() - _END_LIMIT_S - _KILL_S
            grace = max(0.0, min(self.config.kill_grace_ms / 1000, _DRIVERS_GRACE_S, left))
            sweep = hygiene.terminate_tree(collect, map(int, sids), grace, self.reaper)
            await _within(sweep, deadline - _END_LIMIT_S)
        if cgroups:  # whatever escaped the sweep (cgroup level)
            kills = (cg.kill_and_wait(self.reaper.sweep, limit_s=0.5) for cg in cgroups)
            await _within(asyncio.gather(*kills, return_exceptions=True), deadline)
        limit = min(_END_LIMIT_S, max(0.05, deadline - asyncio.get_running_loop().time()))
        await asyncio.gather(*(d.end_shutdown(limit) for d in drivers), return_exceptions=True)

    async def _sweep_instance(self) -> None:
        """Kill whatever carries this instance's tag and escaped its owner."""
        if not self.spawn.instance:
            return
        key, prefix = hygiene.TAG_VAR.encode(), f"{self.spawn.instance}/".encode()

        def collect() -> set[int]:
            return procfs.scan_instance(key, prefix)

        if collect():
            await hygiene.kill_tree_now(collect, [], self.reaper)

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
        driver = self._drivers.pop(job.job_id, None)
        if driver is not None:
            driver.release_cgroup()  # (one still holding processes goes at shutdown)
        # a job that never started (spawn failure, syntax error)
        launch.remove_tmp_files(job, self.data)
        job.log.unlink()
        self._changed(None)

    # -- helpers -------------------------------------------------------------------------------

    def resolve_cwd(self, cwd: str | None) -> str:
        return self.spawn.resolve_cwd(cwd)

    def _refill_logs(self) -> None:
        """Top the spare log files up on the loop's next turn: that is while the job just
        admitted runs, so it costs its exec nothing, and no worker thread contends with the
        loop for the GIL (a thread hand-off costs more than making the files)."""
        if self._refill_pending or not self.log_pool.needs_refill():
            return
        self._refill_pending = True
        asyncio.get_running_loop().call_soon(self._refill_now)

    def _refill_now(self) -> None:
        self._refill_pending = False
        if not self._closed:
            self.log_pool.refill()

    def new_log(self) -> tuple[str, JobLog]:
        """A fresh job id and its log file."""
        job_id, path, fd = self.log_pool.take()
        self._refill_logs()
        return job_id, JobLog(path, fd, self.config.max_log_bytes, self.data)

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
        self.jobs.admit(check_name(name))
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

    # -- the warm bash (core/jobs/warm.py) -----------------------------------------------------

    async def _spawn_warm(
        self, argv: list[str], cwd: str
    ) -> tuple[Job, PipeDriver, dict[str, str]]:
        """A pipe job's process and log, started ahead of need (in its own cgroup at that
        containment level, as every job), not in the job table."""
        job_id, log = self.new_log()
        job = Job(job_id=job_id, mode="command", cwd=cwd, log=log, on_finish=self.jobs.finished)
        env = self.spawn.child_env(job_id, pty=False, cwd=cwd)
        driver = PipeDriver(job, self.reaper, on_output_limit=self.spawn.output_limit)
        fence: SpawnFence | None = None
        try:
            fence = await self.spawn.fence(job_id)
            if self._closed:
                raise RuntimeClosedError()
            # a bootstrap of Conch's own: the very shell that runs it enters the cgroup
            driver.start(
                argv, cwd=cwd, env=env, stdin=None, stdin_open=True, fence=fence, merge_sh=True
            )
        except BaseException:
            log.unlink()
            if fence is not None and fence.cgroup is not None:
                fence.cgroup.remove()
            raise
        job.driver = driver
        self._drivers[job_id] = driver
        return job, driver, env

    def _discard_warm(self, job: Job) -> None:
        """A warm bash that will not be used: EOF on its stdin ends it; then its log goes."""

        def gone(j: Job) -> None:
            self._drivers.pop(j.job_id, None)
            j.log.unlink()

        if job.terminal:
            gone(job)
            return
        job.on_finish(gone)
        if isinstance(job.driver, PipeDriver) and job.driver.stdin_open:
            job.driver.feed(b"", close=True)

    def _unfenced_but_for_the_cgroup(self, req: ExecRequest) -> bool:
        """No sandbox and no limit applies to this call (a cgroup per job may: the warm bash
        has one of its own)."""
        c = self.spawn.containment
        if c is None:
            return True
        limits = c.resolve_limits({"memory_max": req.memory_max, "pids_max": req.pids_max})
        return not limits and not c.resolve_policy(req.sandbox, req.network).active

    def _take_warm(
        self, req: ExecRequest, cwd: str, args: list[str], program: str | None
    ) -> Job | None:
        """The warm bash (a plain `command`) or sh (a plain `argv`: ``program`` is where it
        runs from, when known already) as this job, or None."""
        if req.command is not None and self._warm is not None:
            warm = self._warm
            data = req.command.encode("utf-8", "surrogateescape") + b"\0"
            accept = None
        elif req.argv is not None and self._warm_sh is not None:
            if program is None:
                program = launch.check_program(args[0], req.env, cwd)
            if not warm_start.runs_directly(program):
                return None
            warm, data = self._warm_sh, warm_start.exec_line(args)

            def accept(env: dict[str, str]) -> bool:
                return warm_start.sh_keeps_env(env, cwd)
        else:
            return None
        self.jobs.admit(check_name(req.name))
        job = warm.take(
            data, cwd, lambda job_id: self.spawn.child_env(job_id, pty=False, cwd=cwd), accept
        )
        if job is None:
            return None
        job.mode = "argv" if req.argv is not None else "command"
        job.name = req.name
        job.output_format = req.output_format
        job.begin(self._changed)
        self.jobs.add(job)
        return job

    def job(self, job_id: str) -> Job:
        self._check_open()
        if not isinstance(job_id, str) or not job_id:
            raise ConchError("invalid_argument", "job_id must be a non-empty string")
        return self.jobs.get(job_id)

    # -- exec ----------------------------------------------------------------------------------

    async def exec_job(
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
        on_start: Callable[[Job], None] | None = None,
        warm: bool = False,
        sandbox: str | None = None,
        network: str | None = None,
        memory_max: int | None = None,
        pids_max: int | None = None,
        inherit_not: tuple[str, ...] = (),
    ) -> JobSnapshot:
        """Run a command, argv or script (or a command in a shell) as a job; see SPEC §3.

        ``on_start(job)`` is called as soon as the job exists (progress reporting uses it);
        ``inherit_not``: server variables a one-shot job must not inherit (a profile's list);
        ``warm``: a plain `command` may run in the bash started ahead (core/jobs/warm.py)."""
        await self._open()
        req = exec_request(
            self.config,
            command=command,
            argv=argv,
            script=script,
            shell_id=shell_id,
            stdin=stdin,
            stdin_open=stdin_open,
            pty=pty,
            cwd=cwd,
            env=env,
            timeout_ms=timeout_ms,
            yield_ms=yield_ms,
            max_output_bytes=max_output_bytes,
            output_format=output_format,
            ready=ready,
            name=name,
            shell_env=shell_env,
            sandbox=sandbox,
            network=network,
            memory_max=memory_max,
            pids_max=pids_max,
        )
        if req.shell_id is not None:
            job = await self._start_shell_command(req, caller_session_id)
        else:
            job = await self._start_process(req, caller_session_id, inherit_not, warm=warm)
        if on_start is not None:
            on_start(job)
        self.spawn.deadline(job, req.timeout_ms)
        result = await self._exec_result(
            job, yield_ms=req.yield_ms, budget=req.budget, ready=req.ready
        )
        if req.shell_id is not None:
            result["shell_id"] = job.shell_id
            result["cwd"] = job.cwd
        return result

    async def _start_process(
        self,
        req: ExecRequest,
        caller_session_id: str,
        inherit_not: tuple[str, ...] = (),
        *,
        warm: bool = False,
    ) -> Job:
        """A one-shot job on pipes or on its own terminal (``pty``)."""
        run_cwd = self.resolve_cwd(req.cwd)
        mode, args, script_text = launch.plan(self.bash, req.command, req.argv, req.script)
        fence_args: dict[str, Any] = dict(
            sandbox=req.sandbox,
            network=req.network,
            memory_max=req.memory_max,
            pids_max=req.pids_max,
        )
        # every containment value is checked before anything runs; a fenced program is exec'd
        # by a wrapper, so a missing one would only show as exit 127: look for it first
        fenced = self.spawn.check_fence(**fence_args)
        program = None
        if fenced and mode == "argv":
            program = launch.check_program(args[0], req.env, run_cwd)
        if (
            warm
            and mode in ("command", "argv")
            and self._unfenced_but_for_the_cgroup(req)
            and script_text is None
            and not req.pty
            and req.stdin is None
            and not req.stdin_open
            and not req.env
            and not req.shell_env
            and not caller_session_id
            and not inherit_not
        ):
            taken = self._take_warm(req, run_cwd, args, program)
            if taken is not None:
                return taken
        job = self.new_job(
            mode="pty" if req.pty else mode,
            cwd=run_cwd,
            name=req.name,
            output_format=req.output_format,
        )
        fence: SpawnFence | None = None
        try:
            fence = await self.spawn.fence(job.job_id, **fence_args)
            if script_text is not None:
                args = await launch.prepare_script(
                    self.data,
                    self.bash,
                    job,
                    script_text,
                    run_cwd,
                    check=mode == "script",
                    env=self.spawn.child_env(job.job_id, pty=False),
                )
            child_env = self.spawn.child_env(
                job.job_id,
                pty=req.pty,
                env=req.env,
                shell_env=req.shell_env,
                caller_session_id=caller_session_id,
                inherit_not=inherit_not,
                cwd=run_cwd,
            )
            stdin = req.stdin.encode("utf-8") if req.stdin is not None else None
            driver: ProcessDriver
            if req.pty:
                if self._closed:
                    raise ConchError("closed", "the runtime is closing")
                driver = PtyDriver(job, self.reaper, on_output_limit=self.spawn.output_limit)
                driver.start(
                    args,
                    cwd=run_cwd,
                    env=child_env,
                    stdin=stdin,
                    # typed input given and stdin not kept open: the program then reads EOF
                    eof_after_stdin=req.stdin is not None and not req.stdin_open,
                    fence=fence,
                )
            else:
                driver = PipeDriver(job, self.reaper, on_output_limit=self.spawn.output_limit)
                driver.start(
                    args,
                    cwd=run_cwd,
                    env=child_env,
                    stdin=stdin,
                    stdin_open=req.stdin_open,
                    fence=fence,
                )
        except BaseException:
            self.jobs.drop(job)
            if fence is not None and fence.cgroup is not None:
                fence.cgroup.remove()
            raise
        job.driver = driver
        self._drivers[job.job_id] = driver
        return job

    async def _start_shell_command(self, req: ExecRequest, caller_session_id: str) -> Job:
        """A command in a persistent shell (the shell's own driver runs it)."""
        assert req.shell_id is not None and req.command is not None
        sh = self._shell_manager().get(req.shell_id)
        if not isinstance(req.command, str) or "\x00" in req.command:
            raise ConchError("invalid_argument", "command must be a string without NUL")
        restarted = await sh.claim()
        job = self.new_job(
            mode="shell",
            cwd=sh.cwd,
            name=req.name,
            shell_id=sh.shell_id,
            output_format=req.output_format,
        )
        job.restarted = restarted
        assign = {**req.env, **req.shell_env}
        if caller_session_id or assign:
            assign[CALLER_SESSION_VAR] = caller_session_id
        sh.run(job, req.command, assign)
        return job

    async def _exec_result(
        self, job: Job, *, yield_ms: int, budget: int, ready: ReadySpec | None
    ) -> JobSnapshot:
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
                    self.spawn.spawn_task(job.driver.stop("cancelled", self.spawn.grace_s))
                )
            raise
        observe(job)
        w = win.preview(job.log, budget, final=job.terminal)
        job.read_cursor[None] = w.next_cursor
        return snapshot(job, w)

    # -- read / write / signal -------------------------------------------------------------------

    async def read_job(
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
    ) -> JobSnapshot:
        await self._open()
        job = self.job(job_id)
        req = read_request(
            self.config,
            cursor=cursor,
            max_bytes=max_bytes,
            wait_ms=wait_ms,
            until=until,
            stream=stream,
        )
        if stream is not None and not job.streams:
            raise ConchError("invalid_argument", "pty and shell jobs have a single stream")
        sidx = STREAMS[stream]
        start = job.read_cursor.get(stream, 0) if cursor is None else cursor
        total = job.log.size(sidx)
        if start > total:
            raise ConchError("invalid_argument", f"cursor {start} is past the end ({total} bytes)")
        if wait_ms > 0:
            if req.until == "exit":
                await job.wait_until(lambda: job.terminal, wait_ms / 1000)
            elif req.pattern is not None:
                since = start if stream is None else job.log.size()
                await wait_ready(job, ReadySpec(pattern=req.pattern), wait_ms / 1000, since=since)
            else:
                # a finished job may still get output from processes it left running
                await job.wait_until(
                    lambda: job.log.size(sidx) > start or (job.terminal and job.log.closed),
                    wait_ms / 1000,
                )
        observe(job)
        if tail:
            floor = start if cursor is not None else 0
            w = win.last(job.log, floor, req.budget, stream=sidx, raw=raw)
        else:
            w = win.following(job.log, start, req.budget, stream=sidx, raw=raw, final=job.terminal)
        job.read_cursor[stream] = w.next_cursor
        return snapshot(job, w, stream=stream)

    async def write_job(
        self,
        job_id: str,
        *,
        text: str | None = None,
        keys: list[str] | None = None,
        eof: bool = False,
        yield_ms: int = 1000,
    ) -> JobSnapshot:
        await self._open()
        job = self.job(job_id)
        text, keys, eof, yield_ms = write_request(text=text, keys=keys, eof=eof, yield_ms=yield_ms)
        data = b""
        if job.terminal or job.driver is None:
            raise ConchError("not_running", f"job {job.job_id} is {job.state}; nothing to write to")
        if text is not None:
            data += text.encode("utf-8")
        if keys:
            if not job.streams:  # a terminal: keys are what the terminal sends for them
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
        observe(job)
        w = win.following(job.log, before, self.config.default_max_output_bytes, final=job.terminal)
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

    async def signal_job(
        self, job_id: str, signal: str = "terminate", *, wait_ms: int = 2000
    ) -> JobSnapshot:
        await self._open()
        job = self.job(job_id)
        signame, wait_ms = signal_request(signal, wait_ms)
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
            task = self.spawn.spawn_task(
                driver.stop("cancelled", 0.0 if signal == "kill" else grace)
            )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), wait_ms / 1000)
        else:
            driver.send_signal(getattr(signal_mod, signame))
            if signal not in ("stop", "continue"):
                await job.wait_until(lambda: job.terminal, wait_ms / 1000)
        observe(job)
        start = job.read_cursor.get(None, 0)
        w = win.following(job.log, start, self.config.default_max_output_bytes, final=job.terminal)
        job.read_cursor[None] = w.next_cursor
        return snapshot(job, w)

    # -- list / info ---------------------------------------------------------------------------

    async def list_jobs(self, state: str = "all") -> ListResult:
        await self._open()
        list_request(state)
        self.jobs.evict()
        jobs = [summary(j) for j in self.jobs if state == "all" or not j.terminal]
        shells = self.shells.summaries() if self.shells is not None else []
        return {"jobs": jobs, "shells": shells}

    async def info(self) -> InfoResult:
        await self._open()
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
            "containment": self._containment_level(),
            "cgroup": self._containment_info().get("cgroup", {}),
            "sandbox": self._containment_info().get("sandbox", {}),
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
        }

    def _containment_level(self) -> str:
        c = self.spawn.containment
        return (c.level if c is not None else None) or hygiene.containment_level()

    def _containment_info(self) -> dict[str, Any]:
        c = self.spawn.containment
        return dict(c.info()) if c is not None else {}

    # -- shells and search (delegated) -----------------------------------------------------------

    async def open_shell(
        self,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        shell: str | None = None,
        startup_command: str | None = None,
        name: str | None = None,
        sandbox: str | None = None,
        network: str | None = None,
        memory_max: int | None = None,
        pids_max: int | None = None,
        echo: bool = True,
        size: tuple[int, int] | None = None,
    ) -> ShellOpened:
        """Open a persistent shell; ``echo``/``size``: see ``ShellManager.open``."""
        await self._open()
        return await self._shell_manager().open(
            cwd=cwd,
            env=env,
            shell=shell,
            startup_command=startup_command,
            name=name,
            sandbox=sandbox,
            network=network,
            memory_max=memory_max,
            pids_max=pids_max,
            echo=echo,
            size=size,
        )

    async def close_shell(self, shell_id: str) -> ShellClosed:
        await self._open()
        return await self._shell_manager().close(shell_id)

    async def search_files(
        self,
        *,
        pattern: str,
        path: str | None = None,
        regex: bool = False,
        ignore_case: bool = False,
        hidden: bool = False,
        glob: builtins.list[str] | None = None,
        context: int = 0,
        mode: str = "matches",
        max_matches: int = 100,
        timeout_ms: int = 30000,
    ) -> SearchResult:
        await self._open()
        assert self.searcher is not None
        return await self.searcher.search(
            pattern=pattern,
            path=path,
            regex=regex,
            ignore_case=ignore_case,
            hidden=hidden,
            glob=glob,
            context=context,
            mode=mode,
            max_matches=max_matches,
            timeout_ms=timeout_ms,
        )
