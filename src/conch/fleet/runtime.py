"""The fleet backend: Conch's tools over every node of a Ray cluster (docs/spec.md §9b).

One node executor actor per alive node (pinned with node affinity, ``soft=False``) embeds a
Conch runtime there. ``conch.Runtime(Config(fleet="ray"))`` holds a :class:`FleetBackend` as
its backend (found through the ``conch.fleets`` entry point), as it holds the engine otherwise;
the backend routes each call (conch/fleet/route.py decides where): work is placed by ``node``
(default: the least loaded alive node), calls on a job or shell go to the node its id names,
``list`` and ``info`` ask every node. A node that died answers ``node_lost``, one
that does not answer in time ``node_unreachable``; nothing is re-run. Ray is imported only here,
when the fleet starts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import itertools
import logging
import os
import re
import signal
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from conch.config import Config
from conch.core import Once, is_loopback
from conch.errors import ConchError, ConfigError, RuntimeClosedError
from conch.fleet.channel import Channel, Request, unanswered, unpack
from conch.fleet.executor import KILL_CHILDREN_ENV, NICENESS_ENV, NodeExecutor
from conch.fleet.handles import REFUSED, Handles, give_out
from conch.fleet.ids import qualify, qualify_result, split
from conch.fleet.mirror import Mirrors
from conch.fleet.nodes import Node, NodeTable
from conch.fleet.route import route
from conch.fleet.tools import FleetRegistry, takes_node
from conch.fleet.view import FleetView
from conch.fleet.watch import FleetWatch
from conch.tools.call import ToolOutcome
from conch.tools.context import ToolContext
from conch.tools.resources import JOBS_RESOURCE, JOBS_URI, job_uri, parse_job_uri
from conch.tools.tool import ErrorResult, Tool

log = logging.getLogger("conch.fleet")
WATCH_S = 0.5  # how often the cluster is looked at (new nodes, lost ones)
_START_TIMEOUT_S = 120.0
_CLOSE_TIMEOUT_S = 15.0
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: how long a node's ``changes`` waits for something to report before it answers empty, and
#: the pause after a batch (at most ~100 batches a second from a busy node)
CHANGES_WAIT_S = 30.0
CHANGES_PAUSE_S = 0.005
#: how long a call batch waits on its node for a reply before it comes back empty
REPLY_WAIT_S = 30.0


class FleetBackend:
    """The backend of ``conch.Runtime(Config(fleet="ray", ray_address=...))``.

    What a runtime holds to serve the host protocol (conch/tools/host.py) as the engine does
    (conch/runtime.py, ``Backend``); its jobs and shells live on their nodes, so what it holds
    itself is none (``list`` shows them)."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config(fleet="ray")
        for name in self.config.profiles:
            if name in REFUSED:
                raise ConfigError(
                    f"fleet: the {name} profile is not served on a fleet: {REFUSED[name]}; "
                    "serve it without --fleet"
                )
        self.table = NodeTable()
        self.handles = Handles()
        self.info_extra: dict[str, Any] = {}
        self.registry = FleetRegistry(self.config.profiles)
        # what the front ends watch of the nodes' jobs: their mirrors, fed by one ``changes``
        # pump per node (started once someone listens or a call asks for progress)
        self.mirrors = Mirrors(keep=self.config.max_jobs)
        self._view = FleetView(
            self.add_listener, self.table, self.registry, self.mirrors, self._ask_caller
        )
        self._watcher = FleetWatch(self.table, self._ask_watch)
        self._listeners: list[Callable[[str | None], None]] = []
        self._started = False
        self._closed = False
        self._once = Once(self._start)
        self._close_task: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._refreshing: asyncio.Task[None] | None = None
        self._starting: dict[str, asyncio.Task[None]] = {}
        self._owns_ray = False
        # executors first start in any worker Ray has; False once one could not leave Ray's
        # niceness there (see _first_executor)
        self._any_worker = True
        self._remote: Any = None  # the NodeExecutor actor class
        self._ray: Any = None
        self._pumps: dict[str, asyncio.Task[None]] = {}  # by node tag
        self._call_ids = itertools.count(1)
        self._progress: dict[int, Callable[[str], Any]] = {}  # call id -> ctx.progress
        self._reports: set[asyncio.Future[Any]] = set()  # progress messages being sent

    @property
    def any_worker(self) -> bool:
        """Whether executors start in any worker Ray has (True until one could not leave Ray's
        niceness there: executors get workers of their own from then on)."""
        return self._any_worker

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Attach to the cluster and start an executor on every alive node (once)."""
        await self._once.run(closed=self._closed)

    async def _start(self) -> None:
        self._connect()  # once, at startup: ray.init wants the main thread
        await self._refresh()
        if self._starting:
            await asyncio.gather(*self._starting.values(), return_exceptions=True)
        if not self.table.usable():
            raise ConchError("node_unreachable", "no node of the Ray cluster took an executor")
        self._watch = asyncio.ensure_future(self._watch_nodes())
        self._started = True

    def _connect(self) -> None:
        address = self.config.ray_address or os.environ.get("RAY_ADDRESS", "") or "local"
        local = address == "local"
        kwargs: dict[str, Any] = {}
        if local or _is_loopback(address):
            # a cluster on this machine: keep Ray's traffic on loopback (Ray otherwise swaps
            # 127.0.0.1 for the host's interface address)
            os.environ.setdefault(_LOOPBACK_ENV, "0")
            kwargs["_node_ip_address"] = "127.0.0.1"
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # executors run in the environment the node has (conch installed there), not in a
        # `uv run` replica of this driver's working directory that Ray would package
        os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        try:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        except ImportError:
            raise ConfigError(
                "fleet: 'ray' needs Ray installed: pip install 'conch[ray]'"
            ) from None

        self._ray = ray
        self._affinity = NodeAffinitySchedulingStrategy
        self._remote = ray.remote(NodeExecutor)
        if ray.is_initialized():
            return  # the host program attached already: use its connection, leave it open
        if local:
            kwargs.update(include_dashboard=False, num_cpus=os.cpu_count() or 1)
        with _stdout_to_stderr(), _own_signal_handlers():
            ray.init(
                address=address,
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=False,
                **kwargs,
            )
        self._owns_ray = True

    async def _refresh(self) -> None:
        rows = await asyncio.to_thread(self._ray.nodes)
        fresh, lost = self.table.update(rows)
        for node in lost:
            log.warning("node %s left the cluster; its jobs answer node_lost", node.node_id)
            self._lost(node)
        for dead in self.table.with_dead_executors():
            # the node is still there: new work gets a new executor (the old one's jobs died
            # with it, its orphan guard killed what they left; their ids answer node_lost)
            log.warning("node %s: its executor died; starting a new one", dead.node_id)
            self._lost(dead)
            fresh.append(self.table.replace(dead))
        for node in fresh:
            if node.node_id not in self._starting:
                self._starting[node.node_id] = asyncio.ensure_future(self._start_executor(node))

    async def _start_executor(self, node: Node) -> None:
        try:
            started = await self._first_executor(node)
            node.hostname = started.get("hostname", "")
            node.pid = int(started.get("pid", 0))
            node.loopback = str(started.get("loopback", ""))
            node.channel = self._channel(node)
            node.ready = True
            if self._listeners:
                self._pump(node)
        except Exception as e:
            if not node.lost_reason:
                node.lost_reason = f"its executor did not start ({type(e).__name__}: {e})"
            log.warning("node %s: %s", node.node_id, node.lost_reason)
        finally:
            self._starting.pop(node.node_id, None)

    async def _first_executor(self, node: Node) -> dict[str, Any]:
        """Start the node's executor; its start call's answer.

        First in any worker Ray has on the node (an idle one if Ray prestarted it: no worker
        start to wait for, ~0.7 s less on a quiet node), where the executor leaves Ray's nice
        15 itself; where it may not (no CAP_SYS_NICE), again in a worker Ray starts for it
        with the executor's variables (conch.fleet.executor), and so for every later node."""
        if self._any_worker:
            node.executor = self.new_executor(node, any_worker=True)
            started: dict[str, Any] = await asyncio.wait_for(
                node.executor.start.remote(True), _START_TIMEOUT_S
            )
            if started.get("ready"):
                return started
            log.info(
                "node %s: the executor may not lower its niceness (%s) in a worker of Ray's; "
                "executors get workers of their own from now on",
                node.node_id,
                started.get("nice"),
            )
            self._any_worker = False
            with contextlib.suppress(Exception):
                self._ray.kill(node.executor, no_restart=True)
        node.executor = self.new_executor(node, any_worker=False)
        started = await asyncio.wait_for(node.executor.start.remote(False), _START_TIMEOUT_S)
        return started

    def new_executor(self, node: Node, *, any_worker: bool) -> Any:
        """A new executor actor pinned to the node (not started: its ``start`` is the first
        call): in any worker Ray has there, or in one Ray starts for it with the executor's own
        variables. The caller owns it: ``ray.kill`` ends it."""
        options: dict[str, Any] = {}
        if not any_worker:
            options["runtime_env"] = {"env_vars": {NICENESS_ENV: "0", KILL_CHILDREN_ENV: "false"}}
        return self._remote.options(
            scheduling_strategy=self._affinity(node_id=node.node_id, soft=False),
            num_cpus=0,
            max_concurrency=1000,
            max_restarts=0,
            max_task_retries=0,
            **options,
        ).remote(self.config, node.node_id)

    def _channel(self, node: Node) -> Channel:
        def running(n: int) -> None:
            node.running = n

        return Channel(
            node.node_id,
            lambda batch: self._ask(node, "call", (batch,), None),
            wait_s=REPLY_WAIT_S,
            timeout_s=self.config.fleet_timeout_ms / 1000,
            on_running=running,
        )

    def _refresh_soon(self) -> None:
        """Look at the cluster now rather than at the next watch turn (an executor died)."""
        if self._closed or (self._refreshing is not None and not self._refreshing.done()):
            return

        async def refresh() -> None:
            with contextlib.suppress(Exception):
                await self._refresh()

        self._refreshing = asyncio.ensure_future(refresh())

    async def _watch_nodes(self) -> None:
        while True:
            await asyncio.sleep(WATCH_S)
            with contextlib.suppress(Exception):
                await self._refresh()

    async def aclose(self) -> None:
        """Stop every executor and every job it started; idempotent."""
        if self._close_task is None:
            self._closed = True
            self._close_task = asyncio.ensure_future(self._aclose())
        await asyncio.shield(self._close_task)

    async def _aclose(self) -> None:
        for task in (self._watch, self._refreshing, *self._pumps.values()):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        start = self._once.task
        if start is not None and not start.done():
            with contextlib.suppress(BaseException):
                await start
        for t in list(self._starting.values()):
            with contextlib.suppress(BaseException):
                await t
        if self._ray is None:
            return
        nodes = [
            n for n in (*self.table.nodes.values(), *self.table.retired) if n.executor is not None
        ]

        async def close(node: Node) -> None:
            if node.alive and not node.lost_reason:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(node.executor.aclose.remote(), _CLOSE_TIMEOUT_S)
            with contextlib.suppress(Exception):
                self._ray.kill(node.executor, no_restart=True)
            node.ready = False
            if node.channel is not None:
                await node.channel.aclose(ConchError("closed", "the Conch fleet is shutting down"))

        await asyncio.gather(*(close(n) for n in nodes))
        if self._owns_ray:
            await asyncio.to_thread(self._ray.shutdown)

    # -- change listeners ------------------------------------------------------------------------

    def add_listener(self, fn: Callable[[str | None], None]) -> Callable[[], None]:
        """fn(job_id or None) on every change of a job or shell on any node (as the nodes
        report them), and after every call that may have changed one."""
        self._listeners.append(fn)
        for node in self.table.usable():
            self._pump(node)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def _fire(self, job_id: str | None) -> None:
        for fn in list(self._listeners):
            with contextlib.suppress(Exception):
                fn(job_id)

    # -- what the nodes report -------------------------------------------------------------------

    def _pump(self, node: Node) -> None:
        """Follow ``node``'s changes (once per executor)."""
        if self._closed or node.tag in self._pumps or not node.ready:
            return
        self._pumps[node.tag] = asyncio.ensure_future(self._follow(node))

    async def _follow(self, node: Node) -> None:
        timeout = CHANGES_WAIT_S + self.config.fleet_timeout_ms / 1000
        while not self._closed:
            try:
                batch = unpack(await self._ask(node, "changes", (CHANGES_WAIT_S,), timeout))
            except ConchError as e:
                if e.code == "node_lost":
                    return  # (its jobs were marked lost by _lost)
                await asyncio.sleep(WATCH_S)
                continue
            self._apply(node, batch)
            if batch["jobs"] or batch["progress"]:
                await asyncio.sleep(CHANGES_PAUSE_S)

    def _apply(self, node: Node, batch: Mapping[str, Any]) -> None:
        node.running = batch["running"]
        for call_id, message in batch["progress"]:
            report = self._progress.get(call_id)
            if report is not None:
                sent = asyncio.ensure_future(report(_qualify_ids(message, node.tag)))
                self._reports.add(sent)
                sent.add_done_callback(self._reports.discard)
        for snap in batch["jobs"]:
            fleet_id = qualify(snap["job_id"], node.tag)
            # (a report that brings nothing new, a start the call's reply brought already,
            # would only hold the next resource update back behind the notifier's pause)
            if self.mirrors.update(fleet_id, node.tag, snap):
                self._fire(fleet_id)
        for local in batch["gone"]:
            self.mirrors.forget(qualify(local, node.tag))
        if batch["set"] or batch["gone"]:
            self._fire(None)

    def _lost(self, node: Node) -> None:
        """The node (or its executor) is gone: its running jobs end here as lost."""
        pump = self._pumps.pop(node.tag, None)
        if pump is not None:
            pump.cancel()
        if node.channel is not None:  # every call in flight there answers node_lost
            node.channel.close(_lost_error(node))
        for fleet_id in self.mirrors.lose_node(node.tag):
            self._fire(fleet_id)
        self._fire(None)

    def _changed(self, result: Mapping[str, Any]) -> None:
        job_id = result.get("job_id") if isinstance(result, Mapping) else None
        self._fire(job_id if isinstance(job_id, str) else None)

    # -- tools -----------------------------------------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        """Every tool as ``tools/list`` shows it (``node`` where work is placed)."""
        return [t.describe() for t in self.registry.tools]

    async def call_tool_full(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        context: ToolContext | None = None,
    ) -> ToolOutcome:
        """A tool call routed to its node(s): its result, whether it is an error, its
        ``_meta``."""
        ctx = context or ToolContext()
        tool = self.registry.get(name)
        if tool is None:
            return ToolOutcome(ConchError("not_found", f"unknown tool {name!r}").envelope(), True)
        args = dict(arguments or {})
        try:
            await self._open()
            return await self._route(tool, args, ctx)
        except ConchError as e:
            return _error(e, self.registry.error_result_of(tool), args)
        except RuntimeClosedError:
            closed = ConchError("closed", "the Conch fleet is shutting down")
            return _error(closed, self.registry.error_result_of(tool), args)

    async def _open(self) -> None:
        if self._closed:
            raise RuntimeClosedError()
        if not self._started:
            await self.start()

    async def _route(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        if tool.name == "list" and args.get("info") is True:
            del args["info"]
            # the fleet's own info (its nodes), not the first node's
            listed = await self._route(tool, args, ctx)
            info = self.registry.get("info")
            if listed.is_error or info is None:
                return listed
            about = await self._info(info, {}, ctx)
            return ToolOutcome({**listed.result, "info": about.result}, False)
        way = route(tool.name, args, self.table, self.handles, placing=takes_node(tool))
        if way.how == "each":
            return await self._list(tool, way.args, ctx)
        if way.how == "info":
            return await self._info(tool, way.args, ctx)
        if way.how == "anywhere":
            return await self._call_anywhere(tool, way.args, ctx)
        assert way.node is not None
        if way.how == "node":
            return await self._call(way.node, tool, way.args, ctx)
        way.node.pending += 1  # placed: counted while it runs, for the next choice
        try:
            return await self._call(way.node, tool, way.args, ctx)
        finally:
            way.node.pending -= 1

    async def _call(
        self, node: Node, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> ToolOutcome:
        if not node.alive or node.lost_reason:
            raise _lost_error(node)
        if not node.ready or node.channel is None:
            raise ConchError("node_unreachable", f"node {node.node_id} has no executor yet")
        meta = dict(ctx.meta) if ctx.meta else None
        timeout = self._timeout_s(tool.name, args)
        call_id = next(self._call_ids)
        report = ctx.progress if tool.progress else None
        if report is not None:
            # the node runs the call's progress as a local call does; its messages come with
            # the node's changes
            self._progress[call_id] = report
            self._pump(node)
        request: Request = (tool.name, args, meta, ctx.trusted, report is not None)
        try:
            reply = await node.channel.call(call_id, request, timeout, ctx.host_gave_up)
        finally:
            if report is not None:
                self._progress.pop(call_id, None)
        result, is_error, out_meta, snap = reply
        if snap is not None:  # the job this call started, for the front ends that watch it
            self.mirrors.update(qualify(snap["job_id"], node.tag), node.tag, snap)
        conch_shaped = self.registry.error_result_of(tool) is None
        result = qualify_result(result, node.tag, node.node_id, add_node=conch_shaped)
        result = give_out(self.handles, tool.name, result, node.tag)
        if conch_shaped and not is_error and tool.name == "search":
            result["node"] = node.node_id  # where the files were searched
        if not tool.read_only:
            self._changed(result)
        return ToolOutcome(result, is_error, out_meta)

    async def _ask(
        self, node: Node, method: str, args: tuple[Any, ...], timeout: float | None
    ) -> Any:
        """``node``'s executor's ``method(*args)``, with the fleet's faults: ``node_lost`` (the
        node or its executor is gone), ``node_unreachable`` (no answer in ``timeout`` s; None:
        the caller bounds the wait itself)."""
        if not node.alive or node.lost_reason:
            raise _lost_error(node)
        if not node.ready:
            raise ConchError("node_unreachable", f"node {node.node_id} has no executor yet")
        ray = self._ray
        try:
            ref = getattr(node.executor, method).remote(*args)
            # an asyncio future of the reply (no task per call), bounded by the call's deadline
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout)
        except asyncio.TimeoutError:
            raise unanswered(node.node_id, timeout or 0) from None
        except ray.exceptions.ActorUnavailableError as e:
            raise ConchError(
                "node_unreachable", f"node {node.node_id} is unreachable right now ({e})"
            ) from None
        except ray.exceptions.RayActorError as e:
            if not node.lost_reason:
                node.lost_reason = f"its executor died: {type(e).__name__}"
                node.executor_died = True
                self._refresh_soon()
            raise _lost_error(node) from None

    # -- resources (each node's, merged; a job's log read on its node) -------------------------

    async def list_resources(self, *, seed_only: bool = False) -> list[dict[str, Any]]:
        """The overview, and every retained job's log (a terminal job's screen and recording
        too) on every ready node (fleet ids)."""
        profiles = [r.describe() for r in self.registry.resources]
        if seed_only:
            return profiles  # (read from every node)
        await self._open()
        timeout = self.config.fleet_timeout_ms / 1000
        nodes = self.table.usable()
        replies = await asyncio.gather(
            *(self._ask(n, "resources", (), timeout) for n in nodes), return_exceptions=True
        )
        out: list[dict[str, Any]] = [dict(JOBS_RESOURCE), *profiles]
        for node, reply in zip(nodes, replies, strict=True):
            if isinstance(reply, BaseException):
                continue  # an absent node lists nothing
            for entry in reply:
                parsed = parse_job_uri(str(entry.get("uri", "")))
                if parsed is None:
                    continue
                local = parsed[0]
                fleet_id = qualify(local, node.tag)
                out.append(
                    {
                        k: v.replace(local, fleet_id) if isinstance(v, str) else v
                        for k, v in entry.items()
                    }
                )
        return out

    async def read_resource(self, uri: str, *, seed_only: bool = False) -> tuple[str, str]:
        """A job's log, screen or recording from its node; the overviews (Conch's, a
        profile's) with one section per ready node."""
        profile_resource = self.registry.resource(uri)
        if seed_only and profile_resource is None:
            raise ConchError("not_found", f"unknown resource {uri!r}")
        await self._open()
        timeout = self.config.fleet_timeout_ms / 1000
        parsed = parse_job_uri(uri)
        if parsed is not None:
            job_id, kind = parsed
            local, tag = split(job_id, self.table.tags)
            node = self.table.by_tag(tag) if tag is not None else None
            if node is None:
                raise ConchError("not_found", f"unknown job {job_id!r} (no node has it)")
            local_uri = job_uri(local, kind)
            found, mime, text = await self._ask(node, "resource", (local_uri,), timeout)
            if not found:
                raise ConchError("not_found", text)
            return mime, text
        if uri != JOBS_URI and profile_resource is None:
            raise ConchError("not_found", f"unknown resource {uri!r}")
        mime = profile_resource.mime_type if profile_resource is not None else "text/markdown"
        nodes = self.table.usable()
        replies = await asyncio.gather(
            *(self._ask(n, "resource", (uri,), timeout) for n in nodes),
            return_exceptions=True,
        )
        parts = []
        for node, reply in zip(nodes, replies, strict=True):
            head = f"# node {node.node_id}"
            if isinstance(reply, BaseException) or not reply[0]:
                why = reply.message if isinstance(reply, ConchError) else "no answer"
                parts.append(f"{head}\n\n({why})")
            else:
                parts.append(f"{head}\n\n{_qualify_ids(reply[2], node.tag)}")
        return mime, "\n\n".join(parts) or "(no node of the fleet is ready)"

    async def _call_anywhere(
        self, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> ToolOutcome:
        """An id without a node (a job's name): the first node that knows it answers."""
        nodes = self.table.usable()
        if not nodes:
            raise ConchError("node_unreachable", "no node of the fleet is ready")
        outcomes = await asyncio.gather(
            *(self._call(n, tool, dict(args), ctx) for n in nodes), return_exceptions=True
        )
        fallback: ToolOutcome | BaseException | None = None
        for out in outcomes:
            if isinstance(out, ToolOutcome) and not _is_not_found(out.result):
                return out
            fallback = fallback or out
        if isinstance(fallback, BaseException):
            raise fallback
        assert fallback is not None
        return fallback

    def _timeout_s(self, name: str, args: Mapping[str, Any]) -> float:
        cfg = self.config
        wait_ms = 0
        for key in ("yield_ms", "wait_ms", "timeout_ms" if name == "search" else ""):
            value = args.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                wait_ms = max(wait_ms, value)
        if name == "exec" and "yield_ms" not in args:
            wait_ms = max(wait_ms, cfg.default_yield_ms)
        if name == "search" and "timeout_ms" not in args:
            wait_ms = max(wait_ms, 60_000)
        base = cfg.fleet_timeout_ms + cfg.kill_grace_ms + cfg.close_timeout_ms
        return (base + wait_ms) / 1000

    # -- fan-out calls -----------------------------------------------------------------------------

    async def _each_node(
        self, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> list[tuple[Node, ToolOutcome | BaseException]]:
        nodes = self.table.usable()
        outcomes = await asyncio.gather(
            *(self._call(n, tool, dict(args), ctx) for n in nodes), return_exceptions=True
        )
        return list(zip(nodes, outcomes, strict=True))

    async def _list(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        merged: dict[str, Any] = {}
        unreachable: list[str] = []
        for node, out in await self._each_node(tool, args, ctx):
            if isinstance(out, BaseException) or out.is_error:
                if isinstance(out, ToolOutcome) and not isinstance(out.result.get("error"), dict):
                    return out  # an answer about the arguments: the same on every node
                if isinstance(out, ToolOutcome):
                    err = out.result["error"]
                    if err.get("code") not in ("node_lost", "node_unreachable"):
                        return out
                unreachable.append(node.node_id)
                continue
            for key, value in out.result.items():
                if isinstance(value, list):
                    merged.setdefault(key, []).extend(value)
                else:
                    merged.setdefault(key, value)
        keys = {"list": ("jobs", "shells"), "bash.jobs": ("jobs",), "shell_list": ("shells",)}
        for key in keys.get(tool.name, ()):
            merged.setdefault(key, [])
        if unreachable:
            merged["unreachable_nodes"] = unreachable
        return ToolOutcome(merged, False)

    async def _info(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        base: ToolOutcome | None = None
        for _node, out in await self._each_node(tool, args, ctx):
            if isinstance(out, ToolOutcome) and not out.is_error:
                base = base or out
        if base is None:
            raise ConchError("node_unreachable", "no node of the fleet answered")
        result = dict(base.result)
        for key in ("pid", "data_dir"):  # one node's, not the fleet's
            result.pop(key, None)
        result["fleet"] = "ray"
        result["nodes"] = [n.describe() for n in self.table.nodes.values()]
        result.update(self.info_extra)
        return ToolOutcome(result, False)

    # -- the host protocol (conch/tools/host.py) ------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def started(self) -> bool:
        return self._started

    @property
    def default_cwd(self) -> str:
        return self.config.resolved_default_cwd

    @property
    def view(self) -> FleetView:
        return self._view

    @property
    def watch(self) -> FleetWatch:
        """The dashboard's data and take-over, asked of each job's node (conch/fleet/watch.py)."""
        return self._watcher

    def _ask_caller(
        self, node: Node, client: tuple[str, int], server: tuple[str, int]
    ) -> concurrent.futures.Future[str | None]:
        """The node's answer to the HTTP guard (from any thread: no event loop needed)."""
        future: concurrent.futures.Future[str | None] = node.executor.sandboxed_caller.remote(
            client, server
        ).future()
        return future

    async def _ask_watch(self, node: Node, op: str, args: tuple[Any, ...]) -> Any:
        await self._open()
        return await self._ask(node, "watch", (op, args), self.config.fleet_timeout_ms / 1000)

    # -- the typed API (conch.Runtime's methods) ----------------------------------------------

    async def request(self, name: str, request: object, node: str | None) -> dict[str, Any]:
        """``conch.Runtime``'s typed method ``name``: its request (a request object or the
        arguments) as the tool's arguments, placed on ``node`` where the tool takes one; a
        tool's error raised as :class:`ConchError`."""
        args = arguments_of(request)
        if node is not None:
            args["node"] = node
        out = await self.call_tool_full(name, args)
        error = out.result.get("error") if out.is_error else None
        if isinstance(error, Mapping):
            raise ConchError(
                str(error.get("code", "internal")),
                str(error.get("message", "")),
                bool(error.get("retryable", False)),
            )
        return out.result


def arguments_of(request: object) -> dict[str, Any]:
    """A request object's fields as a tool's arguments: those its caller set (not at their
    default), sequences as lists."""
    if isinstance(request, Mapping):
        return dict(request)
    assert dataclasses.is_dataclass(request) and not isinstance(request, type)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(request):
        value = getattr(request, f.name)
        if f.default is not dataclasses.MISSING and value == f.default:
            continue
        if f.default_factory is not dataclasses.MISSING and value == f.default_factory():
            continue
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


_LOCAL_ID = re.compile(r"\b([js]_[0-9a-f]{10})\b")


def _qualify_ids(text: str, tag: str) -> str:
    """A node's overview with its job and shell ids made fleet ids."""
    return _LOCAL_ID.sub(lambda m: qualify(m.group(1), tag), text)


def _lost_error(node: Node) -> ConchError:
    return ConchError(
        "node_lost",
        f"node {node.node_id} is gone ({node.lost_reason or 'left the cluster'}); its jobs and "
        "shells are lost and nothing was re-run",
    )


def _error(e: ConchError, shape: ErrorResult | None, args: Mapping[str, Any]) -> ToolOutcome:
    if shape is not None:
        result, is_error = shape(e, args)
        return ToolOutcome(result, is_error)
    return ToolOutcome(e.envelope(), True)


def _is_not_found(result: Mapping[str, Any]) -> bool:
    error = result.get("error")
    return isinstance(error, Mapping) and error.get("code") == "not_found"


def _is_loopback(address: str) -> bool:
    return is_loopback(address.split("://", 1)[-1].rsplit(":", 1)[0])


@contextlib.contextmanager
def _own_signal_handlers() -> Iterator[None]:
    """ray.init replaces SIGTERM's handler with a bare ``sys.exit``; the server's own handlers
    (which stop every job first) stay in charge."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            if handler is not None:
                with contextlib.suppress(ValueError, OSError):
                    signal.signal(s, handler)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """stdout may be the stdio MCP wire: what ray.init prints, and the processes it starts,
    go to stderr."""
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


if TYPE_CHECKING:  # mypy checks that this is a runtime's backend (conch/runtime.py)
    from conch.runtime import Backend

    def _is_a_backend(fleet: FleetBackend) -> Backend:
        return fleet
