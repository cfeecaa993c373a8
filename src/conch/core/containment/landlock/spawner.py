"""How a landlock job is started: a thread of Conch's restricts itself and spawns it
(``RestrictedSpawner``), or, where it must start in a cgroup v2 directory, the fork server does
(``ForkServer``, the client of lockdown.py's). ``probe``: whether either works here."""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import dataclasses
import errno
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
from collections.abc import Iterator
from typing import Any

from conch.core.containment import sandbox as sb
from conch.core.containment import shenv
from conch.core.containment.landlock import lockdown as ld
from conch.core.containment.landlock.rules import (
    SH,
    JobSpec,
    Layout,
    exec_refused,
    gate_script,
    job_spec,
)
from conch.core.process import libc_spawn
from conch.core.process.spec import SpawnSpec

# -- the restricted thread ------------------------------------------------------------------------

_ALL_SIGNALS = frozenset(signal.valid_signals())

_pylib: Any = None


def _lib() -> Any:
    """libc as a ``PyDLL``: the restricted thread's calls keep the GIL (no other thread runs
    between its steps, and it never waits to get the GIL back)."""
    global _pylib
    if _pylib is None:
        _pylib = ld.load_libc(ctypes.PyDLL)
    return _pylib


class _Job:
    """One job's spawn made ready by the caller: the thread that runs it (``_restricted``)
    only makes the calls, with arguments built ahead (``restriction``, the same steps as the
    fork server's child: lockdown.py). Its results: ``tid``, and in ``restriction`` the
    ``stage`` and ``errno`` of a failed step (errno 0: the child runs, ``call.pid``) and the
    notify filter's ``listener`` (or -1)."""

    __slots__ = ("call", "done", "restriction", "tid")

    def __init__(self, spec: JobSpec, call: libc_spawn.Prepared, ruleset: int) -> None:
        self.call = call
        self.restriction = ld.Restriction(
            ruleset, spec["seccomp"], spec["notify"], bool(spec["drop_caps"])
        )
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.tid = 0


def _restricted(job: _Job) -> None:
    """The spawning thread: it restricts itself (only itself: ``no_new_privs``, Landlock,
    seccomp without TSYNC and capabilities are per thread) and spawns the job, which inherits
    all of it, then ends. Every signal is blocked here (the process's signals go to the other
    threads); the caller keeps the collector off until this thread is gone, so no finalizer of
    another's object runs restricted; nothing is imported, opened or allocated that matters.
    Its calls go through a PyDLL: they keep the GIL, so no other thread runs between them."""
    r = job.restriction
    try:
        job.tid = _thread.get_native_id()
        signal.pthread_sigmask(signal.SIG_BLOCK, _ALL_SIGNALS)
        if r.apply(_lib()):
            r.stage = "exec"
            r.errno = job.call.run()
    except BaseException as e:  # (say so, never leave the caller waiting)
        r.errno = getattr(e, "errno", None) or errno.EIO
    finally:
        job.done.release()


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


class RestrictedSpawner:
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
        self._plans = ld.Plans()

    def spawn(self, spec: JobSpec, child: SpawnSpec) -> tuple[int, int]:
        """Start the job ``child`` describes (``spec``: its ``job_spec``); (its pid, a child
        of this process; the listener of its notify filter or -1, now the caller's). A failure
        is the ``OSError`` of the step that failed."""
        refused = exec_refused(spec)
        if refused is not None:
            raise refused
        with self._lock:  # (the path plans are shared)
            try:
                ruleset = ld.build_ruleset(spec, self._plans)
            except OSError as e:
                raise OSError(e.errno, _setup_failed("landlock", str(e))) from None
        opened: list[int] = []
        call: libc_spawn.Prepared | None = None
        job: _Job | None = None
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
            fix, env = shenv.restore(child.env, child.cwd, spec["env_prog"])
            gate_argv = [SH, "-c", gate_script(len(procs)), "conch-enter", *fix, *child.argv]
            call = libc_spawn.Prepared(
                dataclasses.replace(
                    child, path=SH, argv=gate_argv, env=env, fds=(gate_r, *procs), first_fd=3
                )
            )
            job = _Job(spec, call, ruleset)
            with _no_collection():
                try:
                    _thread.start_new_thread(_restricted, (job,))
                except RuntimeError as e:
                    raise OSError(errno.EAGAIN, f"cannot start the spawning thread: {e}") from None
                waiting = True
                job.done.acquire()
                waiting = False
                if not _gone(job.tid):  # (never let the job's program run beside that thread)
                    raise OSError(errno.ETIMEDOUT, "the spawning thread did not end")
        except BaseException:
            if job is not None:
                r = job.restriction
                if waiting:  # (interrupted while it ran: it ends before its call is freed)
                    job.done.acquire()
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
        r = job.restriction
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

    def spawn(self, spec: JobSpec, child: SpawnSpec, channel: int = -1) -> int:
        """Start the job ``child`` describes (``spec``: its ``job_spec``) in its cgroup;
        ``channel``: where its notify filter's listener goes back (``sandbox_sockets``); its
        pid, a child of this process. A failure is the ``OSError`` of the step that failed
        (the failed child reaped)."""
        fds = [*child.stdio, *([channel] if channel >= 0 else [])]
        msg = marshal.dumps(dict(spec))
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


def probe(spawner: RestrictedSpawner, layout: Layout, true: str, *, seccomp: bool) -> str | None:
    """One job under the strictest spec (read-only, network off; without the seccomp filter
    when not ``seccomp``) through ``spawner``: None when it ran and exited 0, else why."""
    if not proc_tasks_visible():
        return "landlock: this process cannot see its own threads in /proc/self/task"
    tmp = tempfile.mkdtemp(prefix="conch-probe.")
    try:
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            child = SpawnSpec(true, [true], {"PATH": "/usr/bin:/bin"}, "/", null, null, null)
            spec = job_spec(
                layout, sb.Policy("read-only", "off"), child, tmpdir=tmp, exposed=(), procs=()
            )
            if not seccomp:
                spec["seccomp"] = b""
            pid, _ = spawner.spawn(spec, child)
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
