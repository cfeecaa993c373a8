"""Process tags, the child subreaper, tree kill and zombie reaping.

Every process a job starts carries ``CONCH_TAG=<instance>/<job_id>`` in its environment, so
``setsid`` and double-forked escapees stay findable; on Linux the runtime is also a child
subreaper, so orphans come back to it instead of init.
"""

from __future__ import annotations

import _signal as _csignal  # type: ignore[import-not-found]
import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from conch.core.process import procfs

TAG_VAR = "CONCH_TAG"
_TAG_KEY = TAG_VAR.encode()
_PR_SET_CHILD_SUBREAPER = 36

_subreaper_enabled = False


def instance_id() -> str:
    """Identifies one runtime: ``<pid>.<start time>.<PID namespace>.<random>`` — the process
    survives pid reuse checks, a server in another PID namespace (a container, a Conch
    sandbox) is never judged by a pid of ours, and two runtimes in one process stay apart."""
    pid = os.getpid()
    return f"{pid}.{procfs.start_time(pid)}.{procfs.pid_namespace()}.{secrets.token_hex(4)}"


# Popen's restore_signals already resets these (Python itself ignores SIGPIPE and SIGXFSZ)
_RESET_BY_POPEN = frozenset(
    getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ", "SIGXFZ") if hasattr(signal, n)
)
_UNCATCHABLE = frozenset({signal.SIGKILL, signal.SIGSTOP})


def child_signal_reset() -> Callable[[], None] | None:
    """What a child must run between fork and exec so it starts with default signal
    dispositions and an empty signal mask, whatever this server inherited (``nohup``,
    supervisors and background shells ignore HUP/QUIT/INT; a blocked mask survives exec).

    ``None`` when there is nothing to undo, so a clean server keeps the fast spawn path
    (a preexec function makes Popen fork instead of vfork). Handled signals need nothing:
    exec resets them by itself; only ignored ones and the mask are inherited.
    """
    ignored, blocked = _signal_state()
    if not ignored and not blocked:
        return None

    def reset() -> None:  # runs in the child: the forking thread is its main thread there
        for s in ignored:
            try:
                signal.signal(s, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        if blocked:
            signal.pthread_sigmask(signal.SIG_SETMASK, [])

    return reset


_POPEN_RESET_MASK = sum(1 << (s - 1) for s in _RESET_BY_POPEN)
_SIGNALS = tuple(
    int(s) for s in sorted(signal.valid_signals()) if s not in _UNCATCHABLE | _RESET_BY_POPEN
)

_COMMON = tuple(
    getattr(signal, n) for n in ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGCHLD", "SIGUSR1")
)
# the C functions under `signal`'s enum-converting wrappers (a third of the cost each)
_getsignal = getattr(_csignal, "getsignal", signal.getsignal)
_setsignal = getattr(_csignal, "signal", signal.signal)
_sigmask = getattr(_csignal, "pthread_sigmask", signal.pthread_sigmask)
_SIG_IGN = getattr(_csignal, "SIG_IGN", signal.SIG_IGN)
_state_until = 0.0
_state_handlers: tuple[object, ...] = ()
_state_ignored: tuple[int, ...] = ()
_STATE_TTL_S = 1.0


def _signal_state() -> tuple[tuple[int, ...], bool]:
    """(the ignored signals a child would inherit and Popen does not reset, whether this
    thread blocks any). The ignored set (read from the kernel, ~20 us; asking Python for every
    signal costs ~0.2 ms) is reused for a second while the usual signals' Python handlers stay
    as they were; the mask (~2 us) is looked at every time."""
    global _state_until, _state_handlers, _state_ignored
    handlers = tuple(_getsignal(s) for s in _COMMON)
    blocked = bool(_sigmask(signal.SIG_BLOCK, ()))
    if time.monotonic() < _state_until and handlers == _state_handlers:
        return _state_ignored, blocked
    kernel = _kernel_signal_state()
    if kernel is not None:
        mask = kernel[0]
        ignored = tuple(s for s in _SIGNALS if mask >> (s - 1) & 1)
    else:
        ignored = tuple(s for s in _SIGNALS if _getsignal(s) == _SIG_IGN)
    _state_until, _state_handlers, _state_ignored = (
        time.monotonic() + _STATE_TTL_S,
        handlers,
        ignored,
    )
    return ignored, blocked


def _caught_for_a_moment(signum: int, frame: object) -> None:
    """Stands in for SIG_IGN while a child is spawned (see ``spawning``)."""


@contextlib.contextmanager
def spawning() -> Iterator[Callable[[], None] | None]:
    """Around one Popen: yields the ``preexec_fn`` it needs for the child to start with default
    signals and an empty mask (``child_signal_reset``), or None, keeping the fast vfork path.

    Signals this server inherited as ignored (nohup, a background shell) would need a preexec
    function, which makes Popen fork the whole server instead of vforking. When only such
    dispositions are to undo and this is the main thread, they are caught by a no-op for the
    moment of the spawn instead: exec resets caught signals to their default by itself, and one
    arriving meanwhile is still ignored in effect. A blocked mask still takes the slow path.
    """
    ignored, blocked = _signal_state()
    if not ignored and not blocked:
        yield None
        return
    if blocked or threading.current_thread() is not threading.main_thread():
        yield child_signal_reset()
        return
    swapped = []
    try:
        for s in ignored:
            try:
                _setsignal(s, _caught_for_a_moment)
            except (OSError, ValueError):
                continue
            swapped.append(s)
        if len(swapped) < len(ignored):
            yield child_signal_reset()
        else:
            yield None
    finally:
        for s in swapped:
            with contextlib.suppress(OSError, ValueError):
                _setsignal(s, _SIG_IGN)


def _kernel_signal_state() -> tuple[int, bool] | None:
    """(mask of ignored signals Popen does not reset, whether this thread blocks any) from
    /proc/thread-self/status (Linux), or None where it cannot be read."""
    if not procfs.LINUX:
        return None
    try:
        fd = os.open("/proc/thread-self/status", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, 8192)
    except OSError:
        return None
    finally:
        os.close(fd)
    ign = blk = None
    for line in data.split(b"\n"):
        if line.startswith(b"SigIgn:"):
            ign = int(line[7:].strip(), 16)
        elif line.startswith(b"SigBlk:"):
            blk = int(line[7:].strip(), 16)
    if ign is None or blk is None:
        return None
    return ign & ~_POPEN_RESET_MASK, blk != 0


def enable_subreaper() -> bool:
    """Make this process a child subreaper (Linux). Returns whether it is one."""
    global _subreaper_enabled
    if _subreaper_enabled:
        return True
    if not procfs.LINUX:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
            _subreaper_enabled = True
    except (OSError, AttributeError):
        pass
    return _subreaper_enabled


def containment_level() -> str:
    return "subreaper" if _subreaper_enabled else "process-group"


def signal_pids(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Reaper:
    """Reaps zombie children that belong to Conch jobs.

    Leaders are reaped by their own waiters (``awaited``). Other zombie children are reaped when
    they are known Conch processes, or belong to a known job session; orphans we never saw
    alive (a double fork that exited at once) are recognised by living in another session than
    ours and staying unreaped for ``grace_s`` — a host program reaps its own children at once.
    With ``reap_all`` (the server owns the whole process) every zombie child is reaped, after the
    same grace: a child that asyncio awaits itself (rg, ``bash -n``) must be left to its watcher,
    or its exit status is lost (asyncio then reports 255).
    """

    def __init__(self, reap_all: bool = False, grace_s: float = 0.5) -> None:
        self.reap_all = reap_all
        self.grace_s = grace_s
        self.awaited: set[int] = set()
        self.known: set[int] = set()
        self.known_sids: set[str] = set()
        self._seen: dict[int, float] = {}
        self._my_sid = str(os.getsid(0))

    def note(self, pids: Iterable[int]) -> None:
        self.known.update(pids)

    def sweep(self, *, final: bool = False) -> int:
        """Reap what can be reaped now; returns how many."""
        n = 0
        now = time.monotonic()
        zombies = set()
        for pid in procfs.children(os.getpid()):
            if pid in self.awaited:
                continue
            fields = procfs.stat_fields(pid)
            if not fields or fields[0] != "Z":
                continue
            zombies.add(pid)
            first = self._seen.setdefault(pid, now)
            foreign_session = fields[3] != self._my_sid
            overdue = final or now - first >= self.grace_s
            if not (
                pid in self.known
                or fields[3] in self.known_sids
                or ((foreign_session or self.reap_all) and overdue)
            ):
                continue
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    n += 1
            except ChildProcessError:
                pass
            self.known.discard(pid)
            zombies.discard(pid)
        for pid in list(self._seen):
            if pid not in zombies:
                del self._seen[pid]
        return n


def _send(pids: set[int], pgids: Iterable[int], sig: int, reaper: Reaper | None) -> None:
    """SIGCONT (a stopped process acts on nothing else) then ``sig`` to every group and pid;
    the pids are noted first, so their zombies are reaped."""
    if reaper:
        reaper.note(pids)
    for g in pgids:
        signal_group(g, signal.SIGCONT)
        signal_group(g, sig)
    signal_pids(pids, signal.SIGCONT)
    signal_pids(pids, sig)


_TERM_BIT = 1 << (signal.SIGTERM - 1)


def _term_view(pid: int) -> tuple[str, bool]:
    """(the program a process runs, whether it ignores TERM)."""
    return procfs.comm(pid), bool(procfs.ignored(pid) & _TERM_BIT)


async def terminate_tree(
    collect: Callable[[], set[int]],
    pgids: Iterable[int],
    grace_s: float,
    reaper: Reaper | None,
    *,
    poll_s: float = 0.02,
) -> None:
    """SIGCONT+SIGTERM the tree, wait up to grace_s, then SIGKILL what is left (and reap it).

    ``collect`` is re-run while waiting, so processes forked during the grace period are caught,
    and a process gets the TERM again when it has become another program since (an exec: the
    new program never saw it) or stopped ignoring it: a sandbox's start ignores it until its
    program runs, and resets it just before the exec, where a TERM can be lost unseen."""
    pgids = list(pgids)
    pids = collect()
    # (looked at just before the send: one that execs or stops ignoring it after that look
    # may have missed it; one with a handler that exec'd in between gets it twice)
    seen = {p: _term_view(p) for p in pids}
    _send(pids, pgids, signal.SIGTERM, reaper)
    deadline = time.monotonic() + grace_s
    signalled = set(pids)
    while True:
        if reaper:
            reaper.sweep()
        alive = {p for p in signalled if procfs.is_alive(p)}
        again = []
        for p in alive:
            now = _term_view(p)
            if now != seen.get(p, now) and not now[1]:
                again.append(p)
            seen[p] = now
        if again:
            _send(set(again), (), signal.SIGTERM, reaper)
        fresh = collect() - signalled
        if fresh:
            seen.update((p, _term_view(p)) for p in fresh)
            _send(fresh, (), signal.SIGTERM, reaper)
            signalled |= fresh
            alive |= fresh
        if not alive or time.monotonic() >= deadline:
            break
        await asyncio.sleep(poll_s)
    await kill_tree_now(collect, pgids, reaper, known=signalled)


async def kill_tree_now(
    collect: Callable[[], set[int]],
    pgids: Iterable[int],
    reaper: Reaper | None,
    *,
    known: set[int] | None = None,
    limit_s: float = 1.0,
    poll_s: float = 0.01,
) -> None:
    """SIGKILL the tree until nothing is left (bounded by limit_s), reaping our zombies."""
    pgids = list(pgids)
    victims = set(known or ()) | collect()
    deadline = time.monotonic() + limit_s
    while True:
        _send(victims, pgids, signal.SIGKILL, reaper)
        if reaper:
            reaper.sweep()
        fresh = collect() - victims
        victims |= fresh
        alive = {p for p in victims if procfs.is_alive(p)}
        if not alive and not fresh:
            break
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(poll_s)
    if reaper:
        # zombies of ours that the kill produced: reap them so kill(pid, 0) says ESRCH
        for _ in range(50):
            reaper.sweep()
            if not any(_is_our_zombie(p) for p in victims):
                break
            await asyncio.sleep(poll_s)


def _is_our_zombie(pid: int) -> bool:
    fields = procfs.stat_fields(pid)
    return bool(fields) and fields[0] == "Z" and fields[1] == str(os.getpid())  # type: ignore[index]


def kill_orphans_of_dead_servers() -> list[int]:
    """Kill processes tagged by a Conch server that no longer exists (it died by SIGKILL; a
    zombie server is dead too)."""
    victims: list[int] = []
    for pid, value in procfs.scan_environ(_TAG_KEY, b"").items():
        inst = value.decode("ascii", "replace").split("/", 1)[0]
        owner = procfs.owner_in_this_namespace(inst)
        if owner is None:
            continue  # another PID namespace's server (or not provably ours): left alone
        owner_pid, owner_start = owner
        if procfs.live_start_time(owner_pid) == owner_start:
            continue  # that server (maybe this very process) is alive: not ours to touch
        victims.append(pid)
    signal_pids(victims, signal.SIGCONT)
    signal_pids(victims, signal.SIGKILL)
    return victims
