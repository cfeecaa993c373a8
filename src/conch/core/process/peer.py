"""Which local process holds the other end of a loopback TCP connection (Linux procfs).

Used to tell a request that comes from inside a sandboxed job: the connection's socket is
found in ``/proc/net/tcp{,6}`` by its two addresses, and its inode among the descriptors of
the processes that may hold it. Which processes may: those that carry a fence the kernel keeps
for them (``fence_marked``: a PID namespace other than the server's, as bwrap makes, or more
seccomp filters than the server has, as every sandboxed job gets), so the answer holds for as
long as any process of a job lives, its leader gone or not. Pure parsing plus a few reads;
nothing is cached here, and a search that runs past its deadline raises ``Untraceable`` (the
caller refuses: it fails closed)."""

from __future__ import annotations

import ipaddress
import os
import sys
import time
from collections.abc import Iterable
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
