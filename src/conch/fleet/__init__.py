"""Conch on many machines (SPEC §9b): the same tools on every node of a Ray cluster.

``FleetRuntime`` (conch.fleet.runtime) routes tool calls to one node executor per node
(conch.fleet.executor). Importing this package does not import Ray; starting a fleet does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from conch.config import Config

if TYPE_CHECKING:
    from conch.fleet.runtime import FleetRuntime

__all__ = ["FleetRuntime", "server_runtime"]


def server_runtime(cfg: Config, *, owns_process: bool = True) -> Any:
    """The runtime a front end serves: the fleet with ``fleet=ray``, else this machine's."""
    if cfg.fleet == "ray":
        from conch.fleet.runtime import FleetRuntime

        return FleetRuntime(cfg)
    from conch.core.runtime import Runtime

    return Runtime(cfg, owns_process=owns_process)


def __getattr__(name: str) -> object:
    if name == "FleetRuntime":
        from conch.fleet.runtime import FleetRuntime

        return FleetRuntime
    raise AttributeError(name)
