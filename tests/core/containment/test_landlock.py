"""Issue 22: the Landlock backend and what holds under both backends (docs/spec.md §9a).

Level exercised: ``cgroup`` (this host; see conftest). The attack cases of test_sandbox.py
run against both backends there; this module adds what issue 22 asks: the seccomp filter (a
UDP send, a raw INET6 socket), host Unix sockets (filesystem and abstract) out of reach under
``network: off``, signals and ptrace of outside processes, another job's TMPDIR, the data dir
through symlinks, ``auto`` falling back to Landlock where bwrap cannot start (a rootless-like
user namespace), and a missing guarantee refused unless ``sandbox_partial: allow``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

import pytest
import system_tools
from job_programs import ATTEMPT
from sandbox_backends import BACKENDS, backend_settings, kind

import conch
from conch import ConchError

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]
PY = os.path.realpath(sys.executable)
SRC = os.path.dirname(os.path.dirname(os.path.abspath(conch.__file__)))


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def base():
    d = tempfile.mkdtemp(prefix="conch-ll-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def workspace(base) -> str:
    os.mkdir(os.path.join(base, "ws"))
    return os.path.join(base, "ws")


def cfg(base: str, workspace: str, backend: str, **settings: object) -> conch.Config:
    return conch.Config(
        result_detail="full",
        data_dir=os.path.join(base, "data"),
        default_cwd=workspace,
        **{**backend_settings(backend), **settings},  # type: ignore[arg-type]
    )


_SOCKETS = (
    ATTEMPT
    + r"""
import errno, socket, sys
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", ("127.0.0.1", 9))
def raw6():
    socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
def tcp6():
    socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
def unix_path():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(2)
    s.connect(sys.argv[1]); s.sendall(b"hi")
def unix_abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(2)
    s.connect("\0" + sys.argv[2]); s.sendall(b"hi")
def dgram_path():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"hi", sys.argv[3])
def pair():
    a, b = socket.socketpair(); a.send(b"p"); assert b.recv(1) == b"p"
for label, make in [("udp", udp), ("raw6", raw6), ("tcp6", tcp6), ("unix_path", unix_path),
                    ("unix_abstract", unix_abstract), ("dgram_path", dgram_path),
                    ("socketpair", pair)]:
    attempt(label, make)
"""
)


def _results(output: str) -> dict[str, str]:
    return {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in output.splitlines() if " " in ln}


async def test_network_off_blocks_udp_raw_inet6_and_every_host_unix_socket(
    base, workspace, backend
):
    """seccomp: socket() of a family but AF_UNIX is EAFNOSUPPORT (UDP, raw or stream INET6);
    connect() and addressed sends are EACCES, so neither a listening filesystem socket nor an
    abstract one of the host (docker, D-Bus, agents, X11 ... made here by the test) is reached;
    a socketpair still works. Network on, the same host sockets answer (the control)."""
    path = os.path.join(base, "host.sock")
    dgram = os.path.join(base, "host-dgram.sock")
    abstract = f"conch-test-{os.getpid()}-{backend}"
    listeners = []
    for family_addr in (path, "\0" + abstract):
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(family_addr)
        srv.listen(8)
        listeners.append(srv)
    d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    d.bind(dgram)
    listeners.append(d)
    os.chmod(path, 0o777)
    argv = [PY, "-c", _SOCKETS, path, abstract, dgram]
    try:
        async with conch.Runtime(cfg(base, workspace, backend, sandbox="read-only")) as rt:
            on = _results((await rt.exec(argv=argv))["output"])
            off = _results((await rt.exec(argv=argv, network="off"))["output"])
            loose = _results(
                (await rt.exec(argv=argv, sandbox="read-only", network="off"))["output"]
            )
    finally:
        for s in listeners:
            s.close()
    assert on["udp"] == "ok" and on["unix_path"] == "ok" and on["dgram_path"] == "ok", on
    if kind(backend) == "landlock":  # same network namespace: the abstract socket answers too
        assert on["unix_abstract"] == "ok", on
    for got in (off, loose):
        assert got["udp"] == "blocked EAFNOSUPPORT", got
        assert got["raw6"] == "blocked EAFNOSUPPORT", got
        assert got["tcp6"] == "blocked EAFNOSUPPORT", got
        assert got["unix_path"] == "blocked EACCES", got
        assert got["unix_abstract"] in ("blocked EACCES", "blocked EPERM"), got
        assert got["dgram_path"] == "blocked EACCES", got
        assert got["socketpair"] == "ok", got


_OUTSIDE = (
    ATTEMPT
    + r"""
import ctypes, errno, os, signal, sys
server, sleeper = int(sys.argv[1]), int(sys.argv[2])
attempt("signal_sleeper", lambda: os.kill(sleeper, signal.SIGTERM))
attempt("signal0_server", lambda: os.kill(server, 0))
libc = ctypes.CDLL(None, use_errno=True)
def ptrace():
    if libc.ptrace(16, server, None, None) != 0:  # PTRACE_ATTACH
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
attempt("ptrace_server", ptrace)
attempt("environ_server", lambda: open(f"/proc/{server}/environ", "rb").read())
attempt("mem_server", lambda: open(f"/proc/{server}/mem", "rb"))
def fds():  # (the numbers may be listed under Landlock; what they are, never)
    for n in os.listdir(f"/proc/{server}/fd"):
        os.readlink(f"/proc/{server}/fd/{n}")
        open(f"/proc/{server}/fd/{n}", "rb").close()
attempt("fds_server", fds)
attempt("root_server", lambda: os.listdir(f"/proc/{server}/root/"))
attempt("self_status", lambda: open("/proc/self/status").read())
"""
)


async def test_no_signal_ptrace_or_proc_access_to_processes_outside_the_job(
    base, workspace, backend
):
    """Landlock scopes signals (ABI 6) and ptrace to the job's own domain; bwrap's PID
    namespace shows nothing outside. The server (this process) and a sleeper started here
    can be neither signalled, traced, nor read through /proc; the job's own /proc/self can."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        async with conch.Runtime(cfg(base, workspace, backend, sandbox="read-only")) as rt:
            r = await rt.exec(argv=[PY, "-c", _OUTSIDE, str(os.getpid()), str(sleeper.pid)])
        got = _results(r["output"])
        assert sleeper.poll() is None, "the sandboxed job killed a process outside"
    finally:
        sleeper.kill()
        sleeper.wait()
    expected = "blocked EPERM" if kind(backend) == "landlock" else "blocked ESRCH"
    assert got["signal_sleeper"] == expected and got["signal0_server"] == expected, got
    assert got["ptrace_server"] in ("blocked EPERM", "blocked ESRCH"), got
    for k in ("environ_server", "mem_server", "fds_server", "root_server"):
        assert got[k].startswith("blocked"), (k, got)
    assert got["self_status"] == "ok", got


async def test_a_job_cannot_reach_another_jobs_temp_files(base, workspace, backend):
    """Landlock: each job's TMPDIR is its own, inside the hidden data dir (bwrap: a private
    /tmp each); another job can neither read, list nor write it; it goes with its job."""
    tmp = "$TMPDIR" if kind(backend) == "landlock" else "/tmp"
    async with conch.Runtime(cfg(base, workspace, backend, sandbox="workspace-write")) as rt:
        a = await rt.exec(
            command=f"echo secret-a > {tmp}/s && echo {tmp} && sleep 30", yield_ms=500
        )
        where = a["output"].strip()
        assert where and a["state"] == "running", a
        # one stream (2>&1), so `end` is last whatever the load: stderr has its own pipe
        b = await rt.exec(
            command=f"exec 2>&1; cat {where}/s; ls {where}; echo x > {where}/planted; echo end"
        )
        assert "secret-a" not in b["output"] and b["output"].endswith("end\n"), b
        assert not os.path.exists(os.path.join(where, "planted")) or backend == "bwrap"
        await rt.signal(a["job_id"], "kill")
        if kind(backend) == "landlock":
            assert where.startswith(os.path.join(base, "data")) and not os.path.exists(where)


async def test_the_data_dir_stays_hidden_through_symlinks_hard_links_and_renames(
    base, workspace, backend
):
    data = os.path.join(base, "data")
    async with conch.Runtime(cfg(base, workspace, backend, sandbox="workspace-write")) as rt:
        first = await rt.exec(command="echo secret-log")
        log = first["log_path"]
        attack = (
            f"exec 2>&1; ln -s {data} dlink; echo x > dlink/planted;"
            f" cat dlink/{os.path.relpath(log, data)};"
            f" ln {log} hard 2>&1; mv {data} {workspace}/moved 2>&1;"
            f" mv {base} {workspace}/base 2>&1; cat /proc/self/root{log}; echo end"
        )
        r = await rt.exec(command=attack)
    assert "secret-log" not in r["output"] and r["output"].endswith("end\n"), r
    assert not os.path.exists(os.path.join(data, "planted"))
    assert os.path.isdir(data) and not os.path.exists(os.path.join(workspace, "hard"))


async def test_auto_falls_back_to_landlock_when_bwrap_cannot_start_and_says_why(
    base, workspace, tmp_path
):
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    async with conch.Runtime(
        cfg(base, workspace, "auto", bwrap=str(broken), sandbox="read-only")
    ) as rt:
        info = (await rt.info())["sandbox"]
        r = await rt.exec(command="touch x; echo rc=$?")
    assert info["backend"] == "landlock" and info["backend_setting"] == "auto"
    assert "No permissions to create new namespace" in info["not_taken"]["bwrap"]
    assert "rc=1" in r["output"] and not os.path.exists(os.path.join(workspace, "x"))


_IN_USERNS = r"""
import asyncio, json, os, sys
sys.path.insert(0, sys.argv[1])
import conch
async def main():
    cfg = conch.Config(result_detail="full", data_dir=sys.argv[2], default_cwd=sys.argv[3],
                       sandbox="workspace-write", network="off")
    async with conch.Runtime(cfg) as rt:
        info = await rt.info()
        r = await rt.exec(
            command="exec 2>&1; echo in > sub/f && touch /etc/conch-x; "
            "grep -c NoNewPrivs:.1 /proc/self/status"
        )
        print(json.dumps({"sandbox": info["sandbox"], "output": r["output"]}))
asyncio.run(main())
"""


def test_auto_picks_landlock_in_a_user_namespace_where_bwrap_cannot_start(base, workspace):
    """Like a rootless container: a user namespace with user.max_user_namespaces=0 set inside
    it, and no capability left (as an unprivileged container's process), so bwrap can make no
    namespace. ``auto`` takes Landlock, info says why bwrap was not taken, the fence holds."""
    if not shutil.which("unshare") or not shutil.which("setpriv"):
        pytest.fail("unshare and setpriv (util-linux) are needed")
    script = os.path.join(base, "in_userns.py")
    with open(script, "w") as f:
        f.write(_IN_USERNS)
    os.mkdir(os.path.join(workspace, "sub"))  # (Landlock: no new entry at the top)
    inner = (
        "echo 0 > /proc/sys/user/max_user_namespaces && "
        'exec setpriv --bounding-set=-all --inh-caps=-all "$@"'
    )
    argv = ["unshare", "--user", "--map-root-user", "sh", "-c", inner, "sh"]
    argv += [sys.executable, script, SRC, os.path.join(base, "data"), workspace]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    sb = out["sandbox"]
    assert sb["backend"] == "landlock" and sb["landlock_abi"] >= 6, sb
    assert "namespace" in sb["not_taken"]["bwrap"], sb
    assert {"fs_write", "net_all", "unix_sockets", "signals"} <= set(sb["guarantees"])
    assert "Permission denied" in out["output"] and out["output"].endswith("1\n"), out
    with open(os.path.join(workspace, "sub", "f")) as f:
        assert f.read() == "in\n"
    assert not os.path.exists("/etc/conch-x")


# A seccomp filter for the server process itself, as a kernel or container without seccomp
# filters for its children would be: prctl(PR_SET_SECCOMP) and seccomp() fail with EINVAL
# (PR_SET_NO_NEW_PRIVS and everything else still work). Installed before Conch starts.
_NO_SECCOMP = r"""
import ctypes, os, struct, sys
ARCH = {"x86_64": (0xC000003E, 157, 317), "aarch64": (0xC00000B7, 167, 277)}[os.uname().machine]
def ins(c, jt, jf, k): return struct.pack("=HBBI", c, jt, jf, k)
prog = b"".join([
    ins(0x20, 0, 0, 4), ins(0x15, 1, 0, ARCH[0]), ins(0x06, 0, 0, 0x7FFF0000),
    ins(0x20, 0, 0, 0), ins(0x15, 3, 0, ARCH[2]), ins(0x15, 0, 3, ARCH[1]),
    ins(0x20, 0, 0, 16), ins(0x15, 0, 1, 22), ins(0x06, 0, 0, 0x00050000 | 22),
    ins(0x06, 0, 0, 0x7FFF0000),
])
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
class F(ctypes.Structure): _fields_ = [("len", ctypes.c_ushort), ("f", ctypes.c_void_p)]
buf = ctypes.create_string_buffer(prog, len(prog))
fp = F(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, ctypes.addressof(fp), 0, 0) == 0
sys.path.insert(0, sys.argv[1])
import asyncio, json, conch
async def main():
    out = {}
    for backend in ("bwrap", "landlock"):
        for partial in ("refuse", "allow"):
            cfg = conch.Config(result_detail="full", data_dir=sys.argv[2], default_cwd=sys.argv[3],
                               sandbox_backend=backend, sandbox_partial=partial)
            async with conch.Runtime(cfg) as rt:
                info = (await rt.info())["sandbox"]
                try:
                    ro = (await rt.exec(
                        command="touch x 2>/dev/null || echo denied", sandbox="read-only"
                    ))["output"]
                except conch.ConchError as e:
                    ro = e.code + ": " + e.message
                try:
                    r = await rt.exec(command="echo ran", network="off")
                    off = r["output"]
                except conch.ConchError as e:
                    off = e.code + ": " + e.message
            out[backend + "/" + partial] = {
                "guarantees": info["guarantees"], "ro": ro, "off": off
            }
    # below ABI 3 only the filter keeps truncation out: without it no fs_write either
    cfg = conch.Config(result_detail="full", data_dir=sys.argv[2], default_cwd=sys.argv[3],
                       sandbox_backend="landlock", landlock_abi_max=2)
    async with conch.Runtime(cfg) as rt:
        info = (await rt.info())["sandbox"]
        try:
            ro = (await rt.exec(command="echo ran", sandbox="read-only"))["output"]
        except conch.ConchError as e:
            ro = e.code + ": " + e.message
    out["landlock/abi2"] = {"guarantees": info["guarantees"], "ro": ro}
    print(json.dumps(out))
asyncio.run(main())
"""


def test_a_missing_guarantee_is_refused_naming_it_unless_partial_is_allowed(base, workspace):
    """Where the seccomp filter cannot be loaded, neither backend can keep host Unix sockets
    (nor, for Landlock, UDP) out of reach, nor a setuid or setgid file out of the workspace:
    ``network: off`` and the filesystem levels are ``sandbox_unavailable`` naming what is
    missing; ``sandbox_partial: allow`` runs them.
    Landlock below ABI 3 (``landlock_abi_max: 2``) then cannot stop truncation by path either:
    no ``fs_write``, ``fs_hide_data_dir``, so a read-only call is refused too."""
    script = os.path.join(base, "no_seccomp.py")
    with open(script, "w") as f:
        f.write(_NO_SECCOMP)
    argv = [sys.executable, script, SRC, os.path.join(base, "data"), workspace]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for backend in ("bwrap", "landlock"):
        refused, allowed = out[f"{backend}/refuse"], out[f"{backend}/allow"]
        assert "unix_sockets" not in refused["guarantees"], refused
        assert allowed["ro"] == "denied\n"
        # without the filter nothing refuses a setuid mode (nor, under Landlock, any other
        # metadata change): no fs_write
        assert "fs_write" not in refused["guarantees"], refused
        assert refused["ro"].startswith("sandbox_unavailable:"), refused
        assert "fs_write" in refused["ro"], refused
        assert refused["off"].startswith("sandbox_unavailable:"), refused
        assert "unix_sockets" in refused["off"] and "sandbox_partial" in refused["off"]
        assert allowed["off"] == "ran\n", allowed
    assert "net_all" not in out["landlock/refuse"]["guarantees"]
    assert "net_all" in out["bwrap/refuse"]["guarantees"]  # (its network namespace)
    abi2 = out["landlock/abi2"]
    assert abi2["guarantees"] == [], abi2  # (ABI 2, no filter: no TCP rule, no scoping)
    assert abi2["ro"].startswith("sandbox_unavailable:") and "fs_write" in abi2["ro"], abi2


def test_the_seccomp_program_guards_the_architecture_and_x32():
    from conch.core.containment.landlock import seccomp as ld

    prog = ld.seccomp_program("x86_64")
    ins = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    assert ins[0] == (0x20, 0, 0, 4) and ins[1][3] == 0xC000003E and ins[2][3] == ld.RET_KILL
    assert ins[4] == (0x35, 0, 1, 0x40000000) and ins[5][3] == ld.RET_KILL
    arm = ld.seccomp_program("aarch64")
    assert struct.unpack("=HBBI", arm[8:16])[3] == 0xC00000B7
    with pytest.raises(ConchError if False else KeyError):
        ld.seccomp_program("mips")
    assert errno.EAFNOSUPPORT == 97


_METADATA = (
    ATTEMPT
    + r"""
import errno, os, sys
target, inside = sys.argv[1:3]
attempt("chmod", lambda: os.chmod(target, 0o666))
attempt("chmod_setuid", lambda: os.chmod(target, 0o4755))
attempt("fchmod_setgid", lambda: os.fchmod(os.open(target, os.O_RDONLY), 0o2755))
attempt("chown", lambda: os.chown(target, os.getuid(), os.getgid()))
attempt("utime", lambda: os.utime(target, (1, 1)))
attempt("setxattr", lambda: os.setxattr(target, "user.conch", b"x"))
attempt("inside_chmod_x", lambda: os.chmod(inside, 0o755))
attempt("inside_setuid", lambda: os.chmod(inside, 0o4755))
"""
)


async def test_metadata_outside_the_writable_roots_stays_as_it_was(base, workspace, backend):
    """Landlock handles no metadata change: the filter refuses them all at ``read-only``; at
    ``workspace-write`` Conch makes mode and time changes for the job inside its writable
    roots only (metaops), refuses setuid/setgid modes, owners and attributes; bwrap's
    read-only binds give EROFS."""
    outside = os.path.join(base, "outside.bin")
    with open(outside, "w") as f:
        f.write("x")
    os.chmod(outside, 0o755)
    os.utime(outside, (1_000_000, 1_000_000))
    inside = os.path.join(workspace, "tool.sh")
    with open(inside, "w") as f:
        f.write("#!/bin/sh\n")
    before = os.stat(outside)

    def unchanged() -> bool:
        now = os.stat(outside)
        same = (now.st_mode, now.st_mtime_ns) == (before.st_mode, before.st_mtime_ns)
        return same and not os.listxattr(outside)

    async with conch.Runtime(cfg(base, workspace, backend)) as rt:
        r = await rt.exec(argv=[PY, "-c", _METADATA, outside, inside], sandbox="read-only")
        ro = _results(r["output"])
        assert unchanged(), os.stat(outside)
        r = await rt.exec(argv=[PY, "-c", _METADATA, outside, inside], sandbox="workspace-write")
        ww = _results(r["output"])
    for name in ("chmod", "chmod_setuid", "fchmod_setgid", "chown", "utime", "setxattr"):
        assert ro[name].startswith("blocked"), (name, ro)
    assert ro["inside_chmod_x"].startswith("blocked"), ro  # (read-only: the workspace too)
    for name in ("chmod_setuid", "fchmod_setgid"):
        assert ww[name].startswith("blocked"), (name, ww)
    assert os.stat(outside).st_mode & 0o6000 == 0
    assert ww["inside_chmod_x"] == "ok", ww
    assert unchanged(), os.stat(outside)
    for name in ("chmod", "chown", "utime", "setxattr"):
        assert ww[name].startswith("blocked"), (name, ww)
    if kind(backend) == "landlock":
        assert ww["inside_setuid"] == "blocked EPERM", ww


_META_WS = (
    ATTEMPT
    + r"""
import errno, os, sys, threading
ws, outside = sys.argv[1:3]
os.chdir(os.path.join(ws, "sub"))  # (Landlock: no new top-level entry beside a .git)
open("made.sh", "w").close()
attempt("chmod_rel", lambda: os.chmod("made.sh", 0o755))
attempt("fchmod", lambda: os.fchmod(os.open("made.sh", os.O_RDONLY), 0o700))
attempt("fchmodat_dirfd", lambda: os.chmod("sub/made.sh", 0o750, dir_fd=os.open(ws, os.O_RDONLY)))
attempt("utime_now", lambda: os.utime("made.sh"))
attempt("utime_set", lambda: os.utime("made.sh", ns=(5_000_000_000, 7_000_000_000)))
attempt("futimens", lambda: os.utime(os.open("made.sh", os.O_RDONLY), ns=(1, 2)))
os.symlink(outside, "link")
attempt("chmod_via_link", lambda: os.chmod("link", 0o777))
attempt("utime_via_link", lambda: os.utime("link", (1, 1)))
attempt("git_dir", lambda: os.chmod(os.path.join(ws, ".git", "config"), 0o777))
# the symlink swapped between a file inside and the outside one while chmod runs
stop = False
def swap():
    while not stop:
        try:
            os.replace("flip-a", "flip")
            os.replace("flip-b", "flip")
        except OSError:
            pass
open("target-in", "w").close()
os.symlink("target-in", "flip-a"); os.symlink(outside, "flip-b")
t = threading.Thread(target=swap); t.start()
for _ in range(300):
    try:
        os.chmod("flip", 0o600)
    except OSError:
        pass
    try:
        os.symlink("target-in", "flip-a"); os.symlink(outside, "flip-b")
    except OSError:
        pass
stop = True; t.join()
st = os.stat("made.sh")
print("mode", oct(st.st_mode & 0o7777), "mtime", st.st_mtime_ns)
"""
)


async def test_a_workspace_job_changes_modes_and_times_inside_and_nowhere_else(
    base, workspace, backend
):
    """At ``workspace-write`` a job chmods and touches files of the workspace as usual
    (relative paths, descriptors, directory descriptors, the `now` and explicit times), while
    a symlink out of it, the repository's .git and a symlink swapped during the calls reach
    nothing outside."""
    outside = os.path.join(base, "outside.txt")
    with open(outside, "w") as f:
        f.write("x")
    os.chmod(outside, 0o644)
    os.utime(outside, (1_000_000, 1_000_000))
    os.mkdir(os.path.join(workspace, ".git"))
    os.mkdir(os.path.join(workspace, "sub"))
    with open(os.path.join(workspace, ".git", "config"), "w") as f:
        f.write("[core]\n")
    before = os.stat(outside)
    async with conch.Runtime(cfg(base, workspace, backend)) as rt:
        r = await rt.exec(
            argv=[PY, "-c", _META_WS, workspace, outside],
            sandbox="workspace-write",
            timeout_ms=60000,
        )
    got = _results(r["output"])
    assert "chmod_rel" in got, r
    for name in ("chmod_rel", "fchmod", "fchmodat_dirfd", "utime_now", "utime_set", "futimens"):
        assert got[name] == "ok", (name, got, r)
    for name in ("chmod_via_link", "utime_via_link", "git_dir"):
        assert got[name].startswith("blocked"), (name, got)
    assert got["mode"] == "0o750 mtime 2", got  # the last chmod; futimens set mtime to 2 ns
    now = os.stat(outside)
    assert (now.st_mode, now.st_mtime_ns) == (before.st_mode, before.st_mtime_ns)
    assert os.stat(os.path.join(workspace, ".git", "config")).st_mode & 0o777 != 0o777


async def test_workspace_write_without_the_broker_is_refused_naming_fs_write(
    base, workspace, monkeypatch
):
    """Where this process cannot take a job's descriptors (``pidfd_getfd`` refused, e.g. Yama
    ``ptrace_scope`` 3; stood in for here by the probe's answer), nothing keeps a Landlock
    job's mode and time changes inside the workspace: ``workspace-write`` is
    ``sandbox_unavailable`` naming ``fs_write``, unless ``sandbox_partial: allow``."""
    from conch.core.containment import unotify

    monkeypatch.setattr(unotify, "check_kernel", lambda: "pidfd_getfd: Operation not permitted")
    async with conch.Runtime(cfg(base, workspace, "landlock", sandbox="workspace-write")) as rt:
        # info says so before any call: the server's own mode (workspace-write) lacks fs_write
        sb = (await rt.info())["sandbox"]
        assert sb["mode"] == "workspace-write" and "fs_write" not in sb["guarantees"], sb
        assert "pidfd_getfd" in sb["caveats"]["fs_write"], sb
        with pytest.raises(ConchError) as e:
            await rt.exec(command="true", sandbox="workspace-write")
        assert e.value.code == "sandbox_unavailable" and "fs_write" in e.value.message
        assert "pidfd_getfd" in e.value.message
        r = await rt.exec(command="echo ran", sandbox="read-only")  # (no broker needed there)
        assert r["output"] == "ran\n"
    async with conch.Runtime(cfg(base, workspace, "landlock", sandbox_partial="allow")) as rt:
        r = await rt.exec(command="echo ran", sandbox="workspace-write")
        assert r["output"] == "ran\n"
    async with conch.Runtime(cfg(base, workspace, "landlock", sandbox="read-only")) as rt:
        sb = (await rt.info())["sandbox"]  # (read-only refuses every metadata change itself)
        assert "fs_write" in sb["guarantees"] and "caveats" in sb, sb


async def test_a_landlock_job_starts_in_its_cgroup_and_a_refused_clone3_falls_back(base, workspace):
    """The fork server starts a job inside its cgroup v2 directory with clone3 whatever the
    glibc (no migration after an idle spell, which waits for an RCU grace period). Where the
    kernel refuses that clone3 (here: a directory that is no cgroup), the child writes itself
    into its cgroup.procs instead, and the job still runs in its cgroup."""
    from conch.core.containment import sandbox as sb
    from conch.core.containment.landlock import rules as ll
    from conch.core.process.spec import SpawnSpec

    async with conch.Runtime(cfg(base, workspace, "landlock")) as rt:
        c = rt.engine.spawn.containment
        assert c is not None and c.level == "cgroup"
        r = await rt.exec(command="grep '^0::' /proc/self/cgroup", sandbox="read-only")
        assert r["exit_code"] == 0 and r["output"].strip().endswith("/" + r["job_id"])
        fence = await c.fence("placed", sandbox="read-only")
        try:
            cg = fence.cgroup
            assert cg is not None and cg.kind == "v2" and fence.place == cg.track
            b = c.backends
            assert b.forkserver is not None and b.layout is not None
            r_fd, w_fd = os.pipe()
            null = os.open(os.devnull, os.O_RDWR)
            try:
                child = SpawnSpec(
                    "/bin/sh",
                    ["/bin/sh", "-c", "grep '^0::' /proc/self/cgroup"],
                    {"PATH": "/usr/bin:/bin"},
                    "/",
                    null,
                    w_fd,
                    null,
                    cgroup=workspace,  # no cgroup: clone3 refuses it
                )
                spec = ll.job_spec(
                    b.layout,
                    sb.Policy("read-only", "on"),
                    child,
                    tmpdir=fence.job_tmp,
                    exposed=(),
                    procs=cg.procs_files(),
                )
                pid = b.forkserver.spawn(spec, child)
            finally:
                os.close(null)
                os.close(w_fd)
            with os.fdopen(r_fd, "rb") as f:
                out = f.read().decode()
            _, status = os.waitpid(pid, 0)
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            assert out.strip().endswith("/" + os.path.basename(cg.track))
        finally:
            fence.drop_tmp()
            assert fence.cgroup is not None and fence.cgroup.remove()


async def test_a_root_servers_sandboxed_job_holds_no_capability(base, workspace, backend):
    """A root server's sandboxed job stays uid 0 but holds no capability, and gains none by
    an exec (no_new_privs): effective, permitted, inheritable and ambient all empty, in the
    job and in a program it execs. Under Landlock the bounding set is empty too (the fork
    server empties it once for every child); bwrap, run by root, leaves it as it was."""
    if os.geteuid() != 0:
        system_tools.unavailable("a root server", "needs root")
    async with conch.Runtime(cfg(base, workspace, backend)) as rt:
        for level in ("read-only", "workspace-write"):
            for _ in range(2):  # (the fork server's first job and one after it)
                r = await rt.exec(
                    command="id -u; grep ^Cap /proc/self/status; "
                    "sh -c 'grep ^Cap /proc/self/status'",
                    sandbox=level,
                )
                assert r["exit_code"] == 0, r
                lines = r["output"].splitlines()
                assert lines[0] == "0"
                caps = [tuple(ln.split()) for ln in lines[1:]]
                names = ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"]
                assert [name for name, _ in caps] == names * 2, caps
                held = {(name, value) for name, value in caps if int(value, 16)}
                if backend == "bwrap":
                    held = {(name, value) for name, value in held if name != "CapBnd:"}
                assert not held, (level, caps)
