"""Who is on the other end of an HTTP connection, and the work of finding out.

A loopback peer is a local user: on Linux the connection's line in ``/proc/net/tcp{,6}`` names
the user who made the client's socket. Elsewhere a peer is only its address. What is kept or
counted per peer (the token throttle, the connection cap, a dashboard sign-in) is keyed by
:attr:`Peer.key`: the user on loopback, the address otherwise.

Finding out reads procfs, so it runs on threads of its own (:class:`Lookups`) within a time
budget: the event loop never waits for it, and a lookup that fails or overruns leaves the peer
unidentified, which the guard refuses unless the request presents the token.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from conch.core import is_loopback, socket_uid

T = TypeVar("T")
# procfs tells the user behind a loopback socket on Linux only
TELLS_USERS = sys.platform.startswith("linux")
LOOKUP_BUDGET_S = 2.0  # a peer or sandbox lookup that takes longer is a refusal
PEER_SCOPE_KEY = "conch.peer"  # the request's Peer, set by the guard

Address = tuple[str, int]


@dataclass(frozen=True)
class Peer:
    """The client of one connection: its address, and on loopback (Linux) its local user."""

    host: str
    loopback: bool
    uid: int | None = None

    @property
    def key(self) -> str:
        """What is counted per peer: the user on loopback, else the address."""
        return f"uid:{self.uid}" if self.uid is not None else f"ip:{self.host}"

    @property
    def identified(self) -> bool:
        """False for a loopback peer whose user should be known here and is not."""
        return not (self.loopback and TELLS_USERS and self.uid is None)


def address(addr: object) -> Address | None:
    """``(host, port)`` of a socket address (an IPv6 one has four fields), as uvicorn puts
    ``client`` and ``server`` into a request's scope."""
    if isinstance(addr, (tuple, list)) and len(addr) >= 2 and isinstance(addr[1], int):
        return str(addr[0]), addr[1]
    return None


def needs_lookup(client: Address) -> bool:
    return TELLS_USERS and is_loopback(client[0])


def identify(client: Address, server: Address) -> Peer:
    """The peer of the connection ``client`` -> ``server`` (reads procfs for a loopback
    client on Linux: call it off the event loop)."""
    host = client[0]
    if not needs_lookup(client):
        return Peer(host, is_loopback(host))
    return Peer(host, True, socket_uid(client, server))


def unidentified(client: Address) -> Peer:
    return Peer(client[0], is_loopback(client[0]))


class LookupFailed(Exception):
    """A lookup raised (``error``) or overran its budget; the message says which."""

    def __init__(self, message: str, error: Exception | None = None) -> None:
        super().__init__(message)
        self.error = error


class Lookups:
    """Runs lookups on a few threads of its own, each within ``budget_s`` (time waiting for a
    free thread included): a slow or stuck lookup costs its caller a refusal, never the event
    loop, and never the threads of anything else."""

    def __init__(self, name: str, workers: int = 2, budget_s: float = LOOKUP_BUDGET_S) -> None:
        self.budget_s = budget_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"conch-{name}")

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, fn, *args)
        overran = False

        def overrun() -> None:
            nonlocal overran
            overran = future.cancel()  # the thread finishes on its own; nobody waits for it

        timer = loop.call_later(self.budget_s, overrun)  # (cheaper than wait_for's task)
        try:
            return await future
        except asyncio.CancelledError:
            if overran:
                raise LookupFailed(f"it took longer than {self.budget_s:g} s") from None
            raise
        except Exception as e:  # the lookup's own failure
            raise LookupFailed(f"{type(e).__name__}: {e}", e) from None
        finally:
            timer.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class Connections:
    """The open connections of the service's listener, each with its peer (looked up once,
    when it was accepted): the guard reads a request's peer here, and the per-peer cap counts
    here. A connection's two addresses name it uniquely while it is open."""

    def __init__(self) -> None:
        self._peers: dict[tuple[Address, Address], Peer] = {}
        self._counts: dict[str, int] = {}

    def peer(self, client: Address, server: Address) -> Peer | None:
        return self._peers.get((client, server))

    def count(self, key: str) -> int:
        return self._counts.get(key, 0)

    def __len__(self) -> int:
        return len(self._peers)

    def add(self, client: Address, server: Address, peer: Peer) -> None:
        self._peers[(client, server)] = peer
        self._counts[peer.key] = self._counts.get(peer.key, 0) + 1

    def remove(self, client: Address, server: Address) -> None:
        peer = self._peers.pop((client, server), None)
        if peer is None:
            return
        left = self._counts.get(peer.key, 1) - 1
        if left > 0:
            self._counts[peer.key] = left
        else:
            self._counts.pop(peer.key, None)


def user_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def who_may_connect(host: str, token: bool, uid: int | None = None) -> str:
    """One sentence for the start of a server (and ``service install``): who may use it."""
    me = user_name(os.geteuid() if uid is None else uid)
    if token:
        return (
            f"any client that presents the token (the bearer header, or the dashboard's "
            f"sign-in) may connect; without it none, {me} included"
        )
    if not is_loopback(host):  # refused at start without a token: said for completeness
        return "a token is required off loopback"
    if TELLS_USERS:
        return (
            f"only {me} may connect (over loopback); other local users are refused "
            "(set CONCH_AUTH_TOKEN to let in whoever has the token)"
        )
    return (
        f"warning: every local user may connect, not only {me}: this system does not tell "
        "Conch who is on the other end of a loopback connection; set CONCH_AUTH_TOKEN on a "
        "machine shared with other users"
    )
