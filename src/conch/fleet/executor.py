"""The node executor: a Ray actor pinned to one node, embedding a Conch runtime there.

Jobs, shells, logs and process hygiene stay on the node; the fleet's tool calls come in
batches through ``call`` and their structured results go back in batches (never a whole log:
``read`` pages), as conch.fleet.channel describes: each request runs as a task of its own, and
``call`` returns once any reply is ready. ``changes`` is the node's side of what the fleet
watches: it waits for the next changes of its jobs (their snapshots, conch.fleet.mirror) and
the progress messages of calls that asked for them, and returns them in one batch. Jobs see
``CONCH_NODE_ID`` (the Ray node id) in their environment.
"""

# ruff: noqa: E402  (the imports after leave_rays_niceness, on purpose)
from __future__ import annotations

# (a worker of Ray's imports this module at Ray's nice 15: it leaves it before the imports
# below, a third of a second of CPU; conch.fleet.nice imports only os)
from conch.fleet.nice import leave_rays_niceness, node_niceness, unnice

leave_rays_niceness()

import asyncio
import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from conch.config import Config
from conch.core import JobView, live_start_time
from conch.errors import ConchError
from conch.fleet.channel import Calls, GaveUp, Reply, Request, pack
from conch.fleet.guard import STOP
from conch.fleet.loopback import loopback_id
from conch.fleet.mirror import Snapshot, snapshot
from conch.runtime import Runtime
from conch.tools.context import ToolContext

NODE_ENV = "CONCH_NODE_ID"
#: Ray starts its workers at nice 15 (``RAY_worker_niceness``, read by the raylet when it
#: starts a worker); jobs are the user's work, not background chores. The executor first runs
#: in whatever worker Ray has (no ``runtime_env``: a worker of its own costs ~0.7 s more, a
#: node's new executor waits for it) and lowers its own threads to the node's niceness
#: (conch.fleet.nice, as this module is imported); where it may not (no CAP_SYS_NICE: an
#: unprivileged cluster, Docker's default capabilities), the fleet starts it again in a worker
#: Ray starts at the right niceness (these variables).
NICENESS_ENV = "RAY_worker_niceness"
#: Ray's worker kills its direct children when it exits (default true): the job leaders, and
#: so the orphan guard is not one (it is started through a shell that exits at once), or it
#: could not kill what the jobs started. Off in the worker Ray starts for the executor.
KILL_CHILDREN_ENV = "RAY_kill_child_processes_on_worker_exit"
# Ray's internal per-worker flags (ray_constants.RAY_INTERNAL_FLAGS, which Ray strips from
# submitted jobs too): a job that runs Ray itself must not inherit the executor's
WORKER_ONLY_ENV = (
    "RAY_JOB_ID",
    "RAY_RAYLET_PID",
    "RAY_OVERRIDE_NODE_ID_FOR_TESTING",
    NICENESS_ENV,
    KILL_CHILDREN_ENV,
)
# what a fleet's dashboard may ask a node's watch (conch/fleet/watch.py)
WATCH_OPS = frozenset(
    {"jobs", "log", "screen", "replay", "type_human", "hand_back", "resize", "run_human"}
)


class NodeExecutor:
    """One per node (made a Ray actor by conch.fleet.runtime)."""

    def __init__(self, config: Config, node_id: str) -> None:
        os.environ[NODE_ENV] = node_id  # jobs inherit it
        for name in WORKER_ONLY_ENV:
            os.environ.pop(name, None)
        self.node_id = node_id
        self.config = dataclasses.replace(config, fleet="off")
        self.rt = Runtime(self.config)
        self._guard: Guard | None = None
        # what ``changes`` has to report: jobs changed (None: the job/shell set), progress
        self._dirty: set[str | None] = set()
        self._progress: list[tuple[int, str]] = []
        self._wake = asyncio.Event()
        self._watching = False
        self._calls = Calls(self._run)

    async def start(self, any_worker: bool = False) -> dict[str, Any]:
        """Start the node's runtime; ``{"ready": False, "nice": n}`` (nothing started) when
        this executor runs in ``any_worker`` of Ray's and may not leave Ray's niceness."""
        niceness = unnice()  # (threads started since the import too)
        if any_worker and niceness > node_niceness():
            return {"ready": False, "nice": niceness, "pid": os.getpid()}
        # Ray runs this loop on a thread that blocks SIGINT: jobs would inherit the mask, and
        # undoing it in each child costs a full fork instead of vfork (a Ray worker is big)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
        # (before the runtime starts: it makes this process a child subreaper, and the guard
        # would come back to it as its child)
        self._guard = Guard.start(os.getpid())
        await self.rt.start()
        return {
            "ready": True,
            "node": self.node_id,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "nice": niceness,
            "loopback": loopback_id(),
        }

    def running(self) -> int:
        return self.rt.view.running

    async def sandboxed_caller(
        self, client: tuple[str, int], server: tuple[str, int]
    ) -> str | None:
        """The fleet server's HTTP guard asks the nodes that share its loopback: the sandboxed
        job or shell of this node that holds the client end of that connection, or None."""
        return self.rt.view.sandboxed_caller((client[0], client[1]), (server[0], server[1]))

    async def call(self, batch: bytes) -> bytes:
        """A packed batch of requests (and cancels) in; the packed replies ready once one is
        (conch.fleet.channel)."""
        return await self._calls.take(batch, self.running)

    async def _run(self, call_id: int, request: Request, gave_up: GaveUp) -> Reply:
        name, args, meta, trusted, progress = request
        started: list[JobView] = []
        ctx = ToolContext(
            meta=meta,
            trusted=trusted,
            progress=self._progress_of(call_id) if progress else None,
            on_started=started.append,
            host_gave_up=gave_up,
        )
        out = await self.rt.call_tool_full(name, args, ctx)
        snap = snapshot(started[0]) if started and self._watching else None
        return out.result, out.is_error, out.meta, snap

    # -- what the fleet watches -------------------------------------------------------------

    def _progress_of(self, call_id: int) -> Any:
        async def report(message: str) -> None:
            self._progress.append((call_id, message))
            self._wake.set()

        return report

    def _on_change(self, job_id: str | None) -> None:
        self._dirty.add(job_id)
        self._wake.set()

    async def changes(self, wait_s: float) -> bytes:
        """The next batch (packed): ``{"jobs": [snapshot...], "gone": [job id...], "set":
        bool, "progress": [(call id, message)...], "running": int}``, after at most ``wait_s``
        (an empty one then). The first call starts the watching."""
        if not self._watching:
            self._watching = True
            self.rt.view.add_listener(self._on_change)
        if not self._dirty and not self._progress:
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait_s)
        dirty, self._dirty = self._dirty, set()
        progress, self._progress = self._progress, []
        jobs: list[Snapshot] = []
        gone: list[str] = []
        for job_id in dirty:
            if job_id is None:
                continue
            try:
                jobs.append(snapshot(self.rt.view.job(job_id)))
            except ConchError:
                gone.append(job_id)  # evicted
        batch = {
            "jobs": jobs,
            "gone": gone,
            "set": None in dirty,
            "progress": progress,
            "running": self.running(),
        }
        return pack(batch)

    async def watch(self, op: str, args: tuple[Any, ...]) -> tuple[bool, Any]:
        """This node's watch (conch/tools/watch.py) for the fleet's dashboard: ``(True,
        answer)``, or ``(False, (code, message))`` for its error."""
        if op not in WATCH_OPS:
            return False, ("invalid_argument", f"no watch operation {op!r}")
        try:
            return True, await getattr(self.rt.watch, op)(*args)
        except ConchError as e:
            return False, (e.code, e.message)

    async def resources(self) -> list[dict[str, Any]]:
        """This node's resources (the fleet qualifies their job ids)."""
        return await self.rt.list_resources()

    async def resource(self, uri: str) -> tuple[bool, str, str]:
        """(found, mime type, text), or (False, "", why) for an unknown resource or job."""
        try:
            mime, text = await self.rt.read_resource(uri)
        except ConchError as e:
            return False, "", e.message
        return True, mime, text

    async def load(self) -> int:
        """Running jobs here (also the benchmark's measure of Ray's bare round trip)."""
        return self.running()

    async def aclose(self) -> None:
        """Stop every job and shell this node's runtime started, then the guard."""
        await self.rt.aclose()
        guard, self._guard = self._guard, None
        if guard is not None:
            await asyncio.to_thread(guard.stop)  # the jobs are stopped: nothing for it to kill


class Guard:
    """The executor's orphan guard (conch.fleet.guard), not a child of the executor: Ray's
    worker SIGKILLs its direct children when it exits, and the guard must outlive it. A shell
    starts it in the background and exits; the guard keeps the read end of a pipe whose write
    end only the executor holds (EOF: the executor is gone)."""

    def __init__(self, pid: int, started: str | None, pipe: int) -> None:
        self.pid = pid
        self.started = started  # its start time: a reused pid is never killed
        self.pipe = pipe

    @classmethod
    def start(cls, owner: int) -> Guard:
        read, write = os.pipe()
        try:
            # (an asynchronous list's stdin is /dev/null before its own redirections: the
            # pipe goes in as fd 3)
            sh = subprocess.Popen(
                [
                    "/bin/sh",
                    "-c",
                    'exec 3<&0; "$0" -m conch.fleet.guard "$1" <&3 3<&- >/dev/null 2>&1 & echo $!',
                    sys.executable,
                    str(owner),
                ],
                stdin=read,
                stdout=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(read)
        out, _ = sh.communicate()
        pid = int(out.strip() or 0)
        return cls(pid, live_start_time(pid) if pid else None, write)

    def stop(self, wait_s: float = 5.0) -> None:
        """Tell it the jobs are stopped, let it exit; kill it if it does not."""
        with contextlib.suppress(OSError):
            os.write(self.pipe, STOP)
        with contextlib.suppress(OSError):
            os.close(self.pipe)
        deadline = time.monotonic() + wait_s
        while self._alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if self._alive():
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)

    def _alive(self) -> bool:
        return bool(self.pid) and live_start_time(self.pid) == self.started
