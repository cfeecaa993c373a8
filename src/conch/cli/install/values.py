"""Config values compared and changed as data, whatever file format they came from."""

from __future__ import annotations

import copy
from typing import Any


def same(a: Any, b: Any) -> bool:
    """Equal as config values: mappings whatever their key order, ``true`` never equal to
    ``1``, ``700`` equal to ``700.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def empty(v: Any) -> bool:
    """A value that says nothing: what hosts write for a setting left at its default."""
    return v is None or (not isinstance(v, bool) and v in ("", [], {}))


def with_value(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of ``data`` with ``value`` at ``path`` (mappings made on the way)."""
    out = copy.deepcopy(data)
    node = out
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = copy.deepcopy(value)
    return out


def without_value(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node = out
    for k in path[:-1]:
        node = node[k]
    del node[path[-1]]
    return out


def lookup(data: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path``, or None where there is none."""
    for k in path:
        if not isinstance(data, dict) or k not in data:
            return None
        data = data[k]
    return data
