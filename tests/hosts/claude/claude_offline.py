"""Where the host under test runs: offline, with every attempt to leave loopback recorded.

Two layers:

- **A network namespace of its own** (where ``unshare(CLONE_NEWNET)`` is allowed: root, or
  CAP_SYS_ADMIN). It has only ``lo``, so nothing can leave the machine whatever the host does,
  proxy settings or not. Every other address is routed to ``lo`` as local (``ip route add local
  0.0.0.0/0 dev lo``), so an attempt to reach the internet lands on a sinkhole here instead of
  failing unseen: the DNS port (UDP 53) records each name looked up and answers REFUSED, and TCP
  80 and 443 record each connection and close it.
- **A recording proxy** on loopback, named by ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``
  (``NO_PROXY`` keeps 127.0.0.1 direct). It answers 403 to every request or ``CONNECT`` and
  records its first line, i.e. the host name the client wanted. This layer alone is what runs
  where no namespace can be made.

Only the calling thread enters the namespace (a network namespace is per thread), so the test
process keeps its own network; sockets made in it and processes started from it belong to it,
hence :meth:`Offline.call`. Whoever uses this asserts :meth:`Offline.attempts` is empty.
"""

from __future__ import annotations

import ctypes
import os
import selectors
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

CLONE_NEWNET = 0x40000000
PROXY_ANSWER = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _enter_own_netns() -> bool:
    """Move the calling thread into a new network namespace with ``lo`` up, and route every
    address to it as local where the stack lets us (then True: the sinkhole can listen).
    Raises OSError where a namespace is not allowed."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True, timeout=10)
    routed = subprocess.run(
        ["ip", "route", "add", "local", "0.0.0.0/0", "dev", "lo"], capture_output=True, timeout=10
    )
    # IPv6 as well where the stack has it; without the route v6 is unreachable anyway
    subprocess.run(["ip", "-6", "route", "add", "local", "::/0", "dev", "lo"], capture_output=True)
    return routed.returncode == 0


def _dns_question(packet: bytes) -> str:
    labels, i = [], 12
    while i < len(packet) and packet[i]:
        n = packet[i]
        labels.append(packet[i + 1 : i + 1 + n].decode(errors="replace"))
        i += 1 + n
    return ".".join(labels)


def _dns_refused(packet: bytes) -> bytes:
    # the query's id and question, flags "response, REFUSED", no answer/authority/extra records
    end = 12
    while end < len(packet) and packet[end]:
        end += 1 + packet[end]
    return packet[:2] + b"\x81\x85" + packet[4:6] + b"\0" * 6 + packet[12 : end + 5]


class Offline:
    """The place to run a host in. ``netns`` says whether the namespace layer is on (and
    ``sinkhole`` whether attempts in it are recorded); ``proxy_env`` are the variables that send
    proxy-aware clients to the recorder."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offline")
        self.netns = False
        self.sinkhole = False
        self.why_no_netns = ""
        if shutil.which("ip") is None:
            self.why_no_netns = "no `ip` command (iproute2)"
        else:
            try:
                self.sinkhole = self._executor.submit(_enter_own_netns).result()
                self.netns = True
            except (OSError, subprocess.SubprocessError) as e:
                self.why_no_netns = str(e)
                # the thread may be half-way in: start over with a fresh one
                self._executor.shutdown()
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="offline")
        self._attempts: list[str] = []
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._sockets: list[socket.socket] = []
        self._stop = threading.Event()
        self.proxy = self.call(lambda: self._listen(socket.SOCK_STREAM, ("127.0.0.1", 0), "proxy"))
        if self.sinkhole:
            for port in (80, 443):
                self.call(lambda p=port: self._listen(socket.SOCK_STREAM, ("0.0.0.0", p), "tcp"))
            self.call(lambda: self._listen(socket.SOCK_DGRAM, ("0.0.0.0", 53), "dns"))
        self._thread = threading.Thread(target=self._serve, daemon=True, name="offline-recorder")
        self._thread.start()

    @property
    def proxy_env(self) -> dict[str, str]:
        url = f"http://127.0.0.1:{self.proxy.getsockname()[1]}"
        names = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
        env = {name: url for name in names} | {name.lower(): url for name in names}
        return env | {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` where the host runs (in the namespace, if there is one)."""
        return self._executor.submit(fn).result()

    def attempts(self) -> list[str]:
        """Every attempt to leave loopback seen so far, one line each."""
        with self._lock:
            return list(self._attempts)

    def describe(self) -> str:
        if self.sinkhole:
            return "own network namespace (only lo, sinkhole for DNS and TCP 80/443) + proxy"
        if self.netns:
            return "own network namespace (only lo) + proxy"
        return f"recording proxy only (no network namespace: {self.why_no_netns})"

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for s in self._sockets:
            s.close()
        self._selector.close()
        self._executor.shutdown()

    # ---- the recorders ------------------------------------------------------------------

    def _listen(self, kind: int, address: tuple[str, int], what: str) -> socket.socket:
        s = socket.socket(socket.AF_INET, kind)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(address)
        if kind == socket.SOCK_STREAM:
            s.listen(16)
        s.setblocking(False)
        self._sockets.append(s)
        self._selector.register(s, selectors.EVENT_READ, what)
        return s

    def _record(self, line: str) -> None:
        with self._lock:
            self._attempts.append(line)

    def _serve(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.1):
                s, what = key.fileobj, key.data
                assert isinstance(s, socket.socket)
                try:
                    if what == "dns":
                        packet, peer = s.recvfrom(4096)
                        self._record(f"dns: lookup of {_dns_question(packet)!r}")
                        s.sendto(_dns_refused(packet), peer)
                    else:
                        conn, _ = s.accept()
                        threading.Thread(target=self._take, args=(conn, what), daemon=True).start()
                except OSError:
                    pass

    def _take(self, conn: socket.socket, what: str) -> None:
        with conn:
            conn.settimeout(2)
            host, port = conn.getsockname()[:2]
            try:
                first = conn.recv(4096)
            except OSError:
                first = b""
            if what == "proxy":
                line = first.split(b"\r\n", 1)[0].decode(errors="replace")
                self._record(f"proxy: {line!r}")
                try:
                    conn.sendall(PROXY_ANSWER)
                except OSError:
                    pass
            else:
                self._record(f"tcp: connection to {host}:{port}, first bytes {first[:40]!r}")
