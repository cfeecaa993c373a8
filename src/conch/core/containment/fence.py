"""What fences a spawn in: its cgroup (limits, kill) and its sandbox (docs/spec.md §9a).

``Containment`` belongs to a runtime: it owns the Conch parent cgroups and knows the server's
sandbox policy. For each job or shell it makes a ``SpawnFence``, which every spawn path applies
the same way: it spawns ``fence.wrap(argv)`` instead of ``argv`` — a tiny ``sh`` that enters
the job's cgroup(s) and execs the (sandboxed) program, so the child is inside before its program
runs and no fork escapes, while the spawn itself stays a cheap vfork. Where glibc can spawn into
a cgroup (2.39+, ``clone3(CLONE_INTO_CGROUP)``, checked once at start) and the job has a single
cgroup v2 directory, a pipe job's spawn starts its child there itself (``SpawnFence.place``):
no sh enters it (one exec fewer per job, and no cgroup migration, which after an idle spell
waits for an RCU grace period); a sandboxed job's sh only sets the bwrap monitor's signals.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import functools
import logging
import os
import shutil
import socket
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conch.core.containment import gitdir, shenv, unotify
from conch.core.containment import landlock as ll
from conch.core.containment import lockdown as ld
from conch.core.containment import sandbox as sb
from conch.core.containment.backends import Backends
from conch.core.containment.cgroup import LIMITS, Cgroups, JobCgroup
from conch.core.process import libc_spawn, procfs, program
from conch.errors import ConchError, ConfigError

log = logging.getLogger("conch.containment")

# Run by /bin/sh before the program (same pid, replaced by exec): move this very process into
# each cgroup given (writing 0 to cgroup.procs means "the writer"), so the program and every
# fork it makes start inside; with `ignore`, leave the signals a bwrap monitor would die of
# ignored (the program gets them back at their defaults from `env --default-signal`).
# A tiny exec of sh is far cheaper than a Python pre-exec hook, which forces fork over vfork.
# With `fd3=FILE`, open FILE as descriptor 3 for bwrap's `--seccomp 3` (bwrap reads and
# closes it: the program never holds it).
ENTER_LOOP = (
    'while [ "$1" != -- ]; do case $1 in '
    'ignore) trap "" ' + " ".join(s[3:] for s in sb.FORWARDED) + ";; "
    'fd3=*) exec 3< "${1#fd3=}" || exit 125;; '
    '*) echo 0 > "$1" || exit 125;; esac; shift; done; shift; '
)
ENTER = ENTER_LOOP + 'exec "$@"'

SH = "/bin/sh"


_ROOT_WORKSPACE = (
    "sandbox workspace-write with the workspace '/' would leave the whole filesystem "
    "writable: set default_cwd to a project directory"
)


@dataclass
class SpawnFence:
    """How one spawn is fenced in; ``None`` parts are not applied."""

    cgroup: JobCgroup | None = None
    sandbox: sb.Fence | None = None
    bwrap: str | None = None
    env_prog: str = "/usr/bin/env"
    root: bool = False
    tmpdir: str = ""  # macOS: the writable scratch directory of the Seatbelt profile
    retire: Callable[[JobCgroup], None] | None = None  # takes the cgroup once it is empty
    #: the cgroup v2 directory a spawn starts the child in itself, where it can (``prepare``)
    place: str | None = None
    #: bwrap: the file of the seccomp program for its policy's network setting (opened by the
    #: sh as fd 3, read by bwrap)
    seccomp_file: str | None = None
    #: the landlock backend: a thread that restricts itself spawns the job (``spawner``)
    landlock: ll.Spawner | None = None
    #: ... or, where the job starts in ``place`` (that thread's spawn cannot put it there), the
    #: fork server (its clone3 does; a move afterwards waits for an RCU grace period when idle)
    forkserver: ll.ForkServer | None = None
    layout: ll.Layout | None = None
    job_tmp: str = ""  # the job's own TMPDIR (landlock)
    #: landlock, ``sandbox_sockets``: decides each connect of a ``network: off`` job
    broker: unotify.Broker | None = None
    broker_dir: str = ""  # bwrap: where each job's channel to the broker is made
    _channel: unotify.Channel | None = None
    _exposed: tuple[str, ...] = ()
    #: a process started ahead of need (a warm one): ``warm_fits`` compares its ruleset later
    ahead: bool = False
    #: landlock, ahead: what its ruleset's hierarchies were found from (``ll.ruleset_stamps``)
    ruleset_stamps: tuple[Any, ...] | None = None
    #: bwrap, workspace-write: ends this spawn's hold on the workspace's .git placeholder
    #: (at ``drop_tmp``, or when the fence is collected: a spawn that failed)
    git_release: Callable[[], Any] | None = None

    @property
    def spawner(self) -> Callable[..., int] | None:
        """What spawns the prepared argv instead of posix_spawn alone (the landlock backend's
        restricted thread, whose posix_spawn gives the child its restrictions)."""
        return self._spawn_landlock if self.landlock is not None else None

    def _spawn_landlock(
        self,
        path: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        stdin: int,
        stdout: int,
        stderr: int,
        terminal: str | None = None,
    ) -> int:
        assert self.landlock is not None and self.layout is not None
        assert self.sandbox is not None
        if self.ahead:  # (before the ruleset is built: a change after it makes them differ)
            self.ruleset_stamps = ll.ruleset_stamps(self.layout, self.sandbox.policy)
        spec = ll.job_spec(
            self.layout,
            self.sandbox.policy,
            path=path,
            argv=argv,
            env=env,
            cwd=cwd,
            tmpdir=self.job_tmp,
            exposed=self._exposed,
            procs=self.cgroup.procs_files() if self.cgroup is not None else (),
            tty=terminal,
            cgroup=self.place,
            brokered=self.broker is not None and bool(self.broker.allowed),
            broker_metadata=self.broker is not None,
            env_prog=self.env_prog,
        )
        if self.forkserver is not None:
            fds = [] if terminal is not None else [stdin, stdout, stderr]
            pid, listener = self._spawn_forkserver(spec, fds)
        else:
            pid, listener = self.landlock.spawn(spec, stdin=stdin, stdout=stdout, stderr=stderr)
        if listener >= 0:
            assert self.broker is not None
            # where its mode and time changes may land: what Landlock lets it write
            roots = ll.metadata_roots(self.layout, self.sandbox.policy, self.job_tmp, terminal)
            self.broker.watch(listener, roots)
        return pid

    def _spawn_forkserver(self, spec: dict[str, Any], fds: list[int]) -> tuple[int, int]:
        """(pid, its connect filter's listener or -1), as ``ll.Spawner.spawn``."""
        assert self.forkserver is not None
        if self.broker is None or not spec["notify"]:
            return self.forkserver.spawn(spec, fds), -1
        # the job's connect filter sends its listener back on this channel before exec
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with ours:
            try:
                pid = self.forkserver.spawn(spec, [*fds, theirs.fileno()])
            finally:
                theirs.close()
            ours.settimeout(5)
            _, got, _, _ = socket.recv_fds(ours, 16, 1)
        if not got:  # (the child cannot exec without sending it)
            raise OSError(errno.EPROTO, "the job's connect filter sent no listener")
        return pid, got[0]

    def drop_tmp(self) -> None:
        """The job is done: its TMPDIR goes (landlock), and so does its hold on the
        workspace's .git placeholder (bwrap: conch/core/containment/gitdir.py)."""
        if self.job_tmp:
            ll.TempDirs.remove(self.job_tmp)
            self.job_tmp = ""
        if self.git_release is not None:
            self.git_release()
            self.git_release = None

    def prepare(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        exposed: Sequence[str] = (),
        merge_sh: bool = False,
    ) -> tuple[list[str], dict[str, str], str | None]:
        """``wrap``, spawning into ``place`` where that works for the argv it gives (glibc
        finds its program): (argv, env, the cgroup directory to spawn into or None)."""
        if self.landlock is not None:
            # landlock: the spawner wraps argv in its own gate sh (which enters the cgroups
            # where the spawn cannot start it there), the fork server execs argv itself;
            # TMPDIR is the job's own
            hidden = self.sandbox.hidden if self.sandbox is not None else ()
            self._exposed = tuple(
                sorted({*_inside(argv, hidden), *(os.path.realpath(e) for e in exposed)})
            )
            return list(argv), {**env, "TMPDIR": self.job_tmp}, None
        if self.place is not None:  # (then there is nothing to enter, merged or not)
            run, start = self.wrap(argv, cwd=cwd, env=env, exposed=exposed, placed=True)
            if program.resolved(run[0], start) is not None:
                return run, start, self.place
        run, start = self.wrap(argv, cwd=cwd, env=env, exposed=exposed, merge_sh=merge_sh)
        return run, start, None

    @property
    def _bwrap_loads_seccomp(self) -> bool:
        """bwrap loads the job's seccomp program (every bwrap job's, but where the
        ``sandbox_sockets`` shim loads its own)."""
        return self.bwrap is not None and self.seccomp_file is not None and self._channel is None

    @property
    def monitor(self) -> bool:
        """A bwrap monitor process sits between the job's leader pid and the program."""
        return self.sandbox is not None and self.bwrap is not None

    def wrap(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        exposed: Sequence[str] = (),
        merge_sh: bool = False,
        placed: bool = False,
    ) -> tuple[list[str], dict[str, str]]:
        """The argv that runs ``argv`` with ``env`` fenced in (entering the cgroup, then the
        sandbox), and the environment to spawn it with. ``merge_sh``: ``argv`` is ``[sh or
        bash, ..., -c, script]`` with a script of Conch's own (no arguments), which then runs in
        the very shell that enters the cgroup: one exec fewer. ``placed``: the spawn starts the
        child in ``place`` itself, so no sh enters the cgroup (one still sets the signals a
        bwrap monitor must ignore)."""
        assert not (placed and (self.place is None or merge_sh))
        if merge_sh and self.cgroup is not None and self.sandbox is None:
            # [sh or bash, ..., -c, script]: the script runs after the loop that enters, with
            # the same $0 and no positional parameters, as it would have alone
            assert argv[-2] == "-c"
            files = self.cgroup.procs_files()
            return [*argv[:-1], ENTER_LOOP + argv[-1], argv[0], *files, "--"], dict(env)
        run = list(argv)
        if self.sandbox is not None:
            hidden = self.sandbox.hidden
            fence = sb.Fence(
                self.sandbox.policy,
                self.sandbox.workspace,
                hidden,
                tuple(
                    sorted(
                        {
                            *self.sandbox.exposed,
                            *_inside(argv, hidden),
                            *(os.path.realpath(e) for e in exposed),
                        }
                    )
                ),
                cwd,
                tuple(f for f in self.sandbox.masked if os.path.isfile(f)),
            )
            if self.bwrap is not None:
                net_off = fence.policy.network == "off" and self.seccomp_file is not None
                binds: tuple[str, ...] = ()
                if net_off and self.broker is not None and self.broker.allowed:
                    # sandbox_sockets: the shim inside loads the filters (a connect filter
                    # whose listener it hands to Conch first), not bwrap
                    if self._channel is None:  # (one per spawn: wrap may run twice)
                        self._channel = unotify.Channel(self.broker, self.broker_dir)
                    run = [*broker_shim_argv(self._channel.path), *run]
                    binds = (self._channel.dir,)
                    # the shim and its interpreter are seen inside even where they lie under
                    # a path the sandbox covers (/tmp is a tmpfs there)
                    fence = dataclasses.replace(
                        fence, exposed=tuple(sorted({*fence.exposed, *shim_files()}))
                    )
                run = sb.bwrap_argv(
                    self.bwrap,
                    self.env_prog,
                    fence,
                    run,
                    root=self.root,
                    seccomp_fd=3 if self._bwrap_loads_seccomp else None,
                    binds=binds,
                )
            else:
                run = sb.seatbelt_argv(fence, run, self.tmpdir)
        pre = self.cgroup.procs_files() if self.cgroup is not None and not placed else []
        if self.monitor:
            pre.append("ignore")
            if self._bwrap_loads_seccomp:
                pre.append(f"fd3={self.seccomp_file}")
        if not pre:
            return run, dict(env)
        # what the sh would change in the environment, the program gets back from `env`
        fix, start = shenv.restore(env, cwd, self.env_prog)
        return [SH, "-c", ENTER, "conch-enter", *pre, "--", *fix, *run], start


def broker_shim_argv(channel: str) -> list[str]:
    """The program that runs first in a bwrap sandbox with ``sandbox_sockets`` (network off):
    lockdown.py on its own, standard library only (``lockdown.broker_shim``), imported as a
    module so its cached bytecode is used (run as a script it is compiled each time)."""
    here = os.path.dirname(os.path.abspath(ld.__file__))
    return [
        os.path.realpath(sys.executable),
        *("-I", "-S", "-c", _SHIM, here),
        *("--broker", channel, "--"),
    ]


def shim_files() -> list[str]:
    """What the shim needs to be visible: lockdown.py and the interpreter's installation."""
    return [os.path.realpath(ld.__file__), os.path.realpath(sys.base_prefix)]


_SHIM = "import sys; sys.path.insert(0, sys.argv[1]); import lockdown; lockdown._main(sys.argv[1:])"


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
            pid = libc_spawn.spawn(
                SH,
                [SH, "-c", 'while read -r l; do echo "$l"; done < /proc/self/cgroup'],
                env={"PATH": "/usr/bin:/bin"},
                cwd="/",
                stdin=null,
                stdout=w,
                stderr=null,
                cgroup=cg.track,
            )
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


def inner_pid(leader: int) -> int:
    """The program bwrap runs for ``leader`` (its monitor): down the chain of bwrap processes
    (monitor, then the PID namespace's init) to the first process that is not bwrap."""
    pid = leader
    for _ in range(4):
        if procfs.comm(pid) != "bwrap":
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
        if not a.startswith("/") or not os.path.isfile(a):
            continue
        real = os.path.realpath(a)
        if any(real.startswith(d.rstrip("/") + "/") for d in dirs):
            out.append(real)
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
        private_files: Sequence[str] = (),
        backend: str = "auto",
        partial: str = "refuse",
        sockets: Sequence[str] = (),
        abi_max: int = 0,
    ) -> None:
        self.policy = policy
        self.default_limits = {k: int(v) for k, v in limits.items() if v}
        self.workspace = os.path.realpath(workspace)
        self.data_dir = os.path.realpath(data_dir)
        # files no sandboxed job may read (the --env-file, which may hold the server's tokens)
        self.private_files = tuple(os.path.realpath(f) for f in private_files if f)
        self.cgroups: Cgroups | None = None
        self._use_cgroups = use_cgroups
        self._instance = instance
        self.root = hasattr(os, "geteuid") and os.geteuid() == 0
        self.env_prog = shutil.which("env") or "/usr/bin/env"
        self.no_cgroup_reason = "cgroups are turned off (setting cgroup=off)"
        self.places_itself = False  # a spawn can start its child in a cgroup v2 directory
        self.broker: unotify.Broker | None = None  # sandbox_sockets; landlock metadata
        self._git: gitdir.Placeholder | None = None  # bwrap workspace-write: <ws>/.git
        self.backends = Backends(
            setting=backend,
            partial=partial,
            abi_max=abi_max,
            sockets=sockets,
            bwrap=bwrap,
            data_dir=self.data_dir,
            workspace=self.workspace,
            private_files=self.private_files,
            instance=instance,
            root=self.root,
            env_prog=self.env_prog,
        )

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

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self.backends.sockets:
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
        allowed = unotify.allow_list(self.backends.sockets)
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
        if fence.ruleset_stamps != ll.ruleset_stamps(fence.layout, self.policy):
            return "stale"
        if _inside(argv, fence.sandbox.hidden):
            return "skip"
        real = os.path.realpath(program) if program else ""
        if not real or ll.in_hole(fence.layout, real):
            return "skip"
        return None

    def _hold_git(self, out: SpawnFence) -> None:
        """A bwrap workspace-write spawn: a ``.git`` at the workspace's top for bwrap to bind
        read-only (a placeholder where there is none), held until ``out`` is done."""
        if self._git is None:
            self._git = gitdir.Placeholder(self.workspace)
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
        forkserver: ll.ForkServer | None = None
        if policy.active:
            refusal = self._workspace_write_refusal()
            if policy.sandbox == "workspace-write" and refusal is not None:
                raise ConchError(*refusal)
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
                    self._metadata_unfenced(b.partial)
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
