"""The embedded API (SPEC §8): ``async with conch.Runtime(conch.Config(...)) as rt:``.

:class:`Runtime` **holds** an engine (conch/core/engine.py) and the tool registry of the
configured profiles, with their per-runtime state; its public API is SPEC §8's methods plus
``tools()`` and ``call_tool()`` (httpx's client holds its transport the same way). Front ends
(MCP, HTTP, CLI) are typed against the :class:`~conch.tools.host.Host` protocol it implements;
nothing in ``conch.core`` or ``conch.tools`` imports this module.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

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
from conch.tools import lean, resources
from conch.tools.call import ToolOutcome, call_tool_full
from conch.tools.context import ToolContext
from conch.tools.host import EngineView, Host, HostBase
from conch.tools.hosts import TRANSPORTS
from conch.tools.registry import ToolRegistry
from conch.tools.watch import LocalWatch

FLEETS_GROUP = "conch.fleets"  # entry points: fleet kind -> its runtime class (conch.fleet)
_WARM = _EngineContext(warm=True)  # the embedded exec may use a process started ahead


class RuntimeInfo(InfoResult):
    """``info``: the engine's facts plus the active profiles and the transports."""

    profiles: list[str]
    transports: list[str]


P = ParamSpec("P")
R = TypeVar("R")


def _shaped(
    rt: Runtime, result: Mapping[str, Any], lean_form: Callable[[Any], dict[str, Any]]
) -> dict[str, Any]:
    """A result in the configured detail (SPEC §6: what the ``conch`` tools return)."""
    return lean_form(result) if rt.config.result_detail == "lean" else dict(result)


def _snapshot(rt: Runtime, result: Any) -> dict[str, Any]:
    return _shaped(rt, result, lambda r: lean.snapshot(r, rt.default_cwd))


def _followup(rt: Runtime, result: Any) -> dict[str, Any]:
    """A later snapshot of a job (read, write, signal): its name was said by its exec."""
    return _shaped(rt, result, lambda r: lean.snapshot(r, rt.default_cwd, named=False))


def _shell_summary(rt: Runtime, result: Any) -> dict[str, Any]:
    return _shaped(rt, result, lean.shell_summary)


def _search(rt: Runtime, result: Any) -> dict[str, Any]:
    return _shaped(rt, result, lean.search)


def _changes(rt: Runtime, result: Any) -> dict[str, Any]:
    return _shaped(rt, result, lean.changes)


def _op(
    name: str,
    make: Callable[P, R],
    run: Callable[[Engine, R], Awaitable[Any]],
    shape: Callable[[Runtime, Any], dict[str, Any]],
    doc: str | None = None,
) -> Callable[Concatenate[Runtime, P], Awaitable[dict[str, Any]]]:
    """A typed method of the embedded API: its arguments are the request's (``make``), its
    result the engine's (``run``) in the configured detail (``shape``)."""

    async def call(self: Runtime, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        return shape(self, await run(self._engine, make(*args, **kwargs)))

    call.__name__, call.__qualname__ = name, f"Runtime.{name}"
    call.__doc__ = doc or run.__doc__ or make.__doc__
    return call


class Runtime(HostBase):
    """Conch's engine with its tool catalogue, usable in-process.

    The typed methods take the tools' own arguments and return what ``call_tool`` returns
    (the result in the configured detail). With ``Config(fleet="ray")`` the object made is the
    fleet's runtime instead (the same surface over every node of a cluster: SPEC §9b), found
    through the ``conch.fleets`` entry points so that this layer never imports the one above."""

    def __new__(cls, config: Config | None = None, **kwargs: Any) -> Runtime:
        if cls is Runtime and config is not None and config.fleet != "off":
            fleet: Runtime = _fleet_class(config.fleet)(config, **kwargs)
            return fleet
        return super().__new__(cls)

    def __init__(self, config: Config | None = None, *, owns_process: bool = False) -> None:
        self._engine = Engine(config, owns_process=owns_process)
        self.config = self._engine.config
        self.registry = ToolRegistry(self.config.profiles)
        self._view = EngineView(self._engine, self.registry)
        self._watch = LocalWatch(self._engine)

    @property
    def engine(self) -> Engine:
        """The engine this runtime holds (``conch.core``'s API: request objects in, full
        results out), for code that wants the level below the tools."""
        return self._engine

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        await self._engine.start()

    async def aclose(self) -> None:
        """Stop every job and shell, reap everything; idempotent and safe to call concurrently."""
        await self._engine.aclose()

    @property
    def closed(self) -> bool:
        return self._engine.closed

    @property
    def started(self) -> bool:
        return self._engine.started

    @property
    def default_cwd(self) -> str:
        return self._engine.default_cwd

    # -- the typed methods (SPEC §8): each takes its request's fields (core/requests.py) ------

    exec = _op("exec", ExecRequest, lambda e, r: e.exec(r, _WARM), _snapshot, Engine.exec.__doc__)
    read = _op("read", ReadRequest, Engine.read, _followup)
    write = _op("write", WriteRequest, Engine.write, _followup)
    signal = _op("signal", SignalRequest, Engine.signal, _followup)
    shell_open = _op("shell_open", ShellOpenRequest, Engine.shell_open, _shell_summary)
    search = _op("search", SearchRequest, Engine.search, _search)

    async def list(self, state: str = "all") -> dict[str, Any]:
        result = await self._engine.list(state)
        return _shaped(self, result, lambda r: lean.listing(r, self.default_cwd))

    async def shell_close(self, shell_id: str) -> dict[str, Any]:
        return _shaped(self, await self._engine.shell_close(shell_id), lean.shell_close)

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
        result = await self._engine.changes(
            job_id, undo=undo, force=tuple(force), cursor=cursor, max_bytes=max_bytes
        )
        return _changes(self, lean.changes_full(result))

    async def info(self) -> RuntimeInfo:
        return {
            **await self._engine.info(),
            "profiles": builtins.list(self.config.profiles),
            "transports": builtins.list(TRANSPORTS),
        }

    # -- the catalogue -------------------------------------------------------------------------

    def tools(self) -> builtins.list[dict[str, Any]]:
        """Every tool of the active profiles as MCP ``tools/list`` shows it."""
        return [t.describe(self.config) for t in self.registry.tools]

    async def _call_tool(
        self, name: str, arguments: Mapping[str, Any] | None, context: ToolContext | None
    ) -> ToolOutcome:
        if not self.closed and not self.started:
            await self.start()
        return await call_tool_full(self._engine, self.registry, name, arguments, context)

    async def list_resources(self, *, seed_only: bool = False) -> builtins.list[dict[str, Any]]:
        """The resources front ends publish (``seed_only``: what a seed profile served alone
        publishes)."""
        return resources.resource_list(self._engine, self.registry, seed_only=seed_only)

    async def read_resource(self, uri: str, *, seed_only: bool = False) -> tuple[str, str]:
        """(mime type, text) of a resource; ``not_found`` for an unknown one."""
        return resources.read_resource(self._engine, self.registry, uri, seed_only=seed_only)

    @property
    def view(self) -> EngineView:
        """What front ends watch (the host protocol's view, conch/tools/host.py)."""
        return self._view

    @property
    def watch(self) -> LocalWatch:
        """What the dashboard shows and takes from a person (conch/tools/watch.py)."""
        return self._watch


def _fleet_class(kind: str) -> Any:
    from importlib.metadata import entry_points

    from conch.errors import ConfigError

    found = [ep for ep in entry_points(group=FLEETS_GROUP) if ep.name == kind]
    if not found:
        raise ConfigError(f"fleet: no fleet named {kind!r} is installed (conch[{kind}])")
    return found[0].load()


__all__: Sequence[str] = ("Runtime", "RuntimeInfo")


if TYPE_CHECKING:  # mypy checks that this runtime is a host (conch/tools/host.py)

    def _is_a_host(rt: Runtime) -> Host:
        return rt
