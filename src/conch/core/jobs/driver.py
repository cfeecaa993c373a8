"""What every one-shot job driver shares: its process tree, how it is stopped, and how the
leader's exit becomes the job's end. Pipe jobs (core/jobs/pipes.py) and PTY jobs
(core/jobs/pty.py) differ only in how bytes go in and out."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable

from conch.core.containment import sandbox as sb
from conch.core.containment.cgroup.job import JobCgroup
from conch.core.containment.fence import SpawnFence
from conch.core.jobs.job import Job
from conch.core.process import procfs
from conch.core.process.exit_watch import ExitWatch, decode_status
from conch.core.process.hygiene import (
    TAG_VAR,
    Reaper,
    containment_level,
    kill_tree_now,
    terminate_tree,
)

_SETTLE_S = 0.2
_SETTLE_POLL_S = 0.002
#: a forwarded signal lost while bwrap set up is sent again once the program runs, for so long
_RESEND_S = 5.0
_RESEND_POLL_S = 0.01
_FORWARDED = frozenset(int(getattr(signal, name)) for name in sb.FORWARDED)
#: what runs in a bwrap job before its program (the leader's sh execs bwrap)
_SETUP_COMMS = ("bwrap", "env")


def setting_up(pid: int, comm: str, leader: int) -> bool:
    """A process (``comm``: its name) of the sandbox's own start, not of the program yet."""
    return comm in _SETUP_COMMS or (pid == leader and comm == "sh")


class ProcessDriver:
    def __init__(self, job: Job, reaper: Reaper, *, on_output_limit: Callable[[Job], None]) -> None:
        self.job = job
        self.reaper = reaper
        self.pid: int | None = None
        self._tag = b""
        self._loop = asyncio.get_running_loop()
        self._watch: ExitWatch | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._on_output_limit = on_output_limit
        self.fence: SpawnFence | None = None
        self.cgroup: JobCgroup | None = None
        self._settle_until = 0.0  # while bwrap's own processes finish (see _on_exit)

    def _fence(self, fence: SpawnFence | None) -> None:
        self.fence = fence
        self.cgroup = fence.cgroup if fence is not None else None

    def _decode(self, status: int | None) -> tuple[int | None, int | None]:
        """(exit code, signal) of the job's program; under bwrap the monitor reports a
        program killed by signal N as exit status 128+N."""
        code, signum = decode_status(status)
        if self.fence is not None and self.fence.monitor and code is not None and 128 < code < 160:
            return None, code - 128
        return code, signum

    def check_limits(self) -> None:
        """The kernel killed a process of the job for its memory limit: the job ends `limit`."""
        if self.cgroup is None or self.job.terminal or self.job.kill_reason:
            return
        if self.cgroup.oom_kills() > 0:
            self.job.limit = "memory_max"
            self.job.kill_reason = "limit"
            if self._stop_task is None:
                self._stop_task = asyncio.ensure_future(self._stop("limit", 0.0))

    # -- signals -------------------------------------------------------------------------------

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the job's processes (as ``signal`` asks)."""
        if self.pid is None:
            return
        self.job.sent_signals.add(signum)
        monitored = self.fence is not None and self.fence.monitor and signum in _FORWARDED
        unseen = monitored and self._nobody_takes(signum)
        self._deliver(signum)
        if unseen:
            self._resend_when_taken(signum)

    def _nobody_takes(self, signum: int) -> bool:
        """Under bwrap every process before the program (the sh that enters the cgroup,
        bwrap, its init) ignores the signals Conch forwards, so that bwrap's monitor outlives
        the program it reports on; ``env --default-signal`` resets them just before it execs
        the program. Whether, looked at just before a send, every process of the job is still
        in that start (a signal that came to env there found it ignoring, or env died of it)."""
        assert self.pid is not None
        leader, bit = self.pid, 1 << (signum - 1)
        views = [(p, procfs.comm(p)) for p in self.pids()]
        return bool(views) and all(
            setting_up(p, comm, leader) and (comm == "env" or procfs.ignored(p) & bit)
            for p, comm in views
        )

    def _resend_when_taken(self, signum: int) -> None:
        """The signal was sent while the job's program did not run yet: send it again once a
        process of the program takes it, for up to ``_RESEND_S``."""
        assert self.pid is not None
        leader, bit = self.pid, 1 << (signum - 1)
        deadline = self._loop.time() + _RESEND_S

        def again() -> None:
            if self.job.terminal or self.pid is None:
                return
            if any(
                procfs.is_alive(p)
                and not setting_up(p, procfs.comm(p), leader)
                and not procfs.ignored(p) & bit
                for p in self.pids()
            ):
                self._deliver(signum)
            elif self._loop.time() < deadline:
                self._loop.call_later(_RESEND_POLL_S, again)

        self._loop.call_later(_RESEND_POLL_S, again)

    # -- what subclasses provide -------------------------------------------------------------

    def _deliver(self, signum: int) -> None:
        """Deliver ``signum`` to the job's processes."""

    def _drain(self) -> None:
        """Take the output that is already waiting (bounded in time)."""

    def _release(self) -> None:
        """Close what the finished job no longer needs."""

    def _close_files(self) -> None:
        """Close every file the driver holds, whoever still uses it (at shutdown)."""

    @property
    def _holds_output(self) -> bool:
        """True while the job's output files are open (a lingering process may write)."""
        return False

    # -- the leader ----------------------------------------------------------------------------

    def _watch_leader(self, pid: int, tag: bytes) -> None:
        self.pid, self._tag = pid, tag
        self.reaper.known_sids.add(str(pid))
        self._watch = ExitWatch(pid, self._on_exit, self.reaper.awaited)

    @property
    def _exited(self) -> bool:
        return self._watch is not None and self._watch.status.done()

    def _status(self) -> asyncio.Future[int]:
        assert self._watch is not None
        return self._watch.status

    def poll_exit(self) -> None:
        """Notice now (not on the loop's next turn) if the leader has died: whoever looks at
        the job then sees a terminal state whenever its leader is gone."""
        if self._watch is not None and not self._watch.status.done():
            self._watch.poll()

    def _on_exit(self, status: int) -> None:
        self.check_limits()  # an OOM kill: the job ends `limit`
        self._drain()
        if self.job.kill_reason:
            # being stopped: the job is over the moment its leader is; _stop() goes on to
            # kill the rest of the tree and close the files
            code, signum = self._decode(status)
            self.job.finish(self.job.kill_reason, exit_code=code, signum=signum)
            return
        if self.job.log.full:
            # the cap wins even when the leader raced to exit: the job ends as output_limit
            self._on_output_limit(self.job)
            return
        lingering = self.lingering()
        # bwrap's monitor can report the program's end before the PID namespace's init (bwrap
        # too) has gone: the sandbox's own helpers are never the job's lingering processes, so
        # give them a moment (a process of the job's that only calls itself bwrap is still
        # listed once the moment has passed)
        monitored = self.fence is not None and self.fence.monitor and self._settle_until == 0
        helpers_only = all(
            procfs.comm(p) == "bwrap" for p in lingering
        )  # (none: its pipe end may be open)
        if monitored and helpers_only and (lingering or self._holds_output):
            self._settle_until = time.monotonic() + _SETTLE_S
            self._loop.call_later(_SETTLE_POLL_S, self._settle, status)
            return
        self._finish_exited(status, lingering)

    def _settle(self, status: int) -> None:
        if self.job.terminal:
            return
        lingering = self.lingering()
        self._drain()
        # (and, once they are gone, until their end of the output pipes is closed too)
        waiting = lingering or self._holds_output
        if waiting and time.monotonic() < self._settle_until:
            self._loop.call_later(_SETTLE_POLL_S, self._settle, status)
            return
        self._finish_exited(status, lingering)

    def _finish_exited(self, status: int, lingering: list[int]) -> None:
        code, signum = self._decode(status)
        self.reaper.note(lingering)
        # killed by a signal Conch sent on request: that is a cancellation, not an exit
        state = "cancelled" if signum is not None and signum in self.job.sent_signals else "exited"
        self.job.finish(state, exit_code=code, signum=signum, lingering=lingering)
        if not lingering:
            self._done()

    # -- the tree --------------------------------------------------------------------------------

    def pids(self) -> set[int]:
        """The job's processes now: those carrying its tag, those in its cgroup, and its
        leader until it has exited."""
        assert self.pid is not None
        pids = procfs.scan_job(self.pid, self.pid, TAG_VAR.encode(), self._tag)
        if self.cgroup is not None:
            pids |= self.cgroup.pids()
        if not self._exited:
            pids.add(self.pid)
        return pids

    def lingering(self) -> list[int]:
        """Processes of the job still alive after its leader exited."""
        if self.pid is None:
            return []
        if self.cgroup is not None:
            # the cgroup holds exactly the job's processes, escapees included
            pids = {p for p in self.cgroup.pids() if procfs.is_alive(p)}
        elif containment_level() == "subreaper":
            # orphans come back to us, so the job's survivors are among our own children
            found: set[int] = set()
            sid = str(self.pid)
            for c in procfs.own_children():
                if c in self.reaper.awaited:
                    continue
                fields = procfs.stat_fields(c)
                if not fields or fields[0] in ("Z", "X"):
                    continue
                if fields[3] == sid or procfs.environ_value(c, TAG_VAR.encode()) == self._tag:
                    found.add(c)
            pids = found | procfs.descendants(found)
        else:
            pids = self.pids()
        pids.discard(self.pid)
        return sorted(pids)

    async def stop(self, reason: str, grace_s: float) -> None:
        """Kill the tree (TERM, grace, KILL); the job ends as ``reason`` once the leader is gone."""
        if self._stop_task is None:
            if self.job.terminal:
                await self.kill_lingering(grace_s)
                return
            self.job.kill_reason = reason
            self._stop_task = asyncio.ensure_future(self._stop(reason, grace_s))
        await asyncio.shield(self._stop_task)

    async def _stop(self, reason: str, grace_s: float) -> None:
        assert self.pid is not None
        if grace_s > 0:
            await terminate_tree(self.pids, [self.pid], grace_s, self.reaper)
        else:  # `signal kill`: SIGKILL at once, no TERM first
            await kill_tree_now(self.pids, [self.pid], self.reaper)
        await self._kill_cgroup()
        await self._finish_killed(reason, 2.0)
        self._done()

    async def _finish_killed(self, reason: str, limit_s: float) -> None:
        """The tree was killed: wait up to limit_s for the leader's status, end the job."""
        status: int | None
        try:
            status = await asyncio.wait_for(asyncio.shield(self._status()), limit_s)
        except asyncio.TimeoutError:
            status = None
        self._drain()
        code, signum = self._decode(status)
        self.job.finish(reason, exit_code=code, signum=signum)

    async def kill_lingering(self, grace_s: float = 0.0) -> None:
        if self.pid is None:
            return
        if grace_s > 0:
            await terminate_tree(self.pids, [self.pid], grace_s, self.reaper)
        else:
            await kill_tree_now(self.pids, [self.pid], self.reaper)
        await self._kill_cgroup()
        self._done()

    async def _kill_cgroup(self) -> None:
        """After TERM and KILL of what was seen: nothing left in the cgroup survives (a fork
        racing the kill, a process that left the session and cleared its environment)."""
        if self.cgroup is not None and self.cgroup.populated:
            await self.cgroup.kill_and_wait(self.reaper.sweep)

    def _done(self) -> None:
        """Nothing of the job runs any more: close what it held, remove its TMPDIR."""
        self._release()
        if self.fence is not None:
            self.fence.drop_tmp()

    def release_cgroup(self) -> None:
        """Give up the job's cgroup once nothing is left in it (its owner removes it later,
        off the loop; one made without an owner is removed now)."""
        cg = self.cgroup
        if cg is None or cg.populated:
            return
        if self.fence is not None:  # (what lingered is gone too)
            self.fence.drop_tmp()
        retire = self.fence.retire if self.fence is not None else None
        if retire is not None:
            retire(cg)
            self.cgroup = None
        elif cg.remove():
            self.cgroup = None

    # -- shutdown (the engine's one sweep over all its drivers) ------------------------------

    def begin_shutdown(self) -> tuple[str | None, bytes]:
        """The runtime is closing: a running job will end as cancelled once the engine's one
        sweep over every driver's tree has killed it. Returns what that sweep looks for: the
        job's session (None when nothing of it can still be alive there) and its tag."""
        if not self.job.terminal and self._stop_task is None:
            self.job.kill_reason = "cancelled"
        alive = self.pid is not None and (not self.job.terminal or self._holds_output)
        return (str(self.pid) if alive else None), self._tag

    async def end_shutdown(self, limit_s: float) -> None:
        """After the sweep: record how the leader ended (waiting up to limit_s), then close
        every file."""
        if self._stop_task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._stop_task), limit_s)
        if not self.job.terminal and self.pid is not None:
            await self._finish_killed(self.job.kill_reason or "cancelled", limit_s)
        if self._watch is not None:
            self._watch.close()
            if self.pid is not None and not self._exited:
                self.reaper.awaited.discard(self.pid)  # the final reaper sweep may take it
        self._close_files()
        self.job.log.close_writer()
        self.release_cgroup()
