"""The sandbox backends the containment tests attack (docs/spec.md §9a, issue 22).

``landlock`` runs at the cgroup level of this host; ``landlock-nocgroup`` without a cgroup. On
glibc 2.36 (this host and CI) a cgroup-level Landlock job is started by the fork server
(clone3 into its cgroup v2 directory; a job with cgroup v1 limits by the spawning thread), one
without a cgroup by a thread of the server that restricts itself and spawns it
(core/containment/landlock/): so both paths meet every attack.
"""

from __future__ import annotations

BACKENDS = ["bwrap", "landlock", "landlock-nocgroup"]


def backend_settings(backend: str) -> dict[str, object]:
    """The Config settings of one of ``BACKENDS``."""
    if backend == "landlock-nocgroup":
        return {"sandbox_backend": "landlock", "cgroup": "off"}
    return {"sandbox_backend": backend}


def kind(backend: str) -> str:
    """``bwrap`` or ``landlock``."""
    return backend.split("-")[0]
