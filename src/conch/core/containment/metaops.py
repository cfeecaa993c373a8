"""Metadata changes of a Landlock job at ``workspace-write``, made by Conch for it (docs/spec.md
§9a).

Landlock handles no metadata change (mode, times): a job could ``chmod 666`` or ``touch -d`` a
file its user owns anywhere. Its filter hands ``chmod``/``fchmod``/``fchmodat``/``fchmodat2``
and ``utime``/``utimes``/``futimesat``/``utimensat`` to the broker (``unotify.Broker``), which
resolves the target once (an ``O_PATH`` descriptor, from the job's directory descriptor or its
cwd, following symlinks only where the call would), checks that it lies inside the job's
writable roots and applies the kernel's own rule for a process without capabilities (the owner
changes the mode and sets times; anyone with write access sets them to now), then makes the
change on that descriptor. The job's memory is read once: nothing it changes afterwards
matters. A mode with the setuid or setgid bit is refused (EPERM) everywhere.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_EMPTY_PATH = 0x1000
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
_SETID = 0o6000
_PATH_MAX = 4096

#: the calls handed over, by name (the syscall numbers are lockdown's)
CALLS = ("chmod", "fchmod", "fchmodat", "fchmodat2", "utime", "utimes", "futimesat", "utimensat")


@dataclass(frozen=True)
class Roots:
    """Where one job may change metadata: trees (root, holes) and single directories."""

    trees: tuple[tuple[str, tuple[str, ...]], ...]
    dirs: tuple[str, ...] = ()

    def holds(self, path: str) -> bool:
        def under(p: str, root: str) -> bool:
            return p == root or p.startswith(root.rstrip("/") + "/")

        if any(under(path, d) for d in self.dirs):
            return True
        return any(
            under(path, root) and not any(under(path, h) for h in holes)
            for root, holes in self.trees
        )


class Job:
    """What a handler may ask of the calling process (its memory, descriptors, cwd)."""

    def __init__(self, pid: int, getfd: Callable[[int], int] | None = None) -> None:
        self.pid = pid
        self._getfd = getfd
        self._mem = -1  # /proc/PID/mem, opened on the first read, kept for the call's pages

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._mem >= 0:
            os.close(self._mem)
            self._mem = -1

    def read(self, addr: int, size: int) -> bytes:
        if self._mem < 0:
            self._mem = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        return os.pread(self._mem, size, addr)

    def string(self, addr: int) -> bytes:
        """A NUL-terminated string of the job's, read a page at a time."""
        out = b""
        while len(out) < _PATH_MAX:
            n = 4096 - (addr + len(out)) % 4096
            chunk = self.read(addr + len(out), n)
            if not chunk:
                raise OSError(errno.EFAULT, "unreadable path")
            cut = chunk.find(b"\0")
            if cut >= 0:
                return out + chunk[:cut]
            out += chunk
        raise OSError(errno.ENAMETOOLONG, "path too long")

    def base(self, dirfd: int) -> int:
        """An O_PATH descriptor of the directory a relative path starts from."""
        if dirfd == AT_FDCWD:
            return os.open(f"/proc/{self.pid}/cwd", os.O_PATH | os.O_CLOEXEC)
        if self._getfd is None:  # (a reader of memory alone: unotify's connect address)
            raise OSError(errno.EBADF, "no descriptor of the job's may be taken here")
        return self._getfd(dirfd)


_libc: Any = None


def libc() -> Any:
    """The C library, loaded once (utimensat has no os-module form on a descriptor path;
    unotify's ioctls and pidfd calls use it too)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _signed(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def _target(job: Job, dirfd: int, path_addr: int, flags: int) -> int:
    """The O_PATH descriptor of a call's file (the caller closes it)."""
    if path_addr == 0:
        if dirfd == AT_FDCWD:
            raise OSError(errno.EFAULT, "no path")
        return job.base(dirfd)  # (utimensat with a NULL path: the descriptor itself)
    path = job.string(path_addr)
    if not path:
        if flags & AT_EMPTY_PATH:
            return job.base(dirfd)
        raise OSError(errno.ENOENT, "empty path")
    base = job.base(dirfd) if not path.startswith(b"/") else -1
    try:
        nofollow = os.O_NOFOLLOW if flags & AT_SYMLINK_NOFOLLOW else 0
        return os.open(
            path, os.O_PATH | os.O_CLOEXEC | nofollow, dir_fd=base if base >= 0 else None
        )
    finally:
        if base >= 0:
            os.close(base)


def _where(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _may_write(st: os.stat_result) -> bool:
    """DAC write access for this process's user without capabilities."""
    if st.st_uid == os.geteuid():
        return bool(st.st_mode & 0o200)
    if st.st_gid == os.getegid() or st.st_gid in os.getgroups():
        return bool(st.st_mode & 0o020)
    return bool(st.st_mode & 0o002)


def handle(name: str, args: Sequence[int], job: Job, roots: Roots) -> int:
    """The errno of one handed-over call (0: done here)."""
    try:
        if name.startswith(("chmod", "fchmod")):
            return _chmod(name, args, job, roots)
        return _utime(name, args, job, roots)
    except OSError as e:
        return e.errno or errno.EPERM


def _chmod(name: str, args: Sequence[int], job: Job, roots: Roots) -> int:
    if name == "chmod":
        dirfd, path, mode, flags = AT_FDCWD, args[0], args[1], 0
    elif name == "fchmod":
        dirfd, path, mode, flags = _signed(args[0]), 0, args[1], 0
    elif name == "fchmodat":
        dirfd, path, mode, flags = _signed(args[0]), args[1], args[2], 0
    else:
        dirfd, path, mode, flags = _signed(args[0]), args[1], args[2], args[3]
    mode &= 0o7777
    if mode & _SETID:
        return errno.EPERM
    fd = _target(job, dirfd, path, flags)
    try:
        if not roots.holds(_where(fd)):
            return errno.EACCES  # (what Landlock answers for a write outside)
        st = os.fstat(fd)
        if stat.S_ISLNK(st.st_mode):
            return errno.EOPNOTSUPP
        if st.st_uid != os.geteuid():
            return errno.EPERM
        os.chmod(f"/proc/self/fd/{fd}", mode)
        return 0
    finally:
        os.close(fd)


class _Timespec2(ctypes.Structure):
    _fields_ = [(f, ctypes.c_long) for f in ("a_sec", "a_nsec", "m_sec", "m_nsec")]


def _times(name: str, addr: int, job: Job) -> tuple[int, int, int, int] | None:
    """(atime s, ns, mtime s, ns) of the call, None for "now" (a NULL pointer)."""
    if addr == 0:
        return None
    if name == "utime":  # struct utimbuf: actime, modtime
        a, m = struct.unpack("=qq", job.read(addr, 16))
        return a, 0, m, 0
    if name in ("utimes", "futimesat"):  # struct timeval[2]
        a, au, m, mu = struct.unpack("=qqqq", job.read(addr, 32))
        if not (0 <= au < 1_000_000 and 0 <= mu < 1_000_000):
            raise OSError(errno.EINVAL, "bad timeval")
        return a, au * 1000, m, mu * 1000
    a, an, m, mn = struct.unpack("=qqqq", job.read(addr, 32))  # struct timespec[2]
    for ns in (an, mn):
        if ns not in (UTIME_NOW, UTIME_OMIT) and not 0 <= ns < 1_000_000_000:
            raise OSError(errno.EINVAL, "bad timespec")
    return a, an, m, mn


def _utime(name: str, args: Sequence[int], job: Job, roots: Roots) -> int:
    if name in ("utime", "utimes"):
        dirfd, path, times_addr, flags = AT_FDCWD, args[0], args[1], 0
    elif name == "futimesat":
        dirfd, path, times_addr, flags = _signed(args[0]), args[1], args[2], 0
    else:
        dirfd, path, times_addr, flags = _signed(args[0]), args[1], args[2], args[3]
    times = _times(name, times_addr, job)
    if times is not None and times[1] == UTIME_OMIT and times[3] == UTIME_OMIT:
        return 0  # nothing to change (the kernel checks nothing either)
    fd = _target(job, dirfd, path, flags)
    try:
        if not roots.holds(_where(fd)):
            return errno.EACCES
        st = os.fstat(fd)
        to_now = times is None or (times[1] == UTIME_NOW and times[3] == UTIME_NOW)
        if st.st_uid != os.geteuid() and not (to_now and _may_write(st)):
            return errno.EACCES if to_now else errno.EPERM
        buf: Any = None
        if times is not None:
            buf = _Timespec2(*times)
        name_b = os.fsencode(f"/proc/self/fd/{fd}")
        nofollow = AT_SYMLINK_NOFOLLOW if stat.S_ISLNK(st.st_mode) else 0
        r = libc().utimensat(
            AT_FDCWD, name_b, ctypes.byref(buf) if buf is not None else None, nofollow
        )
        if r != 0:
            return ctypes.get_errno() or errno.EPERM
        return 0
    finally:
        os.close(fd)
