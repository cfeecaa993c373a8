"""The embedded API (docs/spec.md §8): ``async with conch.Runtime(conch.Config(...)) as rt:``.

:class:`Runtime` **holds** a backend, as httpx's client holds its transport: the engine of this
machine (:class:`LocalBackend`: conch/core/engine.py and the tool registry of the configured
profiles, with their per-runtime state) or, with ``Config(fleet=...)``, a fleet's (conch.fleet,
found through the ``conch.fleets`` entry points so that this layer never imports the one above).
Either way ``Runtime(config)`` is a ``Runtime``: its public API, docs/spec.md §8's typed methods
plus ``tools()`` and ``call_tool()``, is written once here and handed to the backend. Front ends
(MCP, HTTP, CLI) are typed against the :class:`~conch.tools.host.Host` protocol it implements;
nothing in ``conch.core`` or ``conch.tools`` imports this module.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from conch.config import Config
from conch.core import CallContext as _EngineContext
from conch.core import (
    Engine,
    ExecRequest,
    InfoResult,
    ReadRequest,
    SearchRequest,
    ShellOpenRequest,
    SignalRequest,
    WriteRequest,
)
from conch.errors import ConchError, ConfigError
from conch.tools import lean, resources
from conch.tools.call import ToolOutcome, call_tool_full
from conch.tools.context import ToolContext
from conch.tools.host import EngineView, Host, HostParts, HostView
from conch.tools.hosts import TRANSPORTS
from conch.tools.registry import ToolRegistry
from conch.tools.watch import LocalWatch, Watch

FLEETS_GROUP = "conch.fleets"  # entry points: fleet kind -> its backend class (conch.fleet)
_WARM = _EngineContext(warm=True)  # the embedded exec may use a process started ahead


class RuntimeInfo(InfoResult):
    """``info``: the engine's facts plus the active profiles and the transports."""

    profiles: list[str]
    transports: list[str]


P = ParamSpec("P")
R = TypeVar("R")


class Backend(HostParts, Protocol):
    """What a :class:`Runtime` holds and hands every call to: the host's parts (the catalogue,
    view and lifecycle of conch/tools/host.py) plus ``started`` and ``request``, the typed
    methods' one entry."""

    @property
    def started(self) -> bool: ...

    async def request(self, name: str, request: object, node: str | None) -> dict[str, Any]:
        """The typed method ``name`` with its request (a request object of conch.core, or the
        arguments of ``list``, ``shell_close`` and ``info``); ``node``: where a fleet places
        the work. Raises ConchError for the call's error."""
        ...


# -- the engine of this machine ------------------------------------------------------------------


def _shaped(
    be: LocalBackend, result: Mapping[str, Any], lean_form: Callable[[Any], dict[str, Any]]
) -> dict[str, Any]:
    """A result in the configured detail (docs/spec.md §6: what the ``conch`` tools return)."""
    return lean_form(result) if be.config.result_detail == "lean" else dict(result)


def _snapshot(be: LocalBackend, result: Any) -> dict[str, Any]:
    return _shaped(be, result, lambda r: lean.snapshot(r, be.default_cwd))


def _followup(be: LocalBackend, result: Any) -> dict[str, Any]:
    """A later snapshot of a job (read, write, signal): its name was said by its exec."""
    return _shaped(be, result, lambda r: lean.snapshot(r, be.default_cwd, named=False))


def _listing(be: LocalBackend, result: Any) -> dict[str, Any]:
    return _shaped(be, result, lambda r: lean.listing(r, be.default_cwd))


def _info(be: LocalBackend, result: Any) -> dict[str, Any]:
    profiles, transports = builtins.list(be.config.profiles), builtins.list(TRANSPORTS)
    return {**result, "profiles": profiles, "transports": transports}


def _detail(form: Callable[[Any], dict[str, Any]]) -> Callable[[LocalBackend, Any], dict[str, Any]]:
    return lambda be, result: _shaped(be, result, form)


Run = Callable[[Engine, Any], Awaitable[Any]]
Shape = Callable[["LocalBackend", Any], dict[str, Any]]

#: each typed method on the engine: how it runs (request object or arguments in, the engine's
#: full result out) and its result in the configured detail
LOCAL: dict[str, tuple[Run, Shape]] = {
    "exec": (lambda e, r: e.exec(r, _WARM), _snapshot),
    "read": (Engine.read, _followup),
    "write": (Engine.write, _followup),
    "signal": (Engine.signal, _followup),
    "shell_open": (Engine.shell_open, _detail(lean.shell_summary)),
    "search": (Engine.search, _detail(lean.search)),
    "list": (lambda e, a: e.list(a["state"]), _listing),
    "shell_close": (lambda e, a: e.shell_close(a["shell_id"]), _detail(lean.shell_close)),
    "info": (lambda e, _: e.info(), _info),
    "changes": (
        lambda e, a: e.changes(
            a["job_id"],
            undo=bool(a.get("undo")),
            force=tuple(a.get("force") or ()),
            cursor=a.get("cursor"),
            max_bytes=a.get("max_bytes"),
        ),
        lambda be, r: _shaped(be, lean.changes_full(r), lean.changes),
    ),
}


class LocalBackend:
    """The engine of this machine with the tool registry of the configured profiles."""

    def __init__(self, config: Config | None = None, *, owns_process: bool = False) -> None:
        self.engine = Engine(config, owns_process=owns_process)
        self.config = self.engine.config
        self.registry = ToolRegistry(self.config.profiles)
        self.view = EngineView(self.engine, self.registry)
        self.watch = LocalWatch(self.engine)

    @property
    def closed(self) -> bool:
        return self.engine.closed

    @property
    def default_cwd(self) -> str:
        return self.engine.default_cwd

    @property
    def started(self) -> bool:
        return self.engine.started

    async def start(self) -> None:
        await self.engine.start()

    async def aclose(self) -> None:
        await self.engine.aclose()

    def tools(self) -> builtins.list[dict[str, Any]]:
        return [t.describe(self.config) for t in self.registry.tools]

    async def call_tool_full(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        context: ToolContext | None = None,
    ) -> ToolOutcome:
        if not self.engine.closed and not self.engine.started:
            await self.engine.start()
        return await call_tool_full(self.engine, self.registry, name, arguments, context)

    async def request(self, name: str, request: object, node: str | None) -> dict[str, Any]:
        if node is not None:
            raise ConchError("invalid_argument", "node: only a fleet places work on a node")
        run, shape = LOCAL[name]
        return shape(self, await run(self.engine, request))

    async def list_resources(self, *, seed_only: bool = False) -> builtins.list[dict[str, Any]]:
        return resources.resource_list(self.engine, self.registry, seed_only=seed_only)

    async def read_resource(self, uri: str, *, seed_only: bool = False) -> tuple[str, str]:
        return resources.read_resource(self.engine, self.registry, uri, seed_only=seed_only)


# -- the runtime ---------------------------------------------------------------------------------


def _op(
    name: str, make: Callable[P, R], doc: str | None = None, *, placing: bool = False
) -> Callable[Concatenate[Runtime, P], Awaitable[dict[str, Any]]]:
    """A typed method of the embedded API: its arguments are the request's (``make``), its
    result the tool's, in the configured detail. ``placing``: on a fleet it also takes
    ``node=`` (where to run; not in the static signature)."""

    async def call(self: Runtime, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        node = cast("str | None", kwargs.pop("node", None)) if placing else None
        return await self._backend.request(name, make(*args, **kwargs), node)

    call.__name__, call.__qualname__ = name, f"Runtime.{name}"
    call.__doc__ = doc or make.__doc__
    return call


class Runtime(Host):
    """Conch's tools and typed methods, usable in-process, over the engine of this machine or,
    with ``Config(fleet="ray")``, over every node of a cluster (docs/spec.md §9b).

    The typed methods take the tools' own arguments and return what ``call_tool`` returns
    (the result in the configured detail); on a fleet ``exec``, ``shell_open`` and ``search``
    also take ``node=``. ``backend``: one already made (a test's, an embedder's)."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        owns_process: bool = False,
        backend: Backend | None = None,
    ) -> None:
        if backend is None:
            if config is not None and config.fleet != "off":
                backend = cast(Backend, _fleet_class(config.fleet)(config))
            else:
                backend = LocalBackend(config, owns_process=owns_process)
        self._backend: Backend = backend
        self.config = backend.config

    @property
    def backend(self) -> Backend:
        """What this runtime holds: a :class:`LocalBackend` or a fleet's backend."""
        return self._backend

    @property
    def engine(self) -> Engine:
        """The engine this runtime holds (``conch.core``'s API: request objects in, full
        results out), for code that wants the level below the tools; a fleet has none."""
        if not isinstance(self._backend, LocalBackend):
            raise ConchError("invalid_argument", "a fleet's runtime holds no engine here")
        return self._backend.engine

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        await self._backend.start()

    async def aclose(self) -> None:
        """Stop every job and shell, reap everything; idempotent and safe to call concurrently."""
        await self._backend.aclose()

    @property
    def closed(self) -> bool:
        return self._backend.closed

    @property
    def started(self) -> bool:
        return self._backend.started

    @property
    def default_cwd(self) -> str:
        return self._backend.default_cwd

    # -- the typed methods (docs/spec.md §8): each takes its request's fields (core/requests.py) ---

    exec = _op("exec", ExecRequest, Engine.exec.__doc__, placing=True)
    read = _op("read", ReadRequest, Engine.read.__doc__)
    write = _op("write", WriteRequest, Engine.write.__doc__)
    signal = _op("signal", SignalRequest, Engine.signal.__doc__)
    shell_open = _op("shell_open", ShellOpenRequest, Engine.shell_open.__doc__, placing=True)
    search = _op("search", SearchRequest, Engine.search.__doc__, placing=True)

    async def list(self, state: str = "all") -> dict[str, Any]:
        return await self._backend.request("list", {"state": state}, None)

    async def shell_close(self, shell_id: str) -> dict[str, Any]:
        return await self._backend.request("shell_close", {"shell_id": shell_id}, None)

    async def info(self) -> RuntimeInfo:
        return cast(RuntimeInfo, await self._backend.request("info", {}, None))

    async def changes(
        self,
        job_id: str,
        undo: bool = False,
        force: Sequence[str] = (),
        *,
        cursor: str | None = None,
        max_bytes: int | None = None,
    ) -> dict[str, Any]:
        """What a finished job changed in the workspace (counts, files, a bounded diff; a page
        of them from ``cursor``); with ``undo=True`` takes it back and returns the undo's own
        change set (undo that to redo). Raises ``ConchError("conflict")`` naming the paths
        changed again since, unless they are in ``force``."""
        args: dict[str, Any] = {"job_id": job_id}
        if undo:
            args["undo"] = True
        if force:
            args["force"] = list(force)
        if cursor is not None:
            args["cursor"] = cursor
        if max_bytes is not None:
            args["max_bytes"] = max_bytes
        return await self._backend.request("changes", args, None)

    # -- the catalogue -------------------------------------------------------------------------

    @property
    def registry(self) -> ToolRegistry:
        return self._backend.registry

    def tools(self) -> builtins.list[dict[str, Any]]:
        """Every tool of the active profiles as MCP ``tools/list`` shows it."""
        return self._backend.tools()

    async def call_tool_full(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        context: ToolContext | None = None,
    ) -> ToolOutcome:
        """Call a tool: its result, whether it is an error, and its ``_meta`` (the backend's
        own call path: the local one, or the fleet's routing)."""
        return await self._backend.call_tool_full(name, arguments, context)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        context: ToolContext | None = None,
    ) -> dict[str, Any]:
        """Call a tool by name; its structured result or ``{"error": {...}}`` (never raises
        for a tool's error)."""
        return (await self.call_tool_full(name, arguments, context)).result

    async def list_resources(self, *, seed_only: bool = False) -> builtins.list[dict[str, Any]]:
        """The resources front ends publish (``seed_only``: what a seed profile served alone
        publishes)."""
        return await self._backend.list_resources(seed_only=seed_only)

    async def read_resource(self, uri: str, *, seed_only: bool = False) -> tuple[str, str]:
        """(mime type, text) of a resource; ``not_found`` for an unknown one."""
        return await self._backend.read_resource(uri, seed_only=seed_only)

    @property
    def view(self) -> HostView:
        """What front ends watch (the host protocol's view, conch/tools/host.py)."""
        return self._backend.view

    @property
    def watch(self) -> Watch:
        """What the dashboard shows and takes from a person (conch/tools/watch.py)."""
        return self._backend.watch


def _fleet_class(kind: str) -> Any:
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=FLEETS_GROUP) if ep.name == kind]
    if not found:
        raise ConfigError(f"fleet: no fleet named {kind!r} is installed (conch[{kind}])")
    return found[0].load()


__all__: Sequence[str] = ("Backend", "LocalBackend", "Runtime", "RuntimeInfo")


if TYPE_CHECKING:  # mypy checks that the engine of this machine is a runtime's backend

    def _is_a_backend(be: LocalBackend) -> Backend:
        return be
