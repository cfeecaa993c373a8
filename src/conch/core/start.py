"""Starting one-shot jobs: admission, the log, the fence, the driver — or a process started
ahead of need (core/jobs/warm.py) when nothing about the call forbids it.

The :class:`Starter` owns every one-shot driver (pipe and PTY; a shell command belongs to its
shell) and the warm processes. The engine asks it for jobs; shutdown asks it for its drivers.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from conch.config import Config
from conch.core.containment.containment import Containment
from conch.core.containment.fence import SpawnFence
from conch.core.datadir import LogPool
from conch.core.jobs import launch
from conch.core.jobs import warm as warm_start
from conch.core.jobs.driver import ProcessDriver
from conch.core.jobs.job import Job
from conch.core.jobs.label import JobLabel
from conch.core.jobs.pipes import PipeDriver
from conch.core.jobs.pty import PtyDriver
from conch.core.jobs.table import JobTable
from conch.core.output.log import JobLog
from conch.core.requests import CallContext, CheckedExec, check_name
from conch.core.spawn import SpawnContext
from conch.errors import ConchError, RuntimeClosedError


class Starter:
    """Makes jobs: ids and logs from the pool, admission in the job table, drivers."""

    def __init__(
        self,
        spawn: SpawnContext,
        jobs: JobTable,
        log_pool: LogPool,
        bash: str | None,
        closed: Callable[[], bool],
    ) -> None:
        self.spawn = spawn
        self.jobs = jobs
        self.log_pool = log_pool
        self.bash = bash
        self._closed = closed
        self.config: Config = spawn.config
        # every one-shot driver (pipe and PTY); shell commands belong to their shell
        self.drivers: dict[str, ProcessDriver] = {}
        self.warm: warm_start.Warm | None = None  # a bash for `command` jobs
        self.warm_sh: warm_start.Warm | None = None  # a sh that execs `argv` jobs
        self._refill_pending = False

    # -- logs and jobs ---------------------------------------------------------------------------

    def refill_logs(self) -> None:
        """Top the spare log files up on the loop's next turn: that is while the job just
        admitted runs, so it costs its exec nothing, and no worker thread contends with the
        loop for the GIL (a thread hand-off costs more than making the files)."""
        if self._refill_pending or not self.log_pool.needs_refill():
            return
        self._refill_pending = True
        asyncio.get_running_loop().call_soon(self._refill_now)

    def _refill_now(self) -> None:
        self._refill_pending = False
        if not self._closed():
            self.log_pool.refill()

    def new_log(self) -> tuple[str, JobLog]:
        """A fresh job id and its log file."""
        job_id, path, fd = self.log_pool.take()
        self.refill_logs()
        return job_id, JobLog(path, fd, self.config.max_log_bytes, self.spawn.data)

    def admit(self, name: str | None) -> None:
        """A new job may start: a free slot (``busy``), its name, room under the logs' total
        cap (``capacity``)."""
        self.jobs.admit(check_name(name))
        self.spawn.data.admit_log()

    def new_job(
        self,
        *,
        mode: str,
        cwd: str,
        name: str | None,
        shell_id: str | None = None,
        output_format: str = "text",
        label: JobLabel | None = None,
    ) -> Job:
        """Admit and register a job (used by every execution mode, shells included)."""
        self.admit(name)
        job_id, log = self.new_log()
        job = Job(
            job_id=job_id,
            mode=mode,
            cwd=cwd,
            log=log,
            name=name,
            shell_id=shell_id,
            output_format=output_format,
            on_change=self.spawn.on_change,
            on_finish=self.jobs.finished,
            label=label,
        )
        self.jobs.add(job)
        return job

    # -- processes started ahead (core/jobs/warm.py) --------------------------------------------

    def start_warm(self, containment: Containment, cwd: str, *, fill_now: bool) -> None:
        """The warm bash (when there is a bash) and, where it saves work, the warm sh; none
        under a sandbox of the server's own that no call could take them under (bwrap)."""
        if not containment.warm_sandbox:
            return
        hooks: dict[str, Any] = dict(spawn=self._spawn_warm, discard=self._discard_warm)
        if containment.policy.active:  # (started under the server's sandbox: warm.Warm)
            hooks["refill_idle"] = warm_start.SANDBOXED_REFILL_IDLE_S
        if self.bash:
            self.warm = warm_start.warm_bash(self.bash, cwd, **hooks)
        # an argv job at the cgroup level is a mkdir and a cgroup-entering sh before its
        # program: there a warm sh saves both; elsewhere one vfork of the program is quicker
        # (where the spawn starts a program in its cgroup itself, there is no sh to save)
        if (
            containment.level == "cgroup"
            and not containment.places_itself
            and warm_start.sh_is_dash()
        ):
            self.warm_sh = warm_start.warm_sh(cwd, **hooks)
        if fill_now:
            for w in (self.warm, self.warm_sh):
                if w is not None:
                    w.fill_soon()

    async def _spawn_warm(
        self, argv: list[str], cwd: str
    ) -> tuple[Job, PipeDriver, dict[str, str]]:
        """A pipe job's process and log, started ahead of need (in its own cgroup at that
        containment level, as every job), not in the job table."""
        job_id, log = self.new_log()
        job = Job(job_id=job_id, mode="command", cwd=cwd, log=log, on_finish=self.jobs.finished)
        env = self.spawn.child_env(job_id, pty=False, cwd=cwd)
        driver = PipeDriver(job, self.spawn.reaper, on_output_limit=self.spawn.output_limit)
        fence: SpawnFence | None = None
        try:
            fence = await self.spawn.fence(job_id)
            fence.ahead = True
            if self._closed():
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
        self.drivers[job_id] = driver
        return job, driver, env

    def _discard_warm(self, job: Job) -> None:
        """A warm bash that will not be used: EOF on its stdin ends it; then its log goes."""

        def gone(j: Job) -> None:
            self.drivers.pop(j.job_id, None)
            j.log.unlink()

        if job.terminal:
            gone(job)
            return
        job.on_finish(gone)
        if isinstance(job.driver, PipeDriver) and job.driver.stdin_open:
            job.driver.feed(b"", close=True)

    def _may_take_warm(self, req: CheckedExec, ctx: CallContext, script: bool) -> bool:
        """Nothing about this call needs a process of its own: no limit (a cgroup per job
        may apply: the warm process has one of its own), no sandbox but the server's own
        Landlock one (the warm process runs under it: ``_take_warm`` compares its ruleset),
        no stdin, terminal, script, environment or caller context."""
        r = req.request
        if not ctx.warm or script or r.pty or r.stdin is not None or r.stdin_open:
            return False
        if req.env or req.shell_env or ctx.caller_session_id or ctx.inherit_not:
            return False
        c = self.spawn.containment
        if c is None:
            return True
        limits = c.resolve_limits({"memory_max": r.memory_max, "pids_max": r.pids_max})
        return not limits and c.resolve_policy(r.sandbox, r.network) == c.policy and c.warm_sandbox

    def _take_warm(
        self, req: CheckedExec, ctx: CallContext, cwd: str, args: list[str], program: str | None
    ) -> Job | None:
        """The warm bash (a plain `command`) or sh (a plain `argv`: ``program`` is where it
        runs from, when known already) as this job, or None."""
        r = req.request
        accept: Callable[[dict[str, str]], bool] | None = None
        if r.command is not None and self.warm is not None:
            warm = self.warm
            data = r.command.encode("utf-8", "surrogateescape") + b"\0"
            program = self.bash
        elif req.argv is not None and self.warm_sh is not None:
            if program is None:
                program = launch.check_program(args[0], req.env, cwd)
            if not warm_start.runs_directly(program):
                return None
            warm, data = self.warm_sh, warm_start.exec_line(args)

            def accept(env: dict[str, str]) -> bool:
                return warm_start.sh_keeps_env(env, cwd)
        else:
            return None
        self.admit(r.name)
        c = self.spawn.containment

        def fits(job: Job) -> str | None:
            # (the fence it was started with: the server's, a sandbox included)
            fence = job.driver.fence if isinstance(job.driver, PipeDriver) else None
            return c.warm_fits(fence, args, program) if c is not None else None

        job = warm.take(
            data,
            cwd,
            lambda job_id: self.spawn.child_env(job_id, pty=False, cwd=cwd),
            accept,
            fits,
        )
        if job is None:
            return None
        job.mode = "argv" if req.argv is not None else "command"
        job.name = r.name
        job.output_format = r.output_format
        job.begin(self.spawn.on_change, ctx.label)
        self.jobs.add(job)
        return job

    # -- one-shot jobs ---------------------------------------------------------------------------

    async def start_process(self, req: CheckedExec, ctx: CallContext) -> Job:
        """A one-shot job on pipes or on its own terminal (``pty``)."""
        r = req.request
        run_cwd = self.spawn.resolve_cwd(r.cwd)
        mode, args, script_text = launch.plan(self.bash, r.command, req.argv, r.script)
        # every containment value is checked before anything runs; a fenced program is exec'd
        # by a wrapper, so a missing one would only show as exit 127: look for it first
        fenced = self.spawn.check_fence(**r.fence)
        program = None
        if fenced and mode == "argv":
            program = launch.check_program(args[0], req.env, run_cwd)
        if mode in ("command", "argv") and self._may_take_warm(req, ctx, script_text is not None):
            taken = self._take_warm(req, ctx, run_cwd, args, program)
            if taken is not None:
                return taken
        job = self.new_job(
            mode="pty" if r.pty else mode,
            cwd=run_cwd,
            name=r.name,
            output_format=r.output_format,
            label=ctx.label,
        )
        fence: SpawnFence | None = None
        try:
            fence = await self.spawn.fence(job.job_id, **r.fence)
            if script_text is not None:
                args = await launch.prepare_script(
                    self.spawn.data,
                    self.bash,
                    job,
                    script_text,
                    run_cwd,
                    check=mode == "script",
                    env=self.spawn.child_env(job.job_id, pty=False),
                )
            child_env = self.spawn.child_env(
                job.job_id,
                pty=r.pty,
                env=req.env,
                shell_env=req.shell_env,
                caller_session_id=ctx.caller_session_id,
                inherit_not=ctx.inherit_not,
                cwd=run_cwd,
            )
            stdin = r.stdin.encode("utf-8") if r.stdin is not None else None
            driver: ProcessDriver
            start: Callable[..., None]
            limit = self.spawn.output_limit
            if r.pty:
                if self._closed():
                    raise ConchError("closed", "the runtime is closing")
                pty = PtyDriver(job, self.spawn.reaper, on_output_limit=limit)
                # typed input given and stdin not kept open: the program then reads EOF
                eof = r.stdin is not None and not r.stdin_open
                driver, start = pty, functools.partial(pty.start, eof_after_stdin=eof)
            else:
                pipe = PipeDriver(job, self.spawn.reaper, on_output_limit=limit)
                driver, start = pipe, functools.partial(pipe.start, stdin_open=r.stdin_open)
            start(args, cwd=run_cwd, env=child_env, stdin=stdin, fence=fence)
        except BaseException:
            self.jobs.drop(job)
            if fence is not None and fence.cgroup is not None:
                fence.cgroup.remove()
            raise
        job.driver = driver
        self.drivers[job.job_id] = driver
        return job

    # -- what the engine's housekeeping and the HTTP guard ask -----------------------------------

    def sandboxed(self) -> list[tuple[str, int, set[int]]]:
        """(job id, leader pid, the processes of its cgroup) of every running one-shot job
        with a sandbox (without a PID namespace, Landlock's, a daemon that left the session
        is no descendant of the leader: its cgroup still holds it)."""
        return [
            (job_id, d.pid, d.cgroup.pids() if d.cgroup is not None else set())
            for job_id, d in self.drivers.items()
            if d.pid is not None
            and d.fence is not None
            and d.fence.sandbox is not None
            and not d.job.terminal
        ]

    def unfenced_leaders(self) -> set[int]:
        """The leaders of the running one-shot jobs without a sandbox."""
        return {
            d.pid
            for d in self.drivers.values()
            if d.pid is not None
            and not d.job.terminal
            and (d.fence is None or d.fence.sandbox is None)
        }

    def watch_cgroups(self) -> None:
        """Cgroup level: end jobs the kernel hit for their memory limit; remove the cgroups
        of finished jobs once what they left running is gone."""
        for d in list(self.drivers.values()):
            cg = d.cgroup
            if cg is None:
                continue
            if d.job.terminal:
                d.release_cgroup()
            elif cg.memory_dir is not None:
                d.check_limits()

    def evicted(self, job: Job) -> None:
        """A job left the table: its driver's cgroup goes (one still holding processes goes
        at shutdown), and its files."""
        driver = self.drivers.pop(job.job_id, None)
        if driver is not None:
            driver.release_cgroup()
        launch.remove_tmp_files(job, self.spawn.data)  # a job that never started
        job.log.unlink()
