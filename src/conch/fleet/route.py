"""Where a fleet sends one tool call: a pure decision on the node table, tested without Ray.

:func:`route` reads the call's arguments (the ``node`` it asks for, the fleet ids and profile
handles it names) and answers a :class:`Route`: ask every node (the listings, ``info``), one
node with the arguments as that node takes them (its own ids and handles), every node until
one knows an id that names no node (a job's name), or the node the fleet chose. It changes
nothing: the caller's arguments are copied, the table and the handles only read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from conch.errors import ConchError
from conch.fleet.handles import Handles, taken_by
from conch.fleet.ids import ID_KEYS, split
from conch.fleet.nodes import Node, NodeTable

# tools that list what a runtime holds: the fleet asks every node and merges the lists
LISTING = frozenset({"list", "bash.jobs", "shell_list"})

How = Literal["each", "info", "node", "anywhere", "placed"]


@dataclass(frozen=True)
class Route:
    """``how`` the call goes: ``each`` (every node, lists merged), ``info`` (every node, one
    answer with the nodes), ``node`` (the node an id or a handle names), ``anywhere`` (every
    node, the first that knows the id answers), ``placed`` (new work on the node chosen)."""

    how: How
    args: dict[str, Any] = field(default_factory=dict)  # as the node(s) take them
    node: Node | None = None  # for ``node`` and ``placed``


def _invalid(message: str) -> ConchError:
    return ConchError("invalid_argument", message)


def route(
    tool: str, arguments: Mapping[str, Any], table: NodeTable, handles: Handles, *, placing: bool
) -> Route:
    """The route of a call of ``tool`` (``placing``: the tool takes a ``node``).

    Raises ``invalid_argument`` for a ``node`` that is no string, ids on two nodes, or a
    ``node`` other than the one an id names; :meth:`NodeTable.choose`'s errors for new work
    no node can take."""
    args = dict(arguments)
    spec = args.pop("node", None) if placing else None
    if spec is not None and (not isinstance(spec, str) or not spec.strip()):
        raise _invalid("node must be a node id or label")
    if tool in LISTING:
        return Route("each", args)
    if tool == "info":
        return Route("info", args)
    named_handle = taken_by(tool, args)
    if named_handle is not None:
        kind, handle = named_handle
        where = handles.resolve(kind, handle)
        holder = table.by_tag(where[0]) if where is not None else None
        if where is not None and holder is not None:
            was = args[kind.arg]
            args[kind.arg] = str(where[1]) if isinstance(was, str) else where[1]
            return Route("node", args, holder)
        # a handle no node gave out: any node answers it in the profile's own words
    target: Node | None = None
    unqualified = False
    named = [(key, args[key]) for key in sorted(ID_KEYS & args.keys())]
    many = args.get("job_ids")  # a read of several jobs: all on one node
    locals_: list[Any] = []
    if isinstance(many, list):
        named += [("job_ids", v) for v in many]
    for key, value in named:
        if not isinstance(value, str):  # refused by the node's validation
            if key == "job_ids":
                locals_.append(value)
            continue
        local, tag = split(value, table.tags)
        if tag is None:
            unqualified = True
            if key == "job_ids":
                locals_.append(value)
            continue
        node = table.by_tag(tag)
        if target is not None and node is not target:
            what = "job_ids name jobs" if key == "job_ids" else f"{key} lives"
            raise _invalid(f"{what} on another node than the rest: read each node's jobs apart")
        target = node
        if key == "job_ids":
            locals_.append(local)
        else:
            args[key] = local
    if isinstance(many, list):
        args["job_ids"] = locals_
    if target is not None:
        if spec is not None and target not in table.match(spec):
            raise _invalid(f"node {spec!r} is not the node {target.node_id} of the id")
        return Route("node", args, target)
    if unqualified:
        return Route("anywhere", args)
    return Route("placed", args, table.choose(spec))
