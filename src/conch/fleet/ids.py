"""Fleet ids: a node's local job or shell id plus that node's tag (``j_0a1b2c3d4e.5f6a7b8c``).

The tag is the start of the Ray node id, so an id says where its job lives and every call on it
is routed there; the joined form still matches every id schema (``[A-Za-z0-9][A-Za-z0-9._-]*``).
Pure functions, no Ray.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from typing import Any

# argument and result keys that hold a job or shell id, in every profile (and a change set's
# undo and undone job)
ID_KEYS = frozenset(
    {"job_id", "shell_id", "exec_id", "active_exec_id", "last_job_id", "undo_of", "undone_by"}
)
# result keys that hold a list of job ids (a change set's overlapping jobs)
ID_LIST_KEYS = frozenset({"overlapping_jobs"})
SEP = "."
TAG_LEN = 8


def node_tag(node_id: str, taken: Container[str] = ()) -> str:
    """The shortest prefix of ``node_id`` (at least TAG_LEN) no other node has taken."""
    for n in range(TAG_LEN, len(node_id) + 1):
        tag = node_id[:n]
        if tag not in taken:
            return tag
    return node_id


def qualify(local_id: str, tag: str) -> str:
    return f"{local_id}{SEP}{tag}"


def split(fleet_id: str, tags: Container[str]) -> tuple[str, str | None]:
    """(local id, node tag) of a fleet id; (the id, None) when it names no known node (a job's
    own name, say: then every node is asked)."""
    local, sep, tag = fleet_id.rpartition(SEP)
    if sep and local and tag in tags:
        return local, tag
    return fleet_id, None


def qualify_result(value: Any, tag: str, node_id: str, *, add_node: bool) -> Any:
    """A node's result with every id made a fleet id; with ``add_node``, every object that
    holds an id also gets ``node`` (the Ray node id)."""
    return _walk(value, lambda local: qualify(local, tag), node_id if add_node else None)


def _walk(value: Any, fix: Callable[[str], str], node_id: str | None) -> Any:
    if isinstance(value, list):
        return [_walk(v, fix, node_id) for v in value]
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    has_id = False
    for k, v in value.items():
        if k in ID_KEYS and isinstance(v, str) and v:
            out[k] = fix(v)
            has_id = True
        elif k in ID_LIST_KEYS and isinstance(v, list):
            out[k] = [fix(x) if isinstance(x, str) and x else x for x in v]
        else:
            out[k] = _walk(v, fix, node_id)
    if has_id and node_id is not None and "node" not in out:
        out["node"] = node_id
    return out
