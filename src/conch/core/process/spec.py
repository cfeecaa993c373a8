"""One child to start, as every spawner takes it.

A ``SpawnSpec`` is the whole of one spawn: the program, its argv and environment, its directory,
its three descriptors (or the terminal they are), the cgroup v2 directory it starts in and any
other descriptor it gets. Every spawner takes one whole and returns the child's pid:
``libc_spawn.spawn`` (glibc's posix_spawn), ``popen.spawn`` (which finds the program, then uses
posix_spawn or Popen, or the spawner a fence gives it), the fence's landlock spawner
(core/containment/fence.py), and behind it the restricted thread and the fork server
(core/containment/landlock/). Nothing re-spells the fields on the way down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class SpawnSpec:
    """One child: it leads a new session, gets ``stdin``/``stdout``/``stderr`` as 0-2 (or opens
    ``terminal``, the PTY slave they are, after setsid: its controlling terminal), ``fds`` as
    ``first_fd``, ``first_fd + 1``, ... and no other descriptor, every signal at its default.
    ``path``: the program's file; None for ``popen.spawn`` to find ``argv[0]`` on ``env``'s
    PATH. ``cgroup``: the cgroup v2 directory the child starts in (None: where its parent
    is)."""

    path: str | None
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str
    stdin: int = -1
    stdout: int = -1
    stderr: int = -1
    terminal: str | None = None
    cgroup: str | None = None
    fds: Sequence[int] = ()
    first_fd: int = 3

    @property
    def stdio(self) -> list[int]:
        """The descriptors that become 0-2 (none where the child opens its terminal)."""
        return [] if self.terminal is not None else [self.stdin, self.stdout, self.stderr]


class Spawner(Protocol):
    """Starts the child ``spec`` describes; its pid (a child of this process, never reaped
    here). A failure to start is an ``OSError`` (``popen.spawn``: ``spawn_failed``)."""

    def __call__(self, spec: SpawnSpec, /) -> int: ...
