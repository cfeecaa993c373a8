"""The bookkeeping tool profiles keep for one runtime, owned by that runtime's tool registry and
handed to each call in its :class:`~conch.tools.context.CallContext` (never a module global,
never looked up on the engine)."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


class ProfileState:
    """One instance of each profile's state class (the ai-device-bash handle table, tfbash's
    output capacities, ...), made on first use; it lives and dies with its runtime."""

    def __init__(self) -> None:
        self._slots: dict[type[Any], Any] = {}

    def get(self, cls: type[T]) -> T:
        slot = self._slots.get(cls)
        if slot is None:
            slot = self._slots[cls] = cls()
        return slot
