"""inotify through libc (ctypes): a non-blocking descriptor, watches, and the events read."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from collections.abc import Iterator

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

#: what a watched directory reports: any change to an entry's content, metadata or name
WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)

_HEADER = struct.Struct("iIII")
_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        lib.inotify_init1.argtypes = [ctypes.c_int]
        lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        _libc = lib
    return _libc


def init() -> int:
    """A new inotify descriptor (non-blocking, close-on-exec)."""
    fd = int(_lib().inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


def add_watch(fd: int, path: str, mask: int = WATCH_MASK) -> int:
    """Watch a directory (never through a symlink); OSError (ENOSPC: out of watches)."""
    wd = int(_lib().inotify_add_watch(fd, os.fsencode(path), mask))
    if wd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return wd


def rm_watch(fd: int, wd: int) -> None:
    _lib().inotify_rm_watch(fd, wd)


def events(buf: bytes) -> Iterator[tuple[int, int, int, str]]:
    """(wd, mask, cookie, name) of each event in one read."""
    at, end = 0, len(buf)
    while at + _HEADER.size <= end:
        wd, mask, cookie, size = _HEADER.unpack_from(buf, at)
        at += _HEADER.size
        raw = buf[at : at + size].split(b"\0", 1)[0]
        at += size
        yield wd, mask, cookie, os.fsdecode(raw)


def read_all(fd: int) -> list[tuple[int, int, int, str]]:
    """Every event queued now (none: an empty list, at the cost of one read)."""
    out: list[tuple[int, int, int, str]] = []
    while True:
        try:
            buf = os.read(fd, 1 << 16)
        except BlockingIOError:
            return out
        if not buf:
            return out
        out.extend(events(buf))
