"""Which sandbox backend a runtime uses, and what it guarantees (docs/spec.md §9a).

``sandbox_backend``: ``bwrap`` (bubblewrap: namespaces), ``landlock`` (Landlock + seccomp:
no namespaces, no root, works in unprivileged containers) or ``auto``: bwrap when it can set
up a sandbox here, else Landlock; chosen once (at start when the server's own policy is
active, else at the first sandboxed call or ``info``). ``info.sandbox`` names the backend,
the Landlock ABI in use (``landlock_abi``: the kernel's, ``landlock_abi_kernel``, lowered to
``landlock_abi_max`` when that is set), why a better backend was not taken, and the guarantees
that hold. A call that needs a guarantee the backend cannot give is ``sandbox_unavailable``
naming it, unless ``sandbox_partial: allow``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import threading
import time
from typing import Any

from conch.config import ContainmentSettings
from conch.core.containment import sandbox as sb
from conch.core.containment.landlock import lockdown as ld
from conch.core.containment.landlock import rules
from conch.core.containment.landlock import seccomp as sc
from conch.core.containment.landlock.spawner import ForkServer, RestrictedSpawner, probe
from conch.core.containment.landlock.syscalls import ARCH, AUDIT_ARCH
from conch.core.containment.landlock.tmpdirs import TempDirs
from conch.core.process import procfs
from conch.errors import ConchError

BACKENDS = ("auto", "bwrap", "landlock")

GUARANTEES = (
    "fs_write",
    "fs_hide_data_dir",
    "private_tmp",
    "pid_namespace",
    "net_tcp",
    "net_all",
    "unix_sockets",
    "signals",
)


def needed(policy: sb.Policy) -> tuple[str, ...]:
    """The guarantees a call with ``policy`` cannot go without (a private /tmp and a PID
    namespace are how bwrap gives some of them, not needs of their own)."""
    out: list[str] = []
    if policy.sandbox != "off":
        out += ["fs_write", "fs_hide_data_dir"]
    if policy.network == "off":
        out += ["fs_hide_data_dir", "net_tcp", "net_all", "unix_sockets"]
    if policy.active:
        out.append("signals")
    return tuple(dict.fromkeys(out))


def landlock_guarantees(abi: int, seccomp: bool) -> list[str]:
    out = []
    # Landlock handles no metadata change (chmod, chown, utimes, xattrs) and, below ABI 3, no
    # truncation by path: the seccomp filter is what refuses them, so without it neither
    # holds
    if abi >= 1 and seccomp:
        out += ["fs_write", "fs_hide_data_dir"]
    if abi >= 4 or seccomp:
        out.append("net_tcp")
    if seccomp:
        out += ["net_all", "unix_sockets"]
    # signals scoped (ABI 6), and the filter refusing prlimit64 on another process (a
    # RLIMIT_CPU set there is the kernel's SIGKILL) and the other calls on other processes
    if abi >= 6 and seccomp:
        out.append("signals")
    return out


def bwrap_guarantees(seccomp: bool) -> list[str]:
    out = ["fs_hide_data_dir", "private_tmp", "pid_namespace", "net_tcp", "net_all"]
    if seccomp:
        # a read-only bind does not stop connect(), nor a setuid or setgid mode in the
        # workspace (chmod, open, mknod, mkdir): the filter does
        out = ["fs_write", *out, "unix_sockets"]
    out.append("signals")  # (the PID namespace: nothing outside is visible to signal)
    return out


#: the bwrap jobs' seccomp programs, by network setting (``seccomp.seccomp_program``)
_SECCOMP_FILES = {"off": "seccomp-network-off.bpf", "on": "seccomp-network-on.bpf"}


def _probe_bwrap(bwrap: str, *, root: bool, env_prog: str, seccomp: str | None) -> str | None:
    """bwrap once with every namespace a job may need (and the seccomp program, as fd 3 from
    the sh that jobs go through too); None if it works, else why not."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid"]
    argv += ["--die-with-parent", "--unshare-net"]
    if seccomp is not None:
        argv += ["--seccomp", "3"]
    if root:
        argv += ["--cap-drop", "ALL"]
    argv += ["--", env_prog, "--default-signal", "--", "true"]
    if seccomp is not None:
        argv = ["/bin/sh", "-c", 'exec 3< "$0" && exec "$@"', seccomp, *argv]
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{bwrap} could not run: {e}"
    finally:
        _reap_probe_orphans()
    if proc.returncode != 0:
        text = proc.stderr.decode("utf-8", "replace").strip()[-500:]
        return f"bwrap cannot set up a sandbox here (exit {proc.returncode}): {text}"
    return None


def _reap_probe_orphans(limit_s: float = 1.0) -> None:
    """bwrap runs the sandbox's init as a child of its own; when that one outlives the outer
    bwrap by a moment it is re-parented to this process (a subreaper), where nothing else
    would reap it if the server stops before its reaper's first sweep (a server that refuses
    its settings). Reap a probe's zombie orphans: children of ours named bwrap, in a session
    of their own."""
    if not procfs.LINUX:
        return
    deadline = time.monotonic() + limit_s
    mine = str(os.getsid(0))
    while True:
        waiting = False
        for pid in procfs.children(os.getpid()):
            fields = procfs.stat_fields(pid)
            if fields is None or fields[3] == mine or procfs.comm(pid) != "bwrap":
                continue
            if fields[0] == "Z":
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            else:
                waiting = True
        if not waiting or time.monotonic() > deadline:
            return
        time.sleep(0.01)


class Backends:
    """The sandbox backend of one runtime, chosen once."""

    def __init__(
        self,
        settings: ContainmentSettings,
        *,
        data_dir: str,
        instance: str,
        root: bool,
        env_prog: str,
    ) -> None:
        """``settings``: the runtime's (its workspace and private files resolved already)."""
        if settings.backend not in BACKENDS:
            raise ValueError(f"sandbox_backend must be one of {', '.join(BACKENDS)}")
        self.settings = settings
        self.data_dir = data_dir
        self.instance = instance
        self.root = root
        self.env_prog = env_prog
        self._lock = threading.Lock()
        self.chosen: str | None = None
        self.decided = False
        self.not_taken: dict[str, str] = {}
        self.abi, self._abi_reason = 0, ""
        self.kernel_abi = 0
        self.seccomp = False
        self.bwrap_path: str | None = None
        #: bwrap: the seccomp program file of each network setting (read by bwrap as fd 3)
        self.seccomp_files: dict[str, str] = {}
        self.spawner: RestrictedSpawner | None = None
        self.forkserver: ForkServer | None = None
        self.tmpdirs: TempDirs | None = None
        self.layout: rules.Layout | None = None

    # -- choosing ------------------------------------------------------------------------------

    def choose(self) -> str | None:
        """The backend (probing once): ``bwrap``, ``landlock``, ``sandbox-exec`` or None."""
        if self.decided:
            return self.chosen
        with self._lock:
            if not self.decided:
                self.chosen = self._choose()
                self.decided = True
        return self.chosen

    def _choose(self) -> str | None:
        kind = sb.backend()
        if kind == "sandbox-exec":
            if not os.access("/usr/bin/sandbox-exec", os.X_OK):
                self.not_taken["sandbox-exec"] = "/usr/bin/sandbox-exec is missing"
                return None
            return kind
        if kind != "bwrap":
            self.not_taken["all"] = f"no sandbox backend on {sys.platform}"
            return None
        self.kernel_abi, self._abi_reason = ld.abi_version()
        # a cap acts as a kernel of that ABI: the ruleset, the filter and the guarantees follow
        self.abi = (
            min(self.kernel_abi, self.settings.abi_max)
            if self.settings.abi_max > 0
            else self.kernel_abi
        )
        if self.settings.backend in ("auto", "bwrap") and self._try_bwrap():
            return "bwrap"
        if self.settings.backend in ("auto", "landlock") and self._try_landlock():
            return "landlock"
        if self.settings.backend == "bwrap":
            self.not_taken.setdefault("landlock", "sandbox_backend is bwrap")
        elif self.settings.backend == "landlock":
            self.not_taken.setdefault("bwrap", "sandbox_backend is landlock")
        return None

    def _seccomp_program_files(self) -> dict[str, str]:
        out = {}
        for network, name in _SECCOMP_FILES.items():
            path = os.path.join(self.data_dir, name)
            program = sc.seccomp_program(net_off=network == "off")
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(path, flags, 0o600)
            try:
                os.write(fd, program)
            finally:
                os.close(fd)
            out[network] = path
        return out

    def _try_bwrap(self) -> bool:
        path = sb.find_bwrap(self.settings.bwrap)
        if path is None:
            where = self.settings.bwrap or "bwrap on PATH"
            self.not_taken["bwrap"] = (
                f"the sandbox needs bubblewrap, and {where} is not there "
                "(install the `bubblewrap` package)"
            )
            return False
        files: dict[str, str] = {}
        try:
            if ARCH in AUDIT_ARCH:
                files = self._seccomp_program_files()
        except OSError:
            files = {}
        seccomp = files.get("off")
        why = _probe_bwrap(path, root=self.root, env_prog=self.env_prog, seccomp=seccomp)
        if why is not None and seccomp is not None:
            # once more before going without the filter: a probe that met a loaded machine
            # (its 10 s) must not cost every job of this server two guarantees
            why = _probe_bwrap(path, root=self.root, env_prog=self.env_prog, seccomp=seccomp)
        # without the filter bwrap may still work, but host sockets stay reachable and a
        # setuid file can be made (info says: no unix_sockets, no fs_write)
        if (
            why is not None
            and seccomp is not None
            and _probe_bwrap(path, root=self.root, env_prog=self.env_prog, seccomp=None) is None
        ):
            files, why = {}, None
        if why is not None:
            self.not_taken["bwrap"] = why
            return False
        self.bwrap_path, self.seccomp_files, self.seccomp = path, files, bool(files)
        return True

    def _try_landlock(self) -> bool:
        if self.abi < 1:
            self.not_taken["landlock"] = self._abi_reason
            return False
        self.layout = rules.Layout(
            self.settings.workspace,
            (self.data_dir,),
            tuple(f for f in self.settings.private_files if os.path.isfile(f)),
            self.abi,
            self.root,
        )
        spawner = RestrictedSpawner()
        true = shutil.which("true") or "/bin/true"
        why = probe(spawner, self.layout, true, seccomp=True)
        seccomp = why is None
        if why is not None and "(seccomp)" in why:
            why = probe(spawner, self.layout, true, seccomp=False)
        if why is not None:
            spawner.close()
            self.not_taken["landlock"] = why
            return False
        self.spawner, self.seccomp = spawner, seccomp
        # (started at its first job: one that must start in a cgroup glibc cannot spawn into)
        self.forkserver = ForkServer()
        self.layout = dataclasses.replace(self.layout, seccomp=seccomp)
        self.tmpdirs = TempDirs(self.data_dir, self.instance)
        return True

    # -- what it guarantees --------------------------------------------------------------------

    def guarantees(self) -> list[str]:
        if self.chosen == "bwrap":
            return bwrap_guarantees(self.seccomp)
        if self.chosen == "landlock":
            return landlock_guarantees(self.abi, self.seccomp)
        if self.chosen == "sandbox-exec":
            return ["fs_write", "fs_hide_data_dir", "net_tcp", "net_all"]
        return []

    def check(self, policy: sb.Policy) -> str:
        """The backend for a call with ``policy``, or ``sandbox_unavailable`` naming why."""
        backend = self.choose()
        if backend is None:
            why = "; ".join(f"{k}: {v}" for k, v in self.not_taken.items())
            raise ConchError("sandbox_unavailable", f"no sandbox backend works here ({why})")
        have = self.guarantees()
        missing = [g for g in needed(policy) if g not in have]
        if missing and self.settings.partial != "allow":
            raise ConchError(
                "sandbox_unavailable",
                f"the {backend} sandbox here cannot guarantee {', '.join(missing)} for "
                f"sandbox {policy.sandbox!r}, network {policy.network!r}"
                + (f" (Landlock ABI {self.abi}{self._capped()})" if backend == "landlock" else "")
                + "; set sandbox_partial=allow to run with what it can give",
            )
        return backend

    def info(self) -> dict[str, Any]:
        backend = self.choose()
        return {
            "backend": backend,
            "backend_setting": self.settings.backend,
            "landlock_abi": self.abi or None,
            "landlock_abi_kernel": self.kernel_abi or None,
            "not_taken": dict(self.not_taken),
            "guarantees": self.guarantees(),
            "partial": self.settings.partial,
            "sockets": list(self.settings.sockets),
        }

    def _capped(self) -> str:
        if self.abi < self.kernel_abi:
            cap = self.settings.abi_max
            return f", capped by landlock_abi_max={cap}; the kernel's is {self.kernel_abi}"
        return ""

    def close(self) -> None:
        if self.spawner is not None:
            self.spawner.close()
        if self.forkserver is not None:
            self.forkserver.close()
        if self.tmpdirs is not None:
            self.tmpdirs.close()
