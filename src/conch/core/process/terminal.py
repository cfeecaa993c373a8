"""Pseudo-terminals: spawn a program on one, watch its leader, ask the kernel whether it waits.

``awaiting_input`` comes from the terminal's real state, never from prompt guessing: a process
of the terminal's foreground process group is asleep in a read (or poll/select) on the terminal;
``awaiting_secret`` additionally needs echo off with canonical input on (a password prompt —
raw mode without echo is an editor or a line-editing REPL, which echoes by itself).
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import platform
import stat
import struct
import termios
import time
from collections.abc import Iterable
from typing import Any

from conch.core.process import popen, procfs
from conch.core.process.spec import Spawner, SpawnSpec

ROWS, COLS = 50, 200
_READS = {
    "x86_64": {0, 17, 19, 295},  # read, pread64, readv, preadv
    "aarch64": {63, 65, 67, 69},
}
_WAITS = {
    "x86_64": {7, 23, 232, 270, 271, 281, 441},  # poll, select, epoll_wait, pselect6, ppoll...
    "aarch64": {22, 72, 73, 441},
}
#: of _WAITS, the calls whose first two arguments are a ``pollfd`` array and its length
_POLLS = {"x86_64": {7, 271}, "aarch64": {73}}  # poll, ppoll
_POLL_READ = 0x1 | 0x2 | 0x40  # POLLIN | POLLPRI | POLLRDNORM
_MAX_POLLED = 256
_TTY_WCHAN = ("n_tty_read", "wait_woken")
_POLL_WCHAN = ("do_select", "poll_schedule_timeout", "do_sys_poll", "ep_poll")


def spawn(
    spec: SpawnSpec,
    *,
    echo: bool = True,
    size: tuple[int, int] = (ROWS, COLS),
    spawner: Spawner | None = None,
) -> tuple[int, int, str, list[Any]]:
    """Start ``spec`` in its own session with a new PTY (``size`` rows × columns) as its
    stdio and controlling terminal (its argv and env as a fence prepared them:
    core/containment/fence.py; its descriptors 0-2 and terminal are this PTY's);
    ``echo=False`` turns the terminal's echo off, so what is typed into it never shows in the
    output. ``spawner``: as ``popen.spawn``.

    Returns (pid, master fd (non-blocking), slave path, the terminal's initial attributes).
    The caller owns reaping the pid.
    """
    master, slave = os.openpty()
    try:
        tty = os.ttyname(slave)
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.ONLCR  # programs print \n, the log gets \n
        if not echo:
            attrs[3] &= ~termios.ECHO
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        set_size(slave, *size)
        on_tty = dataclasses.replace(spec, stdin=slave, stdout=slave, stderr=slave, terminal=tty)
        pid = popen.spawn(on_tty, spawner=spawner)
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    return pid, master, tty, attrs


def set_size(master: int, rows: int, cols: int) -> None:
    """Set the terminal's window size; the kernel sends SIGWINCH to its foreground group (a
    full-screen program redraws at the new size)."""
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def read_master(fd: int) -> bytes | None:
    """What the terminal has for us now: bytes, b"" if nothing yet, None once it is closed."""
    try:
        return os.read(fd, 1 << 16) or None
    except BlockingIOError:
        return b""
    except OSError:  # EIO: every slave end is closed
        return None


def _syscall(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return f.read().split()
    except OSError:
        return []


def _polled(pid: int, call: list[str]) -> list[int] | None:
    """The descriptors a process asleep in ``poll``/``ppoll`` waits to read (its ``pollfd``
    array, from its memory); None where that cannot be read (another user's, a process that
    is not dumpable: ``sudo``, ``ssh``), or the array is large."""
    try:
        addr, count = int(call[1], 16), int(call[2], 16)
    except (IndexError, ValueError):
        return None
    if not 0 < count <= _MAX_POLLED:
        return None
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.pread(fd, 8 * count, addr)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) != 8 * count:
        return None
    return [
        polled
        for polled, events, _ in struct.iter_unpack("=ihh", data)
        if polled >= 0 and events & _POLL_READ
    ]


def _blocked_on_terminal(pid: int, tty: str) -> bool:
    fields = procfs.stat_fields(pid)
    if not fields or fields[0] != "S":
        return False
    arch = platform.machine()
    call = _syscall(pid)
    if call and call[0].isdigit() and arch in _READS:
        nr = int(call[0])
        if nr in _READS[arch] and len(call) > 1:
            return _is_terminal(procfs.fd_target(pid, int(call[1], 16)), tty)
        if nr in _WAITS[arch]:
            polled = _polled(pid, call) if nr in _POLLS[arch] else None
            if polled is not None:  # the very descriptors it waits on
                return any(_is_terminal(procfs.fd_target(pid, fd), tty) for fd in polled)
            return _is_terminal(procfs.fd_target(pid, 0), tty)
        return False
    wchan = procfs.wchan(pid)
    if wchan.startswith(_TTY_WCHAN) or wchan.startswith(_POLL_WCHAN):
        return _is_terminal(procfs.fd_target(pid, 0), tty)
    return False


def _is_terminal(target: str, tty: str) -> bool:
    """Whether an fd's target is our terminal. Password prompts (getpass, sudo, ssh) open
    ``/dev/tty``, which names the process's controlling terminal: for a process of the
    terminal's foreground group (the only ones asked about) that is ours."""
    return target == tty or target == "/dev/tty"


def input_state(master: int, tty: str, pids: Iterable[int]) -> tuple[bool, bool]:
    """(awaiting_input, awaiting_secret) of the terminal, looking at the given processes."""
    if not procfs.LINUX:
        return False, False
    try:
        fg = str(os.tcgetpgrp(master))
    except OSError:
        return False, False
    for pid in pids:
        fields = procfs.stat_fields(pid)
        if not fields or fields[2] != fg:
            continue
        if _blocked_on_terminal(pid, tty):
            try:
                lflag = termios.tcgetattr(master)[3]
            except termios.error:
                return True, False
            return True, not lflag & termios.ECHO and bool(lflag & termios.ICANON)
    return False, False


#: how long ``readers`` looks for the terminal's holders outside the job's processes
OUTSIDE_BUDGET_S = 1.0
#: stands in ``readers`` for the processes not looked at within ``OUTSIDE_BUDGET_S``
UNCHECKED = 0


def readers(master: int, tty: str, pids: Iterable[int]) -> list[int]:
    """The given processes that wait reading the terminal now, in its foreground group: those
    that get what is typed next (a password prompt's program, or whatever set echo off); then
    every other process that can read it (``outside``)."""
    if not procfs.LINUX:
        return []
    try:
        fg = str(os.tcgetpgrp(master))
    except OSError:
        return []
    known = list(pids)
    inside = [
        pid
        for pid in known
        if (fields := procfs.stat_fields(pid)) and fields[2] == fg
        if _blocked_on_terminal(pid, tty)
    ]
    return inside + outside(tty, fg, set(known))


def outside(tty: str, fg: str, known: set[int], budget_s: float = OUTSIDE_BUDGET_S) -> list[int]:
    """The processes, other than ``known`` (the job's) and this one, that can read the
    terminal ``tty`` whose foreground process group is ``fg``: one in that group, one whose
    controlling terminal it is (it opens ``/dev/tty`` at will: a process an earlier command
    left in the session), and one that holds it open on any descriptor (one that left the
    session, ``setsid``, keeping it). Such a process may read what is typed next, or make
    itself the foreground group and read it after any check.

    Processes of another user are not seen where their descriptors cannot be read (neither
    can they open the terminal, which is this user's). Bounded: past ``budget_s`` the search
    stops and ``UNCHECKED`` stands for the processes not looked at (fail closed)."""
    try:
        rdev = os.stat(tty).st_rdev
    except OSError:
        return [UNCHECKED]
    major, minor = os.major(rdev), os.minor(rdev)
    tty_nr = str((minor & 0xFF) | (major << 8) | ((minor & ~0xFF) << 12))  # as /proc's stat
    me = os.getpid()
    deadline = time.monotonic() + budget_s
    out: list[int] = []
    for pid in procfs.all_pids():
        if pid in known or pid == me:
            continue
        if time.monotonic() > deadline:
            return [*out, UNCHECKED]
        fields = procfs.stat_fields(pid)
        if not fields or fields[0] in ("Z", "X"):
            continue
        if fields[2] == fg or fields[4] == tty_nr:
            out.append(pid)
            continue
        held = _holds(pid, rdev, deadline)
        if held is None:
            return [*out, UNCHECKED]
        if held:
            out.append(pid)
    return out


def _holds(pid: int, rdev: int, deadline: float) -> bool | None:
    """Whether ``pid`` has the terminal ``rdev`` open on a descriptor (None: the deadline
    passed while looking)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False  # (gone, or another user's)
    for i, fd in enumerate(fds):
        if i % 64 == 63 and time.monotonic() > deadline:
            return None
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == rdev:
            return True
    return False


def eof_byte(master: int) -> bytes:
    """The terminal's end-of-file character (VEOF, normally ctrl-d)."""
    try:
        c = termios.tcgetattr(master)[6][termios.VEOF]
    except (termios.error, IndexError):
        return b"\x04"
    return c if isinstance(c, bytes) else bytes([c])
