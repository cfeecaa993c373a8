"""Which local process or user holds the other end of a loopback TCP connection (Linux procfs).

Used to tell a request that comes from inside a sandboxed job. Where every sandboxed spawn has
a cgroup v2 of its own (``CgroupMarks``), the cgroup the kernel recorded for the connection's
socket when it was made (sock_diag tells it with the socket's owner) decides at once. Else the
socket is found in ``/proc/net/tcp{,6}`` by its two addresses, and its inode among the
descriptors of the processes that may hold it: those that carry a fence the kernel keeps for
them (``Marks``: a PID namespace other than the server's, as bwrap makes, or more seccomp
filters than the server has, as every sandboxed job gets), so the answer holds for as long as
any process of a job lives, its leader gone or not; a search that runs past its deadline
raises ``Untraceable`` (the caller refuses: it fails closed).

The same line names the user who made the socket (its ``uid`` column): the HTTP front end lets
only its own user in without a token. That owner is asked of the kernel's socket-diagnostics
netlink (sock_diag, an exact lookup by the two addresses: microseconds) where it answers, and
read from the table otherwise (the whole table each time: milliseconds per thousand sockets on
the host). Pure parsing plus a few reads; nothing is cached but whether sock_diag answers (and
the sandboxed cgroups, ``CgroupMarks``)."""

from __future__ import annotations

import errno
import functools
import ipaddress
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


def _hex_addr(host: str, port: int) -> str | None:
    """``host:port`` as /proc/net/tcp spells it (each 32-bit word in host byte order)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    raw = ip.packed
    if sys.byteorder == "little":  # the kernel prints each word as a host-order number
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return f"{raw.hex().upper()}:{port:04X}"


def parse_tcp_table(text: str, local: str, remote: str) -> int | None:
    """The inode of the socket whose local and remote addresses are the given ones (pure)."""
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 10 and fields[1] == local and fields[2] == remote:
            return int(fields[9]) or None
    return None


def parse_tcp_uid(text: str, local: str, remote: str) -> int | None:
    """The owner (uid) of the socket whose local and remote addresses are the given ones
    (pure); None when no line has them, or when the socket has no file any more (inode 0:
    its process closed it; some kernels then show uid 0 for it, which is nobody's)."""
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 10 and fields[1] == local and fields[2] == remote:
            return int(fields[7]) if fields[9] != "0" else None
    return None


def _tcp_lines(client: tuple[str, int], server: tuple[str, int]) -> Iterator[tuple[str, str, str]]:
    """(a table's text, the client's address, the server's address) as /proc/net/tcp and tcp6
    spell the connection (a v4 peer of a v6 socket too), each table read once."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        hosts = [(client[0], server[0])]
        if table.endswith("6") and ":" not in client[0]:
            hosts = [(f"::ffff:{client[0]}", f"::ffff:{server[0]}")]  # v4 on a v6 socket
        wanted: list[tuple[str, str]] = []
        for c, s in hosts:
            local, remote = _hex_addr(c, client[1]), _hex_addr(s, server[1])
            if local is not None and remote is not None:
                wanted.append((local, remote))
        if not wanted:
            continue
        try:
            with open(table) as f:
                text = f.read()
        except OSError:
            continue
        for local, remote in wanted:
            yield text, local, remote


def socket_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The user who owns the client's end of a loopback connection from ``client`` to
    ``server`` (the socket's creator), or None when it is not found (it has closed)."""
    if diag_answers():
        try:
            return diag_socket_uid(client, server)
        except OSError:
            pass
    return table_socket_uid(client, server)


def table_socket_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """:func:`socket_uid` from /proc/net/tcp{,6} (reads the whole table)."""
    for text, local, remote in _tcp_lines(client, server):
        uid = parse_tcp_uid(text, local, remote)
        if uid is not None:
            return uid
    return None


_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLMSG_ERROR = 2
_NLM_F_REQUEST = 1
_DIAG_MSG = struct.Struct("=BBBB48sIIIII")  # struct inet_diag_msg: ... idiag_uid, idiag_inode
_INET_DIAG_CGROUP_ID = 21  # (Linux 5.9: the cgroup v2 id of the socket's maker)


def diag_request(client: tuple[str, int], server: tuple[str, int]) -> bytes:
    """A sock_diag request for the one TCP socket from ``client`` to ``server`` (pure):
    struct nlmsghdr + struct inet_diag_req_v2, all states, no cookie to match."""
    family = socket.AF_INET6 if ":" in client[0] else socket.AF_INET
    src = socket.inet_pton(family, client[0]).ljust(16, b"\0")
    dst = socket.inet_pton(family, server[0]).ljust(16, b"\0")
    sockid = struct.pack("!HH", client[1], server[1]) + src + dst
    sockid += struct.pack("=III", 0, 0xFFFFFFFF, 0xFFFFFFFF)  # any interface, INET_DIAG_NOCOOKIE
    req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    return struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + req


def parse_diag_reply(data: bytes) -> int | None:
    """The socket's owner in a sock_diag reply (pure); None when the kernel found no such
    socket, or one without a file; OSError for any other error."""
    found = parse_diag_owner(data)
    return found[0] if found is not None else None


def parse_diag_owner(data: bytes) -> tuple[int, int] | None:
    """(owner, inode) of the socket in a sock_diag reply (pure); None as ``parse_diag_reply``."""
    found = parse_diag_socket(data)
    return (found.uid, found.inode) if found is not None else None


@dataclass(frozen=True)
class Found:
    """The client end of a connection as the kernel tells it: its owner, its inode, and the
    id of the cgroup v2 its socket was made in (None where the kernel did not say: the table
    was read, or no cgroup data is kept for sockets). The cgroup is the maker's when it
    made the socket, kept with the socket whatever process holds it later."""

    uid: int
    inode: int
    cgroup: int | None = None


def parse_diag_socket(data: bytes) -> Found | None:
    """The socket in a sock_diag reply (pure); None as ``parse_diag_reply``."""
    if len(data) < 20:
        raise OSError("short sock_diag reply")
    _, kind = struct.unpack_from("=IH", data)
    if kind == _NLMSG_ERROR:
        err = -struct.unpack_from("=i", data, 16)[0]
        if err == errno.ENOENT:
            return None
        raise OSError(err, os.strerror(err))
    if kind != _SOCK_DIAG_BY_FAMILY or len(data) < 16 + _DIAG_MSG.size:
        raise OSError(f"unexpected sock_diag reply (type {kind})")
    fields = _DIAG_MSG.unpack_from(data, 16)
    uid, inode = int(fields[8]), int(fields[9])
    # a socket its process has closed (or one in TIME_WAIT) has no inode, and on some kernels
    # uid 0: it names nobody
    if inode in (0, 0xFFFFFFFF):
        return None
    return Found(uid, inode, _diag_cgroup(data))


def _diag_cgroup(data: bytes) -> int | None:
    """The INET_DIAG_CGROUP_ID attribute of a sock_diag reply (pure), None without one."""
    end = min(len(data), struct.unpack_from("=I", data)[0])
    at = 16 + _DIAG_MSG.size
    while at + 4 <= end:
        length, kind = struct.unpack_from("=HH", data, at)
        if length < 4:
            break
        if kind == _INET_DIAG_CGROUP_ID and length >= 12 and at + 12 <= end:
            return int(struct.unpack_from("=Q", data, at + 4)[0])
        at += (length + 3) & ~3
    return None


def diag_socket_owner(client: tuple[str, int], server: tuple[str, int]) -> tuple[int, int] | None:
    """(owner, inode) of the client's socket by one sock_diag exact lookup (OSError where it
    is unavailable)."""
    found = diag_socket(client, server)
    return (found.uid, found.inode) if found is not None else None


def diag_socket(client: tuple[str, int], server: tuple[str, int]) -> Found | None:
    """The client's socket by one sock_diag exact lookup (OSError where it is unavailable)."""
    with socket.socket(
        socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG
    ) as nl:
        nl.settimeout(1.0)
        nl.sendto(diag_request(client, server), (0, 0))
        return parse_diag_socket(nl.recv(8192))


def diag_socket_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """:func:`socket_uid` by one sock_diag exact lookup (OSError where it is unavailable)."""
    found = diag_socket_owner(client, server)
    return found[0] if found is not None else None


@functools.cache
def diag_answers() -> bool:
    """Whether sock_diag finds TCP sockets here (its TCP module may be missing: it answers
    ENOENT then, as for a socket that is gone): tried once on a connection of our own."""
    try:
        with (
            socket.create_server(("127.0.0.1", 0)) as listener,
            socket.create_connection(listener.getsockname(), timeout=1) as conn,
        ):
            accepted, _ = listener.accept()
            with accepted:
                uid = diag_socket_uid(conn.getsockname(), listener.getsockname())
        return uid == os.geteuid()
    except OSError:
        return False


def socket_found(client: tuple[str, int], server: tuple[str, int]) -> Found | None:
    """The client's end of a connection from ``client`` to ``server``: by sock_diag where it
    answers (with the cgroup it was made in), else from /proc/net/tcp{,6} (without)."""
    if diag_answers():
        tries = [(client, server)]
        if ":" not in client[0]:  # a v4 peer of a v6 socket (a server bound to "::")
            tries.append(((f"::ffff:{client[0]}", client[1]), (f"::ffff:{server[0]}", server[1])))
        for c, s in tries:
            try:
                found = diag_socket(c, s)
            except (OSError, ValueError):
                break
            if found is not None:
                return found
    for text, local, remote in _tcp_lines(client, server):
        for line in text.splitlines()[1:]:
            fields = line.split()
            matches = len(fields) >= 10 and fields[1] == local and fields[2] == remote
            if matches and fields[9] != "0":
                return Found(int(fields[7]), int(fields[9]))
    return None


def socket_inode(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The inode of the client's end of a connection from ``client`` to ``server``: by
    sock_diag where it answers (one exact lookup, whatever the number of sockets on the host),
    else from /proc/net/tcp{,6}."""
    if diag_answers():
        try:
            found = diag_socket_owner(client, server)
            if found is not None:
                return found[1]
        except (OSError, ValueError):
            pass
    # (not found by sock_diag: a v4 peer of a v6 socket is spelled both ways in the table)
    return table_socket_inode(client, server)


def table_socket_inode(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """:func:`socket_inode` from /proc/net/tcp{,6} (reads the whole table)."""
    for text, local, remote in _tcp_lines(client, server):
        inode = parse_tcp_table(text, local, remote)
        if inode is not None:
            return inode
    return None


class Untraceable(Exception):
    """The holder of a socket could not be found within the time allowed."""


def holders(inode: int, pids: Iterable[int], deadline: float | None = None) -> list[int]:
    """Those of ``pids`` with a descriptor on socket ``inode``; past ``deadline`` (a
    ``time.monotonic()`` value) the search stops with ``Untraceable``: a process holding a
    great many descriptors cannot make the answer slow, only a refusal."""
    want = f"socket:[{inode}]"
    out = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for n, fd in enumerate(fds):
            if deadline is not None and n % 256 == 0 and time.monotonic() > deadline:
                raise Untraceable(f"socket {inode}: search past its deadline")
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == want:
                    out.append(pid)
                    break
            except OSError:
                continue
    return out


def parse_status_int(text: str, key: str) -> int | None:
    """An integer field of ``/proc/<pid>/status`` (pure): ``Seccomp_filters``, ``Seccomp``."""
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name == key:
            try:
                return int(value.split()[0])
            except (IndexError, ValueError):
                return None
    return None


@dataclass(frozen=True)
class Marks:
    """What the kernel says of one process's fence: its PID namespace and how many seccomp
    filters it runs under (every one inherited by its children, none removable). ``None`` where
    it could not be read (the process is gone, or another user's). The network namespace is
    no reason to skip a process: a socket made in the server's can be passed to one outside."""

    pid_ns: str | None
    filters: int | None

    @classmethod
    def of(cls, pid: int | str) -> Marks:
        try:
            pid_ns: str | None = os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            pid_ns = None
        try:
            with open(f"/proc/{pid}/status") as f:
                text = f.read()
        except OSError:
            return cls(pid_ns, None)
        filters = parse_status_int(text, "Seccomp_filters")
        if filters is None:  # before Linux 5.9: only the mode (2: filtered)
            mode = parse_status_int(text, "Seccomp")
            filters = None if mode is None else (1 if mode == 2 else 0)
        return cls(pid_ns, filters)

    def fenced_against(self, own: Marks) -> bool:
        """True when this process is fenced where ``own`` (the server's) is not: another PID
        namespace, or more seccomp filters; a mark that cannot be read counts as a fence."""
        if self.pid_ns is None or self.filters is None or own.filters is None:
            return True
        return self.pid_ns != own.pid_ns or self.filters > own.filters


#: sandboxed cgroups remembered past this many only while their directory is there
CGROUPS_KEPT = 65536


class CgroupMarks:
    """The cgroup v2 of every fenced spawn, by id: a socket made in one of them (by whatever
    process of that job, its leader gone or not) is that job's, whoever holds it now. The
    kernel keeps the mark: a socket's cgroup is its maker's when it was made; a job cannot
    leave its cgroup (its sandbox cannot write the cgroup tree) nor make one inside it
    (``cgroup.max.descendants`` is set to 0 here, before it starts).

    ``complete`` is False once a fenced spawn has no cgroup v2 directory of its own (cgroups
    off, a v1-only host, a setup that failed): then the socket's cgroup proves nothing and
    the caller searches the processes instead."""

    def __init__(self) -> None:
        self.complete = True
        self._units: dict[int, tuple[str, str]] = {}  # cgroup id -> (unit, directory)
        self._lock = threading.Lock()

    def add(self, unit: str, directory: str | None) -> None:
        """Mark ``directory`` (a cgroup v2 directory, or None: there is none) as ``unit``'s,
        before anything runs in it."""
        if directory is None:
            self.complete = False
            return
        try:
            with open(os.path.join(directory, "cgroup.max.descendants"), "w") as f:
                f.write("0")
            ident = os.stat(directory).st_ino  # (a cgroup v2 directory's inode is its id)
        except OSError:
            self.complete = False
            return
        with self._lock:
            self._units[ident] = (unit, directory)
            if len(self._units) > CGROUPS_KEPT:
                self._units = {k: v for k, v in self._units.items() if os.path.isdir(v[1])}

    def unit(self, cgroup: int) -> str | None:
        """The unit whose cgroup has the id ``cgroup``, or None (not a fenced spawn's)."""
        with self._lock:
            found = self._units.get(cgroup)
        return found[0] if found is not None else None
