"""A bash started ahead of need for the next ``command`` job.

Starting bash (loading it, its locale, importing the environment) is most of what a small
command costs. One bash per runtime waits, already started, with the environment, session,
pipes and log of the job it will become; it reads the command from its stdin (NUL-terminated),
points stdin at /dev/null and evaluates it, so the job costs a pipe write instead of a spawn.
A replacement is started on the next loop turn, while the command runs.

It serves only the plain case, and only when it would behave like a fresh spawn: the default
working directory, no stdin, no sandbox or limits, and exactly the environment a fresh child
would get now (compared at dispatch, so a changed server environment is never missed). At the
cgroup level it was started in a cgroup of its own, like any job. Everything else spawns as
before. What differs from ``bash -c``: bash's own diagnostics name ``eval`` rather than
``-c``, and ``BASH_EXECUTION_STRING`` is the bootstrap.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from conch.core.jobs.job import Job
from conch.core.process.pipes import PipeDriver

#: read the command up to its NUL, give the command /dev/null as stdin, run it
BOOTSTRAP = 'IFS= read -r -d "" __conch_c; exec 0</dev/null; eval "unset __conch_c;$__conch_c"'
#: bash reads a pipe a byte at a time: beyond this a fresh spawn is as quick
MAX_COMMAND_BYTES = 4096


@dataclass
class _Warm:
    job: Job
    driver: PipeDriver
    env: dict[str, str]
    cwd: str


class WarmBash:
    """Keeps one bash ready. ``spawn(cwd)`` makes a (job, driver, env) the way the runtime
    makes any pipe job, but not registered; ``discard(job)`` undoes it."""

    def __init__(
        self,
        bash: str,
        cwd: str,
        spawn: Callable[[list[str], str], Awaitable[tuple[Job, PipeDriver, dict[str, str]]]],
        discard: Callable[[Job], None],
    ) -> None:
        self._argv = [bash, "--noprofile", "--norc", "-c", BOOTSTRAP]
        self._cwd = cwd
        self._spawn = spawn
        self._discard = discard
        self._ready: _Warm | None = None
        self._filling = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    def take(self, command: str, cwd: str, env: Callable[[str], dict[str, str]]) -> Job | None:
        """The waiting job, now running ``command`` — or None (spawn as usual). ``env(job_id)``
        is the environment a fresh child with that id would get. The first call only starts
        the first warm bash (a server that never runs a command never has one)."""
        warm, self._ready = self._ready, None
        self.fill_soon()
        if warm is None:
            return None
        data = command.encode("utf-8", "surrogateescape")
        usable = (
            len(data) < MAX_COMMAND_BYTES
            and warm.cwd == cwd
            and not warm.job.terminal
            and warm.driver.stdin_open
            and env(warm.job.job_id) == warm.env
        )
        if not usable:
            self._discard(warm.job)
            return None
        warm.driver.feed(data + b"\0", close=True)
        return warm.job

    def fill_soon(self) -> None:
        """Start a replacement on the next loop turn (off the current call's path)."""
        if self._filling or self._closed or self._ready is not None:
            return
        self._filling = True
        self._task = asyncio.ensure_future(self._fill())

    async def _fill(self) -> None:
        try:
            if self._closed or self._ready is not None:
                return
            with contextlib.suppress(Exception):  # no warm bash: jobs spawn as usual
                job, driver, env = await self._spawn(self._argv, self._cwd)
                if self._closed:
                    self._discard(job)
                    return
                self._ready = _Warm(job, driver, env, self._cwd)
        finally:
            self._filling = False

    def close(self) -> None:
        """The runtime is closing (its shutdown sweep kills the waiting bash)."""
        self._closed = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
        warm, self._ready = self._ready, None
        if warm is not None:
            self._discard(warm.job)
