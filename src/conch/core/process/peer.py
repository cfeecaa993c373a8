"""Which local process holds the other end of a loopback TCP connection (Linux procfs).

Used to tell a request that comes from inside a sandboxed job: the connection's socket is
found in ``/proc/net/tcp{,6}`` by its two addresses, and its inode among the descriptors of
the processes that may hold it. Pure parsing plus a few reads; nothing is cached."""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Iterable


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
