"""What one landlock job's ruleset and filters hold (``job_spec``, the same for the restricted
thread and the fork server: spawner.py), the gate sh it starts as (``gate_script``), and what
Conch can tell ahead that its exec would meet (``exec_refused``).

Rules of one job (``job_spec``), all filesystem rights of the ABI handled:
* read and execute beneath ``/`` except the holes: Conch's data dir (and in it every job's temp
  dir), the server's ``--env-file``, ``/dev`` (only ``DEVICES`` and the job's own terminal are
  granted: no other terminal of the host, and no new one);
  the directories above a hole are not listable (Landlock grants hierarchies, never "all but");
* writes where the level allows: ``workspace-write`` each entry of its workspace but ``.git``
  (the workspace directory itself never, whether or not a ``.git`` is there: so none can be
  made, and no other new entry at the top either); ``off``
  (network off only) ``/`` less the holes, ``/proc`` and ``/sys``; ``read-only`` nothing;
  always the job's own ``TMPDIR`` (made by Conch inside the data dir, read and write) and the
  few devices;
* read of the files a job must see inside the data dir (its script, a shell's command file);
* at every level the seccomp filter's rules of every sandboxed job (no setuid or setgid mode,
  no lease, no user namespace: ``seccomp.seccomp_program``);
* ``network: off``: TCP bind/connect handled with no port granted (ABI 4), abstract Unix
  sockets scoped (ABI 6), and the seccomp filter's network rules;
* signals scoped at every level (ABI 6): a job signals only its own processes; and at every
  level the seccomp filter refuses what would change another process's limits (``prlimit64``:
  RLIMIT_CPU set on the server is a SIGKILL from the kernel), priority, I/O priority,
  scheduling or CPU affinity (``seccomp.seccomp_program``'s ``others``);
* below ABI 3 (no TRUNCATE right) the seccomp filter refuses truncation by path at every
  level (``truncate``, a read-only ``open`` with O_TRUNC): ``fs_write`` holds by it.

Everything here follows ``Layout.abi``, the ABI in use (``landlock_abi_max`` may lower the
kernel's): a cap of N builds the ruleset, the filter and the guarantees of a kernel of ABI N.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from conch.core.containment import metaops, shenv
from conch.core.containment import sandbox as sb
from conch.core.containment.landlock import lockdown as ld
from conch.core.containment.landlock import seccomp
from conch.core.process.spec import SpawnSpec

#: device files a job may open (read and write) under the landlock backend: the rest of /dev
#: (disks, /dev/mem, /dev/kmsg, ...) is not even readable. Of the terminals only its own (the
#: slave it was started on, granted by path: landlock.job_spec) and ``/dev/tty`` (which opens
#: the caller's controlling terminal, whatever it is): ``/dev/pts`` whole would let a job open
#: any terminal of the host's devpts (another job's, a person's), read what is typed into it
#: and write into it. Not ``/dev/ptmx`` either: a new terminal's slave appears in
#: ``/dev/pts``, which no rule can grant ahead (Landlock checks ``TIOCGPTPEER``'s open of it
#: too), so a master would be of no use, and every master taken counts against the host's
#: ``kernel.pty.max`` (the initial devpts instance, the one Conch's own terminals come from).
DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
)


class JobSpec(TypedDict):
    """One landlock job as both spawn paths take it (``job_spec``): plain values, so that it
    marshals as the fork server's request (lockdown.py reads the same keys)."""

    abi: int
    trees: list[tuple[str, list[str], int]]  # (root, holes, rights): see ``_trees``
    paths: list[tuple[str, int]]  # single paths granted, opened per job
    net_off: bool
    scoped: int
    seccomp: bytes  # the job's seccomp filter (seccomp.seccomp_program), or none
    notify: bytes  # the filter that hands calls to Conch (seccomp.notify_program), or none
    drop_caps: bool
    path: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    tty: str | None
    procs: list[str]  # cgroup.procs files it enters itself, where it does not start in cgroup
    cgroup: str  # the cgroup v2 directory it starts in ("" none)
    env_prog: str


@dataclass(frozen=True)
class Layout:
    """What every job of one runtime shares: the holes and the writable roots' bases."""

    workspace: str
    hidden: tuple[str, ...]  # the data dir (and so every job's TMPDIR, inside it)
    masked: tuple[str, ...]  # files no job may read (the --env-file)
    abi: int
    root: bool
    seccomp: bool = True  # the seccomp filter loads here (probed)


def workspace_tree(layout: Layout) -> tuple[str, tuple[str, ...]]:
    """The tree a workspace-write job may write, and the holes in it (hidden, masked, .git,
    HEAD: no repository at the top, conch/core/containment/gitdir.py)."""
    ws = layout.workspace
    return ws, (*layout.hidden, *layout.masked, *(os.path.join(ws, n) for n in (".git", "HEAD")))


def metadata_roots(
    layout: Layout, policy: sb.Policy, tmpdir: str, tty: str | None = None
) -> metaops.Roots:
    """Where a job's brokered mode and time changes may land: what job_spec's ruleset lets
    it write (the workspace less its holes, its temp dir, its own terminal: ``mesg``)."""
    trees = (workspace_tree(layout),) if policy.sandbox == "workspace-write" else ()
    return metaops.Roots(trees, tuple(d for d in (tmpdir, tty) if d))


def read_holes(layout: Layout) -> list[str]:
    """What a job's ruleset keeps out of its read of ``/``: the hidden and masked paths and
    ``/dev`` (single paths of them, its own terminal say, are granted one by one)."""
    return [*layout.hidden, *layout.masked, "/dev"]


def _beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def in_hole(layout: Layout, real: str) -> bool:
    """Whether the resolved path ``real`` lies in one of ``read_holes``."""
    return any(_beneath(real, h) for h in read_holes(layout))


def _trees(layout: Layout, policy: sb.Policy) -> list[tuple[str, list[str], int]]:
    """The hierarchies a job's ruleset grants, each (root, holes, rights): the same for every
    job of one layout and policy (what differs per job are single paths: ``job_spec``)."""
    write = ld.write_rights(layout.abi)
    holes = [*layout.hidden, *layout.masked]
    trees: list[tuple[str, list[str], int]] = [("/", read_holes(layout), ld.READ)]
    if policy.sandbox == "workspace-write":
        ws, ws_holes = workspace_tree(layout)
        trees.append((ws, list(ws_holes), write))
    elif policy.sandbox == "off":  # network off alone: the filesystem stays writable
        trees.append(("/", [*holes, "/dev", "/proc", "/sys"], write))
    return trees


def ruleset_stamps(layout: Layout, policy: sb.Policy) -> tuple[tuple[Any, ...], ...]:
    """What the hierarchies of a ruleset for ``policy`` are found from: per tree, each
    directory ``lockdown.cover`` lists to keep its holes out, whether or not they exist
    (inode and mtime: an entry made, removed or renamed there changes it, a hole that appears
    or goes too). Equal stamps: a ruleset built now grants what one built then did, so a warm
    process started under the older one may stand for a new job (core/jobs/warm.py)."""
    out = []
    for root, holes, _ in _trees(layout, policy):
        inside = root.rstrip("/") + "/"
        there = sorted(h for h in holes if h.startswith(inside))
        out.append((tuple(there), tuple(ld.stamps(ld.walked(root, there)))))
    return tuple(out)


def job_spec(
    layout: Layout,
    policy: sb.Policy,
    spec: SpawnSpec,
    *,
    tmpdir: str,
    exposed: Sequence[str],
    procs: Sequence[str],
    brokered: bool = False,
    broker_metadata: bool = False,
    env_prog: str = "/usr/bin/env",
) -> JobSpec:
    """What ``RestrictedSpawner.spawn`` (or the fork server: marshal-able) needs for the job
    ``spec`` starts (its path resolved): its ruleset's rules, its filters, its program. Its
    cgroup: the cgroup v2 directory to start it in (the fork server's clone3); else it writes
    itself into each of ``procs`` before its program runs. ``brokered``
    (``sandbox_sockets``): a ``network: off`` job's connects go to Conch (``notify``).
    ``broker_metadata``: a ``workspace-write`` job's mode and time changes go to Conch too
    (conch/core/containment/metaops.py); without it only setuid/setgid modes are refused."""
    assert spec.path is not None
    abi, tty = layout.abi, spec.terminal
    trees = _trees(layout, policy)
    paths: list[tuple[str, int]] = [(tmpdir, ld.fs_rights(abi))]
    paths += [(dev, ld.FS_READ_FILE | ld.FS_WRITE_FILE) for dev in DEVICES]
    if tty:  # its own terminal's slave only (a rule on its inode: a later one of the same
        # number is another inode), never /dev/pts: see DEVICES
        paths.append((tty, ld.FS_READ_FILE | ld.FS_WRITE_FILE))
    paths += [(f, ld.FS_READ_FILE | ld.FS_EXECUTE) for f in exposed]
    scoped = ld.SCOPE_SIGNAL
    if policy.network == "off":
        scoped |= ld.SCOPE_ABSTRACT_UNIX_SOCKET
    net_off = policy.network == "off"
    guard = abi < 3  # no TRUNCATE right: the filter refuses truncation by path (any level)
    # Landlock handles no metadata change: read-only refuses them all, workspace-write hands
    # modes and times to Conch (a setuid/setgid mode is refused at every level: every
    # program's rules, seccomp.seccomp_program)
    metadata = "all" if policy.sandbox == "read-only" else ""
    program = notify = b""
    brokered = brokered and net_off and layout.seccomp
    meta = broker_metadata and policy.sandbox == "workspace-write" and layout.seccomp
    if meta:
        metadata = "brokered"
    if layout.seccomp:  # (at every level: the calls on other processes, ``others``)
        program = seccomp.seccomp_program(
            net_off=net_off, truncate=guard, connect_ok=brokered, metadata=metadata, others=True
        )
    if brokered or meta:
        notify = seccomp.notify_program(connect=brokered, metadata=meta)
    return {
        "abi": abi,
        "trees": trees,
        "paths": paths,
        "net_off": net_off,
        "scoped": scoped,
        "seccomp": program,
        "notify": notify,
        "drop_caps": layout.root,
        "path": spec.path,
        "argv": list(spec.argv),
        "env": dict(spec.env),
        "cwd": spec.cwd,
        "tty": tty,
        "procs": list(procs),
        "cgroup": spec.cgroup or "",
        "env_prog": env_prog,
    }


#: the program every landlock job starts as (the same pid then execs the job's own)
SH = "/bin/sh"


@functools.lru_cache(maxsize=8)
def gate_script(procs: int) -> str:
    """The sh a landlock job starts as, restricted already: it waits until Conch closes the
    other end of descriptor 3 (which Conch does once the thread that spawned it has left the
    kernel: ``RestrictedSpawner``), writes itself into the ``procs`` cgroup.procs files open
    as 4, 5, ... (opened by Conch: the job could not open them), closes them all and execs
    the program (``$@``). Nothing of the job's own runs before the gate opens."""
    fds = range(4, 4 + procs)
    script = "read -r __conch_gate <&3; exec 3<&-; "
    script += "".join(f"echo 0 >&{n} || exit 125; " for n in fds)
    if procs:
        script += "exec " + " ".join(f"{n}>&-" for n in fds) + "; "
    return script + 'exec "$@"'


def exec_refused(spec: JobSpec) -> OSError | None:
    """The error the job's exec of its program would meet, where Conch can tell ahead (the
    gate sh execs it after the spawn has returned): a program inside a hole of the ruleset
    that no rule grants (EACCES, as Landlock says), a file the kernel would not exec, which
    sh would run as a script of its own (ENOEXEC, as a direct exec says)."""
    path = spec["path"]
    real = os.path.realpath(path)
    hidden = any(_beneath(real, h) for h in spec["trees"][0][1])  # (read_holes)
    granted = (p for p, access in spec["paths"] if access & ld.FS_EXECUTE)
    if hidden and not any(_beneath(real, p) for p in granted):
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
    # (a file the server cannot read, execute-only, is left to the exec)
    if shenv.runs_directly(real) is False:
        return OSError(errno.ENOEXEC, os.strerror(errno.ENOEXEC), path)
    return None
