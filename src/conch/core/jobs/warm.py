"""Processes started ahead of need for the next plain job: a bash for ``command`` jobs, and at
the cgroup level a POSIX sh (dash) that execs the next ``argv`` job.

Starting bash (loading it, its locale, importing the environment) is most of what a small
command costs; for an ``argv`` job at the cgroup level it is the mkdir of its cgroup and the sh
that enters it before the program (elsewhere an argv job is one vfork, which a warm process
does not beat: it is not used there). One process of each kind per runtime waits, already
started, with the environment, session, pipes, log (and cgroup) of the job it will become; it
reads what to run from its stdin, points stdin at /dev/null and runs it, so the job costs a
pipe write instead of a spawn. A replacement is started on the next loop turn. At the cgroup
level the bootstrap itself enters the job's cgroup (no sh before it).

They serve only the plain case, and only when it behaves like a fresh spawn: the default
working directory, no stdin, no limits, and exactly the environment a fresh child would get now
(compared at dispatch, so a changed server environment is never missed). No sandbox either,
but one: where the server's own policy is a Landlock sandbox, the warm process was started
under it (restricted, in its cgroup, with its own ``TMPDIR``), and a call with that very policy
takes it when the ruleset it would get is the one the process has
(``Containment.warm_fits``: no path of the data dir exposed, no program in a hole, the
directories the ruleset was found from unchanged since); any other call spawns as usual. What
differs from ``bash -c``: bash's own diagnostics name ``eval`` rather than ``-c``, and
``BASH_EXECUTION_STRING`` is the bootstrap. For ``argv`` the program gets the very argv and
environment a direct spawn would give it: the sh is used only when it leaves the environment
as it is (conch/core/containment/shenv.py), and only for a program that is a binary or a
``#!`` script (a direct spawn refuses any other file, which sh would run as a script).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conch.core.containment import shenv
from conch.core.jobs.job import Job
from conch.core.jobs.pipes import PipeDriver

#: read the command up to its NUL, give the command /dev/null as stdin, run it
BOOTSTRAP = 'IFS= read -r -d "" __conch_c; exec 0</dev/null; eval "unset __conch_c;$__conch_c"'
#: bash reads a pipe a byte at a time: beyond this a fresh spawn is as quick
MAX_COMMAND_BYTES = 4096

#: dash: read the shell-quoted ``exec`` line up to EOF, give the program /dev/null as stdin,
#: run it (the two variables are the sh's own, not exported)
SH_BOOTSTRAP = (
    '__conch_c=; while IFS= read -r __conch_l; do __conch_c="$__conch_c$__conch_l\n"; done; '
    'exec 0</dev/null; eval "$__conch_c"'
)
SH = "/bin/sh"
_SH_OWN = frozenset({"__conch_c", "__conch_l"})


def sh_is_dash(sh: str = SH) -> bool:
    """Whether ``sh`` is dash, whose environment handling conch/core/containment/shenv.py knows."""
    return os.path.basename(os.path.realpath(sh)) == "dash"


def sh_keeps_env(env: Mapping[str, str], cwd: str) -> bool:
    """Whether the warm sh, started with ``env`` in ``cwd``, passes exactly ``env`` on."""
    return shenv.keeps_env(env, cwd, reserved=_SH_OWN)


def exec_line(argv: Sequence[str]) -> bytes:
    """The line that makes the waiting sh exec ``argv`` (dash's ``exec`` takes no options, so
    a program named ``-x`` is just that); every word single-quoted."""
    words = (
        b"'" + a.encode("utf-8", "surrogateescape").replace(b"'", b"'\\''") + b"'" for a in argv
    )
    return b"exec " + b" ".join(words) + b"\n"


runs_directly = shenv.runs_directly


@dataclass
class _Warm:
    job: Job
    driver: PipeDriver
    env: dict[str, str]
    cwd: str
    accepted: bool | None = None  # what ``take``'s ``accept`` said of env (it depends on it only)


class Warm:
    """Keeps one process ready. ``spawn(argv, cwd)`` makes a (job, driver, env) the way the
    runtime makes any pipe job, but not registered; ``discard(job)`` undoes it. ``argv``
    starts the process (a bootstrap that reads what to run from stdin).

    ``refill_idle``: None, a replacement (or the first process) starts on the next loop turn;
    a number of seconds, it starts once calls have left the runtime that long alone (each call
    that finds no process ready, each process taken and each end of a job it ran puts it off
    again). A sandboxed start (Landlock at the cgroup level: the fork server's round trip,
    about 3 ms of the loop, as much as a fresh spawn) started at once would hold the loop
    while the job just taken ends, and calls back to back would pay it and the warm process's
    own exec each time; started in a quiet moment it costs no call anything, and calls back to
    back simply spawn (measured: bench/results/2026-12-06-landlock.md)."""

    def __init__(
        self,
        argv: list[str],
        cwd: str,
        spawn: Callable[[list[str], str], Awaitable[tuple[Job, PipeDriver, dict[str, str]]]],
        discard: Callable[[Job], None],
        refill_idle: float | None = None,
    ) -> None:
        self._argv = argv
        self._cwd = cwd
        self._spawn = spawn
        self._discard = discard
        self._refill_idle = refill_idle
        self._idle: asyncio.TimerHandle | None = None
        self._ready: _Warm | None = None
        self._filling = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    @property
    def ready_job(self) -> Job | None:
        """The job of the process waiting for a command (None while none is ready): what a
        caller may inspect, never feed (``take`` does)."""
        return self._ready.job if self._ready is not None else None

    @property
    def ready_pid(self) -> int | None:
        """The pid of the process waiting for a command, once it has one."""
        return self._ready.driver.pid if self._ready is not None else None

    def take(
        self,
        data: bytes,
        cwd: str,
        env: Callable[[str], dict[str, str]],
        accept: Callable[[dict[str, str]], bool] | None = None,
        fits: Callable[[Job], str | None] | None = None,
    ) -> Job | None:
        """The waiting job, now given ``data`` (then EOF) — or None (spawn as usual).
        ``env(job_id)`` is the environment a fresh child with that id would get; ``accept``
        may refuse the process for it. ``fits(job)``, asked last, says whether the process's
        fence is the one this call would get: None (it is), ``"skip"`` (not for this call),
        ``"stale"`` (for no call any more: replaced). The first call only starts the first
        warm process (a server that never runs a command never has one)."""
        warm = self._ready
        if warm is None:
            self._refill()
            return None
        if (
            warm.job.terminal
            or not warm.driver.stdin_open
            or env(warm.job.job_id) != warm.env
            or not os.path.exists(warm.job.log.path)  # the data dir was removed under us
        ):
            self._ready = None  # stale (the server's environment changed): replace it
            self._discard(warm.job)
            self._refill()
            return None
        if len(data) > MAX_COMMAND_BYTES or warm.cwd != cwd:
            return None  # not for this call; it stays ready for one it fits
        if accept is not None and warm.accepted is None:
            warm.accepted = accept(warm.env)  # (of its own cwd and env: both are checked)
        if warm.accepted is False:
            return None
        verdict = fits(warm.job) if fits is not None else None
        if verdict == "stale":
            self._ready = None
            self._discard(warm.job)
            self._refill()
            return None
        if verdict is not None:
            return None
        self._ready = None
        self._refill()
        if self._refill_idle is not None:
            warm.job.on_finish(lambda _job: self._refill())
        warm.driver.feed(data, close=True)
        return warm.job

    def _refill(self) -> None:
        """Start a replacement: on the next loop turn, or (``refill_idle``) once calls have
        been quiet that long (put off again by each call meanwhile)."""
        if self._refill_idle is None:
            self.fill_soon()
            return
        if self._closed or self._ready is not None:
            return
        if self._idle is not None:
            self._idle.cancel()
        self._idle = asyncio.get_running_loop().call_later(self._refill_idle, self.fill_soon)

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
            with contextlib.suppress(Exception):  # none ready: jobs spawn as usual
                job, driver, env = await self._spawn(self._argv, self._cwd)
                if self._closed:
                    self._discard(job)
                    return
                self._ready = _Warm(job, driver, env, self._cwd)
        finally:
            self._filling = False

    def close(self) -> None:
        """The runtime is closing: no more starts, the waiting process told EOF (the
        shutdown sweep kills it if it lingers)."""
        self._closed = True
        if self._idle is not None:
            self._idle.cancel()
        warm, self._ready = self._ready, None
        if warm is not None:
            self._discard(warm.job)

    async def aclose(self) -> None:
        """``close``, and a start under way finished (its process then discarded too)."""
        self.close()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await self._task


#: a sandboxed warm process starts once calls have been quiet this long (``Warm``)
SANDBOXED_REFILL_IDLE_S = 0.02


def warm_bash(bash: str, cwd: str, **kw: Any) -> Warm:
    """The bash for ``command`` jobs: give it ``command + NUL``."""
    return Warm([bash, "--noprofile", "--norc", "-c", BOOTSTRAP], cwd, **kw)


def warm_sh(cwd: str, **kw: Any) -> Warm:
    """The sh for ``argv`` jobs: give it :func:`exec_line`."""
    return Warm([SH, "-c", SH_BOOTSTRAP], cwd, **kw)
