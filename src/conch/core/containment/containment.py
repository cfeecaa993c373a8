"""The containment of one runtime (``Containment``): it owns the Conch parent cgroups, the
sandbox backend (backends.py) and the socket broker (unotify.py), knows the server's sandbox
policy and limits, and makes the fence of each spawn (``Containment.fence``: fence.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import shutil
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conch.config import ContainmentSettings
from conch.core.containment import gitdir, unotify
from conch.core.containment import sandbox as sb
from conch.core.containment.backends import Backends
from conch.core.containment.cgroup.tree import LIMITS, Cgroups
from conch.core.containment.fence import SH, SpawnFence, inside
from conch.core.containment.landlock import rules
from conch.core.containment.landlock.spawner import ForkServer
from conch.core.process import libc_spawn
from conch.core.process.spec import SpawnSpec
from conch.errors import ConchError, ConfigError

log = logging.getLogger("conch.containment")


_ROOT_WORKSPACE = (
    "sandbox workspace-write with the workspace '/' would leave the whole filesystem "
    "writable: set default_cwd to a project directory"
)


def _spawns_into(cgroups: Cgroups) -> bool:
    """Whether this kernel starts a child in a job's cgroup v2 directory when glibc asks it to
    (``CLONE_INTO_CGROUP``, Linux 5.7+): one real spawn of sh into a probe cgroup, which says
    where it found itself."""
    if not os.access(SH, os.X_OK):
        return False
    try:
        cg = cgroups.new(f"probe-{os.getpid()}")
    except (OSError, ValueError):
        return False
    r = w = -1
    try:
        if cg.kind != "v2" or cg.dirs != [cg.track]:
            return False
        r, w = os.pipe()
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            scan = 'while read -r l; do echo "$l"; done < /proc/self/cgroup'
            pid = libc_spawn.spawn(
                SpawnSpec(
                    SH, [SH, "-c", scan], {"PATH": "/usr/bin:/bin"}, "/", null, w, null,
                    cgroup=cg.track,
                )
            )  # fmt: skip
        finally:
            os.close(null)
        os.close(w)
        w = -1
        with os.fdopen(r, "rb") as f:
            r = -1
            lines = f.read(65536).decode(errors="replace").splitlines()
        _, status = os.waitpid(pid, 0)
        where = next((ln[3:] for ln in lines if ln.startswith("0::")), None)
        return (
            os.WIFEXITED(status)
            and os.WEXITSTATUS(status) == 0
            and where is not None
            and where != "/"
            and cg.track.rstrip("/").endswith(where.rstrip("/"))
        )
    except OSError:
        return False
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
        cg.remove()


class Containment:
    """The containment level of one runtime and the fence of each of its spawns."""

    def __init__(self, settings: ContainmentSettings, *, instance: str, data_dir: str) -> None:
        # (paths resolved once: every later comparison is with real paths)
        self.settings = settings = dataclasses.replace(
            settings,
            workspace=os.path.realpath(settings.workspace),
            # files no sandboxed job may read (the --env-file: it may hold the server's tokens)
            private_files=tuple(os.path.realpath(f) for f in settings.private_files if f),
        )
        self.policy = sb.Policy(settings.sandbox, settings.network)
        self.default_limits = {k: int(v) for k, v in settings.limits.items() if v}
        self.workspace = settings.workspace
        self.data_dir = os.path.realpath(data_dir)
        self.private_files = settings.private_files
        self.cgroups: Cgroups | None = None
        self._use_cgroups = settings.cgroups
        self._instance = instance
        self.root = hasattr(os, "geteuid") and os.geteuid() == 0
        self.env_prog = shutil.which("env") or "/usr/bin/env"
        self.no_cgroup_reason = "cgroups are turned off (setting cgroup=off)"
        self.places_itself = False  # a spawn can start its child in a cgroup v2 directory
        self.broker: unotify.Broker | None = None  # sandbox_sockets; landlock metadata
        self._git: gitdir.Placeholders | None = None  # bwrap workspace-write: .git, HEAD
        #: the workspace's setuid and setgid files, or None when not known (set by the
        #: engine to its change tracker's ``privileged``: the tracker sits above this level)
        self.privileged_files: Callable[[], list[str] | None] | None = None
        self.backends = Backends(
            settings, data_dir=self.data_dir, instance=instance, root=self.root,
            env_prog=self.env_prog,
        )  # fmt: skip

    def _workspace_write_refusal(self) -> tuple[str, str] | None:
        """(error code, message) when workspace-write cannot fence this workspace: '/' leaves
        everything writable; a data dir inside it could be moved aside by a job (renaming a
        directory above its hidden mount) and the server, holding it by path, would serve
        forged logs."""
        if self.workspace == "/":
            return "invalid_argument", _ROOT_WORKSPACE
        if (self.data_dir + "/").startswith(self.workspace.rstrip("/") + "/"):
            return "sandbox_unavailable", (
                f"sandbox workspace-write: the data dir {self.data_dir} lies inside the "
                f"workspace {self.workspace}, where a job could move it aside and forge its "
                "logs: set data_dir (CONCH_DATA_DIR) outside the workspace, or default_cwd to "
                "a project directory"
            )
        return None

    def _refuse_privileged_files(self) -> None:
        """A setuid or setgid file already in the workspace: a workspace-write job could
        rewrite its content through a shared mapping (the kernel clears the bits on
        ``write``, not on a write through ``mmap``), and whoever runs it next would run the
        job's code with its owner's rights. Such a workspace gets no workspace-write job
        (known from the change tracker's index: ``privileged_files``; where tracking is off
        nothing is known, as docs/containment.md says)."""
        if self.privileged_files is None:
            return
        found = self.privileged_files()
        if not found:
            return
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise ConchError(
            "sandbox_unavailable",
            f"sandbox workspace-write: the workspace {self.workspace} holds setuid or setgid "
            f"files ({shown}); a job could rewrite one through a shared mapping and keep its "
            "bit: remove the bits (chmod u-s,g-s) or run read-only",
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self.settings.sockets:
            self._start_broker()
        if self.policy.sandbox == "workspace-write":
            refusal = self._workspace_write_refusal()
            if refusal is not None:
                raise ConfigError(refusal[1])
            if self.workspace == os.path.realpath(os.path.expanduser("~")):
                log.warning(
                    "sandbox workspace-write with the workspace %s, the home directory: "
                    "jobs can write its rc files (.bashrc, .profile, .ssh/): set default_cwd "
                    "to a project directory",
                    self.workspace,
                )
        if self.policy.active:  # chosen now, so the first job does not wait for the probes
            self.backends.choose()
        if not self._use_cgroups:
            return
        cg = Cgroups(self._instance)
        support = cg.setup()
        if support.level:
            self.cgroups = cg
            self.places_itself = libc_spawn.into_cgroup_available() and _spawns_into(cg)
        else:
            self.no_cgroup_reason = support.reason

    def _start_broker(self) -> None:
        """``sandbox_sockets``: a Linux backend (landlock: the spawning thread's filter gives
        the listener to Conch directly; bwrap: a shim inside the sandbox hands it over), and
        the seccomp filter."""
        allowed = unotify.allow_list(self.settings.sockets)
        kind = self.backends.choose()
        if kind not in ("landlock", "bwrap"):
            why = "; ".join(f"{k}: {v}" for k, v in self.backends.not_taken.items())
            raise ConfigError(
                "sandbox_sockets needs the landlock or bwrap sandbox backend, the backend "
                f"here is {kind or 'none'}" + (f" ({why})" if why else "")
            )
        if not self.backends.seccomp:
            raise ConfigError("sandbox_sockets: the seccomp filter cannot be loaded here")
        problem = self._broker_problem
        if problem is not None:
            raise ConfigError(f"sandbox_sockets: this kernel cannot broker connects: {problem}")
        self.broker = unotify.Broker(allowed)

    def _landlock_broker(self) -> unotify.Broker | None:
        """The broker of a landlock job (``sandbox_sockets``, and the mode and time changes of
        ``workspace-write``: metaops), made at the first such job where this kernel can
        broker; None elsewhere (then the filter refuses setuid/setgid modes only)."""
        if self.broker is None and self._broker_problem is None:
            self.broker = unotify.Broker(())
        return self.broker

    @functools.cached_property
    def _broker_problem(self) -> str | None:
        """Why this kernel cannot broker a job's calls (None: it can; a broker is only ever
        made where it can). Probed once: two syscalls, the same answer each time."""
        return unotify.check_kernel()

    def _metadata_unfenced(self, partial: str) -> None:
        """Without the broker a workspace-write job's mode and time changes are not kept to
        the workspace (only setuid/setgid modes are refused): fs_write does not fully hold,
        so the call is refused unless sandbox_partial allows it."""
        if partial != "allow":
            raise ConchError(
                "sandbox_unavailable",
                "the landlock sandbox here cannot guarantee fs_write for sandbox "
                "'workspace-write': mode and time changes outside the workspace cannot be "
                f"refused ({self._broker_problem}); set sandbox_partial=allow to run with "
                "what it can give",
            )

    def close(self) -> None:
        self.backends.close()
        if self._git is not None:
            self._git.close()
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
                **(
                    {"placement": "clone3" if self.places_itself else "sh"}
                    if cg is not None
                    else {}
                ),
            },
            "sandbox": self._sandbox_info(),
        }

    def _sandbox_info(self) -> dict[str, Any]:
        out = {
            "mode": self.policy.sandbox,
            "network": self.policy.network,
            **self.backends.info(),
            "workspace": self.workspace,
        }
        if out["backend"] == "landlock" and "fs_write" in out["guarantees"]:
            why = self._broker_problem
            if why is not None:
                # (no broker: a workspace-write job's mode and time changes are not kept to
                # the workspace; read-only refuses them all, so fs_write holds there only)
                out["caveats"] = {
                    "fs_write": "holds at sandbox 'read-only' only: at 'workspace-write' mode "
                    f"and time changes outside the workspace cannot be refused ({why})"
                }
                if self.policy.sandbox == "workspace-write":
                    out["guarantees"] = [g for g in out["guarantees"] if g != "fs_write"]
        return out

    # -- per spawn ---------------------------------------------------------------------------

    @property
    def warm_sandbox(self) -> bool:
        """Whether a process started ahead under the server's own policy may become a job
        with that policy: only under Landlock, whose ruleset ``warm_fits`` can compare (a
        bwrap job's mounts depend on its directory and files; a call there spawns)."""
        return not self.policy.active or self.backends.chosen == "landlock"

    def warm_fits(
        self, fence: SpawnFence | None, argv: Sequence[str], program: str | None
    ) -> str | None:
        """Whether a process started ahead with ``fence`` may run ``argv`` (``program``:
        where its program is) as a job whose policy is the server's (the caller checked
        that): None when this call's fresh spawn would get the very same fence (Landlock: a
        ruleset granting the same), ``"skip"`` when this call needs one of its own (a file
        of the data dir it names, exposed to a fresh job; a program in a hole, which a fresh
        spawn refuses with EACCES), ``"stale"`` when no call can take it any more (the
        directories the ruleset was found from changed)."""
        if not self.policy.active:
            return None if fence is None or fence.sandbox is None else "stale"
        if fence is None or fence.landlock is None or fence.sandbox is None:
            return "stale"
        if fence.sandbox.policy != self.policy or fence.layout is None:
            return "stale"
        if fence.ruleset_stamps != rules.ruleset_stamps(fence.layout, self.policy):
            return "stale"
        if inside(argv, fence.sandbox.hidden):
            return "skip"
        real = os.path.realpath(program) if program else ""
        if not real or rules.in_hole(fence.layout, real):
            return "skip"
        return None

    def _hold_git(self, out: SpawnFence) -> None:
        """A bwrap workspace-write spawn: a ``.git`` and a ``HEAD`` at the workspace's top
        for bwrap to bind read-only (placeholders where there are none), held until ``out``
        is done."""
        if self._git is None:
            self._git = gitdir.Placeholders(self.workspace)
        try:
            self._git.hold()
        except ValueError as e:
            raise ConchError("sandbox_unavailable", str(e)) from None
        out.git_release = weakref.finalize(out, self._git.release)

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
        shell: bool = False,
    ) -> SpawnFence:
        """Check the call's values and make the fence of one spawn (its cgroup included)."""
        limits = self.resolve_limits({"memory_max": memory_max, "pids_max": pids_max})
        policy = self.resolve_policy(sandbox, network)
        out = SpawnFence(root=self.root, env_prog=self.env_prog)
        forkserver: ForkServer | None = None
        if policy.active:
            refusal = self._workspace_write_refusal()
            if policy.sandbox == "workspace-write" and refusal is not None:
                raise ConchError(*refusal)
            if policy.sandbox == "workspace-write":
                self._refuse_privileged_files()
            out.sandbox = sb.Fence(
                policy, self.workspace, (self.data_dir,), masked=self.private_files
            )
            b = self.backends
            kind = b.check(policy) if b.decided else await asyncio.to_thread(b.check, policy)
            if kind == "bwrap":
                out.bwrap, out.seccomp_file = b.bwrap_path, b.seccomp_files.get(policy.network)
                out.broker = self.broker
                out.broker_dir = os.path.join(self.data_dir, "brokers")
                if policy.sandbox == "workspace-write":
                    self._hold_git(out)
            elif kind == "landlock":
                assert b.tmpdirs is not None
                out.landlock, out.layout = b.spawner, b.layout
                forkserver = b.forkserver
                out.broker = self._landlock_broker()
                if policy.sandbox == "workspace-write" and out.broker is None:
                    self._metadata_unfenced(self.settings.partial)
                try:
                    out.job_tmp = b.tmpdirs.make(name)
                except OSError as e:
                    raise ConchError("spawn_failed", f"cannot make the job's TMPDIR: {e}") from None
            else:
                out.tmpdir = os.environ.get("TMPDIR") or "/tmp"
        if self.cgroups is not None:
            try:
                out.cgroup = self.cgroups.new(name, limits, oom_group=not shell)
                out.retire = self.cgroups.retire
            except (OSError, ValueError) as e:
                raise ConchError("spawn_failed", str(e)) from None
            cg = out.cgroup
            if cg.kind == "v2" and cg.dirs == [cg.track]:
                if forkserver is not None:
                    # a landlock job: the fork server's clone3 starts it there (no grace
                    # period), before the job's filter, which refuses clone3 (glibc's spawn
                    # into a cgroup from the restricted thread would run under it)
                    out.place, out.forkserver = cg.track, forkserver
                elif self.places_itself:
                    out.place = cg.track
        return out
