"""The HTTP service: one Starlette app behind the security guard.

/mcp             Streamable HTTP MCP (both protocol eras)
/sse, /messages/ legacy SSE MCP
POST /invoke     {"method", "params"} -> the tool's structured result (HTTP 200, errors too)
GET /health      liveness and job counts
GET /manifest    seed 3's service manifest
GET /            the dashboard (+ /api/jobs, /api/jobs/{job_id}/log|screen|cast|replay|changes,
                 POST /login, /logout, and POST /api/jobs/{job_id}/signal|input|handback|
                 resize|undo, /api/shells/{shell_id}/exec with --dashboard-control)
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import Receive, Scope, Send

from conch._version import __version__
from conch.config import Config
from conch.http import IS_ERROR_HEADER, dashboard, signin
from conch.http.manifest import SERVICE_ID, manifest
from conch.http.peers import Connections
from conch.http.register import Registrar
from conch.http.secret_page import LoopbackSecretPages
from conch.http.security import MAX_BODY_BYTES, Guard
from conch.mcp.server import ConchMCP
from conch.runtime import Runtime
from conch.tools.context import ToolContext, caller_context_trusted
from conch.tools.host import Host

log = logging.getLogger("conch.http")
# The guard checks Host/Origin on every route; the SDK's own check would only repeat it
# (and rejects a port-less `Host: localhost`).
_SDK_SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "retryable": False}}


MAX_JSON_DEPTH = 64  # no tool's arguments nest this deep


def _depth(value: Any) -> int:
    """How deep arrays and objects nest in ``value`` (iteratively: any depth is measured)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, d)
            if d > MAX_JSON_DEPTH:
                return d
            stack.extend((x, d + 1) for x in v)
    return deepest


class ConchHTTP:
    """Builds the app; the runtime starts and stops with the app's lifespan."""

    def __init__(self, cfg: Config, *, registrar: Registrar | None = None) -> None:
        self.config = cfg
        # --register: checked here, so a bad gateway URL fails before the socket is bound
        self.registrar = registrar or (Registrar(cfg) if cfg.register else None)
        self.runtime: Host = Runtime(cfg, owns_process=True)
        self.signin_throttle = signin.Throttle()  # 5 wrong tokens a minute per peer
        self.signins = signin.Sessions()  # dashboard sign-ins of this run
        # the open connections and their peers, filled by the listener (conch.http.listener)
        self.connections = Connections()
        self.guard: Guard | None = None
        pages = LoopbackSecretPages() if cfg.secret_prompt == "elicit" else None
        self.mcp = ConchMCP(self.runtime, transport="http", secret_pages=pages)
        self.sessions = StreamableHTTPSessionManager(
            app=self.mcp.server,
            security_settings=_SDK_SECURITY,
            max_request_body_size=MAX_BODY_BYTES,
        )
        self.sse = SseServerTransport(
            "/messages/", security_settings=_SDK_SECURITY, max_request_body_size=MAX_BODY_BYTES
        )
        self.closing = False
        self.started_at = time.time()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with self.runtime:
            self.mcp.start()
            if self.registrar is not None:
                self.registrar.start()
            try:
                async with self.sessions.run():
                    yield
            finally:
                self.closing = True
                if self.guard is not None:
                    self.guard.close()
                await self.mcp.aclose()
                if self.registrar is not None:
                    await self.registrar.stop()

    def app(self) -> Guard:
        starlette = Starlette(
            routes=[
                Route("/", dashboard.page, methods=["GET"]),
                Route("/api/jobs", dashboard.api_jobs, methods=["GET"]),
                Route("/api/jobs/{job_id}/log", dashboard.api_log, methods=["GET"]),
                Route("/api/jobs/{job_id}/signal", dashboard.api_signal, methods=["POST"]),
                Route("/api/jobs/{job_id}/screen", dashboard.api_screen, methods=["GET"]),
                Route("/api/jobs/{job_id}/replay", dashboard.api_replay, methods=["GET"]),
                Route("/api/jobs/{job_id}/cast", dashboard.api_cast, methods=["GET"]),
                Route("/api/jobs/{job_id}/input", dashboard.api_input, methods=["POST"]),
                Route("/api/jobs/{job_id}/handback", dashboard.api_handback, methods=["POST"]),
                Route("/api/jobs/{job_id}/resize", dashboard.api_resize, methods=["POST"]),
                Route("/api/jobs/{job_id}/changes", dashboard.api_changes, methods=["GET"]),
                Route("/api/jobs/{job_id}/undo", dashboard.api_undo, methods=["POST"]),
                Route("/api/shells/{shell_id}/exec", dashboard.api_shell_exec, methods=["POST"]),
                Route("/login", self.login, methods=["GET", "POST"]),
                Route("/logout", self.logout, methods=["POST"]),
                Route("/health", self.health, methods=["GET"]),
                Route("/manifest", self.manifest, methods=["GET"]),
                Route("/invoke", self.invoke, methods=["POST"]),
                Route("/mcp", StreamableHTTPASGIApp(self.sessions)),
                Route("/sse", self.handle_sse, methods=["GET"]),
                Mount("/messages/", app=self.sse.handle_post_message),
            ],
            lifespan=self.lifespan,
        )
        starlette.state.runtime = self.runtime
        starlette.state.config = self.config
        starlette.state.sessions = self.signins
        self.guard = Guard(
            starlette,
            bind_host=self.config.host,
            token=self.config.auth_token,
            throttle=self.signin_throttle,
            sessions=self.signins,
            sandboxed_caller=self.runtime.view.sandboxed_caller,
            connections=self.connections,
        )
        return self.guard

    # -- routes ----------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        if request.method == "GET" and self.config.auth_token:
            return signin.signin_page(status=200)
        return await signin.login(
            request, self.config.auth_token, self.signin_throttle, self.signins
        )

    async def logout(self, request: Request) -> Response:
        return await signin.logout(request, self.signins)

    async def health(self, request: Request) -> Response:
        rt = self.runtime
        body = {
            "status": "closing" if self.closing else "ok",
            "service": SERVICE_ID,
            "version": __version__,
            "cwd": self.config.resolved_default_cwd,
            "shell": rt.view.bash,
            "active_jobs": rt.view.running,
            "retained_jobs": rt.view.retained_count,
            "shells": len(rt.view.shell_summaries()),
            "uptime_s": int(time.time() - self.started_at),
            "profiles": list(self.config.profiles),
            "registered": self.registrar.registered if self.registrar else False,
            "registration_error": self.registrar.error if self.registrar else None,
        }
        return JSONResponse(body, status_code=503 if self.closing else 200)

    async def manifest(self, request: Request) -> Response:
        return JSONResponse(manifest(self.config, str(request.base_url)))

    async def invoke(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return JSONResponse(_error("invalid_argument", "the body is not valid JSON"), 400)
        except RecursionError:  # json's own limit: deeper still
            body = None
            depth = MAX_JSON_DEPTH + 1
        else:
            depth = _depth(body)
        if depth > MAX_JSON_DEPTH:
            message = f"the body nests deeper than {MAX_JSON_DEPTH} levels"
            return JSONResponse(_error("invalid_argument", message), 400)
        if not isinstance(body, dict):
            return JSONResponse(_error("invalid_argument", "the body must be a JSON object"), 400)
        method = body.get("method", body.get("capability"))
        params = body.get("params", {})
        if not isinstance(method, str) or not method:
            outcome_result, is_error = (
                _error("invalid_argument", "`method` must be a tool name"),
                True,
            )
        elif not isinstance(params, dict):
            outcome_result, is_error = (
                _error("invalid_argument", "`params` must be an object"),
                True,
            )
        else:
            # request metadata (shell_env, assistant.session_id) rides in `_meta`, beside the
            # params or inside them, as MCP clients send it
            meta = params.pop("_meta", None) if isinstance(params.get("_meta"), dict) else None
            if meta is None and isinstance(body.get("_meta"), dict):
                meta = body["_meta"]
            ctx = ToolContext(
                meta=meta, trusted=caller_context_trusted(self.config, request.headers)
            )
            outcome = await self.runtime.call_tool_full(method, params, ctx)
            outcome_result, is_error = outcome.result, outcome.is_error
        return JSONResponse(
            outcome_result, headers={IS_ERROR_HEADER: "true" if is_error else "false"}
        )

    async def handle_sse(self, request: Request) -> Response:
        scope: Scope = request.scope
        receive: Receive = request.receive
        send: Send = request._send
        async with self.sse.connect_sse(scope, receive, send) as (read, write):
            await self.mcp.server.run(read, write, self.mcp.initialization_options())
        return Response()


def build_app(cfg: Config) -> Guard:
    return ConchHTTP(cfg).app()
