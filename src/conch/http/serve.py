"""``conch serve --http``: run the HTTP service with uvicorn until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import sys

from conch.config import Config
from conch.errors import ConfigError
from conch.http.security import is_loopback

log = logging.getLogger("conch.http")


def check_bind(cfg: Config) -> None:
    """Refuse a non-loopback bind without a token (docs/spec.md §9)."""
    if not is_loopback(cfg.host) and not cfg.auth_token:
        raise ConfigError(
            f"auth_token: binding to the non-loopback host {cfg.host!r} requires --auth-token "
            "(or CONCH_AUTH_TOKEN); Conch runs commands with this user's rights"
        )


def run_http(cfg: Config) -> int:
    check_bind(cfg)
    import uvicorn

    from conch.http.app import ConchHTTP
    from conch.http.listener import Limits, make_server, raise_descriptor_limit
    from conch.http.peers import who_may_connect

    http = ConchHTTP(cfg)
    app = http.app()
    limits = Limits.for_descriptors(raise_descriptor_limit())
    host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
    print(
        f"conch: serving http://{host}:{cfg.port} (MCP /mcp, SSE /sse, POST /invoke, "
        f"dashboard /){' with bearer-token auth' if cfg.auth_token else ''}",
        file=sys.stderr,
    )
    print(f"conch: {who_may_connect(cfg.host, bool(cfg.auth_token))}", file=sys.stderr)
    config = uvicorn.Config(
        app,
        host=cfg.host,
        port=cfg.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
        server_header=False,
        # the client is the socket's peer: uvicorn would otherwise take X-Forwarded-For from
        # a loopback peer (any local process), which resets the sign-in throttle
        proxy_headers=False,
        http="h11",  # the listener's HeadDeadline is uvicorn's h11 protocol
        ws="none",  # no route is a websocket
    )
    server = make_server(config, http.connections, limits)
    server.run()
    return 0 if server.started else 1
