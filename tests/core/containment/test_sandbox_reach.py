"""Issue 22b: what a sandboxed job can reach that is not its own, attacked on both Linux
backends (``bwrap``, ``landlock`` at the cgroup level: the fork server starts it on this glibc,
``landlock-nocgroup``: the server's restricted thread; tests/support/sandbox_backends.py).

Level exercised: ``cgroup`` and ``subreaper`` (this host; see conftest), the sandbox on top.

Terminals: another terminal's slave (a Conch terminal job's, or a person's terminal that is not
Conch's at all) can be neither opened nor listed from inside, at every level (bwrap: a devpts of
the sandbox's own, also at ``sandbox: off`` with ``network: off``, where the host's ``/dev`` was
bound before; Landlock: only the job's own slave is granted). A Landlock job cannot make new
terminals (their slaves appear in ``/dev/pts``, which no rule can grant ahead); a bwrap job
makes them in its own devpts.

Other processes: a job cannot change another process's limits (``prlimit64``: RLIMIT_CPU set
on the server kills it), priority, I/O priority, scheduling or CPU affinity (Landlock: the
seccomp filter; bwrap: the PID namespace hides every outside pid), nor read, write, compare or
take anything of another process (Landlock's ptrace scoping; bwrap: the PID namespace). Each
attack also runs unsandboxed (its program drops its own capabilities, as a sandboxed job has
none) against a victim of its own: there it succeeds, so the test can fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from job_ends import until_exit
from job_programs import ATTEMPT
from sandbox_backends import BACKENDS, backend_settings, kind

import conch

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]
INSIDE_PY = os.path.realpath(sys.executable)
LEVELS = [("read-only", "on"), ("workspace-write", "off"), ("off", "off")]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def sandbox_settings(backend) -> dict[str, object]:
    """Every ``config`` of this module's tests on the backend (conftest.py)."""
    return backend_settings(backend)


def _results(output: str) -> dict[str, str]:
    return {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in output.splitlines() if " " in ln}


# -- terminals -------------------------------------------------------------------------------

#: open each terminal given (read and write), write a fake line into it, list /dev/pts
_TERMINALS = (
    ATTEMPT
    + r"""
import os, sys
def fake(path):
    def go():
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        try:
            os.write(fd, b"FAKE-LINE\n")
        finally:
            os.close(fd)
    return go
for n, path in enumerate(sys.argv[1:]):
    attempt(f"write{n}", fake(path))
    attempt(f"read{n}", lambda path=path: os.close(os.open(path, os.O_RDONLY | os.O_NOCTTY)))
attempt("ptmx", lambda: os.close(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)))
try:
    print("names", ",".join(sorted(os.listdir("/dev/pts"))) or "-")
except OSError as e:
    print("names", "blocked", e.errno)
"""
)


def _drain(master: int) -> bytes:
    os.set_blocking(master, False)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except (BlockingIOError, OSError):
            return out
        if not chunk:
            return out
        out += chunk


async def _whole(rt: conch.Runtime, job_id: str) -> str:
    """Everything a job's terminal showed, from its start."""
    r = await rt.call_tool("read", {"job_id": job_id, "cursor": 0, "max_bytes": 65536})
    return str(r["output"])


async def _terminal_job(rt: conch.Runtime) -> tuple[str, str]:
    """An unsandboxed terminal job waiting for a line: (its job id, its terminal's path)."""
    r = await rt.exec(command="tty; read -r line; echo got:$line", pty=True, yield_ms=400)
    assert r["state"] == "running", r
    tty = r["output"].splitlines()[0].strip()
    assert tty.startswith("/dev/pts/"), r
    return r["job_id"], tty


@pytest.mark.parametrize(("sandbox", "network"), LEVELS)
async def test_a_sandboxed_job_can_open_no_other_terminal(config, backend, sandbox, network):
    """A job's terminal and a person's (a terminal made outside Conch) cannot be opened from
    inside, for reading or writing, nor found by listing /dev/pts: nothing typed into them
    can be read there, and no fake line reaches them. The same program unsandboxed writes
    into terminals of the same two kinds (the control)."""
    person_m, person_s = os.openpty()
    other_m, other_s = os.openpty()
    try:
        person, other = os.ttyname(person_s), os.ttyname(other_s)
        async with conch.Runtime(config()) as rt:
            victim, victim_tty = await _terminal_job(rt)
            r = await rt.exec(
                argv=[INSIDE_PY, "-c", _TERMINALS, victim_tty, person],
                sandbox=sandbox,
                network=network,
            )
            got = _results(r["output"])
            await until_exit(rt, await rt.write(victim, text="real\n"))
            shown = await _whole(rt, victim)
            # the control: unsandboxed, into a terminal job and a person's terminal of its own
            control_job, control_tty = await _terminal_job(rt)
            c = await rt.exec(argv=[INSIDE_PY, "-c", _TERMINALS, control_tty, other])
            free = _results(c["output"])
            await until_exit(rt, await rt.write(control_job, text="real\n"))
            control_shown = await _whole(rt, control_job)
        reached, reached_other = _drain(person_m), _drain(other_m)
    finally:
        for fd in (person_m, person_s, other_m, other_s):
            os.close(fd)
    assert r["exit_code"] == 0, r
    want = "blocked EACCES" if kind(backend) == "landlock" else "blocked ENOENT"
    for key in ("write0", "read0", "write1", "read1"):
        assert got[key] == want, (key, got)
    if kind(backend) == "landlock":
        assert got["names"] == "blocked 13", got  # (EACCES: /dev/pts cannot be listed)
        # no master either: each would hold one of the host's kernel.pty.max terminals
        assert got["ptmx"] == "blocked EACCES", got
    else:  # its own devpts: no terminal of the host in it
        assert got["names"] == "ptmx" and got["ptmx"] == "ok", got
    assert "FAKE-LINE" not in shown and shown.endswith("got:real\n"), shown
    assert b"FAKE-LINE" not in reached
    # the attack works where nothing fences it
    assert all(free[k] == "ok" for k in ("write0", "read0", "write1", "read1", "ptmx")), free
    assert "FAKE-LINE" in control_shown and b"FAKE-LINE" in reached_other, control_shown


#: its own terminal: by its path, by /dev/tty; then a new terminal (glibc's openpty, which
#: opens the new slave with TIOCGPTPEER, and script(1))
_OWN_TERMINAL = r"""
t=$(tty); echo "tty=$t"
{ exec 3<>"$t" && echo reopened; } 2>/dev/null || echo reopen-refused
{ echo x >/dev/tty && echo devtty; } 2>/dev/null || echo devtty-refused
script -qc 'echo inner=$(tty)' /dev/null 2>&1; echo "script=$?"
"$0" -c 'import os; m, s = os.openpty(); print("openpty", os.ttyname(s))' 2>&1 | tail -1
"""


@pytest.mark.needs("script")
async def test_a_job_keeps_its_own_terminal_and_only_bwrap_makes_new_ones(config, backend):
    """The job's own terminal stays usable (by its path and as /dev/tty). A new terminal can
    be made under bwrap (in the sandbox's own devpts) but not under Landlock, where both the
    master (/dev/ptmx is not granted) and so every program that makes one fail with EACCES."""
    async with conch.Runtime(config(sandbox="workspace-write")) as rt:
        r = await rt.exec(
            argv=["sh", "-c", _OWN_TERMINAL, INSIDE_PY], pty=True, env={"PATH": "/usr/bin:/bin"}
        )
    out = r["output"]
    assert "reopened" in out and "devtty\n" in out, out
    if kind(backend) == "landlock":
        assert "tty=/dev/pts/" in out, out
        assert "script: failed to create pseudo-terminal: Permission denied" in out, out
        assert "script=1" in out and "PermissionError: [Errno 13]" in out, out
    else:  # (bwrap shows the job's terminal as /dev/console)
        assert "inner=/dev/pts/" in out and "script=0" in out, out
        assert "openpty /dev/pts/" in out, out


# -- other processes -------------------------------------------------------------------------

#: every call that acts on another process, against the victim pid (argv[1]), after dropping
#: this process's own capabilities (a sandboxed job has none: so the unsandboxed control
#: compares like with like); then the same calls on itself, which must keep working.
#: setpriority(PRIO_USER, 0, -20) and ioprio_set(IOPRIO_WHO_USER, 0, a class that does not
#: exist) change nothing even where they pass (no capability: no nice value can be lowered;
#: the class is EINVAL), so they run only inside the sandbox, where they must be EPERM
_PROCESSES = (
    ATTEMPT
    + r"""
import ctypes, os, platform, struct, sys
victim, inside = int(sys.argv[1]), sys.argv[2] == "inside"
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NAMES = ("prlimit64", "setpriority", "sched_setaffinity", "sched_setscheduler",
         "sched_setparam", "sched_setattr", "ioprio_set", "ioprio_get", "process_vm_readv",
         "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise", "migrate_pages",
         "move_pages", "perf_event_open", "get_robust_list", "pidfd_open", "capset")
NUMBERS = {
    "x86_64": (302, 141, 203, 144, 142, 314, 251, 252, 310, 311, 312, 438, 440, 256, 279,
               298, 274, 434, 126),
    "aarch64": (261, 140, 122, 119, 118, 274, 30, 31, 270, 271, 272, 438, 440, 238, 239,
                241, 100, 434, 91),
}[platform.machine()]
NR = dict(zip(NAMES, NUMBERS))
def sc(name, *args):
    r = libc.syscall(NR[name], *[ctypes.c_long(a) for a in args])
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
for cap in range(64):  # no capability, now or later (as a sandboxed job)
    libc.prctl(24, cap, 0, 0, 0)
def addr(obj):
    return ctypes.addressof(obj)
hdr = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0), 8)
caps = ctypes.create_string_buffer(bytes(24), 24)
sc("capset", addr(hdr), addr(caps))
limit = (ctypes.c_uint64 * 2)(16, 16)
got = (ctypes.c_uint64 * 2)()
mask = ctypes.c_uint64(1)
idle = ctypes.c_int(0)
attr = ctypes.create_string_buffer(struct.pack("=IIQiIQQQ", 56, 5, 0, 0, 0, 0, 0, 0), 56)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(64)
local, remote = iovec(addr(buf), 8), iovec(0x10000, 8)
nodes = ctypes.c_ulong(1)
page, status = ctypes.c_void_p(0x10000), ctypes.c_int(0)
perf = bytearray(128)
struct.pack_into("=IIQ", perf, 0, 1, 128, 0)  # PERF_TYPE_SOFTWARE, CPU clock
struct.pack_into("=Q", perf, 40, (1 << 5) | (1 << 6))  # exclude_kernel, exclude_hv
perf_attr = ctypes.create_string_buffer(bytes(perf), 128)
head, size = ctypes.c_void_p(), ctypes.c_size_t()
v = victim
attempt("prlimit_set", lambda: sc("prlimit64", v, 7, addr(limit), 0))
cpu = (ctypes.c_uint64 * 2)(1 << 40, 1 << 40)
attempt("prlimit_cpu", lambda: sc("prlimit64", v, 0, addr(cpu), 0))
attempt("prlimit_get", lambda: sc("prlimit64", v, 7, 0, addr(got)))
attempt("setpriority", lambda: sc("setpriority", 0, v, 19))
attempt("setpriority_pgrp", lambda: sc("setpriority", 1, v, 19))
attempt("sched_setaffinity", lambda: sc("sched_setaffinity", v, 8, addr(mask)))
attempt("sched_setscheduler", lambda: sc("sched_setscheduler", v, 5, addr(idle)))
attempt("sched_setparam", lambda: sc("sched_setparam", v, addr(idle)))
attempt("sched_setattr", lambda: sc("sched_setattr", v, addr(attr), 0))
attempt("ioprio_set", lambda: sc("ioprio_set", 1, v, 3 << 13))
attempt("ioprio_set_pgrp", lambda: sc("ioprio_set", 2, v, 3 << 13))
if inside:
    attempt("setpriority_user", lambda: sc("setpriority", 2, 0, -20))
    attempt("ioprio_set_user", lambda: sc("ioprio_set", 3, 0, 7 << 13))
attempt("process_vm_readv", lambda: sc("process_vm_readv", v, addr(local), 1, addr(remote), 1, 0))
attempt("process_vm_writev", lambda: sc("process_vm_writev", v, addr(local), 1, addr(remote), 1, 0))
attempt("kcmp", lambda: sc("kcmp", os.getpid(), v, 0, 0, 0))
attempt("migrate_pages", lambda: sc("migrate_pages", v, 64, addr(nodes), addr(nodes)))
attempt("move_pages", lambda: sc("move_pages", v, 1, addr(page), 0, addr(status), 0))
attempt("perf_event_open", lambda: os.close(sc("perf_event_open", addr(perf_attr), v, -1, -1, 0)))
attempt("get_robust_list", lambda: sc("get_robust_list", v, addr(head), addr(size)))
try:
    pidfd = sc("pidfd_open", v, 0)
    attempt("pidfd_getfd", lambda: os.close(sc("pidfd_getfd", pidfd, 0, 0)))
    attempt("process_madvise", lambda: sc("process_madvise", pidfd, addr(remote), 1, 20, 0))
except OSError as e:
    print("pidfd_open", "blocked", errno.errorcode.get(e.errno, e.errno))
# its own: all of it still works
mine = (ctypes.c_uint64 * 2)(256, 256)
attempt("own_prlimit", lambda: sc("prlimit64", 0, 7, addr(mine), 0))
attempt("own_setrlimit", lambda: __import__("resource").setrlimit(7, (128, 128)))
attempt("own_setpriority", lambda: sc("setpriority", 0, 0, 5))
attempt("own_pgrp_setpriority", lambda: sc("setpriority", 1, 0, 6))
attempt("own_sched_setaffinity", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
batch = os.sched_param(0)
attempt("own_sched_setscheduler", lambda: os.sched_setscheduler(0, os.SCHED_BATCH, batch))
attempt("own_ioprio_set", lambda: sc("ioprio_set", 1, 0, (2 << 13) | 4))
print("own_nice", os.getpriority(os.PRIO_PROCESS, 0))
"""
)

#: the calls the Landlock filter refuses (EPERM); the rest Landlock's ptrace scoping does
_FILTERED = (
    "prlimit_set",
    "prlimit_cpu",
    "setpriority",
    "setpriority_pgrp",
    "sched_setaffinity",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "ioprio_set",
    "ioprio_set_pgrp",
    "setpriority_user",
    "ioprio_set_user",
)
_PTRACE_SCOPED = (
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "migrate_pages",
    "move_pages",
    "get_robust_list",
    "pidfd_getfd",
)
_OWN = (
    "own_prlimit",
    "own_setrlimit",
    "own_setpriority",
    "own_pgrp_setpriority",
    "own_sched_setaffinity",
    "own_sched_setscheduler",
    "own_ioprio_set",
)


def _victim() -> subprocess.Popen[bytes]:
    """A process outside every job, with no capability (as a sandboxed job, another job, or
    the server of a user who is not root): the kernel's own capability check does not stop
    a call on it, only the sandbox can."""
    drop = "import ctypes, os\nfor c in range(64): ctypes.CDLL(None).prctl(24, c, 0, 0, 0)\n"
    drop += "os.execv('/bin/sleep', ['sleep', '120'])\n"
    # (a session of its own: its process group is its own to renice, and nothing else's)
    proc = subprocess.Popen(
        [INSIDE_PY, "-S", "-c", drop], stdin=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                status = dict(ln.rstrip("\n").split(":\t", 1) for ln in f if ":\t" in ln)
            if status["Name"] == "sleep":
                assert int(status["CapPrm"], 16) == 0, status
                return proc
        except FileNotFoundError:
            pass
        time.sleep(0.01)
    raise AssertionError("the victim did not start")


def _state(pid: int) -> tuple[object, ...]:
    """What the calls would change: limits, nice, policy, affinity, I/O priority."""
    import ctypes
    import resource

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ioprio_get = {"x86_64": 252, "aarch64": 31}[os.uname().machine]
    return (
        resource.prlimit(pid, resource.RLIMIT_NOFILE),
        resource.prlimit(pid, resource.RLIMIT_CPU),
        os.getpriority(os.PRIO_PROCESS, pid),
        os.sched_getscheduler(pid),
        sorted(os.sched_getaffinity(pid)),
        libc.syscall(ioprio_get, 1, pid),
    )


@pytest.mark.parametrize(("sandbox", "network"), LEVELS)
async def test_a_sandboxed_job_cannot_change_or_reach_another_process(
    config, backend, sandbox, network
):
    """From inside, at every level, a job changes nothing of a process outside (its limits,
    nice value, scheduling policy, CPU affinity, I/O priority) and reads, writes, compares or
    takes nothing of it; its own limits, priority and scheduling it still sets. Unsandboxed,
    the same program changes all of that on a victim of its own (the control)."""
    victim, control_victim = _victim(), _victim()
    try:
        before = _state(victim.pid)
        async with conch.Runtime(config()) as rt:
            r = await rt.exec(
                argv=[INSIDE_PY, "-c", _PROCESSES, str(victim.pid), "inside"],
                sandbox=sandbox,
                network=network,
            )
            c = await rt.exec(argv=[INSIDE_PY, "-c", _PROCESSES, str(control_victim.pid), "out"])
        after = _state(victim.pid)
        control_before, control_after = before, _state(control_victim.pid)
    finally:
        for p in (victim, control_victim):
            p.kill()
            p.wait()
    assert r["exit_code"] == 0 and c["exit_code"] == 0, (r, c)
    got, free = _results(r["output"]), _results(c["output"])
    assert after == before, (before, after, got)
    if kind(backend) == "landlock":
        for key in _FILTERED:
            assert got[key] == "blocked EPERM", (key, got)
        for key in _PTRACE_SCOPED:
            assert got[key] == "blocked EPERM", (key, got)
        assert got["prlimit_get"] == "ok", got  # (reading a limit is left alone)
        assert got["perf_event_open"] == "blocked EACCES", got
        assert got["process_madvise"].startswith("blocked"), got
    else:  # the PID namespace: no outside pid is there to act on
        for key in (*_FILTERED, *_PTRACE_SCOPED, "prlimit_get", "pidfd_open"):
            if key in ("setpriority_user", "ioprio_set_user", "pidfd_getfd"):
                continue  # (the user's processes in the namespace only; no pidfd to use)
            assert got[key] == "blocked ESRCH", (key, got)
    for key in _OWN:
        assert got[key] == "ok", (key, got)
    assert got["own_nice"] == "6", got  # (its process group's, set after its own)
    # the control: every call reached its victim
    for key in _FILTERED:
        if key not in ("setpriority_user", "ioprio_set_user"):
            assert free[key] == "ok", (key, free)
    for key in ("kcmp", "migrate_pages", "move_pages", "get_robust_list", "pidfd_getfd"):
        assert free[key] == "ok", (key, free)
    assert free["process_vm_readv"] == "blocked EFAULT", free  # (past the access check)
    assert free["perf_event_open"] == "ok", free
    assert control_after != control_before, control_after
    limits, cpu, nice, policy, _, ioprio = control_after
    assert limits == (16, 16) and cpu == (1 << 40, 1 << 40) and nice == 19, control_after
    assert policy == os.SCHED_IDLE and ioprio == 3 << 13, control_after


#: ordinary programs that set their own (or their children's) limits and priorities
_ORDINARY = r"""
ulimit -n 256 && echo "ulimit=$(ulimit -n)"
nice -n 5 sh -c 'echo "nice=$(nice)"'
taskset -c 0 true && echo taskset-ok
chrt -b 0 true && echo chrt-ok
ionice -c 3 true && echo ionice-ok
sleep 30 & child=$!
renice -n 3 -p "$child" >/dev/null 2>&1 && echo renice-child-ok || echo renice-child-refused
prlimit --pid "$child" --nofile=64 >/dev/null 2>&1 && echo prlimit-child-ok \
  || echo prlimit-child-refused
kill "$child"; wait "$child" 2>/dev/null
prlimit --nofile=64 sh -c 'echo "prlimit-run=$(ulimit -n)"'
"""


async def test_ordinary_programs_still_set_their_own_limits_and_priorities(config, backend):
    """``ulimit``, ``nice``, ``taskset``, ``chrt``, ``ionice`` and ``prlimit CMD`` act on the
    job itself and work on both backends. ``renice``/``prlimit --pid`` of the job's own child
    work under bwrap and are refused under Landlock (the filter cannot tell a pid of the job
    from any other: docs/containment.md)."""
    async with conch.Runtime(config(sandbox="read-only")) as rt:
        r = await rt.exec(command=_ORDINARY, env={"PATH": "/usr/bin:/bin"})
    out = r["output"]
    for line in ("ulimit=256", "nice=5", "taskset-ok", "chrt-ok", "ionice-ok", "prlimit-run=64"):
        assert line in out.splitlines(), (line, out)
    if kind(backend) == "landlock":
        assert "renice-child-refused" in out and "prlimit-child-refused" in out, out
    else:
        assert "renice-child-ok" in out and "prlimit-child-ok" in out, out
