"""The ``landlock`` sandbox backend (docs/spec.md §9a): what a job's Landlock ruleset holds, how it
is applied before the job's program runs (``Spawner``: a thread of the server restricts itself
and spawns the job, which starts as a gate sh; where a job must start in a cgroup v2
directory, the fork server of core/containment/lockdown.py), and what this backend
guarantees on this kernel.

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
  no lease, no user namespace: ``lockdown.seccomp_program``);
* ``network: off``: TCP bind/connect handled with no port granted (ABI 4), abstract Unix
  sockets scoped (ABI 6), and the seccomp filter's network rules;
* signals scoped at every level (ABI 6): a job signals only its own processes; and at every
  level the seccomp filter refuses what would change another process's limits (``prlimit64``:
  RLIMIT_CPU set on the server is a SIGKILL from the kernel), priority, I/O priority,
  scheduling or CPU affinity (``lockdown.seccomp_program``'s ``others``);
* below ABI 3 (no TRUNCATE right) the seccomp filter refuses truncation by path at every
  level (``truncate``, a read-only ``open`` with O_TRUNC): ``fs_write`` holds by it.

Everything here follows ``Layout.abi``, the ABI in use (``landlock_abi_max`` may lower the
kernel's): a cap of N builds the ruleset, the filter and the guarantees of a kernel of ABI N.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import errno
import functools
import gc
import marshal
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conch.core.containment import lockdown as ld
from conch.core.containment import metaops, shenv
from conch.core.containment import sandbox as sb
from conch.core.process import libc_spawn

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


@dataclass(frozen=True)
class Layout:
    """What every job of one runtime shares: the holes and the writable roots' bases."""

    workspace: str
    hidden: tuple[str, ...]  # the data dir (and so every job's TMPDIR, inside it)
    masked: tuple[str, ...]  # files no job may read (the --env-file)
    abi: int
    root: bool
    seccomp: bool = True  # the seccomp filter loads here (probed)


def _workspace_tree(layout: Layout) -> tuple[str, tuple[str, ...]]:
    """The tree a workspace-write job may write, and the holes in it (hidden, masked, .git)."""
    ws = layout.workspace
    return ws, (*layout.hidden, *layout.masked, os.path.join(ws, ".git"))


def metadata_roots(
    layout: Layout, policy: sb.Policy, tmpdir: str, tty: str | None = None
) -> metaops.Roots:
    """Where a job's brokered mode and time changes may land: what job_spec's ruleset lets
    it write (the workspace less its holes, its temp dir, its own terminal: ``mesg``)."""
    trees = (_workspace_tree(layout),) if policy.sandbox == "workspace-write" else ()
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
        ws, ws_holes = _workspace_tree(layout)
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
        out.append((tuple(there), tuple(ld._stamps(ld.walked(root, there)))))
    return tuple(out)


def job_spec(
    layout: Layout,
    policy: sb.Policy,
    *,
    path: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    tmpdir: str,
    exposed: Sequence[str],
    procs: Sequence[str],
    tty: str | None,
    cgroup: str | None = None,
    brokered: bool = False,
    broker_metadata: bool = False,
    env_prog: str = "/usr/bin/env",
) -> dict[str, Any]:
    """What ``Spawner.spawn`` (or the fork server: marshal-able) needs for one job: its
    ruleset's rules, its filters, its program. ``cgroup``: the cgroup v2 directory to start it
    in (glibc 2.39's ``posix_spawnattr_setcgroup_np``, or the fork server's clone3); else it
    writes itself into each of ``procs`` before its program runs. ``brokered``
    (``sandbox_sockets``): a ``network: off`` job's connects go to Conch (``notify``).
    ``broker_metadata``: a ``workspace-write`` job's mode and time changes go to Conch too
    (conch/core/containment/metaops.py); without it only setuid/setgid modes are refused."""
    abi = layout.abi
    trees = _trees(layout, policy)
    paths: list[tuple[str, int]] = [(tmpdir, ld.fs_rights(abi))]
    paths += [(dev, ld.FS_READ_FILE | ld.FS_WRITE_FILE) for dev in ld.DEVICES]
    if tty:  # its own terminal's slave only (a rule on its inode: a later one of the same
        # number is another inode), never /dev/pts: see ld.DEVICES
        paths.append((tty, ld.FS_READ_FILE | ld.FS_WRITE_FILE))
    paths += [(f, ld.FS_READ_FILE | ld.FS_EXECUTE) for f in exposed]
    scoped = ld.SCOPE_SIGNAL
    if policy.network == "off":
        scoped |= ld.SCOPE_ABSTRACT_UNIX_SOCKET
    net_off = policy.network == "off"
    guard = abi < 3  # no TRUNCATE right: the filter refuses truncation by path (any level)
    # Landlock handles no metadata change: read-only refuses them all, workspace-write hands
    # modes and times to Conch (a setuid/setgid mode is refused at every level: every
    # program's rules, lockdown.seccomp_program)
    metadata = "all" if policy.sandbox == "read-only" else ""
    program = notify = b""
    brokered = brokered and net_off and layout.seccomp
    meta = broker_metadata and policy.sandbox == "workspace-write" and layout.seccomp
    if meta:
        metadata = "brokered"
    if layout.seccomp:  # (at every level: the calls on other processes, ``others``)
        program = ld.seccomp_program(
            net_off=net_off, truncate=guard, connect_ok=brokered, metadata=metadata, others=True
        )
    if brokered or meta:
        notify = ld.notify_program(connect=brokered, metadata=meta)
    return {
        "abi": abi,
        "trees": trees,
        "paths": paths,
        "net_off": net_off,
        "scoped": scoped,
        "seccomp": program,
        "notify": notify,
        "drop_caps": layout.root,
        "path": path,
        "argv": list(argv),
        "env": dict(env),
        "cwd": cwd,
        "tty": tty,
        "procs": list(procs),
        "cgroup": cgroup or "",
        "env_prog": env_prog,
    }


#: the program every landlock job starts as (the same pid then execs the job's own)
SH = "/bin/sh"


@functools.lru_cache(maxsize=8)
def gate_script(procs: int) -> str:
    """The sh a landlock job starts as, restricted already: it waits until Conch closes the
    other end of descriptor 3 (which Conch does once the thread that spawned it has left the
    kernel: ``Spawner``), writes itself into the ``procs`` cgroup.procs files open as 4, 5, ...
    (opened by Conch: the job could not open them), closes them all and execs the program
    (``$@``). Nothing of the job's own runs before the gate opens."""
    fds = range(4, 4 + procs)
    script = "read -r __conch_gate <&3; exec 3<&-; "
    script += "".join(f"echo 0 >&{n} || exit 125; " for n in fds)
    if procs:
        script += "exec " + " ".join(f"{n}>&-" for n in fds) + "; "
    return script + 'exec "$@"'


def _exec_refused(spec: dict[str, Any]) -> OSError | None:
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


# -- the restricted thread ------------------------------------------------------------------------

# (the fork server's steps, in lockdown.py, are the same: this thread makes its own calls, on
# a PyDLL that keeps the GIL and with arguments built ahead, so it allocates nothing)
_PR_SET_NO_NEW_PRIVS = ld._PR_SET_NO_NEW_PRIVS
_PR_SET_SECCOMP = ld._PR_SET_SECCOMP
_PR_CAPBSET_DROP = ld._PR_CAPBSET_DROP
_PR_CAP_AMBIENT = ld._PR_CAP_AMBIENT
_PR_CAP_AMBIENT_CLEAR_ALL = ld._PR_CAP_AMBIENT_CLEAR_ALL
_SECCOMP_MODE_FILTER = ld._SECCOMP_MODE_FILTER
_SECCOMP_SET_MODE_FILTER = ld._SECCOMP_SET_MODE_FILTER
_SECCOMP_FILTER_FLAG_NEW_LISTENER = ld._SECCOMP_FILTER_FLAG_NEW_LISTENER
_ALL_SIGNALS = frozenset(signal.valid_signals())

_pylib: Any = None


def _lib() -> Any:
    """libc as a ``PyDLL``: the restricted thread's calls keep the GIL (no other thread runs
    between its steps, and it never waits to get the GIL back)."""
    global _pylib
    if _pylib is None:
        lib = ctypes.PyDLL(None, use_errno=True)
        lib.syscall.restype = ctypes.c_long
        lib.prctl.restype = ctypes.c_int
        lib.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        _pylib = lib
    return _pylib


class _Restriction:
    """One job's restriction and spawn, made ready by the caller: the thread that runs it
    (``_restricted``) only makes the calls, with arguments built here. Its results: ``tid``,
    ``stage`` and ``errno`` of a failed step (errno 0: the child runs, ``call.pid``),
    ``listener`` (the notify filter's, or -1)."""

    __slots__ = (
        "call",
        "caps",
        "capset",
        "done",
        "drop_caps",
        "errno",
        "listener",
        "notify",
        "programs",
        "ruleset",
        "seccomp",
        "stage",
        "tid",
    )

    def __init__(self, spec: dict[str, Any], call: libc_spawn.Prepared, ruleset: int) -> None:
        self.call = call
        self.ruleset = ruleset
        # (each sock_fprog and its buffer kept here while the thread may use them)
        sec = ld._fprog(spec["seccomp"]) if spec["seccomp"] else None
        note = ld._fprog(spec["notify"]) if spec["notify"] else None
        self.programs = [p for p in (sec, note) if p is not None]
        self.seccomp = ctypes.addressof(sec[0]) if sec is not None else 0
        self.notify = ctypes.byref(note[0]) if note is not None else None
        self.drop_caps = bool(spec["drop_caps"])
        self.caps = range(ld._last_cap() + 1) if self.drop_caps else range(0)
        header = struct.pack("=Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
        self.capset = (
            ctypes.create_string_buffer(header, 8),
            ctypes.create_string_buffer(bytes(24), 24),  # every set empty
        )
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.tid = 0
        self.stage = ""
        self.errno = 0
        self.listener = -1


def _restricted(r: _Restriction) -> None:
    """The spawning thread: it restricts itself (only itself: ``no_new_privs``, Landlock,
    seccomp without TSYNC and capabilities are per thread) and spawns the job, which inherits
    all of it, then ends. Every signal is blocked here (the process's signals go to the other
    threads); the caller keeps the collector off until this thread is gone, so no finalizer of
    another's object runs restricted; nothing is imported, opened or allocated that matters."""
    lib = _lib()
    try:
        r.tid = _thread.get_native_id()
        signal.pthread_sigmask(signal.SIG_BLOCK, _ALL_SIGNALS)
        r.stage = "no_new_privs"
        if lib.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            r.errno = ctypes.get_errno() or errno.EIO
            return
        r.stage = "landlock"
        if lib.syscall(ld._sys("restrict_self"), r.ruleset, ctypes.c_uint32(0)):
            r.errno = ctypes.get_errno() or errno.EIO
            return
        r.stage = "seccomp"
        if r.notify is not None:
            # the user-notification filter first: its listener lands in Conch's own table (the
            # thread shares it); the network-off filter after it refuses sendmsg, not this
            fd = lib.syscall(
                ld._sys("seccomp"),
                ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
                ctypes.c_uint(_SECCOMP_FILTER_FLAG_NEW_LISTENER),
                r.notify,
            )
            if fd < 0:
                r.errno = ctypes.get_errno() or errno.EIO
                return
            r.listener = fd
        if r.seccomp and lib.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, r.seccomp, 0, 0):
            r.errno = ctypes.get_errno() or errno.EIO
            return
        if r.drop_caps:
            # as bwrap's --cap-drop ALL: the bounding set emptied, ambient cleared, then
            # permitted, effective and inheritable all zero (this thread's, then the child's)
            r.stage = "capabilities"
            for cap in r.caps:
                lib.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
            lib.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
            if lib.syscall(ld._sys("capset"), *r.capset):
                r.errno = ctypes.get_errno() or errno.EIO
                return
        r.stage = "exec"
        r.errno = r.call.run()
    except BaseException as e:  # (say so, never leave the caller waiting)
        r.errno = getattr(e, "errno", None) or errno.EIO
    finally:
        r.done.release()


_gc_lock = threading.Lock()
_gc_holds = 0
_gc_was_on = False


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """The cyclic collector off while a restricted thread lives (a collection runs in the
    thread that allocates: there, it would run other objects' finalizers restricted). Nested
    and concurrent spawns share one switch; the collector's own state is restored after."""
    global _gc_holds, _gc_was_on
    with _gc_lock:
        if _gc_holds == 0:
            _gc_was_on = gc.isenabled()
            gc.disable()
        _gc_holds += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holds -= 1
            if _gc_holds == 0 and _gc_was_on:
                gc.enable()


def _gone(tid: int, limit_s: float = 10.0) -> bool:
    """Wait until thread ``tid`` of this process has left the kernel's task list (no longer
    found by its id, so nothing can signal, trace or read through it); False after
    ``limit_s``. Its Python state is released a moment before its kernel task goes."""
    where = f"/proc/self/task/{tid}"
    deadline = time.monotonic() + limit_s
    n = 0
    while True:
        try:
            os.stat(where)
        except FileNotFoundError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0 if n < 50 else 0.0002)  # (first a few bare yields: it is ending)
        n += 1


def proc_tasks_visible() -> bool:
    """Whether this process sees its own threads in /proc (``_gone`` needs it)."""
    return os.path.isdir(f"/proc/self/task/{_thread.get_native_id()}")


class Spawner:
    """Starts landlock jobs (docs/spec.md §9a) with no Python in the child (all but those the fork
    server starts in their cgroup: ``ForkServer``). For each job a fresh thread of this
    process restricts itself and spawns the job with glibc's ``posix_spawn``, which gives the
    child the thread's restrictions; the thread then ends.

    The job starts as ``gate_script``'s sh, not as its program: while the spawning thread
    lives it shares the job's Landlock domain, so a program of the job's own could signal it
    (SIGKILL or SIGSTOP reach all of Conch), trace it or read Conch's memory through it
    (``/proc/<pid>/task/<tid>/mem``). The sh waits until this process has seen the thread
    leave the kernel, and only then runs the program."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plans = ld._Plans()

    def spawn(
        self, spec: dict[str, Any], *, stdin: int = -1, stdout: int = -1, stderr: int = -1
    ) -> tuple[int, int]:
        """Start one job (``spec``: ``job_spec``; the three descriptors unless it has a
        terminal); (its pid, a child of this process; the listener of its notify filter or
        -1, now the caller's). A failure is the ``OSError`` of the step that failed."""
        refused = _exec_refused(spec)
        if refused is not None:
            raise refused
        with self._lock:  # (the path plans are shared)
            try:
                ruleset = ld.build_ruleset(spec, self._plans)
            except OSError as e:
                raise OSError(e.errno, _setup_failed("landlock", str(e))) from None
        opened: list[int] = []
        call: libc_spawn.Prepared | None = None
        r: _Restriction | None = None
        gate = -1
        waiting = False  # (the thread may still be using ``call``)
        try:
            gate_r, gate = os.pipe2(os.O_CLOEXEC)
            opened.append(gate_r)
            procs = []
            if not spec["cgroup"]:  # (opened here, unrestricted: the sh only writes them)
                for p in spec["procs"]:
                    procs.append(os.open(p, os.O_WRONLY | os.O_CLOEXEC))
                    opened.append(procs[-1])
            fix, env = shenv.restore(spec["env"], spec["cwd"], spec["env_prog"])
            call = libc_spawn.Prepared(
                SH,
                [SH, "-c", gate_script(len(procs)), "conch-enter", *fix, *spec["argv"]],
                env=env,
                cwd=spec["cwd"],
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                terminal=spec["tty"],
                cgroup=spec["cgroup"] or None,
                fds=[gate_r, *procs],
            )
            r = _Restriction(spec, call, ruleset)
            with _no_collection():
                try:
                    _thread.start_new_thread(_restricted, (r,))
                except RuntimeError as e:
                    raise OSError(errno.EAGAIN, f"cannot start the spawning thread: {e}") from None
                waiting = True
                r.done.acquire()
                waiting = False
                if not _gone(r.tid):  # (never let the job's program run beside that thread)
                    raise OSError(errno.ETIMEDOUT, "the spawning thread did not end")
        except BaseException:
            if r is not None:
                if waiting:  # (interrupted while it ran: it ends before its call is freed)
                    r.done.acquire()
                if r.stage == "exec" and not r.errno and call is not None:
                    _kill(call.pid)  # (before its gate opens: no job runs that nobody watches)
                if r.listener >= 0:
                    os.close(r.listener)
            if gate >= 0:
                os.close(gate)
            raise
        finally:
            os.close(ruleset)
            for fd in opened:
                os.close(fd)
            if call is not None:
                call.close()
        if r.errno:
            os.close(gate)
            if r.listener >= 0:
                os.close(r.listener)
            if r.stage == "exec":  # (the spawn failed: glibc has reaped the child)
                raise OSError(r.errno, os.strerror(r.errno), spec["path"])
            raise OSError(r.errno, _setup_failed(r.stage, os.strerror(r.errno)))
        os.close(gate)  # the gate opens: the thread is gone
        return call.pid, r.listener

    def close(self) -> None:
        with self._lock:
            self._plans.close()


def _setup_failed(stage: str, why: str) -> str:
    return f"the landlock sandbox could not be set up ({stage}): {why}"


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


class ForkServer:
    """Conch's end of the fork server (lockdown.py): where a job must start in its cgroup v2
    directory, the fork server clones it there with clone3 (the restricted thread's spawn
    cannot: glibc before 2.39 has no way to, and from 2.39 it needs the clone3 that the job's
    filter refuses). Started once (at its first job), restarted if it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", ld.__file__, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        return ours

    def spawn(self, spec: dict[str, Any], fds: Sequence[int]) -> int:
        """Start one job (``spec``: ``job_spec``); its pid, a child of this process. A failure
        is the ``OSError`` of the step that failed (the failed child reaped)."""
        msg = marshal.dumps(spec)
        with self._lock:
            for attempt in (0, 1):
                sock = self._sock or self._start()
                try:
                    rights = struct.pack(f"{len(fds)}i", *fds)
                    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)] if fds else []
                    sock.sendmsg([msg], anc)
                    answer = sock.recv(1 << 16)
                    if not answer:
                        raise ConnectionResetError(errno.ECONNRESET, "fork server ended")
                    break
                except OSError:
                    self._stop()
                    if attempt:
                        raise
        pid, stage, code, message = marshal.loads(answer)
        if code:
            if pid:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
            filename = spec["path"] if stage == "exec" else None
            if stage != "exec":
                message = _setup_failed(stage, message)
            raise OSError(code, message, filename)
        return int(pid)

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def close(self) -> None:
        with self._lock:
            self._stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


class TempDirs:
    """Each job's own TMPDIR under the landlock backend (no private /tmp there): inside the
    data dir, so no other job sees it; removed when the job is done, all at close."""

    def __init__(self, data_dir: str, instance: str) -> None:
        self.root = os.path.join(data_dir, "tmp", instance)

    def make(self, name: str) -> str:
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:40]
        return tempfile.mkdtemp(prefix=f"{safe}.", dir=self.root)

    @staticmethod
    def remove(path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(self.root))
        except OSError:
            pass


def probe(spawner: Spawner, layout: Layout, true: str, *, seccomp: bool) -> str | None:
    """One job under the strictest spec (read-only, network off; without the seccomp filter
    when not ``seccomp``) through ``spawner``: None when it ran and exited 0, else why."""
    if not proc_tasks_visible():
        return "landlock: this process cannot see its own threads in /proc/self/task"
    tmp = tempfile.mkdtemp(prefix="conch-probe.")
    try:
        spec = job_spec(
            layout,
            sb.Policy("read-only", "off"),
            path=true,
            argv=[true],
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            tmpdir=tmp,
            exposed=(),
            procs=(),
            tty=None,
        )
        if not seccomp:
            spec["seccomp"] = b""
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            pid, _ = spawner.spawn(spec, stdin=null, stdout=null, stderr=null)
        finally:
            os.close(null)
        _, status = os.waitpid(pid, 0)
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            return f"a probe job under Landlock did not run (wait status {status})"
        return None
    except OSError as e:
        return f"landlock: {e.strerror or e}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
