"""The fleet's read-only copies of its nodes' jobs, kept current by the nodes' change reports.

A node executor reports each change of a job as a :func:`snapshot` (conch.fleet.executor);
:class:`JobMirror` is a :class:`~conch.core.JobView` of the last one, so what front ends do
with a local job's view (an MCP task waits for its end, names its state and last line) works
the same for a job on a node. Its log holds only the last line (all a status line reads);
the log itself is read on the node. Pure: no Ray.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from conch.core import JobLabel, JobView
from conch.tools.views import last_line

Snapshot = dict[str, Any]
LOST = "lost"  # the state of a job whose node left the cluster (its calls answer node_lost)


def snapshot(job: JobView) -> Snapshot:
    """What the fleet keeps of a job (sent by the node's executor on every change)."""
    return {
        "job_id": job.job_id,
        "name": job.name,
        "mode": job.mode,
        "shell_id": job.shell_id,
        "cwd": job.cwd,
        "state": job.state,
        "exit_code": job.exit_code,
        "signal": job.signal,
        "started_at": job.started_at.timestamp(),
        "terminal": job.terminal,
        "streams": job.streams,
        "duration_ms": job.duration_ms,
        "version": job.version,
        "output_format": job.output_format,
        "last_line": last_line(job),
        "input_state": job.input_state(),
    }


def _without_duration(snap: Snapshot) -> Snapshot:
    return {k: v for k, v in snap.items() if k != "duration_ms"}


class _LastLine:
    """The log of a mirror: its last line only (``path`` is the node's, not readable here)."""

    def __init__(self, line: str) -> None:
        self._data = (line + "\n").encode() if line else b""

    @property
    def path(self) -> str:
        return ""

    @property
    def closed(self) -> bool:
        return True

    def size(self, stream: int | None = None) -> int:
        return len(self._data)

    def read(self, start: int, end: int, stream: int | None = None) -> bytes:
        return self._data[start:end]


class JobMirror:
    """A job on a node as this process last heard of it (a JobView), under its fleet id."""

    def __init__(self, fleet_id: str, tag: str, snap: Snapshot) -> None:
        self.fleet_id = fleet_id
        self.tag = tag
        self._snap: Snapshot = {}
        self._seen = 0.0
        self._waiters: list[asyncio.Future[None]] = []
        self.update(snap)

    def update(self, snap: Snapshot) -> bool:
        """Take a newer report; whether it says anything the last did not (a running job's
        ``duration_ms`` aside: it grows by itself)."""
        if self._snap and snap["version"] < self._snap["version"] and not snap.get("lost"):
            return False  # an older report overtaken by a newer one
        news = snap["version"] != self._snap.get("version")  # (else compare: no copies)
        news = news or _without_duration(snap) != _without_duration(self._snap)
        self._snap = snap
        self._seen = time.monotonic()
        self._log = _LastLine(str(snap.get("last_line") or ""))
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
        return news

    def lose(self) -> None:
        """The node left: the job ends here as ``lost`` (reading it answers node_lost)."""
        if not self._snap["terminal"]:
            self.update(
                {
                    **self._snap,
                    "state": LOST,
                    "terminal": True,
                    "lost": True,
                    "version": self._snap["version"] + 1,
                    "input_state": (False, False),
                }
            )

    # -- JobView -----------------------------------------------------------------------------

    @property
    def job_id(self) -> str:
        return self.fleet_id

    @property
    def name(self) -> str | None:
        return self._snap["name"]

    @property
    def mode(self) -> str:
        return str(self._snap["mode"])

    @property
    def shell_id(self) -> str | None:
        sid = self._snap["shell_id"]
        return f"{sid}.{self.tag}" if sid else None

    @property
    def cwd(self) -> str:
        return str(self._snap["cwd"])

    @property
    def state(self) -> str:
        return str(self._snap["state"])

    @property
    def exit_code(self) -> int | None:
        return self._snap["exit_code"]

    @property
    def signal(self) -> str | None:
        return self._snap["signal"]

    @property
    def started_at(self) -> datetime:
        return datetime.fromtimestamp(self._snap["started_at"], timezone.utc)

    @property
    def terminal(self) -> bool:
        return bool(self._snap["terminal"])

    @property
    def streams(self) -> bool:
        return bool(self._snap["streams"])

    @property
    def duration_ms(self) -> int:
        ms = int(self._snap["duration_ms"])
        if not self.terminal:  # still running: its time goes on since the report
            ms += int((time.monotonic() - self._seen) * 1000)
        return ms

    @property
    def version(self) -> int:
        return int(self._snap["version"])

    @property
    def output_format(self) -> str:
        return str(self._snap["output_format"])

    @property
    def label(self) -> JobLabel | None:
        return None

    @property
    def log(self) -> _LastLine:
        return self._log

    @property
    def attended(self) -> bool:
        """Not known here: a person takes a terminal over on its node (conch/fleet/watch.py)."""
        return False

    def input_state(self) -> tuple[bool, bool]:
        a, s = self._snap["input_state"]
        return bool(a), bool(s)

    def terminal_readers(self) -> tuple[tuple[int, str | None], ...]:
        return ()  # on its node: not known here

    async def wait_change(self, since: int, timeout_s: float) -> bool:
        return await self.wait_until(lambda: self.version > since, timeout_s)

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            left = deadline - loop.time()
            if left <= 0:
                return False
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append(fut)
            try:
                await asyncio.wait_for(fut, left)
            except asyncio.TimeoutError:
                return predicate()
        return True


class Mirrors:
    """Every job mirror by fleet id; finished ones beyond ``keep`` are let go, oldest first."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._jobs: OrderedDict[str, JobMirror] = OrderedDict()

    def get(self, fleet_id: str) -> JobMirror | None:
        return self._jobs.get(fleet_id)

    def update(self, fleet_id: str, tag: str, snap: Snapshot) -> bool:
        """Whether the report is news: a job not heard of, or a change the mirror did not have
        (the node reports the start of a job the call's reply brought already, say)."""
        mirror = self._jobs.get(fleet_id)
        if mirror is None:
            self._jobs[fleet_id] = JobMirror(fleet_id, tag, snap)
            self._trim()
            return True
        return mirror.update(snap)

    def forget(self, fleet_id: str) -> None:
        self._jobs.pop(fleet_id, None)

    def lose_node(self, tag: str) -> list[str]:
        """Every running job of a node that left ends as ``lost``; their fleet ids."""
        lost = [m for m in self._jobs.values() if m.tag == tag and not m.terminal]
        for m in lost:
            m.lose()
        return [m.fleet_id for m in lost]

    def _trim(self) -> None:
        if len(self._jobs) <= self.keep:
            return
        for fleet_id, m in list(self._jobs.items()):
            if len(self._jobs) <= self.keep:
                break
            if m.terminal:
                del self._jobs[fleet_id]
