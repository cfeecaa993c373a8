"""The engine: owns jobs, the job starter, the shells and search; runs the requests.

It knows nothing of tools, profiles or transports: the embedded façade ``conch.Runtime``
(conch/runtime.py) holds one and adds those on top. What the objects it owns need from it they
get through one :class:`~conch.core.spawn.SpawnContext`, never the engine itself. Starting jobs
is core/start.py's, shutting down core/shutdown.py's.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import conch.core.ops as ops
import conch.core.requests as rq
import conch.core.results as rs
from conch._version import __version__
from conch.config import SCREEN_CATCHUP_BYTES, SCREENS_KEPT, Config
from conch.core.changes import view as change_view
from conch.core.changes.store import JOB_ID, Store
from conch.core.changes.tracker import Active, Tracker, counts
from conch.core.changes.undo import undo as undo_changes
from conch.core.containment.containment import Containment
from conch.core.datadir import DataDir, LogPool
from conch.core.env import CALLER_SESSION_VAR
from conch.core.jobs import launch
from conch.core.jobs.job import Job, new_id
from conch.core.jobs.label import JobLabel
from conch.core.jobs.ready import ReadySpec, wait_ready
from conch.core.jobs.screens import Screens
from conch.core.jobs.snapshot import summary
from conch.core.jobs.table import JobTable
from conch.core.jobs.view import JobView
from conch.core.netaddr import is_loopback
from conch.core.once import Once
from conch.core.output.cast import cast_lines, session_cast_lines
from conch.core.output.screen import ScreenSnapshot
from conch.core.process import hygiene, peer, procfs
from conch.core.search import Searcher
from conch.core.shell.manager import ShellManager
from conch.core.shutdown import Owned, shut_down
from conch.core.spawn import SpawnContext
from conch.core.start import Starter
from conch.errors import ConchError, RuntimeClosedError

_HOUSEKEEPING_S = 0.5
#: how long the search for a loopback peer's process may take before the guard refuses it
PEER_BUDGET_S = 0.25
#: verdicts kept by socket inode (one a connection: a keep-alive client pays the search once)
PEER_CACHE = 4096
_NO_CONTEXT = rq.CallContext()
#: how long the engine's start waits for the change tracker's index (then it goes on building):
#: a small workspace's is ready by then; a server started in a large tree starts no slower
TRACKER_START_WAIT_S = 0.25


def _content(tracker: Tracker, oid: str) -> bytes | None:
    try:
        return tracker.store.get(oid)
    except OSError:
        return None


class Engine:
    """Conch's engine, usable in-process: ``async with Engine(Config()) as engine: ...``.

    Users want ``conch.Runtime`` (which holds one, with the tool catalogue on top). Every
    operation takes a request object (core/requests.py) and a ``CallContext``."""

    def __init__(self, config: Config | None = None, *, owns_process: bool = False) -> None:
        self.config = config or Config()
        self._started = False
        self._once = Once(self._start)
        self._closed = False
        self._peers: dict[int, str] = {}  # socket inode -> what holds it, "" for no fence
        self._peers_lock = threading.Lock()
        self._close_task: asyncio.Task[None] | None = None
        self._listeners: builtins.list[Callable[[str | None], None]] = []
        self.data = DataDir(self.config.resolved_data_dir, self.config.max_total_log_bytes)
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
            logs_over=lambda: self.data.logs_over,
        )
        self.data.make_room = self.jobs.evict
        self.bash = launch.find_bash()
        self.screens = Screens(keep=SCREENS_KEPT, catchup=SCREEN_CATCHUP_BYTES)
        self.starter = Starter(
            self.spawn,
            self.jobs,
            LogPool(self.data, lambda: new_id("j")),
            self.bash,
            closed=lambda: self._closed,
        )
        self._housekeeping: asyncio.Task[None] | None = None
        self._shells: ShellManager | None = None
        self.searcher: Searcher | None = None
        self.orphans_killed: builtins.list[int] = []
        self._default_cwd: str | None = None
        # changes and undo (core/changes): the tracker, and each ended job's record capture
        self.tracker: Tracker | None = None
        self._captures: dict[str, asyncio.Future[None]] = {}
        self._next_expiry = 0.0

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
        """What holds the client end of a loopback connection to ``server`` when it is inside
        a sandbox (a job or shell id, or a phrase naming a leftover), else None: a request from
        inside a sandbox must not get more than its fence.

        The fence travels with the processes. First answer, where every sandboxed spawn runs
        in a cgroup v2 of its own (``SpawnContext.cgroup_marks``): the cgroup the kernel
        recorded for the socket when it was made decides, in one sock_diag lookup, whatever
        the number of processes or descriptors: a socket made in a sandboxed job's cgroup (by
        its leader or anything it left running) is that job's. Otherwise the processes are
        searched: every process of the server's tree that carries a fence the kernel keeps
        for it (another PID namespace: bwrap; more seccomp filters than the server: every
        sandboxed job, Landlock's included) is a suspect for as long as it lives (a Landlock
        job's leftover comes back to the server, a subreaper, and stays in its tree).

        Fails closed: a socket that cannot be found, or a search that runs past
        ``PEER_BUDGET_S``, is refused. Blocking (procfs reads, netlink): the HTTP guard calls
        it off the event loop, for every peer: a job reaches a server bound to every interface
        by this machine's own address as well as by the loopback (a peer whose socket is not
        in this machine's table is another machine). A runtime that never sandboxed anything
        answers at once."""
        if not self.spawn.fenced:
            return None
        found = peer.socket_found(client, server)
        if found is None:
            if not is_loopback(client[0]):
                return None  # another machine's (a local process's socket is in the table)
            return "an untraceable peer (its socket is not in /proc/net/tcp)"
        marks = self.spawn.cgroup_marks
        if found.cgroup is not None and marks.complete:
            return marks.unit(found.cgroup)  # (one dict lookup: nothing to keep)
        inode = found.inode
        with self._peers_lock:
            cached = self._peers.get(inode)
        if cached is not None:
            return cached or None
        try:
            verdict = self._trace_peer(inode)
        except peer.Untraceable:  # (not kept: the next request searches again)
            return "an untraceable peer (the search for its process ran out of time)"
        with self._peers_lock:
            self._peers[inode] = verdict or ""
            while len(self._peers) > PEER_CACHE:
                del self._peers[next(iter(self._peers))]
        return verdict

    def _trace_peer(self, inode: int) -> str | None:
        """``sandboxed_caller``'s search (from a thread other than the loop's: a table that
        changes meanwhile is searched again, up to the deadline; the only retry there is)."""
        deadline = time.monotonic() + PEER_BUDGET_S
        while True:
            try:
                return self._search_peer(inode, deadline)
            except RuntimeError:  # a dict changed size under the iteration
                if time.monotonic() > deadline:
                    raise peer.Untraceable("the job tables kept changing") from None

    def _search_peer(self, inode: int, deadline: float) -> str | None:
        units = self.starter.sandboxed()
        if self._shells is not None:
            units += self._shells.sandboxed()
        named: set[int] = set()
        for unit, leader, members in units:
            pids = {leader} | procfs.descendants({leader}) | members
            named |= pids
            if peer.holders(inode, pids, deadline):
                return unit
        tree = procfs.descendants({os.getpid()}) - named
        own = peer.Marks.of("self")
        suspects = [p for p in tree if peer.Marks.of(p).fenced_against(own)]
        if self.spawn.unmarked:  # a fence the kernel does not mark: every leftover
            free = self.starter.unfenced_leaders()
            free |= procfs.descendants(free)
            suspects = sorted(tree - free)
        if peer.holders(inode, suspects, deadline):
            return "a process a sandboxed job left running"
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
        await self._once.run(closed=self._closed)

    async def _start(self) -> None:
        self.data.prepare()
        self.data.remove_expired(self.config.log_ttl_s)
        hygiene.enable_subreaper()
        self.spawn.instance = hygiene.instance_id()
        self.orphans_killed = await asyncio.to_thread(hygiene.kill_orphans_of_dead_servers)
        containment = Containment(
            self.config.containment(), instance=self.spawn.instance, data_dir=str(self.data.root)
        )
        await asyncio.to_thread(containment.start)
        self.spawn.containment = containment
        if self.config.changes == "on":
            self.tracker = await asyncio.to_thread(self._start_tracker)
            if os.path.realpath(self.tracker.workspace) == os.path.realpath(containment.workspace):
                containment.privileged_files = self.tracker.privileged
        self.searcher = Searcher(self.config.resolved_default_cwd, env=self._search_env)
        self._housekeeping = asyncio.ensure_future(self._housekeep())
        if self.config.warm_bash:
            self.starter.start_warm(containment, self.default_cwd, fill_now=self._warm_at_start)
        self._started = True
        self.starter.refill_logs()

    def _start_tracker(self) -> Tracker:
        """The change tracker of the workspace: its index is built in a thread; a small
        workspace's is ready when the engine is (a larger one's jobs are untracked until it
        is: ``tracker.wait_ready`` waits for it, ``info`` says ``building``)."""
        cfg = self.config
        # what the index needs at most, and as much again for what jobs change meanwhile
        # (records go with their jobs' retention): the store's disk use is bounded
        store = Store(self.data.root, cap=2 * cfg.changes_max_store_bytes)
        store.open()
        tracker = Tracker(
            cfg.resolved_default_cwd,
            store,
            max_files=cfg.changes_max_files,
            max_file_bytes=cfg.changes_max_file_bytes,
            max_store_bytes=cfg.changes_max_store_bytes,
            exclude=cfg.changes_exclude,
            skip=(str(self.data.root),),
        )
        tracker.load_records(cfg.retention_s)
        tracker.start(wait_s=TRACKER_START_WAIT_S)
        return tracker

    def _track_begin(self, request: rq.ExecRequest) -> Active | None:
        """Before a job's process starts: its changes are tracked from now on (unless off)."""
        if self.tracker is None:
            return None
        # (changes: false keeps no record, but the jobs it overlaps must know it ran)
        return self.tracker.begin(new_id("j"), keep=request.changes is not False)

    def _track_bind(self, job: Job, active: Active | None) -> None:
        """The job exists: its record is made when it ends."""
        tracker = self.tracker
        if active is None or tracker is None:
            return
        tracker.rename(active, job.job_id)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._captures[job.job_id] = done

        async def capture() -> None:
            try:
                record = tracker.end_quick(active)
                if record is None:
                    record = await asyncio.to_thread(tracker.end, active)
                n = {k: v for k, v in counts(record).items() if v}
                job.changes = n or None
            finally:
                done.set_result(None)
                self._captures.pop(job.job_id, None)
                job.notify()

        def ended(_job: Job) -> None:
            self.spawn.spawn_task(capture())

        if job.terminal:
            ended(job)
        else:
            job.on_finish(ended)

    async def _captured(self, job_id: str) -> None:
        """A finished job's record is made (its counts are in its snapshot)."""
        done = self._captures.get(job_id)
        if done is not None:
            await asyncio.shield(done)

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
            ops.follow_digests(self.jobs, self.spawn.spawn_task)
            if self.tracker is not None and time.monotonic() > self._next_expiry:
                self._next_expiry = time.monotonic() + 60
                await asyncio.to_thread(self.tracker.expire, self.config.retention_s)
            self.starter.watch_cgroups()
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

    async def aclose(self) -> None:
        """Stop every job and shell, reap everything; idempotent and safe to call concurrently."""
        if self._close_task is None:
            self._closed = True
            s = self.starter
            owned = Owned(
                config=self.config,
                spawn=self.spawn,
                jobs=self.jobs,
                log_pool=s.log_pool,
                data=self.data,
                starting=self._once.task,
                warm=(s.warm, s.warm_sh),
                housekeeping=self._housekeeping,
                shells=self._shells,
                drivers=s.drivers,
            )
            self._close_task = asyncio.ensure_future(self._shut_down(owned))
        task = self._close_task
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            # finish cleanup even when the caller is cancelled, then let the cancel through
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), 5.0)
            raise

    async def _shut_down(self, owned: Owned) -> None:
        try:
            await shut_down(owned)
        finally:
            if self.tracker is not None:
                await asyncio.to_thread(self.tracker.close)

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
        if self.tracker is not None:
            self.tracker.forget(job.job_id)
        self.screens.drop(job.job_id)
        self.starter.evicted(job)
        self._changed(None)

    # -- jobs ----------------------------------------------------------------------------------

    def job(self, job_id: str) -> JobView:
        """The job with this id or name, read-only (``not_found`` otherwise)."""
        return self._job(job_id)

    def retained(self) -> builtins.list[JobView]:
        """Every job still retained (what retention let go is evicted first)."""
        self.jobs.evict()
        return builtins.list(self.jobs)

    @property
    def running(self) -> int:
        return self.jobs.running

    def shell_summaries(self) -> builtins.list[rs.ShellSummary]:
        return self.shells.summaries() if self.shells is not None else []

    def shells_available(self) -> builtins.list[rs.ShellAvailable]:
        return self.shells.available() if self.shells is not None else []

    def output_file(self, content: bytes = b"") -> str:
        """A file named like the job logs, so that log retention removes it (a profile's
        output file of a call that failed before it had a job)."""
        path, fd = self.data.new_file(self.data.logs, new_id("j"), "log")
        try:
            if content:
                os.write(fd, content)
        finally:
            os.close(fd)
        return path

    def _job(self, job_id: str) -> Job:
        if self._closed:
            raise RuntimeClosedError()
        if not self._started:
            raise RuntimeError("Runtime not started: use `async with Runtime(...)` or start()")
        if not isinstance(job_id, str) or not job_id:
            raise ConchError("invalid_argument", "job_id must be a non-empty string")
        return self.jobs.get(job_id)

    async def exec(
        self, request: rq.ExecRequest, context: rq.CallContext = _NO_CONTEXT
    ) -> rs.JobSnapshot:
        """Run a command, argv or script (or a command in a shell) as a job; see docs/spec.md §3."""
        await self._open()
        req = request.checked(self.config, context.shell_env)
        active = self._track_begin(request)
        try:
            if request.shell_id is not None:
                job = await self._start_shell_command(req, context)
            else:
                job = await self.starter.start_process(req, context)
        except BaseException:
            if active is not None and self.tracker is not None:
                self.tracker.cancel(active)
            raise
        self._track_bind(job, active)
        job.digest_off = request.digest is False
        if not job.digest_off:
            ops.follow_when_big(job, self.spawn.spawn_task)
        if context.on_start is not None:
            context.on_start(job)
        self.spawn.deadline(job, req.timeout_ms)
        result = await self._exec_result(
            job, yield_ms=req.yield_ms, budget=req.budget, ready=req.ready, context=context
        )
        result = await ops.with_digest(job, result, request.digest)
        if request.shell_id is not None:
            result["shell_id"] = job.shell_id
            result["cwd"] = job.cwd
        return result

    async def _start_shell_command(self, req: rq.CheckedExec, ctx: rq.CallContext) -> Job:
        """A command in a persistent shell (the shell's own driver runs it)."""
        r = req.request
        assert r.shell_id is not None and r.command is not None
        sh = self._shell_manager().get(r.shell_id)
        if not isinstance(r.command, str) or "\x00" in r.command:
            raise ConchError("invalid_argument", "command must be a string without NUL")
        restarted = await sh.claim()
        job = self.starter.new_job(
            mode="shell",
            cwd=sh.cwd,
            name=r.name,
            shell_id=sh.shell_id,
            output_format=r.output_format,
            label=ctx.label,
        )
        job.restarted = restarted
        # a person ran a command here since the agent's last one: this one's result says so
        told, sh.human = sh.human, None
        job.attendance = told.carried() if told is not None else None
        assign = {**req.env, **req.shell_env}
        if ctx.caller_session_id or assign:
            assign[CALLER_SESSION_VAR] = ctx.caller_session_id
        sh.run(job, r.command, assign)
        return job

    async def _exec_result(
        self,
        job: Job,
        *,
        yield_ms: int,
        budget: int,
        ready: ReadySpec | None,
        context: rq.CallContext,
    ) -> rs.JobSnapshot:
        """Wait up to yield_ms for the job to end (or become ready); the exec result."""
        try:
            if ready is not None:
                job.ready = await wait_ready(job, ready, yield_ms / 1000)
                if job.ready is None:
                    job.ready = False if job.terminal else None
            else:
                await job.wait_until(lambda: job.terminal, yield_ms / 1000)
            if job.terminal:
                await self._captured(job.job_id)
        except asyncio.CancelledError:
            # the caller gave up on the exec (e.g. MCP cancellation): the job goes with it,
            # unless that was the host's own timeout (docs/spec.md §2: a later read finds it)
            if not job.terminal and job.driver is not None:
                await asyncio.shield(self.spawn.spawn_task(ops.cancelled(job, context, self.spawn)))
            raise
        return ops.window_from(job, None, budget)

    # -- read / write / signal (core/jobs/ops.py) ---------------------------------------------

    async def read(self, request: rq.ReadRequest) -> rs.JobSnapshot:
        await self._open()
        checked = request.checked(self.config)
        jobs = [self._job(i) for i in request.ids]
        for job in jobs:
            if job.terminal:
                await self._captured(job.job_id)
        return await ops.read(jobs, checked, self.screens)

    async def write(self, request: rq.WriteRequest) -> rs.JobSnapshot:
        await self._open()
        job = self._job(request.job_id)
        budget = request.max_bytes or self.config.default_max_output_bytes
        return await ops.write(job, request.checked(), budget)

    # -- terminals: screens, recordings, a person typing (docs/spec.md §8) -------------------------

    def screen(self, job_id: str) -> ScreenSnapshot:
        """A terminal job's screen now (emulated from its log: core/jobs/screens.py)."""
        return self.screens.look(self._job(job_id))

    def replay(self, job_id: str, t: float) -> tuple[ScreenSnapshot, float]:
        """A terminal job's screen ``t`` seconds into its recording, and the recording's length."""
        return self.screens.at(self._job(job_id), t)

    def shell_cast(self, shell_id: str) -> Iterator[str]:
        """A shell session's asciicast v2 recording: its retained commands in turn, line by
        line (``not_found`` when none is retained)."""
        if self._closed:
            raise RuntimeClosedError()
        parts = sorted(
            ((j.recording, j.log) for j in self.jobs if j.shell_id == shell_id and j.recording),
            key=lambda part: part[0].started,
        )
        if not parts:
            raise ConchError(
                "not_found",
                f"no command of shell {shell_id!r} is retained (unknown, none run yet, or "
                "evicted): nothing to record",
            )
        return session_cast_lines(parts)

    def cast(self, job_id: str) -> Iterator[str]:
        """A terminal job's asciicast v2 recording, line by line."""
        job = self._job(job_id)
        if job.recording is None:
            raise ConchError(
                "invalid_argument", f"job {job.job_id} has no terminal (only pty and shell jobs)"
            )
        return cast_lines(job.recording, job.log)

    async def type_human(
        self, job_id: str, text: str | None = None, keys: Sequence[str] = ()
    ) -> int:
        """A person's keys into a terminal job (core/ops.py ``type_human``)."""
        await self._open()
        return await ops.type_human(
            self._job(job_id), text, keys, idle_s=self.config.attended_idle_ms / 1000
        )

    def hand_back(self, job_id: str) -> None:
        ops.hand_back(self._job(job_id))

    async def run_human(self, shell_id: str, command: str) -> str:
        """A command a person types into an idle shell from the dashboard (docs/spec.md §8): the
        shell's next command, run as any is (``shell_busy`` while one runs), attended from its
        start so the agent's ``write`` to it answers ``busy``. The agent's next result for it,
        or else its next command in the shell, carries ``human_input`` (its byte count, never
        its text). Returns the job id."""
        if not isinstance(command, str) or not command.strip():
            raise ConchError("invalid_argument", "command must be a non-empty string")
        request = rq.ExecRequest(command=command, shell_id=shell_id, yield_ms=0)
        label = JobLabel(command=command, purpose="typed by a person in the dashboard")
        snap = await self.exec(request, rq.CallContext(label=label))
        job = self._job(snap["job_id"])
        idle_s = self.config.attended_idle_ms / 1000
        typed = ops.attend(job, len(command.encode("utf-8")) + 1, idle_s=idle_s)  # + Enter
        self._shell_manager().get(shell_id).human = typed
        return job.job_id

    def resize(self, job_id: str, size: object) -> tuple[int, int]:
        """A person's resize of a terminal job (the dashboard's Fit): ``size`` is checked as
        ``write``'s ``resize`` is, and set the way it sets it (core/ops.py ``resize_human``).
        Returns (rows, columns)."""
        job = self._job(job_id)
        rows, cols = rq.terminal_size(size)
        ops.resize_human(job, rows, cols)
        return rows, cols

    async def type_secret(self, job_id: str, text: str) -> None:
        """Type a secret and Enter into a job's terminal (core/ops.py ``type_secret``)."""
        await ops.type_secret(self._job(job_id), text)

    async def signal(self, request: rq.SignalRequest) -> rs.JobSnapshot:
        await self._open()
        job = self._job(request.job_id)
        signame = request.checked()
        return await ops.send_signal(
            job,
            request,
            signame,
            grace_s=self.spawn.grace_s,
            budget=request.max_bytes or self.config.default_max_output_bytes,
            spawn_task=self.spawn.spawn_task,
        )

    # -- list / info ---------------------------------------------------------------------------

    async def list(self, state: str = "all") -> rs.ListResult:
        await self._open()
        rq.list_request(state)
        self.jobs.evict()
        jobs = [summary(j) for j in self.jobs if state == "all" or not j.terminal]
        return {"jobs": jobs, "shells": self.shell_summaries()}

    async def info(self) -> rs.InfoResult:
        await self._open()
        cfg = self.config
        c = self.spawn.containment
        contained: dict[str, Any] = dict(c.info()) if c is not None else {}
        return {
            "version": __version__,
            "python": platform.python_version(),
            "platform": sys.platform,
            "machine": platform.machine(),
            "pid": os.getpid(),
            "default_cwd": cfg.resolved_default_cwd,
            "data_dir": str(self.data.root),
            "bash": self.bash,
            "shells": self.shells_available(),
            "rg": self.searcher.info()
            if self.searcher is not None
            else {"path": None, "version": None},
            "containment": (c.level if c is not None else None) or hygiene.containment_level(),
            "cgroup": contained.get("cgroup", {}),
            "sandbox": contained.get("sandbox", {}),
            "limits": cfg.limits(),  # type: ignore[typeddict-item]
            "running_jobs": self.jobs.running,
            "retained_jobs": len(self.jobs),
            "changes": self._changes_info(),
        }

    def _changes_info(self) -> dict[str, Any]:
        if self.tracker is None:
            return {
                "state": "off",
                "reason": "the setting changes is off",
                "workspace": self.config.resolved_default_cwd,
            }
        return self.tracker.info()

    # -- changes and undo (core/changes) ----------------------------------------------------------

    async def changes(
        self,
        job_id: str,
        *,
        undo: bool = False,
        force: Sequence[str] = (),
        cursor: str | None = None,
        max_bytes: int | None = None,
    ) -> dict[str, Any]:
        """What a finished job changed under the workspace (paths, sizes, modes, a bounded
        diff of text files, by pages); with ``undo`` it takes them back and returns the undo's
        own change set (undo that to redo). Refusals: ``conflict`` (paths changed since,
        named, unless in ``force``; the job still running), ``not_found`` (no record:
        unknown, evicted, run with ``changes: false`` or while tracking was off)."""
        await self._open()
        if not isinstance(job_id, str) or not job_id:
            raise ConchError("invalid_argument", "job_id must be a non-empty string")
        if not isinstance(force, (list, tuple)) or not all(isinstance(p, str) for p in force):
            raise ConchError("invalid_argument", "force must be a list of workspace paths")
        budget = max_bytes if max_bytes is not None else self.config.default_max_output_bytes
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise ConchError("invalid_argument", "max_bytes must be a non-negative integer")
        tracker = self.tracker
        if tracker is None:
            raise ConchError(
                "not_found", "change tracking is off on this server (the setting changes)"
            )
        job: Job | None = None
        rid = job_id
        try:
            job = self.jobs.get(job_id)  # by id or name, while retained
            rid = job.job_id
        except ConchError:
            if not JOB_ID.match(job_id):  # a record outlives its server (a restart), by id
                raise
        if job is not None and not job.terminal:
            raise ConchError(
                "conflict",
                f"job {rid} is still running: what it changed is known when it ends "
                "(wait for it, or signal it)",
            )
        await self._captured(rid)
        record = await asyncio.to_thread(tracker.record, rid)
        if record is None:
            raise ConchError(
                "not_found",
                f"no change record for {rid}: unknown, evicted (retention), or run with "
                "changes: false or while change tracking was off",
            )
        if undo and tracker.state == "building":
            raise ConchError(
                "busy",
                "change tracking is still building its index of the workspace: undo when "
                "`info` says changes: on",
                retryable=True,
            )
        if undo:
            record = await asyncio.to_thread(
                undo_changes, tracker, record, tuple(force), new_id("u"), tracker.record
            )
        return await asyncio.to_thread(
            change_view.result,
            record,
            cursor=cursor,
            max_bytes=budget,
            content=lambda oid: _content(tracker, oid),
            workspace=tracker.workspace,
            exclude=tracker.exclude,
        )

    # -- shells and search -----------------------------------------------------------------------

    async def shell_open(self, request: rq.ShellOpenRequest) -> rs.ShellOpened:
        await self._open()
        return await self._shell_manager().open(request)

    async def shell_close(self, shell_id: str) -> rs.ShellClosed:
        await self._open()
        return await self._shell_manager().close(shell_id)

    async def search(self, request: rq.SearchRequest) -> rs.SearchResult:
        await self._open()
        assert self.searcher is not None
        return await self.searcher.search(request)
