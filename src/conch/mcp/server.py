"""The MCP server: the SDK's low-level ``Server`` over the tool catalogue and the resources.

Conch validates arguments and shapes results itself (``conch.tools``), so the low-level server
is all it needs; every transport (stdio, Streamable HTTP, SSE) serves the same instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import sys
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError

from conch._version import __version__
from conch.config import Config
from conch.core import JobView
from conch.errors import ConchError
from conch.mcp.detached import DetachedJobs
from conch.mcp.notify import ResourceNotifier, peer_of
from conch.mcp.secrets import WATCHED_TOOLS, SecretPages, SecretPrompter, url_elicitation_supported
from conch.mcp.seed_wire import SeedWire
from conch.mcp.tasks import ConchTasks, TaskListenHandler, install
from conch.tools import registry, resources
from conch.tools.call import text_block
from conch.tools.context import ToolContext, caller_context_trusted
from conch.tools.host import Host
from conch.tools.hosts import HostFacts, facts_for, is_host_timeout
from conch.tools.profiles import seed_module, server_identity

log = logging.getLogger("conch.mcp")
RESOURCE_NOT_FOUND = -32002
#: a cut that may be the host's timeout teaches the client's horizon from this long on (an
#: interrupt a second into a call says nothing of a timeout)
LEARN_MIN_MS = 2000


def instructions(cfg: Config, rt: Host) -> str:
    """What the server tells the model. It opens with the call sheets of the profiles served
    (``tool{argument,...}``): Codex defers an MCP server's tools behind its ``tool_search``
    and shows the model only the first 250 characters of these instructions, and with the
    sheet in them a model can call a tool at once instead of loading its schema first (one
    turn fewer per task; measured in bench/agent_tasks.py)."""
    shell = rt.view.bash or "/bin/sh"
    fleet = cfg.fleet == "ray"
    sheets = [registry.profile(name).call_sheet for name in dict.fromkeys(cfg.profiles)]
    sheet = " ".join(s for s in sheets if s)
    opener = f"Conch gives you a shell {'on a Ray cluster' if fleet else 'on this machine'}."
    where = (
        "Jobs run on the nodes of a Ray cluster (`list {info: true}` lists them; `node` on "
        "exec/shell_open/search picks one, ids remember theirs). "
        if fleet
        else ""
    )
    text = f"{opener} {sheet} {where}" if sheet else f"{opener} {where}"
    text += f"Shell {shell}, default working directory {cfg.resolved_default_cwd}."
    if "conch" in cfg.profiles:
        text += (
            " Long commands "
            f"continue in the background after yield_ms={cfg.default_yield_ms}: follow them "
            "with `read`, type into them with `write`, stop them with `signal`; `shell_open` "
            "+ `exec {shell_id}` for a persistent shell (closed with `signal {shell_id}`); "
            "`changes {job_id}` shows what a job changed in the workspace, `undo: true` takes "
            "it back. "
            f"Limits: {cfg.max_running} running "
            f"jobs, {cfg.max_shells} shells, deadline {cfg.default_timeout_ms} ms by default, "
            f"{cfg.default_max_output_bytes} bytes of output inline (the rest stays readable), "
            f"{cfg.max_log_bytes} bytes of log per job, finished jobs kept {cfg.retention_s} "
            "s. Resources: conch://jobs (overview), conch://jobs/{job_id}/log."
        )
    return text + _fence_note(cfg)


def _fence_note(cfg: Config) -> str:
    """The containment a model must know about (docs/spec.md §9a), when the server sets any."""
    parts = []
    if cfg.sandbox == "workspace-write":
        parts.append(
            f"jobs may write only under {cfg.resolved_default_cwd} and a temp dir of their "
            "own ($TMPDIR where set, else /tmp; elsewhere: read-only file system or permission "
            "denied)"
        )
    elif cfg.sandbox == "read-only":
        parts.append(
            "the filesystem is read-only to jobs except a temp dir of their own ($TMPDIR "
            "where set, else /tmp)"
        )
    if cfg.network == "off":
        parts.append("jobs have no network")
    if cfg.memory_max:
        parts.append(f"each job may use at most {cfg.memory_max} bytes of memory")
    if cfg.pids_max:
        parts.append(f"each job may run at most {cfg.pids_max} processes")
    return (" Sandbox: " + "; ".join(parts) + ".") if parts else ""


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill_instructions(template: str, cfg: Config, rt: Host) -> str:
    """A seed profile's instructions with ``{dialect}``, ``{platform}``, ``{shell_version}``,
    ``{default_cwd}`` and ``{workspace_root}`` filled in (other braces are left alone)."""
    dialect = cfg.shell or "bash"
    if dialect.startswith("/"):
        dialect = "zsh" if dialect.rsplit("/", 1)[-1].startswith("zsh") else "bash"
    found = rt.view.shells_available()
    line = next((a.get("version_line", "") for a in found if a["name"] == dialect), "")
    values = {
        "dialect": dialect,
        "platform": "macos" if sys.platform == "darwin" else sys.platform,
        "shell_version": line,
        "default_cwd": cfg.resolved_default_cwd,
        "workspace_root": cfg.resolved_default_cwd,
    }
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _client_info(ctx: ServerRequestContext[Any, Any]) -> tuple[str | None, str | None]:
    """The ``clientInfo`` name and version the session's host sent at ``initialize``."""
    params = ctx.session.client_params
    info = getattr(params, "client_info", None) if params is not None else None
    name, version = getattr(info, "name", None), getattr(info, "version", None)
    return (
        name if isinstance(name, str) else None,
        version if isinstance(version, str) else None,
    )


class _Reasons:
    """One session's cancel reasons, by request id."""

    __slots__ = ("reasons", "seen")

    def __init__(self) -> None:
        self.reasons: dict[Any, str | None] = {}
        self.seen: dict[Any, asyncio.Event] = {}

    def event(self, rid: Any) -> asyncio.Event:
        return self.seen.setdefault(rid, asyncio.Event())


class CancelWatch:
    """Middleware: the ``reason`` of each ``notifications/cancelled``, by session and request
    id (every client numbers its requests on its own, so a bare id names a request of every
    session: one client's cancel must never decide another's call). The SDK cancels the
    call's scope first and forwards the notification after, so a call that was cancelled waits
    (briefly) here for its reason."""

    _WAIT_S = 0.5
    _KEEP = 256  # per session (cancels of calls long gone)

    def __init__(self) -> None:
        self._sessions: weakref.WeakKeyDictionary[Any, _Reasons] = weakref.WeakKeyDictionary()

    def _of(self, session: ServerSession) -> _Reasons:
        peer = peer_of(session)  # (the SDK makes a session object per message)
        found = self._sessions.get(peer)
        if found is None:
            found = self._sessions[peer] = _Reasons()
        return found

    async def __call__(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]],
    ) -> Any:
        if ctx.method == "notifications/cancelled" and isinstance(ctx.params, Mapping):
            rid = ctx.params.get("requestId")
            reason = ctx.params.get("reason")
            if isinstance(rid, str | int) and not isinstance(rid, bool):
                own = self._of(ctx.session)
                own.reasons[rid] = reason if isinstance(reason, str) else None
                own.event(rid).set()
                while len(own.reasons) > self._KEEP:
                    old = next(iter(own.reasons))
                    own.reasons.pop(old, None)
                    own.seen.pop(old, None)
        return await call_next(ctx)

    async def reason(self, session: ServerSession, rid: Any) -> str | None:
        """The reason ``session``'s peer gave for cancelling its request ``rid`` (None: none,
        or none came)."""
        if rid is None:
            return None
        own = self._of(session)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(own.event(rid).wait(), self._WAIT_S)
        own.seen.pop(rid, None)
        return own.reasons.pop(rid, None)


def _progress_token(ctx: ServerRequestContext[Any, Any]) -> Any:
    meta = ctx.meta or {}
    token = meta.get("progress_token", meta.get("progressToken"))
    if token is None and isinstance(ctx.params, Mapping):
        raw_meta = ctx.params.get("_meta")
        if isinstance(raw_meta, Mapping):
            token = raw_meta.get("progressToken")
    return token


class ConchMCP:
    """One MCP server bound to one runtime. ``transport`` is ``stdio`` (trusted caller) or
    ``http`` (trusted only with the caller-context header matching the configured token)."""

    def __init__(
        self, rt: Host, *, transport: str = "stdio", secret_pages: SecretPages | None = None
    ) -> None:
        self.rt = rt
        self.config = rt.config
        self.transport = transport
        self.secrets: SecretPrompter | None = None
        if self.config.secret_prompt == "elicit" and secret_pages is not None:
            self.secrets = SecretPrompter(rt, secret_pages)
        self.notifier = ResourceNotifier(rt.view.changed_resources)
        self._unlisten: Callable[[], None] | None = None
        self._tools = rt.registry.tools
        self._by_name = {t.name: t for t in self._tools}
        self._in_flight = 0
        described = [t.describe(self.config) for t in self._tools]
        self._tool_list = types.ListToolsResult(
            tools=[types.Tool.model_validate(d) for d in described]
        )
        # what the SDK checks a 2026-era HTTP call's Mcp-Param headers against; without it the
        # SDK runs (and serializes) the whole tools/list for every tools/call (~1 ms each)
        self._input_schemas = {d["name"]: d.get("inputSchema") for d in described}
        self.tasks = ConchTasks(self)
        self.listen_handler = TaskListenHandler(
            ListenHandler(self.notifier.bus), self.notifier.bus, self.tasks
        )
        # A seed profile served alone speaks as the original (docs/spec.md §7); else Conch's
        # identity.
        self.seed = seed_module(self.config.profiles)
        identity = server_identity(self.config.profiles)
        if identity is not None:
            name, version, template = identity
            ident: dict[str, Any] = {
                "version": version or __version__,
                "instructions": fill_instructions(template, self.config, rt) if template else None,
            }
        else:
            name = "conch"
            ident = {
                "version": __version__,
                "title": "Conch",
                "description": "A shell for AI agents: commands, background jobs, persistent "
                "shells, search.",
                "instructions": instructions(self.config, rt),
            }
        self.server: Server[Any] = Server(
            name,
            **ident,
            get_tool_input_schema=self._input_schemas.get,
            on_list_tools=self.list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            # a seed profile served alone has only its own resources; RESOURCE_TEMPLATES = None
            # in its module: the original has no templates method at all (tfbash: -32601)
            on_list_resource_templates=self._list_templates
            if self.seed is None or getattr(self.seed, "RESOURCE_TEMPLATES", []) is not None
            else None,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_subscriptions_listen=self.listen_handler,
        )
        install(self.server, self.tasks, self._call_tool)
        # what the SDK's models would drop from a seed's own listing and initialize result
        wire = SeedWire(
            self.seed, [t.describe(self.config) for t in self._tools if t.wire.describer]
        )
        if wire.needed:
            self.server.middleware.append(wire)
        self.cancels = CancelWatch()
        self.server.middleware.append(self.cancels)
        self.detached = DetachedJobs()
        # per client (peer_of), the shortest time its host let a call last before a cancel
        # that may have been its own timeout: every later wait of that client ends before it
        self.cut_at: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start delivering resource notifications (call inside the running loop)."""
        if self._unlisten is None:
            self._unlisten = self.rt.view.add_listener(self.notifier.on_runtime_change)
            self.notifier.start()

    async def aclose(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        self.listen_handler.close()
        await self.tasks.aclose()
        if self.secrets is not None:
            await self.secrets.aclose()
        await self.notifier.aclose()

    def initialization_options(self) -> InitializationOptions:
        return self.server.create_initialization_options(
            NotificationOptions(resources_changed=False, tools_changed=False),
            # the originals' SDK (mcp 1.x) always announces an empty ``experimental``
            experimental_capabilities={} if self.seed is not None else None,
        )

    # -- tools ---------------------------------------------------------------------------------

    @property
    def tools(self) -> list[Any]:
        return list(self._tools)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """The answer to ``tools/list`` (built once, at start)."""
        return self._tool_list

    def _trusted(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        if self.transport == "stdio":
            return True
        request = ctx.request
        headers = getattr(request, "headers", None)
        return headers is not None and caller_context_trusted(self.config, headers)

    async def settle_calls(self, limit_s: float) -> None:
        """Give tool calls already received a moment to answer (stdin EOF after a burst of
        requests); bounded, since shutdown kills what is still running anyway."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit_s
        await asyncio.sleep(0.01)  # let handlers of the last requests start
        while self._in_flight and loop.time() < deadline:
            await asyncio.sleep(0.01)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        meta = dict(params.meta) if params.meta else None
        prompter = self.secrets
        if prompter is None or params.name not in WATCHED_TOOLS or params.name not in self._by_name:
            return await self.run_tool(ctx, params.name, params.arguments, meta)
        result: types.CallToolResult | types.InputRequiredResult
        if not url_elicitation_supported(ctx):
            result = await self.run_tool(ctx, params.name, params.arguments, meta)
        else:
            result = await prompter.run(
                ctx,
                params.name,
                params.arguments,
                params.request_state,
                lambda on_started: self.run_tool(
                    ctx, params.name, params.arguments, meta, on_started=on_started
                ),
            )
        if isinstance(result, types.InputRequiredResult):
            return result
        # a prompt no elicitation took to a person: its page goes to the agent to pass on
        return await prompter.offer(result)

    async def run_tool(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        arguments: Mapping[str, Any] | None,
        meta: dict[str, Any] | None,
        *,
        progress: bool = True,
        on_started: Callable[[JobView], None] | None = None,
    ) -> types.CallToolResult:
        """Run one tool call as ``tools/call`` does (also for the work of an MCP task, which
        sends no progress: the request that started it has been answered)."""
        report: Callable[[str], Awaitable[None]] | None = None
        if progress and _progress_token(ctx) is not None:
            step = 0

            async def report(message: str) -> None:
                nonlocal step
                step += 1
                await ctx.session.report_progress(step, None, message)

        facts = self._facts(ctx)
        started = time.monotonic()
        session = ctx.session
        jobs: list[JobView] = []

        def job_started(job: JobView) -> None:
            jobs.append(job)
            if on_started is not None:
                on_started(job)

        async def host_gave_up() -> bool:
            return await self.host_gave_up(ctx, started, jobs[-1] if jobs else None)

        call = ToolContext(
            meta=meta,
            trusted=self._trusted(ctx),
            progress=report,
            on_started=job_started,
            host=facts,
            host_gave_up=host_gave_up,
        )
        self._in_flight += 1
        try:
            outcome = await self.rt.call_tool_full(name, arguments, call)
        finally:
            self._in_flight -= 1
        tool = self._by_name.get(name)
        if tool is None and self.seed is not None and hasattr(self.seed, "UNKNOWN_TOOL_TEXT"):
            unknown = str(self.seed.UNKNOWN_TOOL_TEXT).replace("{name}", repr(name))
            # the original's answer to an unknown tool: plain text, no structured content
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=unknown)],
                is_error=True,
            )
        note = self.detached.take(session) if self._tells_of_detached(name) else None
        if note is not None:  # in both views: some hosts show only one of them
            outcome.result = {**outcome.result, "detached": note}
        text = text_block(self.rt.registry, name, outcome, self.config.text_format)
        if note is not None and self.config.text_format != "json":
            text = f"[{note}]\n{text}"
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            # a seed profile's failure without a result (tfbash: "The tool failed unexpectedly.")
            # or one whose original sends its result as text only (ai-device-bash)
            structured_content=outcome.result
            if (outcome.result or not outcome.is_error) and (tool is None or tool.wire.structured)
            else None,
            is_error=outcome.is_error,
            _meta=outcome.meta,
        )

    async def host_gave_up(
        self, ctx: ServerRequestContext[Any, Any], started: float, job: JobView | None
    ) -> bool:
        """Whether the cancellation of the call ``ctx`` (received at ``started``, monotonic)
        may be the host's own timeout (tools/hosts.py): its job then runs on, detached, and
        the session's next result says so."""
        reason = await self.cancels.reason(ctx.session, ctx.request_id)
        elapsed_ms = (time.monotonic() - started) * 1000
        facts = facts_for(*_client_info(ctx))
        keep = is_host_timeout(reason, elapsed_ms, facts, self.config.host_timeout_ms)
        if keep and job is not None and not job.terminal:
            self.detached.add(ctx.session, job)
        if keep and elapsed_ms >= LEARN_MIN_MS:
            self._learn(ctx, int(elapsed_ms))
        return keep

    def _facts(self, ctx: ServerRequestContext[Any, Any]) -> HostFacts:
        """The calling host's facts, with the cut it was seen to make (``host_gave_up``)."""
        facts = facts_for(*_client_info(ctx))
        try:
            cut = self.cut_at.get(peer_of(ctx.session))
        except TypeError:  # (a channel that takes no weak reference)
            cut = None
        return dataclasses.replace(facts, learned_ms=cut) if cut else facts

    def _learn(self, ctx: ServerRequestContext[Any, Any], elapsed_ms: int) -> None:
        """A cancel that may be the host's timeout came ``elapsed_ms`` into a call: the
        client's later waits end before that (a person's interrupt that its host words alike
        shortens them as well, never lengthens them; a wait cut short says so)."""
        with contextlib.suppress(TypeError):
            peer = peer_of(ctx.session)
            known = self.cut_at.get(peer)
            self.cut_at[peer] = elapsed_ms if known is None else min(known, elapsed_ms)

    def _tells_of_detached(self, name: str) -> bool:
        """The default profile's results carry the detached-job notice; a seed or dialect
        profile's keep their originals' shapes (its jobs are found by its own listing)."""
        tool = self.rt.registry.get(name)
        return tool is not None and self.rt.registry.profile_of(tool).name == "conch"

    # -- resources -----------------------------------------------------------------------------

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        listed = await self.rt.list_resources(seed_only=self.seed is not None)
        return types.ListResourcesResult(
            resources=[types.Resource.model_validate(r) for r in listed]
        )

    def _unknown_resource(self, uri: str, message: str) -> MCPError:
        """The original's error for an unknown URI (tfbash: -32602 "Unknown Resource URI.")."""
        code, text = getattr(self.seed, "UNKNOWN_RESOURCE", (RESOURCE_NOT_FOUND, None))
        if text is not None:
            return MCPError(code, text.replace("{uri}", repr(uri)))
        return MCPError(code, message, {"uri": uri})

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        listed = (
            resources.resource_templates()
            if self.seed is None
            else list(getattr(self.seed, "RESOURCE_TEMPLATES", None) or [])
        )
        return types.ListResourceTemplatesResult(
            resource_templates=[types.ResourceTemplate.model_validate(t) for t in listed]
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            mime, text = await self.rt.read_resource(uri, seed_only=self.seed is not None)
        except ConchError as e:
            raise self._unknown_resource(uri, e.message) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        await self._check_seed_uri(str(params.uri))
        self.notifier.subscribe(ctx.session, str(params.uri))
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await self._check_seed_uri(str(params.uri))
        self.notifier.unsubscribe(ctx.session, str(params.uri))
        return types.EmptyResult()

    async def _check_seed_uri(self, uri: str) -> None:
        """A seed profile served alone refuses (un)subscribing to what it does not publish."""
        if self.seed is not None and not any(
            r["uri"] == uri for r in await self.rt.list_resources(seed_only=True)
        ):
            raise self._unknown_resource(uri, f"unknown resource {uri!r}")
