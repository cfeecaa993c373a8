"""Where this process's cgroups are: the v2 directory and the v1 ones, parsed from
/proc/self/mountinfo and /proc/self/cgroup (``parse_layout`` is pure; ``read_layout`` reads)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from conch.core.process import procfs

#: the name of a runtime's parent cgroup is this prefix and the runtime's instance
PARENT_PREFIX = "conch-"


@dataclass(frozen=True)
class Layout:
    """Where this process's cgroups are: the v2 directory and v1 directories by controller."""

    v2: str | None = None
    v1: dict[str, str] = field(default_factory=dict)
    v2_mount: str | None = None  # the root of the v2 hierarchy (may hold processes)


def parse_layout(mountinfo: str, proc_cgroup: str) -> Layout:
    """This process's cgroup directories from /proc/self/mountinfo and /proc/self/cgroup."""
    v2_mounts: list[tuple[str, str]] = []  # (root within the hierarchy, mount point)
    v1_mounts: dict[str, tuple[str, str]] = {}
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if rfields[0] == "cgroup2":
            v2_mounts.append((root, point))
        elif rfields[0] == "cgroup":
            for opt in rfields[2].split(","):
                if opt in ("memory", "pids", "freezer") and opt not in v1_mounts:
                    v1_mounts[opt] = (root, point)
    v2: str | None = None
    v2_mount: str | None = None
    v1: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hier, controllers, path = parts
        if hier == "0" and controllers == "":
            for root, point in v2_mounts:
                d = _under(point, root, path)
                if d is not None:
                    v2, v2_mount = d, point
                    break
        else:
            for c in controllers.split(","):
                if c in v1_mounts:
                    d = _under(v1_mounts[c][1], v1_mounts[c][0], path)
                    if d is not None:
                        v1[c] = d
    return Layout(v2=v2, v1=v1, v2_mount=v2_mount)


def _unescape(s: str) -> str:
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")


def _under(point: str, root: str, path: str) -> str | None:
    """The directory of cgroup ``path`` in a hierarchy mounted at ``point`` showing ``root``."""
    root = root.rstrip("/")
    if root and path != root and not path.startswith(root + "/"):
        return None
    rel = path[len(root) :].lstrip("/")
    return os.path.join(point, rel) if rel else point


def read_layout() -> Layout:
    if not procfs.LINUX:
        return Layout()
    try:
        with open("/proc/self/mountinfo") as f:
            mountinfo = f.read()
        with open("/proc/self/cgroup") as f:
            own = f.read()
    except OSError:
        return Layout()
    return parse_layout(mountinfo, own)
