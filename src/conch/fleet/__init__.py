"""Conch on many machines (SPEC §9b): the same tools on every node of a Ray cluster.

``FleetRuntime`` (conch.fleet.runtime) routes tool calls to one node executor per node
(conch.fleet.executor). ``conch.Runtime(Config(fleet="ray"))`` makes one (entry point
``conch.fleets: ray``), so every front end serves a fleet unchanged. Importing this package
does not import Ray; starting a fleet does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conch.fleet.runtime import FleetRuntime

__all__ = ["FleetRuntime"]


def __getattr__(name: str) -> object:
    if name == "FleetRuntime":
        from conch.fleet.runtime import FleetRuntime

        return FleetRuntime
    raise AttributeError(name)
