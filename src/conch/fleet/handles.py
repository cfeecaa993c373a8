"""Profile handles that are not Conch ids: ai-device-bash's ``background_pid`` (read back by
``get {pid}``) and Codex's session id (``write_stdin {session_id}``). Each node gives them out
for its own runtime; the fleet remembers which node gave which, so the call naming one goes
there, and gives the caller a handle of its own when two nodes gave out the same one (a handle
stays a number in the profile's range, as the original's is). Pure: no Ray.

Profiles whose tools keep state between calls of one runtime that no id carries are refused
on a fleet (:data:`REFUSED`): its calls would land on different nodes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

REFUSED = {
    "claude-code": "its Bash keeps the working directory (and `cd`) from one call to the next "
    "within one runtime, and a fleet places each call on a node of its own",
}
_CODEX_SESSION = re.compile(r"(Process running with session ID )(\d+)")


@dataclass(frozen=True)
class HandleKind:
    """Where one profile's handle is given out and read back, and its range."""

    issued_by: frozenset[str]  # tools whose results give one out
    result_key: str  # the result's key holding it ("" : in the result's text)
    taken_by: frozenset[str]  # tools that name one
    arg: str
    lo: int
    hi: int


KINDS = (
    HandleKind(
        frozenset({"bash", "run", "script"}),
        "background_pid",
        frozenset({"get"}),
        "pid",
        10_000_000,
        2**31 - 1,
    ),
    HandleKind(
        frozenset({"exec_command", "write_stdin"}),
        "",
        frozenset({"write_stdin"}),
        "session_id",
        1_000,
        100_000,
    ),
)


class Handles:
    """fleet handle <-> (node tag, the node's handle), per kind."""

    def __init__(self) -> None:
        self._to_node: dict[tuple[str, int], tuple[str, int]] = {}
        self._to_fleet: dict[tuple[str, str, int], int] = {}
        self._random = random.SystemRandom()

    def learn(self, kind: HandleKind, tag: str, local: int) -> int:
        key = (kind.arg, tag, local)
        known = self._to_fleet.get(key)
        if known is not None:
            return known
        handle = local
        while (kind.arg, handle) in self._to_node:  # another node gave out the same one
            handle = self._random.randrange(kind.lo, kind.hi)
        self._to_node[(kind.arg, handle)] = (tag, local)
        self._to_fleet[key] = handle
        return handle

    def resolve(self, kind: HandleKind, handle: int) -> tuple[str, int] | None:
        return self._to_node.get((kind.arg, handle))


def taken_by(tool: str, args: Mapping[str, Any]) -> tuple[HandleKind, int] | None:
    """The handle a call names, if its tool takes one."""
    for kind in KINDS:
        if tool in kind.taken_by:
            value = args.get(kind.arg)
            if isinstance(value, int) and not isinstance(value, bool):
                return kind, value
            if isinstance(value, str) and value.isdigit():
                return kind, int(value)
    return None


def give_out(handles: Handles, tool: str, result: dict[str, Any], tag: str) -> dict[str, Any]:
    """A node's result with the handles it gives out made the fleet's."""
    for kind in KINDS:
        if tool not in kind.issued_by:
            continue
        if kind.result_key:
            value = result.get(kind.result_key)
            if isinstance(value, int) and not isinstance(value, bool):
                result = {**result, kind.result_key: handles.learn(kind, tag, value)}
        elif isinstance(result.get("text"), str):
            result = {**result, "text": _give_out_in_text(handles, kind, tag, result["text"])}
    return result


def _give_out_in_text(handles: Handles, kind: HandleKind, tag: str, text: str) -> str:
    def fleet_handle(m: re.Match[str]) -> str:
        return m.group(1) + str(handles.learn(kind, tag, int(m.group(2))))

    return _CODEX_SESSION.sub(fleet_handle, text)
