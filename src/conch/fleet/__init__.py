"""Conch on many machines (docs/spec.md §9b): the same tools on every node of a Ray cluster.

``conch.Runtime(Config(fleet="ray"))`` is a ``conch.Runtime`` whose backend is a
``FleetBackend`` (conch.fleet.runtime, found through the entry point ``conch.fleets: ray``): it
routes tool calls (conch.fleet.route) to one node executor per node (conch.fleet.executor), so
every front end serves a fleet unchanged. Importing this package does not import Ray; starting a
fleet does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conch.fleet.runtime import FleetBackend

__all__ = ["FleetBackend"]


def __getattr__(name: str) -> object:
    if name == "FleetBackend":
        from conch.fleet.runtime import FleetBackend

        return FleetBackend
    raise AttributeError(name)
