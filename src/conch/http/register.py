"""Gateway registration (seed 3's capability network) for ``conch serve --http --register URL``.

* ``URL`` is a local gateway's base URL (``http://127.0.0.1:36908``): plain http, a loopback host,
  no credentials, no path, query or fragment. Anything else is a startup error naming
  ``register``.
* Once the service listens, ``POST <URL>/services`` carries the manifest plus ``id``, ``port``,
  ``kind``, ``reachability`` and ``health`` (seed 3's registration object). The POST repeats
  every ``RETRY_INTERVAL_S`` seconds: while the gateway is down that is the retry, afterwards it
  re-announces the service to a gateway that restarted. ``/health`` reports ``registered`` and
  the last ``registration_error``.
* On stop, if an attempt ever succeeded: ``GET <URL>/services`` and, only when an entry still
  has this id and this port (a replacement may own the id now), ``DELETE <URL>/services/<id>``.
  Gateway errors on stop are logged and ignored: the gateway's own health checks drop stale
  entries.

Standard library only: urllib in a worker thread, a short timeout per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from conch.config import Config, local_url
from conch.errors import ConfigError
from conch.http.manifest import SERVICE_ID, manifest
from conch.http.security import is_loopback

log = logging.getLogger("conch.http")

RETRY_INTERVAL_S = 30.0
REQUEST_TIMEOUT_S = 2.0
LISTEN_WAIT_S = 10.0
_EXAMPLE = "e.g. http://127.0.0.1:36908"


def gateway_url(value: str) -> str:
    """The gateway's origin (``http://host:port``) or a ``ConfigError`` naming ``register``."""
    text = value.strip()
    try:
        parts = urllib.parse.urlsplit(text)
        host = parts.hostname
        port = parts.port
    except ValueError as e:
        raise ConfigError(f"register: not a valid URL {value!r} ({e}); {_EXAMPLE}") from None
    if parts.scheme.lower() != "http":
        raise ConfigError(
            f"register: the gateway must be a local plain-http URL ({_EXAMPLE}), got {value!r}"
        )
    if parts.username is not None or parts.password is not None:
        raise ConfigError("register: the gateway URL must not carry credentials")
    if not host or not is_loopback(host):
        raise ConfigError(
            f"register: the gateway must run on this machine (127.0.0.1, ::1 or localhost), "
            f"got host {host!r}"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(
            f"register: give the gateway's base URL without a path or query ({_EXAMPLE}); "
            f"Conch posts to <URL>/services"
        )
    netloc = f"[{host}]" if ":" in host else host
    return f"http://{netloc}" + (f":{port}" if port is not None else "")


def service_base_url(cfg: Config) -> str:
    """How the gateway reaches this service: the bind address, or loopback for a wildcard."""
    return local_url(cfg.host, cfg.port)


def _request(url: str, method: str, body: Any, timeout: float) -> Any:
    """One gateway request; the decoded JSON answer (None when empty) or an exception."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        detail = e.read().decode("utf-8", "replace").strip()[:200]
        raise OSError(
            f"gateway answered HTTP {e.code}" + (f": {detail}" if detail else "")
        ) from None
    except urllib.error.URLError as e:
        raise OSError(f"gateway unreachable at {url} ({e.reason})") from None
    except http.client.HTTPException as e:
        raise OSError(f"gateway answered with a broken response ({e!r})") from None
    return json.loads(text) if text.strip() else None


class Registrar:
    """Keeps this service registered with the gateway while the HTTP service runs."""

    def __init__(
        self,
        cfg: Config,
        *,
        interval_s: float = RETRY_INTERVAL_S,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.gateway = gateway_url(cfg.register)
        if cfg.port == 0:
            raise ConfigError("register: needs a fixed --port (the gateway is told the port)")
        self.config = cfg
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.service_id = SERVICE_ID
        self.port = cfg.port
        self.base_url = service_base_url(cfg)
        self.registered = False
        self.error: str | None = None
        self._announced = False  # a POST succeeded at some point: the gateway may hold our entry
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def registration(self) -> dict[str, Any]:
        """Seed 3's registration object: the manifest plus what the gateway routes by."""
        return {
            **manifest(self.config, self.base_url),
            "id": self.service_id,
            "kind": "mcp",
            "port": self.port,
            "reachability": "localhost",
            "health": "/health",
        }

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="conch-register")

    async def stop(self) -> None:
        """Stop announcing; unregister if the gateway entry is still this service's."""
        self._stopping.set()
        task, self._task = self._task, None
        if task is not None:
            # an attempt in flight finishes (bounded by the request timeout), so the state
            # below is the gateway's
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._announced:
            await asyncio.to_thread(self._unregister)
            self.registered = self._announced = False

    async def _run(self) -> None:
        await self._wait_listening()
        while not self._stopping.is_set():
            await asyncio.to_thread(self._register_once)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval_s)

    async def _wait_listening(self) -> None:
        """The lifespan starts before the socket is bound: announce once it accepts."""
        host = self.base_url.split("//", 1)[1].rsplit(":", 1)[0].strip("[]")
        deadline = time.monotonic() + LISTEN_WAIT_S
        while not self._stopping.is_set() and time.monotonic() < deadline:
            try:
                _, writer = await asyncio.open_connection(host, self.port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return

    # -- gateway calls (worker thread) --------------------------------------------------------

    def _register_once(self) -> None:
        try:
            _request(f"{self.gateway}/services", "POST", self.registration(), self.timeout_s)
        except (OSError, ValueError) as e:
            message = str(e) or type(e).__name__
            if message != self.error:
                print(
                    f"conch: registration with {self.gateway} pending: {message}", file=sys.stderr
                )
            self.registered, self.error = False, message
            return
        if not self.registered:
            print(f"conch: registered {self.service_id!r} with {self.gateway}", file=sys.stderr)
        self.registered, self.error, self._announced = True, None, True

    def _unregister(self) -> None:
        try:
            listing = _request(f"{self.gateway}/services", "GET", None, self.timeout_s)
            entries = listing.get("services", []) if isinstance(listing, dict) else listing
            if not isinstance(entries, list):
                entries = []
            mine = any(
                isinstance(e, dict)
                and e.get("id") == self.service_id
                and e.get("port") == self.port
                for e in entries
            )
            if not mine:
                log.warning(
                    "not unregistering: the gateway entry %r is not this service's", SERVICE_ID
                )
                return
            quoted = urllib.parse.quote(self.service_id, safe="")
            _request(f"{self.gateway}/services/{quoted}", "DELETE", None, self.timeout_s)
        except (OSError, ValueError) as e:
            log.warning("unregistering from %s failed: %s", self.gateway, e)
