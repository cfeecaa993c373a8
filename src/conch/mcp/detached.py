"""Jobs a host stopped waiting for: a cancel that may be the host's own timeout leaves the job
running (tools/hosts.py), and the model was told nothing of it (the host showed it a timeout
error, often without the job's id). The session's next result says so, once, with how to
follow the job and how to stop it."""

from __future__ import annotations

import weakref
from typing import Any

from mcp.server.session import ServerSession

from conch.core import JobView
from conch.mcp.notify import peer_of


def notice(job: JobView) -> str:
    """What the model is told of a job whose call its host stopped waiting for."""
    j = job.job_id
    if not job.terminal:
        return (
            f"{j} kept running after the host stopped waiting for the call that started it "
            f"(not an error): read {j} to follow it, signal {j} to stop it."
        )
    if job.state == "exited" and job.signal is None:
        how = f"exited {job.exit_code}"
    else:
        how = job.state + (f" ({job.signal})" if job.signal else "")
    return (
        f"{j} ran on after the host stopped waiting for the call that started it, and has "
        f"ended ({how}): read {j} for its output."
    )


class DetachedJobs:
    """Per client (``peer_of`` its session: the SDK makes a session object per message), the
    jobs detached since its last result (a bounded few)."""

    _KEEP = 16

    def __init__(self) -> None:
        self._by_session: weakref.WeakKeyDictionary[Any, list[JobView]] = (
            weakref.WeakKeyDictionary()
        )

    def add(self, session: ServerSession, job: JobView) -> None:
        jobs = self._by_session.setdefault(peer_of(session), [])
        if all(j.job_id != job.job_id for j in jobs):
            jobs.append(job)
            del jobs[: -self._KEEP]

    def take(self, session: ServerSession) -> str | None:
        """The notice for the jobs ``session`` has not been told of yet (None: none)."""
        jobs = self._by_session.pop(peer_of(session), None)
        return " ".join(notice(j) for j in jobs) if jobs else None
