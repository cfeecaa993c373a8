"""Issue 22: how a Landlock job is started, attacked (core/containment/landlock/).

Levels exercised: ``cgroup`` and ``subreaper`` (this host; see conftest). A thread of the
server restricts itself and spawns the job with ``posix_spawn``; the job starts as a gate sh
that runs its program only once that thread has left the kernel (while it lives it shares the
job's Landlock domain); cgroup.procs files reach the gate as descriptors the server opened.
Where a job must start in a cgroup v2 directory and glibc cannot spawn it there (glibc 2.36
here), the fork server's clone3 does. Every case runs on both paths (``landlock`` at the cgroup
level, ``landlock-nocgroup`` without one; see tests/support/sandbox_backends.py), real jobs,
real files, real sockets.

What a job must not do: hold any descriptor but its three (the gate's, a cgroup.procs file);
open or write any cgroup.procs file (moving itself out, or another process into its cgroup);
signal, trace or read any thread of the server, even the one that spawned it; leave the server
restricted after it spawned; run a program the sandbox hides, or one sh would run as a script,
where a direct exec refuses it.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import pytest
from job_ends import until_exit
from job_programs import ATTEMPT
from sandbox_backends import backend_settings

import conch
from conch import ConchError
from conch.core.containment.landlock import rules as ll
from conch.core.containment.landlock.spawner import RestrictedSpawner
from conch.core.process import libc_spawn
from conch.core.process.spec import SpawnSpec

pytestmark = [pytest.mark.anyio]
PY = os.path.realpath(sys.executable)
ROOT = os.geteuid() == 0


@pytest.fixture(params=["landlock", "landlock-nocgroup"])
def backend(request) -> str:
    return request.param


@pytest.fixture
def base() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="conch-lls-", dir="/var/tmp")
    for sub in ("ws", "outside", "ws/sub"):  # (Landlock: no new entry at the workspace's top)
        os.mkdir(os.path.join(d, sub))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def cfg(base: str, backend: str, **settings: object) -> conch.Config:
    return conch.Config(
        result_detail="full",
        data_dir=os.path.join(base, "data"),
        default_cwd=os.path.join(base, "ws"),
        **{**backend_settings(backend), **settings},  # type: ignore[arg-type]
    )


def _results(output: str) -> dict[str, str]:
    return {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in output.splitlines() if " " in ln}


# -- the gate ------------------------------------------------------------------------------------


def test_the_gate_runs_nothing_until_the_server_closes_its_end(tmp_path):
    """The gate sh waits on descriptor 3 until the other end closes, then closes it and execs
    the program: nothing of the program runs before, and it holds only 0, 1 and 2."""
    marker = tmp_path / "ran"
    scan = _FDS.replace("print('fds', fds)", f"open({str(marker)!r}, 'w').write(str(fds))")
    gate_r, gate_w = os.pipe2(os.O_CLOEXEC)
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        gate = [ll.SH, "-c", ll.gate_script(0), "conch-enter", PY, "-S", "-c", scan]
        pid = libc_spawn.spawn(
            SpawnSpec(
                ll.SH, gate, {"PATH": "/usr/bin:/bin"}, str(tmp_path), null, null, null,
                fds=[gate_r],
            )
        )  # fmt: skip
    finally:
        os.close(null)
        os.close(gate_r)
    try:
        time.sleep(0.5)
        assert not marker.exists(), "the program ran before the gate opened"
    finally:
        os.close(gate_w)
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert marker.read_text() == "[]"  # (nothing above 2: the gate's own descriptor closed)


_FD_SWAP = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from conch.core.process import libc_spawn
from conch.core.process.spec import SpawnSpec
# the extra descriptors sit exactly where the other one must go: 3 -> 4 and 4 -> 3
import fcntl
def high(fd):
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 20); os.close(fd); return moved
a_r, a_w = (high(fd) for fd in os.pipe()); b_r, b_w = (high(fd) for fd in os.pipe())
os.dup2(a_w, 3); os.dup2(b_w, 4); os.close(a_w); os.close(b_w)
null = os.open(os.devnull, os.O_RDWR)
script = "echo to3 >&3; echo to4 >&4; exec >&3; ls /proc/$$/fd"
pid = libc_spawn.spawn(SpawnSpec("/bin/sh", ["/bin/sh", "-c", script], {"PATH": "/usr/bin:/bin"},
                                 "/", null, null, null, fds=[4, 3]))
os.close(3); os.close(4)
os.waitpid(pid, 0)
print(json.dumps({"a": os.read(a_r, 4096).decode(), "b": os.read(b_r, 4096).decode()}))
"""


def test_extra_descriptors_land_on_3_and_up_even_where_they_sit_on_each_other():
    """``SpawnSpec.fds``: the n-th descriptor becomes 3 + n in the child, even when
    one given sits where another must go (each is copied above them all first); nothing else
    is inherited. In a fresh process, so its descriptors 3 and 4 are free to take."""
    src = os.path.dirname(os.path.dirname(os.path.abspath(conch.__file__)))
    r = subprocess.run(
        [sys.executable, "-c", _FD_SWAP, src], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["a"] == "to4\n", got  # a sat on 3, was given second: the child's 4
    assert got["b"].split() == ["to3", "0", "1", "2", "3", "4"], got


# -- descriptors ---------------------------------------------------------------------------------

_FDS = "import os\nfds = []\nfor fd in range(3, 1024):\n    try:\n        os.fstat(fd)\n"
_FDS += "    except OSError:\n        continue\n    fds.append(fd)\nprint('fds', fds)\n"


async def _fds_of(rt: conch.Runtime, **call: object) -> str:
    r = await rt.exec(argv=[PY, "-c", _FDS], **call)  # type: ignore[arg-type]
    assert r["exit_code"] == 0, r
    return _results(r["output"])["fds"]


@pytest.mark.parametrize("how", ["pipes", "pty", "sockets"])
async def test_a_job_holds_only_its_three_descriptors(base, backend, how):
    """No gate pipe, notify listener or server descriptor reaches the program: it holds 0, 1
    and 2 only (the same program unsandboxed too: the control)."""
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(os.path.join(base, "allowed.sock"))
    listening.listen(4)
    settings: dict[str, object] = {}
    if how == "sockets":
        settings["sandbox_sockets"] = [listening.getsockname()]
    try:
        async with conch.Runtime(cfg(base, backend, **settings)) as rt:
            fds = await _fds_of(rt, sandbox="workspace-write", network="off", pty=how == "pty")
            control = await _fds_of(rt)
    finally:
        listening.close()
    assert fds == "[]" and control == "[]", (fds, control)


async def test_a_job_with_limits_holds_no_cgroup_procs_descriptor(base):
    """With limits the job has cgroup v1 directories besides its v2 one, so the gate sh writes
    itself into each cgroup.procs file through a descriptor the server opened (on this host
    the spawning thread's path, even at the cgroup level): none of them reaches the program."""
    async with conch.Runtime(cfg(base, "landlock")) as rt:
        fds = await _fds_of(rt, sandbox="read-only", memory_max=256 << 20, pids_max=64)
    assert fds == "[]", fds


# -- cgroups -------------------------------------------------------------------------------------

_CGROUPS = (
    ATTEMPT
    + r"""
import os, sys
mounts = {}
for line in open("/proc/self/mountinfo"):
    left, right = line.split(" - ")
    fstype, _, opts = right.split()[:3]
    point = left.split()[4]
    if fstype == "cgroup2":
        mounts["v2"] = point
    elif fstype == "cgroup":
        for c in opts.split(","):
            mounts[c] = point
own = {}
for line in open("/proc/self/cgroup"):
    _, ctrl, path = line.rstrip("\n").split(":", 2)
    key = "v2" if ctrl == "" else ctrl
    if key in mounts and key in ("v2", "memory", "pids"):
        own[key] = mounts[key] + path
print("own", sorted(own))
def write_procs(path, what):
    def go():
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(what)
    return go
for key, path in sorted(own.items()):
    attempt(f"own_{key}", write_procs(path, "0"))
    attempt(f"parent_{key}", write_procs(os.path.dirname(path), "0"))
    attempt(f"server_{key}", write_procs(os.path.dirname(os.path.dirname(path)), sys.argv[1]))
    attempt(f"mkdir_{key}", lambda: os.mkdir(os.path.join(path, "sub")))
    attempt(f"rename_{key}", lambda: os.rename(path, path + ".moved"))
attempt("root_v2", write_procs(mounts["v2"], "0"))
def reopen():
    for fd in range(3, 16):
        try:
            os.close(os.open(f"/proc/self/fd/{fd}", os.O_WRONLY))
            return
        except FileNotFoundError:
            continue
    raise OSError(errno.ENOENT, "no descriptor 3-15 to reopen")
attempt("reopen_fd", reopen)
print("still", [ln.strip() for ln in open("/proc/self/cgroup") if ln.startswith("0::")][0])
"""
)


@pytest.mark.parametrize("limits", [False, True], ids=["v2", "v1-limits"])
async def test_a_job_can_neither_reopen_nor_write_any_cgroup_procs_file(base, limits):
    """At the cgroup level (the fork server's clone3 for a job in one v2 directory; with v1
    limit directories, the gate sh writing the cgroup.procs files the server opened): the job's
    program can open no cgroup.procs for writing (its own, its parent's, the server's, the
    root's: it would move itself out, or another process into its cgroup), make or move no
    cgroup, reopen no descriptor; it stays in its own cgroup."""
    call: dict[str, object] = {"sandbox": "workspace-write"}
    if limits:
        call["memory_max"] = 256 << 20
    async with conch.Runtime(cfg(base, "landlock")) as rt:
        r = await rt.exec(argv=[PY, "-c", _CGROUPS, str(os.getpid())], **call)  # type: ignore[arg-type]
    got = _results(r["output"])
    assert r["exit_code"] == 0, r
    assert "'v2'" in got["own"] and (not limits or "'memory'" in got["own"]), got
    attempts = {k: v for k, v in got.items() if k not in ("own", "still")}
    assert len(attempts) >= 6, got
    for k, v in attempts.items():
        assert v.startswith("blocked"), (k, got)
    for k in ("own_v2", "parent_v2", "server_v2", "root_v2", "mkdir_v2", "rename_v2"):
        assert attempts[k] == "blocked EACCES", (k, got)
    assert attempts["reopen_fd"] == "blocked ENOENT", got
    assert got["still"].endswith("/" + r["job_id"]), got


# -- the server's threads ------------------------------------------------------------------------

_THREADS = (
    ATTEMPT
    + r"""
import ctypes, os, sys, time
server = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
def call(ret):
    if ret != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
seen, reached = set(), []
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{server}/task")]
    except OSError:
        tids = []
    for tid in tids:
        seen.add(tid)
        tries = {
            "tgkill": lambda: call(libc.syscall(234, server, tid, 0)),
            "ptrace": lambda: call(libc.ptrace(0x4206, tid, None, None)),
            "mem": lambda: open(f"/proc/{server}/task/{tid}/mem", "rb").close(),
            "fd": lambda: os.readlink(f"/proc/{server}/task/{tid}/fd/0"),
            "environ": lambda: open(f"/proc/{server}/task/{tid}/environ", "rb").read(),
        }
        for name, go in tries.items():
            try:
                go()
                reached.append(f"{name}:{tid}")
            except OSError:
                pass
print("seen", len(seen))
print("reached", ",".join(reached) or "none")
"""
)


async def test_no_thread_of_the_server_can_be_reached_from_a_job(base, backend):
    """The thread that spawned a job shares the job's Landlock domain while it lives: it must
    be gone before the job's program runs. A job scans every thread of the server for a
    while, from its first instant, and tries to signal (tgkill), trace (PTRACE_SEIZE) and read
    (/proc/.../task/TID/{mem,fd,environ}) each, while other sandboxed jobs are spawned beside
    it (their spawning threads come and go): none is ever reached."""
    async with conch.Runtime(cfg(base, backend, sandbox="read-only")) as rt:
        attacker = asyncio.ensure_future(
            rt.exec(argv=[PY, "-S", "-c", _THREADS, str(os.getpid()), "1.5"], yield_ms=30000)
        )
        others = []
        while not attacker.done():
            others.append(await rt.exec(argv=["true"]))
            await asyncio.sleep(0.01)
        r = await attacker
    got = _results(r["output"])
    assert r["exit_code"] == 0, r
    assert int(got["seen"]) >= 2, got
    assert got["reached"] == "none", got
    assert len(others) >= 5 and all(o["exit_code"] == 0 for o in others)


def _task_status() -> list[dict[str, str]]:
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                fields = dict(ln.rstrip("\n").split(":\t", 1) for ln in f if ":\t" in ln)
        except FileNotFoundError:
            continue
        out.append(fields)
    return out


async def test_the_server_stays_unrestricted_after_it_spawned_sandboxed_jobs(base, backend):
    """After sandboxed jobs of every kind (pipes, a terminal, a shell, network off with the
    metadata broker), no thread of the server has no_new_privs, a seccomp filter or fewer
    capabilities (so no spawning thread is left), the collector is on again, and an unsandboxed
    job writes outside the workspace and connects over TCP as before."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    outside = os.path.join(base, "outside")
    try:
        async with conch.Runtime(cfg(base, backend)) as rt:
            for network in ("on", "off"):
                r = await rt.exec(command="true", sandbox="workspace-write", network=network)
                assert r["exit_code"] == 0, r
            r = await rt.exec(command="tty", pty=True, sandbox="read-only")
            assert r["output"].startswith("/dev/pts/"), r
            sh = await rt.shell_open(sandbox="read-only")
            r = await rt.exec(shell_id=sh["shell_id"], command="echo in-shell")
            assert r["output"] == "in-shell\n"
            statuses = _task_status()
            for st in statuses:
                assert st["NoNewPrivs"] == "0" and st["Seccomp"] == "0", st
                if ROOT:
                    assert int(st["CapEff"], 16) != 0 and int(st["CapBnd"], 16) != 0, st
            assert gc.isenabled()
            probe = (
                f"import socket; open('{outside}/w', 'w').write('x'); "
                f"socket.create_connection(('127.0.0.1', {port}), timeout=5).close(); print('ok')"
            )
            r = await rt.exec(argv=[PY, "-c", probe])
            assert r["output"] == "ok\n", r
            with open(os.path.join(outside, "server"), "w") as f:  # the server itself
                f.write("x")
            await rt.shell_close(sh["shell_id"])
    finally:
        listener.close()
    assert os.path.exists(os.path.join(outside, "w"))


# -- restriction itself --------------------------------------------------------------------------

_FENCED = (
    ATTEMPT
    + r"""
import os, sys
attempt("write_outside", lambda: open(os.path.join(sys.argv[1], "x"), "w").close())
attempt("write_workspace", lambda: open("sub/inside", "w").close())
status = dict(ln.rstrip("\n").split(":\t", 1) for ln in open("/proc/self/status") if ":\t" in ln)
print("nnp", status["NoNewPrivs"])
print("seccomp", status["Seccomp"])
print("caps", status["CapEff"], status["CapPrm"], status["CapBnd"])
"""
)


@pytest.mark.parametrize("pty", [False, True], ids=["pipes", "pty"])
async def test_a_sandboxed_job_is_restricted_and_its_control_is_not(base, backend, pty):
    """The spawn path must restrict: a write outside the workspace fails with EACCES, the job
    has no_new_privs, its seccomp filter (network off) and, under a root server, no capability
    left (the bounding set empty). The same program unsandboxed writes there: so a spawn path
    that stopped restricting fails here."""
    outside = os.path.join(base, "outside")
    argv = [PY, "-c", _FENCED, outside]
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(argv=argv, sandbox="workspace-write", network="off", pty=pty)
        control = await rt.exec(argv=argv, pty=pty)
    got, free = _results(r["output"]), _results(control["output"])
    assert got["write_outside"] == "blocked EACCES", r
    assert got["write_workspace"] == "ok" and got["nnp"] == "1" and got["seccomp"] == "2", got
    if ROOT:
        assert got["caps"] == "0000000000000000 0000000000000000 0000000000000000", got
    assert free["write_outside"] == "ok" and free["nnp"] == "0" and free["seccomp"] == "0", free


# -- terminals and shells ------------------------------------------------------------------------


async def test_terminal_jobs_shells_and_password_prompts_work_inside(base, backend):
    """The child opens its terminal after setsid, restricted already: the slave must be
    granted. A terminal job's password prompt (bash ``read -s``, Python's getpass on /dev/tty)
    is awaiting_secret and gets what is typed; bash and zsh shells keep their directory and
    stay fenced."""
    outside = os.path.join(base, "outside")
    async with conch.Runtime(cfg(base, backend, sandbox="workspace-write")) as rt:
        r = await rt.exec(
            command="read -s -p 'Password: ' pw; echo; echo got:$pw", pty=True, yield_ms=1000
        )
        assert r["awaiting_input"] and r["awaiting_secret"], r
        w = await until_exit(rt, await rt.write(r["job_id"], text="s3cret\n"))
        assert w["output"].endswith("got:s3cret\n"), w
        code = "import getpass; print('got:' + getpass.getpass('Secret: '))"
        r = await rt.exec(argv=[PY, "-c", code], pty=True, yield_ms=2000)
        assert r["awaiting_input"] and r["awaiting_secret"], r
        w = await until_exit(rt, await rt.write(r["job_id"], text="s3\n"))
        assert "got:s3" in w["output"], w
        for kind in ("bash", "zsh"):
            sh = await rt.shell_open(shell=kind)
            sid = sh["shell_id"]
            r = await rt.exec(shell_id=sid, command=f"touch {outside}/{kind}; echo rc=$?")
            assert "Permission denied" in r["output"] and "rc=1" in r["output"], r
            r = await rt.exec(shell_id=sid, command=f"mkdir -p sub/{kind} && cd sub/{kind} && tty")
            assert r["output"].startswith("/dev/pts/"), r
            r = await rt.exec(shell_id=sid, command="pwd")
            assert r["output"].strip().endswith(f"/sub/{kind}"), r
            await rt.shell_close(sid)
    assert os.listdir(outside) == []


# -- errors --------------------------------------------------------------------------------------


async def test_a_program_that_cannot_run_inside_is_the_same_error_on_every_path(base, backend):
    """The gate sh execs the program after the spawn returned, so the spawner says ahead what
    that exec would meet, as the fork server's exec does: a missing program, a program found
    on the PATH inside the hidden data dir (EACCES: only a file the argv names there, a job's
    script, is let through), a file the kernel would not exec and sh would run as a script
    (ENOEXEC), a missing directory; each the same structured error on both paths."""
    ws = os.path.join(base, "ws")
    data = os.path.join(base, "data")
    plain = os.path.join(ws, "notes.txt")
    with open(plain, "w") as f:
        f.write("echo ran-as-a-script\n")
    os.chmod(plain, 0o755)
    errors = {}
    async with conch.Runtime(cfg(base, backend, sandbox="read-only")) as rt:
        hidden = os.path.join(data, "hidden-true")
        shutil.copy("/bin/true", hidden)
        cases = {
            "missing": {"argv": ["no-such-program-xyz"]},
            "hidden": {"argv": ["hidden-true"], "env": {"PATH": f"{data}:/usr/bin:/bin"}},
            "script": {"argv": [plain]},
            "cwd": {"argv": ["true"], "cwd": os.path.join(ws, "gone")},
        }
        for name, call in cases.items():
            with pytest.raises(ConchError) as e:
                await rt.exec(**call)  # type: ignore[arg-type]
            errors[name] = (e.value.code, e.value.value)
        r = await rt.exec(argv=["true"])
        assert r["exit_code"] == 0
    assert errors == {
        "missing": ("spawn_failed", "not found"),
        "hidden": ("spawn_failed", "not permitted"),
        "script": ("spawn_failed", "ENOEXEC"),
        "cwd": ("cwd_not_found", os.path.join(ws, "gone")),
    }, errors


def _children() -> list[str]:
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                out += f.read().split()
        except FileNotFoundError:
            continue
    return sorted(out)


def test_a_failed_restriction_is_said_and_leaves_nothing_behind(tmp_path):
    """A step of the spawning thread that fails (here a seccomp program the kernel refuses:
    one that does not end in a RET) is an OSError naming the step; no child, no thread, no
    descriptor is left, and the collector is on again."""
    from conch.core.containment import sandbox as sb

    layout = ll.Layout(str(tmp_path), (str(tmp_path / "data"),), (), 7, ROOT)
    spawner = RestrictedSpawner()
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    child = SpawnSpec("/bin/true", ["true"], {"PATH": "/usr/bin:/bin"}, "/", null, null, null)
    spec = ll.job_spec(
        layout, sb.Policy("read-only", "off"), child, tmpdir=str(tmp_path), exposed=(), procs=()
    )
    try:
        pid, _ = spawner.spawn(spec, child)  # (it works)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        fds_before = sorted(os.listdir("/proc/self/fd"))
        threads_before = len(os.listdir("/proc/self/task"))
        children_before = _children()
        spec["seccomp"] = bytes(8)  # one instruction, no RET: PR_SET_SECCOMP says EINVAL
        with pytest.raises(OSError) as e:
            spawner.spawn(spec, child)
        # (another test's thread in this worker may hold a descriptor for a moment: the
        # tables are compared until they settle, a leak never does)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (
            sorted(os.listdir("/proc/self/fd")) != fds_before
            or len(os.listdir("/proc/self/task")) != threads_before
        ):
            time.sleep(0.05)
        assert sorted(os.listdir("/proc/self/fd")) == fds_before
        assert len(os.listdir("/proc/self/task")) == threads_before
        assert _children() == children_before
    finally:
        os.close(null)
        spawner.close()
    assert "(seccomp)" in str(e.value) and e.value.errno == errno.EINVAL, e.value
    assert gc.isenabled()


def test_both_spawn_paths_say_a_failed_restriction_step_alike(tmp_path):
    """The restriction's steps are one sequence (``lockdown.Restriction``) for the restricted
    thread and the fork server's child: a step that fails there (a seccomp program the kernel
    refuses) is the same OSError naming the same step on both paths, and the fork server's
    failed child is reaped."""
    from conch.core.containment import sandbox as sb
    from conch.core.containment.landlock.spawner import ForkServer

    layout = ll.Layout(str(tmp_path), (str(tmp_path / "data"),), (), 7, ROOT)
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    child = SpawnSpec("/bin/true", ["true"], {"PATH": "/usr/bin:/bin"}, "/", null, null, null)
    spec = ll.job_spec(
        layout, sb.Policy("read-only", "off"), child, tmpdir=str(tmp_path), exposed=(), procs=()
    )
    spec["seccomp"] = bytes(8)  # one instruction, no RET: PR_SET_SECCOMP says EINVAL
    before = _children()
    thread, server = RestrictedSpawner(), ForkServer()
    try:
        errors = []
        for spawn in (lambda: thread.spawn(spec, child), lambda: server.spawn(spec, child)):
            with pytest.raises(OSError) as e:
                spawn()
            errors.append((e.value.errno, str(e.value)))
    finally:
        os.close(null)
        thread.close()
        server.close()
    assert errors[0] == errors[1], errors
    assert errors[0][0] == errno.EINVAL and "(seccomp)" in errors[0][1], errors
    assert _children() == before


def test_what_the_gate_would_meet_is_told_before_the_spawn(tmp_path):
    """``_exec_refused``: EACCES for a program inside a hole that no rule grants (the data
    dir, /dev), none for one the job's TMPDIR or an exposed file grants; ENOEXEC for a readable
    file that is neither a binary nor a ``#!`` script; nothing said for a file the server
    cannot read (an execute-only binary for a server without root; here: a missing one),
    which is the exec's to refuse."""
    from conch.core.containment import sandbox as sb

    data, tmp = tmp_path / "data", tmp_path / "data" / "tmp" / "job"
    tmp.mkdir(parents=True)
    layout = ll.Layout(str(tmp_path), (str(data),), (), 7, ROOT)
    text = tmp_path / "notes.txt"
    text.write_text("echo hi\n")
    for name in ("hidden", "exposed"):
        shutil.copy("/bin/true", data / name)
    shutil.copy("/bin/true", tmp / "mine")

    def refused(path: str) -> int | None:
        spec = ll.job_spec(
            layout,
            sb.Policy("read-only", "on"),
            SpawnSpec(path, [path], {}, "/"),
            tmpdir=str(tmp),
            exposed=(str(data / "exposed"),),
            procs=(),
        )
        e = ll.exec_refused(spec)
        return None if e is None else e.errno

    assert refused(str(data / "hidden")) == errno.EACCES
    assert refused("/dev/null") == errno.EACCES
    assert refused(str(data / "exposed")) is None
    assert refused(str(tmp / "mine")) is None
    assert refused(str(text)) == errno.ENOEXEC
    assert refused("/bin/true") is None
    assert refused(str(tmp_path / "missing")) is None


_PDEATHSIG = r"""
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(1, signal.SIGTERM, 0, 0, 0) == 0  # PR_SET_PDEATHSIG, at once
time.sleep(0.5)
print("parent", os.getppid(), "alive")
"""


async def test_a_job_that_asks_for_its_parents_death_signal_is_not_sent_it_by_the_spawner(
    base, backend
):
    """A parent-death signal follows the thread that cloned the child. The spawning thread is
    gone before the program runs, so a program that sets PR_SET_PDEATHSIG first thing lives
    on, a child of the server."""
    async with conch.Runtime(cfg(base, backend, sandbox="read-only")) as rt:
        for _ in range(3):
            r = await rt.exec(argv=[PY, "-S", "-c", _PDEATHSIG])
            assert r["state"] == "exited" and r["exit_code"] == 0, r
            assert r["output"] == f"parent {os.getpid()} alive\n", r
