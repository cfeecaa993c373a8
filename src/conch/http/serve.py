"""``conch serve --http``: run the HTTP service with uvicorn until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType

from conch.config import Config
from conch.errors import ConfigError
from conch.http.security import is_loopback

log = logging.getLogger("conch.http")


def check_bind(cfg: Config) -> None:
    """Refuse a non-loopback bind without a token (SPEC §9)."""
    if not is_loopback(cfg.host) and not cfg.auth_token:
        raise ConfigError(
            f"auth_token: binding to the non-loopback host {cfg.host!r} requires --auth-token "
            "(or CONCH_AUTH_TOKEN); Conch runs commands with this user's rights"
        )


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """Stops cleanly on SIGTERM/SIGINT and exits 0 (uvicorn re-raises the signal after its
        graceful shutdown, so the process would die by it); a second SIGINT forces the exit."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            else:
                self.should_exit = True

    return Server


def run_http(cfg: Config) -> int:
    check_bind(cfg)
    import uvicorn

    from conch.http.app import build_app

    app = build_app(cfg)
    server_cls = _server_class()
    host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
    print(
        f"conch: serving http://{host}:{cfg.port} (MCP /mcp, SSE /sse, POST /invoke, "
        f"dashboard /){' with bearer-token auth' if cfg.auth_token else ''}",
        file=sys.stderr,
    )
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
    )
    server = server_cls(config)
    server.run()
    return 0 if server.started else 1
