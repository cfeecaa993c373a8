"""The node executor: a Ray actor pinned to one node, embedding a Conch runtime there.

Jobs, shells, logs and process hygiene stay on the node; the fleet calls ``call`` with a tool
name and arguments and gets the structured result back (never a whole log: ``read`` pages).
Jobs see ``CONCH_NODE_ID`` (the Ray node id) in their environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from conch.config import Config
from conch.errors import ConchError
from conch.fleet.guard import STOP
from conch.runtime import Runtime
from conch.tools.context import ToolContext

NODE_ENV = "CONCH_NODE_ID"
NICENESS_ENV = "RAY_worker_niceness"  # read by the raylet when it starts the worker
#: Ray's worker kills its direct children when it exits (default true): the job leaders and
#: the orphan guard, which then cannot kill what the jobs started. Off for the executor's
#: worker; the guard kills every job process once the executor is gone.
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


class NodeExecutor:
    """One per node (made a Ray actor by conch.fleet.runtime)."""

    def __init__(self, config: Config, node_id: str) -> None:
        os.environ[NODE_ENV] = node_id  # jobs inherit it
        for name in WORKER_ONLY_ENV:
            os.environ.pop(name, None)
        self.node_id = node_id
        self.config = dataclasses.replace(config, fleet="off")
        self.rt = Runtime(self.config)
        self._guard: subprocess.Popen[bytes] | None = None

    async def start(self) -> dict[str, Any]:
        # Ray runs this loop on a thread that blocks SIGINT: jobs would inherit the mask, and
        # undoing it in each child costs a full fork instead of vfork (a Ray worker is big)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
        self._guard = subprocess.Popen(
            [sys.executable, "-m", "conch.fleet.guard", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        await self.rt.start()
        return {"node": self.node_id, "hostname": socket.gethostname(), "pid": os.getpid()}

    def running(self) -> int:
        return self.rt.view.running

    async def call(
        self, name: str, args: Mapping[str, Any], meta: Mapping[str, Any] | None, trusted: bool
    ) -> tuple[dict[str, Any], bool, dict[str, Any] | None, int]:
        """(result, is_error, result _meta, running jobs on this node)."""
        out = await self.rt.call_tool_full(name, args, ToolContext(meta=meta, trusted=trusted))
        return out.result, out.is_error, out.meta, self.running()

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
        return self.running()

    async def aclose(self) -> None:
        """Stop every job and shell this node's runtime started, then the guard."""
        await self.rt.aclose()
        guard, self._guard = self._guard, None
        if guard is not None:
            if guard.stdin is not None:
                with contextlib.suppress(OSError):
                    guard.stdin.write(STOP)  # the jobs are stopped: nothing for it to kill
                    guard.stdin.flush()
                with contextlib.suppress(OSError):
                    guard.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(guard.wait, 5)
            if guard.poll() is None:
                guard.kill()
                guard.wait()
