"""The tool registry as the fleet publishes it: the usual tools, with an optional ``node`` on
the ones that place work (``exec``, ``shell_open``, ``search``) and ``nodes`` in ``info``. The
profiles' resources are listed here and read on every node (conch.fleet.runtime)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

from conch.tools.registry import ToolRegistry
from conch.tools.tool import Tool

PLACING = frozenset({"exec", "shell_open", "search"})
NODE_ARG: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 256,
    "description": "Where to run: a node id (or a unique prefix of one), `key=value` of a node "
    "label, or a label value. Default: the least loaded alive node. Jobs and shells started "
    "there carry the node in their ids; later calls on them go there by themselves.",
}
NODES_OUTPUT: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "node": {"type": "string"},
            "alive": {"type": "boolean"},
            "labels": {"type": "object"},
            "running_jobs": {"type": "integer"},
        },
        "required": ["node", "alive", "labels", "running_jobs"],
    },
}


class FleetRegistry(ToolRegistry):
    """The fleet's tools by name; profile state and resources stay with each node's runtime."""

    def __init__(self, profiles: Sequence[str] = ("conch",)) -> None:
        super().__init__(profiles)
        self.tools = [_fleet_tool(t) if self.error_result_of(t) is None else t for t in self.tools]
        self.unlisted = [_fleet_tool(t) for t in self.unlisted]
        self._by_name = {t.name: t for t in [*self.unlisted, *self.tools]}


def takes_node(tool: Tool) -> bool:
    return "node" in tool.input_schema.get("properties", {})


def _fleet_tool(tool: Tool) -> Tool:
    """A Conch-shaped tool (its errors are Conch's envelope) as the fleet publishes it."""
    if tool.name in PLACING:
        schema = copy.deepcopy(tool.input_schema)
        schema.setdefault("properties", {})["node"] = NODE_ARG
        return dataclasses.replace(tool, input_schema=schema)
    if tool.name == "info":
        out = copy.deepcopy(tool.output_schema)
        out.setdefault("properties", {})["nodes"] = NODES_OUTPUT
        out["properties"]["fleet"] = {"type": "string"}
        return dataclasses.replace(tool, output_schema=out)
    return tool
