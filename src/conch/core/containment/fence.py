"""How one spawn is fenced in (``SpawnFence``, made by ``Containment.fence``:
containment.py): its cgroup (limits, kill) and its sandbox.

Every spawn path applies a fence the same way: it spawns ``fence.wrap(argv)`` instead of
``argv`` — a tiny ``sh`` that enters the job's cgroup(s) and execs the (sandboxed) program, so
the child is inside before its program runs and no fork escapes, while the spawn itself stays a
cheap vfork. Where glibc can spawn into a cgroup (2.39+, ``clone3(CLONE_INTO_CGROUP)``, checked
once at start) and the job has a single cgroup v2 directory, a pipe job's spawn starts its child
there itself (``SpawnFence.place``): no sh enters it (one exec fewer per job, and no cgroup
migration, which after an idle spell waits for an RCU grace period); a sandboxed job's sh only
sets the bwrap monitor's signals. Under the landlock backend the fence's ``spawner`` starts the
job instead (landlock/spawner.py)."""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import socket
import struct
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conch.core.containment import sandbox as sb
from conch.core.containment import shenv, unotify
from conch.core.containment.cgroup.job import JobCgroup
from conch.core.containment.landlock import rules, shim
from conch.core.containment.landlock import seccomp as sc
from conch.core.containment.landlock.spawner import ForkServer, RestrictedSpawner
from conch.core.containment.landlock.tmpdirs import TempDirs
from conch.core.process import procfs, program
from conch.core.process.spec import Spawner, SpawnSpec

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
    landlock: RestrictedSpawner | None = None
    #: ... or, where the job starts in ``place`` (that thread's spawn cannot put it there), the
    #: fork server (its clone3 does; a move afterwards waits for an RCU grace period when idle)
    forkserver: ForkServer | None = None
    layout: rules.Layout | None = None
    job_tmp: str = ""  # the job's own TMPDIR (landlock)
    #: landlock, ``sandbox_sockets``: decides each connect of a ``network: off`` job
    broker: unotify.Broker | None = None
    broker_dir: str = ""  # bwrap: where each job's channel to the broker is made
    _channel: unotify.Channel | None = None
    _exposed: tuple[str, ...] = ()
    #: a process started ahead of need (a warm one): ``warm_fits`` compares its ruleset later
    ahead: bool = False
    #: landlock, ahead: what its ruleset's hierarchies were found from (``rules.ruleset_stamps``)
    ruleset_stamps: tuple[Any, ...] | None = None
    #: bwrap, workspace-write: ends this spawn's hold on the workspace's .git placeholder
    #: (at ``drop_tmp``, or when the fence is collected: a spawn that failed)
    git_release: Callable[[], Any] | None = None

    @property
    def spawner(self) -> Spawner | None:
        """What spawns the prepared argv instead of posix_spawn alone (the landlock backend's
        restricted thread, whose posix_spawn gives the child its restrictions)."""
        return self._spawn_landlock if self.landlock is not None else None

    def _spawn_landlock(self, spec: SpawnSpec) -> int:
        """Start ``spec`` fenced in (its cgroup: ``place``, else the gate sh enters it)."""
        assert self.landlock is not None and self.layout is not None
        assert self.sandbox is not None
        if self.ahead:  # (before the ruleset is built: a change after it makes them differ)
            self.ruleset_stamps = rules.ruleset_stamps(self.layout, self.sandbox.policy)
        spec = dataclasses.replace(spec, cgroup=self.place)
        job = rules.job_spec(
            self.layout,
            self.sandbox.policy,
            spec,
            tmpdir=self.job_tmp,
            exposed=self._exposed,
            procs=self.cgroup.procs_files() if self.cgroup is not None else (),
            brokered=self.broker is not None and bool(self.broker.allowed),
            broker_metadata=self.broker is not None,
            env_prog=self.env_prog,
        )
        if self.forkserver is not None:
            pid, listener = self._spawn_forkserver(job, spec)
        else:
            pid, listener = self.landlock.spawn(job, spec)
        if listener >= 0:
            assert self.broker is not None
            # where its mode and time changes may land: what Landlock lets it write
            roots = rules.metadata_roots(
                self.layout, self.sandbox.policy, self.job_tmp, spec.terminal
            )
            self.broker.watch(listener, roots)
        return pid

    def _spawn_forkserver(self, job: rules.JobSpec, spec: SpawnSpec) -> tuple[int, int]:
        """(pid, its connect filter's listener or -1), as ``RestrictedSpawner.spawn``."""
        assert self.forkserver is not None
        if self.broker is None or not job["notify"]:
            return self.forkserver.spawn(job, spec), -1
        # the job's connect filter sends its listener back on this channel before exec
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with ours:
            try:
                pid = self.forkserver.spawn(job, spec, theirs.fileno())
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
            TempDirs.remove(self.job_tmp)
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
                sorted({*inside(argv, hidden), *(os.path.realpath(e) for e in exposed)})
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
                            *inside(argv, hidden),
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
                        self._channel = unotify.Channel(
                            self.broker, self.broker_dir, shim_filters()
                        )
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
    landlock/shim.py on its own, standard library and lockdown.py only (``shim.broker_shim``),
    imported as a module so its cached bytecode is used (run as a script it is compiled each
    time)."""
    above = os.path.dirname(os.path.dirname(os.path.abspath(shim.__file__)))
    return [
        os.path.realpath(sys.executable),
        *("-I", "-S", "-c", _SHIM, above),
        *("--broker", channel, "--"),
    ]


def shim_filters() -> bytes:
    """What the shim takes first on its channel (``shim.receive_filters``): the connect
    filter and the ``network: off`` filter that lets ``connect`` through to it."""
    notify, program = sc.notify_program(), sc.seccomp_program(net_off=True, connect_ok=True)
    return struct.pack("=II", len(notify), len(program)) + notify + program


def shim_files() -> list[str]:
    """What the shim needs to be visible: its package's files it imports and the
    interpreter's installation."""
    here = os.path.dirname(os.path.realpath(shim.__file__))
    files = [os.path.join(here, f) for f in ("__init__.py", "shim.py", "lockdown.py")]
    return [*files, os.path.realpath(sys.base_prefix)]


_SHIM = (
    "import sys; sys.path.insert(0, sys.argv[1]); from landlock import shim; "
    "shim.main(sys.argv[2:])"
)


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


def inside(argv: Sequence[str], dirs: Sequence[str]) -> list[str]:
    """argv elements that are files inside a hidden directory (a job's own script file)."""
    out = []
    for a in argv:
        if not a.startswith("/") or not os.path.isfile(a):
            continue
        real = os.path.realpath(a)
        if any(real.startswith(d.rstrip("/") + "/") for d in dirs):
            out.append(real)
    return out
