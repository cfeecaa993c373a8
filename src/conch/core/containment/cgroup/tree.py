"""The Conch parent cgroups of one runtime (``Cgroups``): made at setup under the server's own
cgroup (the v2 tree, with the memory/pids controllers handed down where the tree delegates them;
the v1 memory/pids/freezer hierarchies where they are writable), what they support
(``Support``), the cgroups of its jobs and shells made below them (``Cgroups.new``), and their
removal at close."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field

from conch.core.containment.cgroup import fs
from conch.core.containment.cgroup import layout as cgroup_layout
from conch.core.containment.cgroup.job import JobCgroup, set_memory
from conch.core.containment.cgroup.kill import kill_now
from conch.core.containment.cgroup.layout import PARENT_PREFIX, Layout
from conch.core.containment.cgroup.sweep import sweep_dead_parents
from conch.core.process import procfs

LIMITS = ("memory_max", "pids_max")
_CONTROLLER = {"memory_max": "memory", "pids_max": "pids"}


@dataclass
class Support:
    """What this host allows: the tracking hierarchy and, per limit, where it applies (or why
    it cannot)."""

    level: bool = False  # a per-job cgroup can be made: the cgroup containment level
    version: str = ""  # "v2", "v1" or "hybrid" (v2 tracks, v1 controllers limit)
    reason: str = ""  # why there is no cgroup level
    limits: dict[str, str] = field(default_factory=dict)  # limit -> "v2" | "v1"
    missing: dict[str, str] = field(default_factory=dict)  # limit -> why not


class Cgroups:
    """The Conch parent cgroups of one runtime, and the cgroups of its jobs and shells."""

    def __init__(self, instance: str, layout: Layout | None = None) -> None:
        self.instance = instance
        # (read through its module: what the probe finds is what a test replaces)
        self.layout = layout if layout is not None else cgroup_layout.read_layout()
        self.support = Support()
        self._v2: str | None = None  # our parent in the v2 tree
        self._v2_controllers: set[str] = set()
        self._v1: dict[str, str] = {}  # controller -> our parent in that v1 hierarchy
        self._parents: list[str] = []
        self.retired: list[JobCgroup] = []  # empty cgroups of finished jobs, to rmdir later
        self._self_leaf: str | None = None  # where this server moved itself (pure v2 scope)

    @property
    def parents(self) -> tuple[str, ...]:
        """The parent cgroups this runtime made (one per hierarchy), until ``close``."""
        return tuple(self._parents)

    # -- setup / teardown --------------------------------------------------------------------

    def setup(self) -> Support:
        """Create the parent cgroups (killing what a dead server left in its own)."""
        name = PARENT_PREFIX + self.instance
        lay = self.layout
        if lay.v2 is not None:
            d = os.path.join(lay.v2, name)
            if fs.mkdir(d):
                if os.path.exists(os.path.join(d, "cgroup.kill")):  # Linux >= 5.14
                    self._v2 = d
                    self._parents.append(d)
                    self._v2_controllers = self._delegate_v2(lay.v2, d)
                else:
                    with contextlib.suppress(OSError):
                        os.rmdir(d)
        for ctrl in ("memory", "pids", "freezer"):
            base = lay.v1.get(ctrl)
            if base is None or (ctrl == "freezer" and self._v2 is not None):
                continue
            d = os.path.join(base, name)
            if fs.mkdir(d):
                self._v1[ctrl] = d
                self._parents.append(d)
        s = Support()
        if self._v2 is not None:
            s.level = True
            s.version = "hybrid" if self._v1 and not self._v2_controllers else "v2"
        elif self._v1:
            s.level = True
            s.version = "v1"
        else:
            s.reason = (
                "no writable cgroup hierarchy (cgroup v2 with cgroup.kill, or the v1 memory/"
                "pids controllers) is available to this process"
                if procfs.LINUX
                else "cgroups exist on Linux only"
            )
        for limit in LIMITS:
            ctrl = _CONTROLLER[limit]
            if ctrl in self._v2_controllers:
                s.limits[limit] = "v2"
            elif ctrl in self._v1:
                s.limits[limit] = "v1"
            elif not s.level:
                s.missing[limit] = f"{limit} needs the cgroup containment level: {s.reason}"
            else:
                s.missing[limit] = (
                    f"{limit} needs the {ctrl} controller, which is neither delegated to this "
                    f"process's cgroup v2 subtree nor writable as a v1 hierarchy"
                )
        self.support = s
        if s.level:
            sweep_dead_parents(lay, keep=name)
        return s

    def _delegate_v2(self, own: str, parent: str) -> set[str]:
        """Enable the memory/pids controllers for our parent's children where the tree allows."""
        available = set(fs.read(os.path.join(own, "cgroup.controllers")).split())
        wanted = {"memory", "pids"} & available
        enabled = set(fs.read(os.path.join(own, "cgroup.subtree_control")).split())
        if wanted - enabled and own != self.layout.v2_mount and fs.pids_in(own) == {os.getpid()}:
            # a delegated scope holding only this server (`systemd-run --user --scope`, a unit
            # with Delegate=yes): the server moves into a leaf of its own, so that the scope may
            # hand its controllers down (cgroup v2 lets only leaves hold processes)
            leaf = parent + "-self"
            if fs.mkdir(leaf):
                try:
                    fs.write(os.path.join(leaf, "cgroup.procs"), "0")
                    self._self_leaf = leaf
                except OSError:
                    with contextlib.suppress(OSError):
                        os.rmdir(leaf)
        for c in wanted - enabled:
            # EBUSY when our own cgroup holds processes (the no-internal-process rule)
            with contextlib.suppress(OSError):
                fs.write(os.path.join(own, "cgroup.subtree_control"), f"+{c}")
        enabled = set(fs.read(os.path.join(own, "cgroup.subtree_control")).split()) & wanted
        out: set[str] = set()
        for c in enabled:
            try:
                fs.write(os.path.join(parent, "cgroup.subtree_control"), f"+{c}")
            except OSError:
                continue
            out.add(c)
        return out

    def close(self) -> None:
        """Remove the parent cgroups (jobs are gone by now; leftovers are killed first). The
        server's own leaf (pure v2 scope) stays while the server lives in it."""
        for d in self._parents:
            for _ in range(20):
                for sub in fs.subdirs(d):
                    kill_now(sub)
                if fs.rmdir_tree(d):
                    break
                time.sleep(0.01)
        self._parents.clear()

    def retire(self, cg: JobCgroup) -> None:
        """``cg`` is empty and no longer needed: it is removed by ``remove_retired`` (off the
        loop: an rmdir of a cgroup waits for the kernel, ~0.1 ms and more under load)."""
        self.retired.append(cg)

    @staticmethod
    def remove_retired(batch: list[JobCgroup]) -> list[JobCgroup]:
        """rmdir each cgroup of ``batch`` (in a worker thread); those that could not go."""
        return [cg for cg in batch if not cg.remove()]

    # -- per job ----------------------------------------------------------------------------

    def check_limits(self, limits: dict[str, int]) -> None:
        """Raise ValueError naming why a requested limit cannot apply here."""
        for k, v in limits.items():
            if v and k in self.support.missing:
                raise ValueError(self.support.missing[k])

    def new(
        self, name: str, limits: dict[str, int] | None = None, *, oom_group: bool = True
    ) -> JobCgroup:
        """A cgroup for one job or shell, limits applied, ready for its child to enter."""
        limits = {k: v for k, v in (limits or {}).items() if v}
        self.check_limits(limits)
        dirs: list[str] = []
        track: str
        kind: str
        try:
            if self._v2 is not None:
                track, kind = fs.mkdir_strict(os.path.join(self._v2, name)), "v2"
                dirs.append(track)
            else:
                ctrl = "freezer" if "freezer" in self._v1 else next(iter(self._v1))
                track, kind = fs.mkdir_strict(os.path.join(self._v1[ctrl], name)), "v1"
                dirs.append(track)
            memory_dir = pids_dir = None
            for limit, value in limits.items():
                ctrl = _CONTROLLER[limit]
                if self.support.limits.get(limit) == "v2":
                    d = track
                else:
                    d = os.path.join(self._v1[ctrl], name)
                    if d not in dirs:
                        fs.mkdir_strict(d)
                        dirs.append(d)
                if limit == "memory_max":
                    memory_dir = d
                    set_memory(d, value, v2=d == track and kind == "v2", oom_group=oom_group)
                else:
                    pids_dir = d
                    fs.write(os.path.join(d, "pids.max"), str(value))
            freezer = None
            if kind == "v1" and "freezer" in self._v1:
                freezer = track
            return JobCgroup(
                dirs=dirs,
                track=track,
                kind=kind,
                memory_dir=memory_dir,
                pids_dir=pids_dir,
                freezer=freezer,
            )
        except OSError as e:
            for d in reversed(dirs):
                with contextlib.suppress(OSError):
                    os.rmdir(d)
            raise OSError(e.errno, f"cannot set up the job's cgroup: {e.strerror}") from None
