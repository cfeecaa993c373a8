"""Which local process or user holds the other end of a loopback TCP connection (Linux procfs).

Used to tell a request that comes from inside a sandboxed job: the connection's socket is
found in ``/proc/net/tcp{,6}`` by its two addresses, and its inode among the descriptors of
the processes that may hold it. The same line names the user who made the socket (its
``uid`` column): the HTTP front end lets only its own user in without a token. That owner is
asked of the kernel's socket-diagnostics netlink (sock_diag, an exact lookup by the two
addresses: microseconds) where it answers, and read from the table otherwise (the whole table
each time: milliseconds per thousand sockets on the host). Pure parsing plus a few reads;
nothing is cached but whether sock_diag answers."""

from __future__ import annotations

import errno
import functools
import ipaddress
import os
import socket
import struct
import sys
from collections.abc import Iterable, Iterator


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
    if _diag_answers():
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
    return uid if inode not in (0, 0xFFFFFFFF) else None


def diag_socket_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """:func:`socket_uid` by one sock_diag exact lookup (OSError where it is unavailable)."""
    with socket.socket(
        socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG
    ) as nl:
        nl.settimeout(1.0)
        nl.sendto(diag_request(client, server), (0, 0))
        return parse_diag_reply(nl.recv(8192))


@functools.cache
def _diag_answers() -> bool:
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


def socket_inode(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The inode of the client's end of a connection from ``client`` to ``server``."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        hosts = [(client[0], server[0])]
        if table.endswith("6") and ":" not in client[0]:
            hosts = [(f"::ffff:{client[0]}", f"::ffff:{server[0]}")]  # v4 on a v6 socket
        for c, s in hosts:
            local, remote = _hex_addr(c, client[1]), _hex_addr(s, server[1])
            if local is None or remote is None:
                continue
            try:
                with open(table) as f:
                    text = f.read()
            except OSError:
                continue
            inode = parse_tcp_table(text, local, remote)
            if inode is not None:
                return inode
    return None


def holders(inode: int, pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` with a descriptor on socket ``inode``."""
    want = f"socket:[{inode}]"
    out = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == want:
                    out.append(pid)
                    break
            except OSError:
                continue
    return out
