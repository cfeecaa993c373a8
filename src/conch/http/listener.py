"""The HTTP service's own accept loop: uvicorn serves each connection, this decides which it
gets and for how long it may sit idle.

- Each accepted connection's peer (its local user on loopback, else its address) is looked up
  once, off the event loop, and counted: past ``Limits.per_peer`` open connections of one peer,
  or ``Limits.total`` in all (set well below the descriptor limit), a connection is answered
  503 and closed at once.
- A connection must send a complete request head within ``HEAD_TIMEOUT_S`` of being accepted,
  and again after each response, or it is closed (uvicorn's keep-alive timer starts only after
  a response, and any byte resets it).
- Out of descriptors (EMFILE, ENFILE), a spare descriptor kept for the purpose lets the loop
  accept a waiting connection and refuse it; if even that fails, accepting pauses a moment.
  The loop never spins on the error, and it is logged at most once a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.protocols.http.h11_impl import H11Protocol

from conch.http.peers import (
    Connections,
    LookupFailed,
    Lookups,
    Peer,
    address,
    identify,
    needs_lookup,
    unidentified,
)

log = logging.getLogger("conch.http")
HEAD_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 1024  # open at once, whatever the descriptor limit
ACCEPT_BATCH = 64  # connections taken per wake-up of the listening socket
ACCEPT_PAUSE_S = 0.5  # how long accepting rests when not even the spare descriptor helps
WARN_EVERY_S = 60.0
_SHORTAGE = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


@dataclass(frozen=True)
class Limits:
    total: int
    per_peer: int

    @classmethod
    def for_descriptors(cls, soft_limit: int) -> Limits:
        """Connections may take half the descriptors at most (the jobs' pipes, logs and
        terminals need the rest), one peer a quarter of those."""
        total = max(8, min(MAX_CONNECTIONS, soft_limit // 2))
        return cls(total=total, per_peer=max(4, total // 4))


def raise_descriptor_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (a systemd user service
    starts at 1024); the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open") as f:
                target = int(f.read())
        except (OSError, ValueError):
            target = 1 << 20
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def _refusal(text: str) -> bytes:
    body = text.encode()
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Connection: close\r\nRetry-After: 1\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


BUSY = _refusal("Service unavailable: too many open connections")
BUSY_PEER = _refusal("Service unavailable: too many open connections from this user or address")


def _refuse(conn: socket.socket, answer: bytes) -> None:
    with contextlib.suppress(OSError):
        conn.send(answer)
    conn.close()


class HeadDeadline(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline for each request head: armed when the
    connection is made and when a response completes, cleared once a request's head has
    arrived. ``release`` runs once when the connection is gone."""

    head_timeout_s = HEAD_TIMEOUT_S

    def __init__(self, *args: Any, release: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._release = release
        self._deadline: asyncio.TimerHandle | None = None

    def _in_request(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.head_timeout_s, self._overdue)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _overdue(self) -> None:
        self._deadline = None
        if not self._in_request() and not self.transport.is_closing():
            if self.conn.our_state is not h11.ERROR:
                with contextlib.suppress(h11.LocalProtocolError):
                    self.conn.send(h11.ConnectionClosed())
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._deadline is not None and self._in_request():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self._in_request():
            self._arm()  # the next head (or the rest of a body nobody reads) is due

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        try:
            super().connection_lost(exc)
        finally:
            self._release()


def bind(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets for ``host:port``, as asyncio's create_server makes them (every
    address the name resolves to; IPv6 sockets IPv6-only)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    socks: list[socket.socket] = []
    seen = set()
    try:
        for family, kind, proto, _, sockaddr in infos:
            if (family, sockaddr) in seen:
                continue
            seen.add((family, sockaddr))
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(sockaddr)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


class Listener:
    """Accepts connections on ``socks`` and hands the admitted ones to
    ``protocol(release)`` (see the module's docstring); quacks as an asyncio Server for
    uvicorn's shutdown (``close``, ``wait_closed``)."""

    def __init__(
        self,
        socks: list[socket.socket],
        protocol: Callable[[Callable[[], None]], asyncio.Protocol],
        connections: Connections,
        limits: Limits,
        lookups: Lookups | None = None,
    ) -> None:
        self.sockets = socks
        self._protocol = protocol
        self.connections = connections
        self.limits = limits
        self._lookups = lookups or Lookups("accept")
        self._open = 0  # accepted and not yet closed, looked up or not
        self._tasks: set[asyncio.Task[None]] = set()
        self._spare: int | None = self._open_spare()
        self._warned = -WARN_EVERY_S
        self._closed = False
        self._loop = asyncio.get_running_loop()

    @staticmethod
    def _open_spare() -> int | None:
        try:
            return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None

    def start(self) -> None:
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._ready, sock)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
            sock.close()
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None
        self._lookups.close()

    async def wait_closed(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _ready(self, sock: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as e:
                if e.errno not in _SHORTAGE:
                    log.warning("accept failed: %s", e)
                    return
                if not self._refuse_with_spare(sock, e):
                    self._pause(sock)
                    return
                continue
            conn.setblocking(False)
            if self._open >= self.limits.total:
                _refuse(conn, BUSY)
                continue
            self._open += 1
            task = self._loop.create_task(self._admit(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _refuse_with_spare(self, sock: socket.socket, error: OSError) -> bool:
        """Out of descriptors: free the spare, accept one waiting connection, answer it 503
        and take the spare back. False when that did not work (accepting should rest)."""
        self._warn(f"out of descriptors ({error.strerror}): refusing new connections")
        if self._spare is None:
            self._spare = self._open_spare()
            return False
        os.close(self._spare)
        self._spare = None
        try:
            conn, _ = sock.accept()
        except (BlockingIOError, InterruptedError):
            self._spare = self._open_spare()
            return False
        except OSError:
            self._spare = self._open_spare()
            return False
        _refuse(conn, BUSY)
        self._spare = self._open_spare()
        return self._spare is not None

    def _pause(self, sock: socket.socket) -> None:
        self._loop.remove_reader(sock.fileno())

        def resume() -> None:
            if not self._closed:
                self._loop.add_reader(sock.fileno(), self._ready, sock)

        self._loop.call_later(ACCEPT_PAUSE_S, resume)

    def _warn(self, text: str) -> None:
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY_S:
            self._warned = now
            log.warning("%s", text)

    async def _admit(self, conn: socket.socket) -> None:
        released = False
        added: tuple[Any, Any] | None = None

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._open -= 1
            if added is not None:
                self.connections.remove(*added)

        try:
            client, server = address(conn.getpeername()), address(conn.getsockname())
            if client is None or server is None:
                raise OSError("no addresses")
            peer = await self._peer(client, server)
            if self.connections.count(peer.key) >= self.limits.per_peer:
                _refuse(conn, BUSY_PEER)
                release()
                return
            self.connections.add(client, server, peer)
            added = (client, server)
            await self._loop.connect_accepted_socket(lambda: self._protocol(release), conn)
        except (OSError, asyncio.CancelledError):
            conn.close()  # gone already, or the server is stopping
            release()
        except Exception:
            conn.close()
            release()
            log.exception("admitting a connection failed")

    async def _peer(self, client: tuple[str, int], server: tuple[str, int]) -> Peer:
        if not needs_lookup(client):
            return identify(client, server)
        try:
            return await self._lookups.run(identify, client, server)
        except LookupFailed:
            return unidentified(client)


def make_server(config: uvicorn.Config, connections: Connections, limits: Limits) -> uvicorn.Server:
    """uvicorn's Server with the listener above in place of asyncio's accept loop, and a clean
    exit on SIGTERM/SIGINT."""

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await self.lifespan.startup()
            if self.lifespan.should_exit:
                sys.exit(STARTUP_FAILURE)
            config = self.config
            try:
                socks = bind(config.host, config.port, config.backlog)
            except OSError as exc:
                logging.getLogger("uvicorn.error").error(exc)
                await self.lifespan.shutdown()
                sys.exit(STARTUP_FAILURE)

            def protocol(release: Callable[[], None]) -> asyncio.Protocol:
                return HeadDeadline(
                    config=config,
                    server_state=self.server_state,
                    app_state=self.lifespan.state,
                    release=release,
                )

            listener = Listener(socks, protocol, connections, limits)
            listener.start()
            self.servers = [listener]  # type: ignore[list-item]
            self.started = True

        def handle_exit(self, sig: int, frame: Any) -> None:
            # uvicorn re-raises the signal after its graceful shutdown, so the process would
            # die by it: stop cleanly and exit 0 instead; a second SIGINT forces the exit
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            else:
                self.should_exit = True

    return Server(config)
