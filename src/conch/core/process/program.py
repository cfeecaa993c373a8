"""Finding the program of an argv job once, like bash's command hash.

Popen otherwise tries ``execve`` on every PATH directory in turn inside the child, while the
server is suspended in ``vfork``, and builds the candidate list in Python, on every call. A
found program is remembered per (name, PATH) and checked with one ``access`` before each use;
PATHs with relative entries (which depend on the cwd) are never remembered.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

_found: dict[tuple[str, str], str] = {}
_LIMIT = 1024


def executable(name: str, path: str | None) -> str | None:
    """The absolute file that running ``name`` with this PATH would execute, or None when
    ``name`` has a slash, PATH is relative in parts, or nothing is found (the caller then lets
    the OS search and report, as before)."""
    if "/" in name or not name or path is None:
        return None
    key = (name, path)
    hit = _found.get(key)
    if hit is not None:
        if os.access(hit, os.X_OK):
            return hit
        del _found[key]
    dirs = path.split(os.pathsep)
    if not all(d.startswith("/") for d in dirs):
        return None
    for d in dirs:
        candidate = os.path.join(d, name)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            if len(_found) >= _LIMIT:
                _found.clear()
            _found[key] = candidate
            return candidate
    return None


def resolved(name: str, env: Mapping[str, str]) -> str | None:
    """The file to execute for argv[0] ``name`` with this environment's PATH: a name with a
    slash is that path (relative to the child's cwd); None when it is not found this way."""
    path = executable(name, env.get("PATH"))
    return name if path is None and "/" in name else path
