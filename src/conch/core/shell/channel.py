"""The end-marker channel of a persistent shell: a Unix datagram socket pair, one end the
shell's descriptor 8, the other Conch's. The kernel stamps each message with the process that
wrote it (``SCM_CREDENTIALS``, Linux), so Conch takes a marker only from the shell itself
(``session.py`` says why that holds and what it does not).

The shell gets its end at start: as descriptor 8 of the spawn (``popen.spawn(keep=…)``), or,
where a fence spawns the shell its own way (the landlock backend's restricted thread or fork
server), from a small launcher that makes the pair inside the fence, waits until Conch has
taken its end (``pidfd_getfd``) and then execs the shell with the other as descriptor 8.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import stat
import struct
import sys

#: the shell's descriptor (zsh names only 0–9 in redirections, and each command runs with it
#: closed: ``. file 8>&-``)
FD = 8
_LAUNCHER_FD = 9  # the launcher holds Conch's end here until Conch has taken it
HELLO = b"\x1e\x1f"  # what the launcher prints once the pair is made
_GO = b"go"
_CREDS = hasattr(socket, "SO_PASSCRED")  # Linux; elsewhere the channel alone holds
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_BATCH = 64  # messages taken per wakeup (a flood from a process that stole a copy waits)
_PIDFD_GETFD = 438  # the same number on every architecture


class Channel:
    """Conch's end: non-blocking, each message with the pid of its writer."""

    def __init__(self, sock: socket.socket) -> None:
        if _CREDS:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        sock.setblocking(False)
        self._sock = sock

    def fileno(self) -> int:
        return self._sock.fileno()

    def receive(self) -> list[tuple[int | None, bytes]]:
        """The messages waiting (up to a batch): (writer's pid, or None where the OS does not
        say, message)."""
        out: list[tuple[int | None, bytes]] = []
        for _ in range(_BATCH):
            try:
                data, anc, _flags, _addr = self._sock.recvmsg(256, socket.CMSG_SPACE(_CRED.size))
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            pid = None
            for level, kind, value in anc:
                if _CREDS and level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = _CRED.unpack_from(value)[0]
            if _CREDS and pid is None:
                continue  # (never without SO_PASSCRED: the kernel adds them to every message)
            out.append((pid, data))
        return out

    def close(self) -> None:
        self._sock.close()


def pair() -> tuple[Channel, socket.socket]:
    """(Conch's end, the shell's end: to pass as its descriptor :data:`FD` and close here)."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    return Channel(mine), theirs


# -- the launcher (for a fence that spawns the shell itself) ------------------------------------

_LAUNCHER = (
    "import os,sys,_socket as s\n"
    "a,b=s.socketpair(s.AF_UNIX,s.SOCK_DGRAM)\n"
    f"assert not {{a.fileno(),b.fileno()}}&{{{FD},{_LAUNCHER_FD}}}\n"
    f"os.dup2(b.fileno(),{FD});os.dup2(a.fileno(),{_LAUNCHER_FD},False);a.close();b.close()\n"
    f"os.write(1,{HELLO!r});os.read({FD},16);os.close({_LAUNCHER_FD})\n"
    "os.execv(sys.argv[1],sys.argv[1:])\n"
)


def launcher_argv(argv: list[str]) -> list[str]:
    """``argv`` (the shell's) started through the launcher: Conch's own Python, isolated
    (``-I -S``: no site, no environment), standard library only."""
    return [os.path.realpath(sys.executable), "-I", "-S", "-c", _LAUNCHER, *argv]


def take(pid: int) -> Channel:
    """Conch's end from the launcher ``pid`` (which printed :data:`HELLO`), and the launcher
    told to go on (exec the shell). ``OSError`` if it cannot be taken."""
    pidfd = os.pidfd_open(pid)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(_PIDFD_GETFD, pidfd, _LAUNCHER_FD, 0)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"pidfd_getfd: {os.strerror(err)}")
    finally:
        os.close(pidfd)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise OSError(errno.EPROTO, "the shell's launcher holds no socket there")
        sock = socket.socket(fileno=fd)
    except BaseException:
        os.close(fd)
        raise
    chan = Channel(sock)  # (stamps messages from here on: the shell's first is after _GO)
    try:
        sock.send(_GO)
    except BaseException:
        chan.close()
        raise
    return chan
