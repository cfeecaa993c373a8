"""The cgroup containment level (docs/spec.md §9a): one cgroup per job and per shell, limits, kill.

Two layouts are supported:

* **cgroup v2** (a typical desktop: a delegated systemd user scope, or root): the server's own
  cgroup gets a ``conch-<instance>`` child, each job a cgroup below it. Killing is
  ``cgroup.kill``; ``memory.max``/``pids.max`` apply where the memory/pids controllers are
  delegated to that subtree.
* **v1 controllers** (older or hybrid hosts): ``memory`` and ``pids`` hierarchies under
  ``/sys/fs/cgroup/<controller>``, used for the limits; they also track processes where no
  writable v2 tree exists (killing is then: freeze, SIGKILL every pid in ``cgroup.procs``, thaw).

A hybrid host has both: a writable v2 tree without controllers tracks and kills, the v1
controllers limit. A child is placed into its cgroups by itself, between fork and exec
(a tiny ``sh`` writes ``0`` to each ``cgroup.procs`` and execs the program, see
containment.py), so no fork can escape between spawn and placement.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from conch.core.process import procfs

PARENT_PREFIX = "conch-"
LIMITS = ("memory_max", "pids_max")
_CONTROLLER = {"memory_max": "memory", "pids_max": "pids"}


# -- layout detection (pure parsing + a probe) --------------------------------------------------


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


# -- small file helpers ------------------------------------------------------------------------


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _keyed(text: str, key: str) -> int:
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            try:
                return int(v)
            except ValueError:
                return 0
    return 0


def _pids_in(d: str) -> set[int]:
    out: set[int] = set()
    for line in _read(os.path.join(d, "cgroup.procs")).split():
        with contextlib.suppress(ValueError):
            out.add(int(line))
    return out


def _rmdir_tree(d: str) -> bool:
    """Remove a cgroup directory and its (empty) children; True when it is gone."""
    try:
        entries = list(os.scandir(d))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            _rmdir_tree(e.path)
    try:
        os.rmdir(d)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


# -- the manager (one per runtime) ---------------------------------------------------------------


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
        self.layout = layout if layout is not None else read_layout()
        self.support = Support()
        self._v2: str | None = None  # our parent in the v2 tree
        self._v2_controllers: set[str] = set()
        self._v1: dict[str, str] = {}  # controller -> our parent in that v1 hierarchy
        self._parents: list[str] = []
        self.retired: list[JobCgroup] = []  # empty cgroups of finished jobs, to rmdir later
        self._self_leaf: str | None = None  # where this server moved itself (pure v2 scope)

    # -- setup / teardown --------------------------------------------------------------------

    def setup(self) -> Support:
        """Create the parent cgroups (killing what a dead server left in its own)."""
        name = PARENT_PREFIX + self.instance
        lay = self.layout
        if lay.v2 is not None:
            d = os.path.join(lay.v2, name)
            if _mkdir(d):
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
            if _mkdir(d):
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
        available = set(_read(os.path.join(own, "cgroup.controllers")).split())
        wanted = {"memory", "pids"} & available
        enabled = set(_read(os.path.join(own, "cgroup.subtree_control")).split())
        if wanted - enabled and own != self.layout.v2_mount and _pids_in(own) == {os.getpid()}:
            # a delegated scope holding only this server (`systemd-run --user --scope`, a unit
            # with Delegate=yes): the server moves into a leaf of its own, so that the scope may
            # hand its controllers down (cgroup v2 lets only leaves hold processes)
            leaf = parent + "-self"
            if _mkdir(leaf):
                try:
                    _write(os.path.join(leaf, "cgroup.procs"), "0")
                    self._self_leaf = leaf
                except OSError:
                    with contextlib.suppress(OSError):
                        os.rmdir(leaf)
        for c in wanted - enabled:
            # EBUSY when our own cgroup holds processes (the no-internal-process rule)
            with contextlib.suppress(OSError):
                _write(os.path.join(own, "cgroup.subtree_control"), f"+{c}")
        enabled = set(_read(os.path.join(own, "cgroup.subtree_control")).split()) & wanted
        out: set[str] = set()
        for c in enabled:
            try:
                _write(os.path.join(parent, "cgroup.subtree_control"), f"+{c}")
            except OSError:
                continue
            out.add(c)
        return out

    def close(self) -> None:
        """Remove the parent cgroups (jobs are gone by now; leftovers are killed first). The
        server's own leaf (pure v2 scope) stays while the server lives in it."""
        for d in self._parents:
            for _ in range(20):
                for sub in _subdirs(d):
                    kill_now(sub)
                if _rmdir_tree(d):
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
                track, kind = _mkdir_strict(os.path.join(self._v2, name)), "v2"
                dirs.append(track)
            else:
                ctrl = "freezer" if "freezer" in self._v1 else next(iter(self._v1))
                track, kind = _mkdir_strict(os.path.join(self._v1[ctrl], name)), "v1"
                dirs.append(track)
            memory_dir = pids_dir = None
            for limit, value in limits.items():
                ctrl = _CONTROLLER[limit]
                if self.support.limits.get(limit) == "v2":
                    d = track
                else:
                    d = os.path.join(self._v1[ctrl], name)
                    if d not in dirs:
                        _mkdir_strict(d)
                        dirs.append(d)
                if limit == "memory_max":
                    memory_dir = d
                    _set_memory(d, value, v2=d == track and kind == "v2", oom_group=oom_group)
                else:
                    pids_dir = d
                    _write(os.path.join(d, "pids.max"), str(value))
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


def _mkdir(d: str) -> bool:
    try:
        os.mkdir(d, 0o755)
    except FileExistsError:
        return True
    except OSError:
        return False
    return True


def _mkdir_strict(d: str) -> str:
    with contextlib.suppress(FileExistsError):
        os.mkdir(d, 0o755)
    return d


def _subdirs(d: str) -> list[str]:
    try:
        return [e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _set_memory(d: str, value: int, *, v2: bool, oom_group: bool) -> None:
    if v2:
        _write(os.path.join(d, "memory.max"), str(value))
        if os.path.exists(os.path.join(d, "memory.swap.max")):
            _write(os.path.join(d, "memory.swap.max"), "0")
        if oom_group:
            with contextlib.suppress(OSError):
                _write(os.path.join(d, "memory.oom.group"), "1")
    else:
        _write(os.path.join(d, "memory.limit_in_bytes"), str(value))
        sw = os.path.join(d, "memory.memsw.limit_in_bytes")
        if os.path.exists(sw):
            with contextlib.suppress(OSError):  # swap accounting may be off
                _write(sw, str(value))


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
            out |= _pids_in(d)
        return out

    @property
    def populated(self) -> bool:
        if self.kind == "v2":
            events = _read(os.path.join(self.track, "cgroup.events"))
            if events:
                return _keyed(events, "populated") != 0
        return bool(self.pids())

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the memory limit since the cgroup began."""
        if self.memory_dir is None:
            return 0
        ev = _read(os.path.join(self.memory_dir, "memory.events"))
        if ev:
            return _keyed(ev, "oom_kill")
        return _keyed(_read(os.path.join(self.memory_dir, "memory.oom_control")), "oom_kill")

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


def kill_now(d: str, *, freezer: bool = False) -> None:
    """Kill every process of cgroup ``d``: ``cgroup.kill`` (v2) or freeze + SIGKILL (v1)."""
    kill_file = os.path.join(d, "cgroup.kill")
    if os.path.exists(kill_file):
        with contextlib.suppress(OSError):
            _write(kill_file, "1")
            return
    frozen = False
    if freezer:
        with contextlib.suppress(OSError):
            _write(os.path.join(d, "freezer.state"), "FROZEN")
            frozen = True
            deadline = time.monotonic() + 0.2
            while "FREEZING" in _read(os.path.join(d, "freezer.state")):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.001)
    for _ in range(100):
        pids = _pids_in(d)
        if not pids:
            break
        _signal(pids, signal.SIGKILL)
        if frozen:
            break
    if frozen:
        with contextlib.suppress(OSError):
            _write(os.path.join(d, "freezer.state"), "THAWED")


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def sweep_dead_parents(layout: Layout, keep: str = "") -> list[str]:
    """Kill and remove the parent cgroups of Conch servers that no longer exist."""
    removed: list[str] = []
    bases = ([layout.v2] if layout.v2 else []) + list(layout.v1.values())
    for base in bases:
        try:
            entries = [
                e for e in os.scandir(base) if e.name.startswith(PARENT_PREFIX) and e.name != keep
            ]
        except OSError:
            continue
        for e in entries:
            if _owner_alive(e.name[len(PARENT_PREFIX) :]):
                continue
            for sub in _subdirs(e.path):
                kill_now(sub)
            kill_now(e.path)
            for _ in range(20):
                if _rmdir_tree(e.path):
                    removed.append(e.path)
                    break
                time.sleep(0.01)
    return removed


def _owner_alive(instance: str) -> bool:
    """False only for a server of this PID namespace that provably no longer runs (see
    procfs.owner_in_this_namespace): another namespace's parents are not ours to judge."""
    owner = procfs.owner_in_this_namespace(instance)
    if owner is None:
        return True
    return procfs.start_time(owner[0]) == owner[1]
