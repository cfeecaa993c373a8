"""``sandbox_sockets``: the host Unix sockets a ``network: off`` job may still connect to
(docs/spec.md §9a), decided by Conch for each ``connect`` (seccomp_unotify(2)), under either Linux
backend (how the listener reaches Conch: ``Channel`` for bwrap; under landlock the spawning
thread loads the filter, so the listener is in Conch's own descriptor table).

The job's filter (``seccomp.notify_program``) stops every ``connect`` and hands it to the
listener it sent back at spawn. For each one a supervisor thread here reads the address from
the job's memory once, and when it names a socket of the allow-list it connects the job's own
socket itself: it takes a copy of the descriptor (``pidfd_getfd``), opens the allowed socket
without following a symlink, checks that it is the socket that was there when the server
started (device and inode), and connects through ``/proc/self/fd``. The job gets ``0`` or the
connect's error; anything else gets ``EACCES``. Letting the call continue instead
(``SECCOMP_USER_NOTIF_FLAG_CONTINUE``) would let another thread of the job rewrite the address
after the check; here the kernel never reads it again.

What differs from a direct connect: the peer's ``SO_PEERCRED`` names the Conch server's pid (its
uid and gid are the job's own); a relative path, an abstract name and ``sendto``/``sendmsg``
with an address are refused (connect first, then ``send``).
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import select
import shutil
import socket
import stat
import struct
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conch.core.containment import metaops
from conch.core.containment.landlock.syscalls import ARCH, SYSCALLS
from conch.errors import ConfigError

log = logging.getLogger("conch.sandbox")

_NOTIF_RECV = 0xC0502100  # SECCOMP_IOWR(0, struct seccomp_notif)
_NOTIF_SEND = 0xC0182101  # SECCOMP_IOWR(1, struct seccomp_notif_resp)
_NOTIF_ID_VALID = 0x80082102  # SECCOMP_IOR(2, __u64) (the value the kernel headers give)
_PIDFD_OPEN = 434  # (the same number on every architecture)
_PIDFD_GETFD = 438
_NOTIF = struct.Struct("=QIIiIQ6Q")  # id, pid, flags, then seccomp_data: nr, arch, ip, args
_RESP = struct.Struct("=QqiI")  # id, val, error, flags
_SUN_PATH = 108
_TIMEVAL = struct.Struct("=qq")  # (struct timeval on the 64-bit Linux the filter is built for)
_SLICE_US = 250_000  # a blocked connect's slice between checks that its job still waits

_lib = metaops.libc


def _call(ret: int) -> int:
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


@dataclass(frozen=True)
class Allowed:
    """One allowed socket: the names a job may give it, and what it is."""

    names: frozenset[str]
    real: str
    dev: int
    ino: int


def allow_list(paths: Iterable[str]) -> tuple[Allowed, ...]:
    """The allow-list as the server starts: each an absolute path of a listening socket
    (resolved now, while no job runs)."""
    out = []
    for p in paths:
        if not os.path.isabs(p):
            raise ConfigError(f"sandbox_sockets: {p!r} is not an absolute path")
        real = os.path.realpath(p)
        try:
            st = os.stat(real)
        except OSError as e:
            raise ConfigError(f"sandbox_sockets: {p}: {e.strerror}") from None
        if not stat.S_ISSOCK(st.st_mode):
            raise ConfigError(f"sandbox_sockets: {p} is not a Unix socket")
        names = frozenset({os.path.normpath(p), real})
        out.append(Allowed(names, real, st.st_dev, st.st_ino))
    return tuple(out)


def check_kernel() -> str | None:
    """Why this process cannot broker connects (None when it can)."""
    try:
        pidfd = _call(_lib().syscall(_PIDFD_OPEN, os.getpid(), 0))
    except OSError as e:
        return f"pidfd_open: {e.strerror}"
    try:
        fd = _call(_lib().syscall(_PIDFD_GETFD, pidfd, 0, 0))
        os.close(fd)
    except OSError as e:
        return f"pidfd_getfd: {e.strerror}"
    finally:
        os.close(pidfd)
    return None


def decide(address: bytes, allowed: tuple[Allowed, ...]) -> Allowed | None:
    """The allowed socket a connect's ``sockaddr`` names, or None (pure)."""
    if len(address) < 3 or struct.unpack_from("=H", address)[0] != socket.AF_UNIX:
        return None
    raw = address[2 : 2 + _SUN_PATH]
    if raw[:1] in (b"\0", b""):
        return None  # abstract or unnamed
    raw = raw.split(b"\0", 1)[0]
    try:
        path = os.fsdecode(raw)
    except UnicodeDecodeError:
        return None
    if not path.startswith("/"):
        return None  # relative to the job's directory: never on the list
    norm = os.path.normpath(path)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return next((a for a in allowed if norm in a.names), None)


def _open_socket(a: Allowed) -> int:
    """An O_PATH descriptor of the allowed socket, walked one name at a time without following
    a symlink, and the very socket the server saw at start."""
    parts = [p for p in a.real.split("/") if p]
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC | (0 if last else os.O_DIRECTORY)
            nxt = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        if not stat.S_ISSOCK(st.st_mode) or (st.st_dev, st.st_ino) != (a.dev, a.ino):
            raise OSError(errno.EACCES, "not the allowed socket")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _tgid(tid: int) -> int:
    """The process of thread ``tid`` (a job's connect may come from any of its threads)."""
    with open(f"/proc/{tid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"Tgid:"):
                return int(line.split()[1])
    raise OSError(errno.ESRCH, "no such thread")


_BY_NUMBER = {
    SYSCALLS[ARCH][n]: n for n in ("connect", *metaops.CALLS) if n in SYSCALLS.get(ARCH, {})
}


class Channel:
    """How a bwrap job's listener reaches Conch: a socket in a directory of its own (inside
    the data dir, bound into that one sandbox), accepted once by a thread here; Conch sends
    the shim inside (``shim.broker_shim``) its ``filters`` (``fence.shim_filters``), the
    shim sends the listener, Conch answers ``K`` and watches it. Then the socket and its
    directory go. No other sandbox sees the data dir."""

    def __init__(self, broker: Broker, parent: str, filters: bytes) -> None:
        os.makedirs(parent, mode=0o700, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix="b.", dir=parent)
        self.path = os.path.join(self.dir, "s")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(self.path)
            self._sock.listen(1)
            self._sock.settimeout(30)  # (a job that never started: given up, cleaned)
            _thread.start_new_thread(self._take, (broker, filters))
        except BaseException:
            self._close()
            raise

    def _take(self, broker: Broker, filters: bytes) -> None:
        try:
            conn, _ = self._sock.accept()
            with conn:
                conn.settimeout(10)
                conn.sendall(filters)
                _, fds, _, _ = socket.recv_fds(conn, 16, 4)
                for extra in fds[1:]:
                    os.close(extra)
                if fds:
                    broker.watch(fds[0])
                    conn.sendall(b"K")
        except OSError:
            pass
        finally:
            self._close()

    def _close(self) -> None:
        self._sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Broker:
    """The supervisor threads of one runtime's jobs."""

    def __init__(self, allowed: tuple[Allowed, ...]) -> None:
        self.allowed = allowed
        self._active = 0
        self._lock = threading.Lock()

    def watch(self, listener: int, roots: metaops.Roots | None = None) -> None:
        """Answer the connects of the job (and its descendants) behind ``listener`` until
        none of them is left; the listener is ours and closed then. (A bare thread: the
        spawn does not wait for it to be scheduled, as ``Thread.start`` does, ~1 ms here.)"""
        with self._lock:
            self._active += 1
        try:
            _thread.start_new_thread(self._serve, (listener, roots))
        except BaseException:
            with self._lock:
                self._active -= 1
            os.close(listener)
            raise

    def active(self) -> int:
        """How many jobs' supervisors run."""
        with self._lock:
            return self._active

    def _serve(self, listener: int, roots: metaops.Roots | None) -> None:
        try:
            poller = select.poll()
            poller.register(listener, select.POLLIN)
            req = ctypes.create_string_buffer(max(_NOTIF.size, 128))
            while True:
                events = poller.poll()
                if not any(e & select.POLLIN for _, e in events):
                    return  # POLLHUP: no task uses the filter any more
                ctypes.memset(req, 0, len(req))
                try:
                    _call(_lib().ioctl(listener, _NOTIF_RECV, req))
                except OSError as e:
                    if e.errno in (errno.ENOENT, errno.EINTR):
                        continue  # the task went away before we took it
                    return
                nid, pid, _, nr, _, _, *args = _NOTIF.unpack_from(req)
                name = _BY_NUMBER.get(nr)
                if name == "connect":
                    error = self._one(listener, nid, pid, args)
                elif name in metaops.CALLS and roots is not None:
                    error = self._metadata(listener, nid, pid, name, args, roots)
                else:
                    error = errno.EPERM
                resp = ctypes.create_string_buffer(_RESP.pack(nid, 0, -error, 0), _RESP.size)
                with contextlib.suppress(OSError):
                    _call(_lib().ioctl(listener, _NOTIF_SEND, resp))
        finally:
            os.close(listener)
            with self._lock:
                self._active -= 1

    def _valid(self, listener: int, nid: int) -> bool:
        cookie = ctypes.c_uint64(nid)
        return _lib().ioctl(listener, _NOTIF_ID_VALID, ctypes.byref(cookie)) == 0

    def _metadata(
        self, listener: int, nid: int, pid: int, name: str, args: list[int], roots: metaops.Roots
    ) -> int:
        """A mode or time change of a workspace-write job (metaops), made here."""
        pidfd = -1

        def getfd(fd: int) -> int:
            return _call(_lib().syscall(_PIDFD_GETFD, pidfd, fd & 0xFFFFFFFF, 0))

        try:
            pidfd = _call(_lib().syscall(_PIDFD_OPEN, _tgid(pid), 0))
            if not self._valid(listener, nid):
                return errno.EPERM
            with metaops.Job(pid, getfd) as job:
                return metaops.handle(name, args, job, roots)
        except OSError as e:
            return e.errno or errno.EPERM
        finally:
            if pidfd >= 0:
                os.close(pidfd)

    def _connect(self, listener: int, nid: int, theirs: int, buf: Any, size: int) -> None:
        """connect(2) the job's socket, as blocking as the job made it, but never past the
        job's own wait: a blocking connect to a listener whose backlog is full waits in
        slices of ``_SLICE_US`` (the socket's send timeout, the job's own restored after),
        and gives up once the job's call is gone (killed, interrupted). Without the slices
        a job could park this supervisor, and its descriptors, for good."""
        if fcntl.fcntl(theirs, fcntl.F_GETFL) & os.O_NONBLOCK:
            _call(_lib().connect(theirs, buf, size))  # (full backlog: EAGAIN at once)
            return
        with socket.socket(fileno=os.dup(theirs)) as sock:
            old = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _TIMEVAL.size)
            sec, usec = _TIMEVAL.unpack(old)
            deadline = time.monotonic() + sec + usec / 1e6 if sec or usec else None
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _TIMEVAL.pack(0, _SLICE_US))
            try:
                while True:
                    if _lib().connect(theirs, buf, size) == 0:
                        return
                    e = ctypes.get_errno()
                    # (EINTR: a signal of Conch's own landed on this thread)
                    if e not in (errno.EAGAIN, errno.EINTR) or not self._valid(listener, nid):
                        raise OSError(e, os.strerror(e))
                    if deadline is not None and time.monotonic() >= deadline:
                        raise OSError(e, os.strerror(e))  # (the job's own send timeout)
            finally:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, old)

    def _one(self, listener: int, nid: int, pid: int, args: list[int]) -> int:
        """The errno for one connect (0: connected here)."""
        sockfd, addr, addrlen = args[0] & 0xFFFFFFFF, args[1], args[2] & 0xFFFFFFFF
        if not 3 <= addrlen <= 2 + _SUN_PATH:
            return errno.EACCES
        try:
            with metaops.Job(pid) as job:
                address = job.read(addr, addrlen)
        except OSError:
            return errno.EFAULT
        if not self._valid(listener, nid):  # the pid may have been reused meanwhile
            return errno.EACCES
        target = decide(address, self.allowed)
        if target is None:
            return errno.EACCES
        pidfd = theirs = path_fd = -1
        try:
            # (the notification names the calling thread; pidfd_open wants its process)
            pidfd = _call(_lib().syscall(_PIDFD_OPEN, _tgid(pid), 0))
            if not self._valid(listener, nid):
                return errno.EACCES
            theirs = _call(_lib().syscall(_PIDFD_GETFD, pidfd, sockfd, 0))
            path_fd = _open_socket(target)
            # the job's own socket (the same open file), connected here: raw connect(2), so
            # nothing about the descriptor (its blocking mode) changes
            name = os.fsencode(f"/proc/self/fd/{path_fd}")
            sun = struct.pack("=H", socket.AF_UNIX) + name + b"\0"
            buf = ctypes.create_string_buffer(sun, len(sun))
            self._connect(listener, nid, theirs, buf, len(sun))
            return 0
        except OSError as e:
            return e.errno or errno.EACCES
        finally:
            for fd in (path_fd, theirs, pidfd):
                if fd >= 0:
                    os.close(fd)
