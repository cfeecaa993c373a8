"""What fences a spawn in: its cgroup (limits, kill) and its sandbox (SPEC §9a).

``Containment`` belongs to a runtime: it owns the Conch parent cgroups and knows the server's
sandbox policy. For each job or shell it makes a ``SpawnFence``, which every spawn path applies
the same way: ``wrap(argv)`` before spawning, ``preexec()`` in the child between fork and exec
(enter the cgroup; under bwrap, ignore the signals the monitor would otherwise die of), and
``spawned()`` after.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conch.core.process import procfs
from conch.core.process import sandbox as sb
from conch.core.process.cgroup import LIMITS, Cgroups, JobCgroup
from conch.errors import ConchError

_SIG_IGN = 1
_libc_signal: Any = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError, AttributeError):
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _libc_signal = _libc.signal
        _libc_signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
        _libc_signal.restype = ctypes.c_void_p
_FORWARDED = [int(getattr(signal, s)) for s in sb.FORWARDED]


@dataclass
class SpawnFence:
    """How one spawn is fenced in; ``None`` parts are not applied."""

    cgroup: JobCgroup | None = None
    sandbox: sb.Fence | None = None
    bwrap: str | None = None
    env_prog: str = "/usr/bin/env"
    root: bool = False
    tmpdir: str = ""
    limits: dict[str, int] = field(default_factory=dict)

    @property
    def sandboxed(self) -> bool:
        return self.sandbox is not None

    @property
    def monitor(self) -> bool:
        """A bwrap monitor process sits between the job's leader pid and the program."""
        return self.sandbox is not None and self.bwrap is not None

    def wrap(self, argv: Sequence[str], *, cwd: str, exposed: Sequence[str] = ()) -> list[str]:
        if self.sandbox is None:
            return list(argv)
        fence = sb.Fence(
            self.sandbox.policy,
            self.sandbox.workspace,
            self.sandbox.hidden,
            tuple(sorted({*self.sandbox.exposed, *_inside(argv, self.sandbox.hidden), *exposed})),
            cwd,
        )
        if self.bwrap is not None:
            return sb.bwrap_argv(self.bwrap, self.env_prog, fence, argv, root=self.root)
        return sb.seatbelt_argv(fence, argv, self.tmpdir)

    def prepare(self) -> None:
        """In the parent, just before the spawn."""
        if self.cgroup is not None:
            self.cgroup.open_for_child()

    def preexec(self) -> None:
        """In the child between fork and exec: nothing here may allocate much or take locks."""
        if self.cgroup is not None:
            self.cgroup.place_self()
        if self.monitor and _libc_signal is not None:
            for s in _FORWARDED:
                _libc_signal(s, _SIG_IGN)

    @property
    def needs_preexec(self) -> bool:
        return self.cgroup is not None or self.monitor

    def spawned(self) -> None:
        if self.cgroup is not None:
            self.cgroup.spawned()


def inner_pid(leader: int) -> int:
    """The program bwrap runs for ``leader`` (its monitor): down the chain of bwrap processes
    (monitor, then the PID namespace's init) to the first process that is not bwrap."""
    pid = leader
    for _ in range(4):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            return pid
        if comm != "bwrap":
            return pid
        kids = procfs.children(pid)
        if len(kids) != 1:
            return pid
        pid = kids[0]
    return pid


def _inside(argv: Sequence[str], dirs: Sequence[str]) -> list[str]:
    """argv elements that are files inside a hidden directory (a job's own script file)."""
    out = []
    for a in argv:
        inside = a.startswith("/") and any(a.startswith(d.rstrip("/") + "/") for d in dirs)
        if inside and os.path.isfile(a):
            out.append(a)
    return out


class Containment:
    """The containment level of one runtime and the fence of each of its spawns."""

    def __init__(
        self,
        *,
        instance: str,
        use_cgroups: bool,
        policy: sb.Policy,
        limits: Mapping[str, int],
        workspace: str,
        data_dir: str,
        bwrap: str = "",
    ) -> None:
        self.policy = policy
        self.default_limits = {k: int(v) for k, v in limits.items() if v}
        self.workspace = os.path.realpath(workspace)
        self.data_dir = os.path.realpath(data_dir)
        self._bwrap_setting = bwrap
        self.cgroups: Cgroups | None = None
        self._use_cgroups = use_cgroups
        self._instance = instance
        self._probed: dict[bool, str | None] = {}  # network_off -> None (works) | why not
        self.root = hasattr(os, "geteuid") and os.geteuid() == 0
        self.env_prog = shutil.which("env") or "/usr/bin/env"
        self.no_cgroup_reason = "cgroups are turned off (setting cgroup=off)"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if not self._use_cgroups:
            return
        cg = Cgroups(self._instance)
        support = cg.setup()
        if support.level:
            self.cgroups = cg
        else:
            self.no_cgroup_reason = support.reason

    def close(self) -> None:
        if self.cgroups is not None:
            self.cgroups.close()

    @property
    def level(self) -> str | None:
        """``cgroup`` when each job gets a cgroup, else None (the caller's own level applies)."""
        return "cgroup" if self.cgroups is not None else None

    def info(self) -> dict[str, Any]:
        cg = self.cgroups
        limits = {}
        for k in LIMITS:
            if cg is not None and k in cg.support.limits:
                limits[k] = {"available": True, "via": f"cgroup {cg.support.limits[k]}"}
            else:
                reason = (
                    cg.support.missing.get(k, "")
                    if cg is not None
                    else f"{k} needs the cgroup containment level: {self.no_cgroup_reason}"
                )
                limits[k] = {"available": False, "reason": reason}
        return {
            "cgroup": {
                "available": cg is not None,
                "version": cg.support.version if cg is not None else None,
                **({} if cg is not None else {"reason": self.no_cgroup_reason}),
                "limits": limits,
                "defaults": dict(self.default_limits),
            },
            "sandbox": {
                "mode": self.policy.sandbox,
                "network": self.policy.network,
                "backend": sb.backend() or None,
                "workspace": self.workspace,
            },
        }

    # -- per spawn ---------------------------------------------------------------------------

    def resolve_limits(self, given: Mapping[str, int | None]) -> dict[str, int]:
        """The limits of one call: the server's defaults, lowered by the call's values."""
        out = dict(self.default_limits)
        for k in LIMITS:
            v = given.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConchError("invalid_argument", f"{k} must be a positive integer")
            ceiling = self.default_limits.get(k)
            if ceiling is not None and v > ceiling:
                raise ConchError(
                    "invalid_argument",
                    f"{k} {v} is above the server's {k} {ceiling}; a call may only lower it",
                )
            out[k] = v
        for k, v in out.items():
            if not v:
                continue
            if self.cgroups is None:
                raise ConchError(
                    "invalid_argument",
                    f"{k} needs the cgroup containment level, which is not available: "
                    f"{self.no_cgroup_reason}",
                )
            why = self.cgroups.support.missing.get(k)
            if why:
                raise ConchError("invalid_argument", why)
        return {k: v for k, v in out.items() if v}

    def resolve_policy(self, sandbox: str | None, network: str | None) -> sb.Policy:
        try:
            return sb.effective(self.policy, sandbox, network)
        except ValueError as e:  # Loosening included
            raise ConchError("invalid_argument", str(e)) from None

    async def fence(
        self,
        name: str,
        *,
        sandbox: str | None = None,
        network: str | None = None,
        memory_max: int | None = None,
        pids_max: int | None = None,
        exposed: Sequence[str] = (),
        shell: bool = False,
    ) -> SpawnFence:
        """Check the call's values and make the fence of one spawn (its cgroup included)."""
        limits = self.resolve_limits({"memory_max": memory_max, "pids_max": pids_max})
        policy = self.resolve_policy(sandbox, network)
        out = SpawnFence(limits=limits, root=self.root, env_prog=self.env_prog)
        if policy.active:
            out.sandbox = sb.Fence(
                policy,
                self.workspace,
                (self.data_dir,),
                tuple(os.path.realpath(e) for e in exposed),
            )
            kind = sb.backend()
            if kind == "bwrap":
                out.bwrap = await self._bwrap(policy.network == "off")
            elif kind == "sandbox-exec":
                if not os.access("/usr/bin/sandbox-exec", os.X_OK):
                    raise ConchError("sandbox_unavailable", "/usr/bin/sandbox-exec is missing")
                out.tmpdir = os.environ.get("TMPDIR") or "/tmp"
            else:
                raise ConchError("sandbox_unavailable", f"no sandbox backend on {sys.platform}")
        if self.cgroups is not None:
            try:
                out.cgroup = self.cgroups.new(name, limits, oom_group=not shell)
            except (OSError, ValueError) as e:
                raise ConchError("spawn_failed", str(e)) from None
        return out

    async def _bwrap(self, network_off: bool) -> str:
        path = sb.find_bwrap(self._bwrap_setting)
        if path is None:
            where = self._bwrap_setting or "bwrap on PATH"
            raise ConchError(
                "sandbox_unavailable",
                f"the sandbox needs bubblewrap, and {where} is not there "
                "(install the `bubblewrap` package)",
            )
        if network_off not in self._probed:
            self._probed[network_off] = await sb.probe(
                path, network_off=network_off, root=self.root
            )
        why = self._probed[network_off]
        if why is not None:
            raise ConchError("sandbox_unavailable", why)
        return path
