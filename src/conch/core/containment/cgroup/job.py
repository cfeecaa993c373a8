"""One job's (or shell's) cgroups: the tracking one, which a kill empties, and those its limits
are written in (the same directory on v2; a directory per controller where a v1 hierarchy
applies the limit). ``set_memory`` writes a memory limit either way."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from conch.core.containment.cgroup import fs
from conch.core.containment.cgroup.kill import kill_now


def set_memory(d: str, value: int, *, v2: bool, oom_group: bool) -> None:
    """Limit cgroup ``d`` to ``value`` bytes, no swap beyond it (v2: ``memory.max``, and with
    ``oom_group`` an OOM kill takes the whole job; v1: ``memory.limit_in_bytes``)."""
    if v2:
        fs.write(os.path.join(d, "memory.max"), str(value))
        if os.path.exists(os.path.join(d, "memory.swap.max")):
            fs.write(os.path.join(d, "memory.swap.max"), "0")
        if oom_group:
            with contextlib.suppress(OSError):
                fs.write(os.path.join(d, "memory.oom.group"), "1")
    else:
        fs.write(os.path.join(d, "memory.limit_in_bytes"), str(value))
        sw = os.path.join(d, "memory.memsw.limit_in_bytes")
        if os.path.exists(sw):
            with contextlib.suppress(OSError):  # swap accounting may be off
                fs.write(sw, str(value))


@dataclass
class JobCgroup:
    """The cgroup(s) of one job: the tracking one (kill, pids), and those of its limits."""

    dirs: list[str]
    track: str
    kind: str  # "v2" | "v1"
    memory_dir: str | None = None
    pids_dir: str | None = None
    freezer: str | None = None
    _oom_base: int = 0

    # -- placement --------------------------------------------------------------------------

    def procs_files(self) -> list[str]:
        """The cgroup.procs files a child writes itself into before it execs its program."""
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    # -- state ------------------------------------------------------------------------------

    def pids(self) -> set[int]:
        out: set[int] = set()
        for d in self.dirs:
            out |= fs.pids_in(d)
        return out

    @property
    def populated(self) -> bool:
        if self.kind == "v2":
            events = fs.read(os.path.join(self.track, "cgroup.events"))
            if events:
                return fs.keyed(events, "populated") != 0
        return bool(self.pids())

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the memory limit since the cgroup began."""
        if self.memory_dir is None:
            return 0
        ev = fs.read(os.path.join(self.memory_dir, "memory.events"))
        if ev:
            return fs.keyed(ev, "oom_kill")
        return fs.keyed(fs.read(os.path.join(self.memory_dir, "memory.oom_control")), "oom_kill")

    def mark_oom(self) -> None:
        """Remember the count now: ``oom_since_mark`` counts from here (per shell command)."""
        self._oom_base = self.oom_kills()

    def oom_since_mark(self) -> int:
        return self.oom_kills() - self._oom_base

    # -- kill -------------------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL everything in the cgroup at once (forks racing the kill included)."""
        kill_now(self.track, freezer=self.freezer is not None)
        for d in self.dirs[1:]:
            kill_now(d)

    async def kill_and_wait(
        self, reap: Callable[[], object] | None = None, limit_s: float = 2.0
    ) -> bool:
        """Kill and wait (bounded) until the cgroup is empty; True when it is."""
        deadline = time.monotonic() + limit_s
        while True:
            self.kill()
            if reap is not None:
                reap()
            if not self.populated:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.005)

    def remove(self) -> bool:
        """rmdir the job's cgroups (they must be empty); True when all are gone."""
        ok = True
        for d in reversed(self.dirs):
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError as e:
                if e.errno != errno.ENOENT:
                    ok = False
        return ok
