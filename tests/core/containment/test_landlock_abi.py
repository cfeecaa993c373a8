"""Issue 22: each Landlock ABI level, run on this kernel (ABI 7) through ``landlock_abi_max``.

Levels exercised: ``cgroup`` and ``subreaper`` (this host; see conftest: the two spawn paths of
a Landlock job, tests/support/sandbox_backends.py). A cap of N must act as a kernel of ABI
N: ``info.sandbox`` reports it and exactly the guarantees that ABI (with the seccomp filter)
gives, and the attacks behave accordingly, real jobs against real files: writes outside the
workspace fail at every level; below ABI 3 (no TRUNCATE right) truncation by path is refused by
the filter, so the file outside keeps its bytes; TCP stays unreachable under ``network: off``
below ABI 4 (the filter); below ABI 6 signals are not scoped (a call is refused naming
``signals`` unless ``sandbox_partial: allow``), from 6 a kill of an outside process is EPERM.
Also: the seccomp program of each variant, on both architectures, run through a small
classic-BPF interpreter (jump targets, verdicts).
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

import pytest
from job_programs import ATTEMPT

import conch
from conch import ConchError
from conch.core.containment.landlock import lockdown as ld
from conch.core.containment.landlock import seccomp as sc

pytestmark = [pytest.mark.anyio]
PY = os.path.realpath(sys.executable)
KERNEL_ABI = ld.abi_version()[0]
CAPS = (1, 2, 3, 4, 5, 6, 7)


@pytest.fixture
def base():
    d = tempfile.mkdtemp(prefix="conch-abi-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _cfg(base: str, cap: int, partial: str, **settings: object) -> conch.Config:
    # (cgroup off: the job is spawned by the server's restricted thread; at the cgroup level
    # on glibc 2.36, by the fork server's clone3 into its cgroup)
    return conch.Config(
        result_detail="full",
        data_dir=os.path.join(base, "data"),
        default_cwd=os.path.join(base, "ws"),
        sandbox_backend="landlock",
        landlock_abi_max=cap,
        sandbox_partial=partial,
        **settings,  # type: ignore[arg-type]
    )


def _expected_guarantees(abi: int) -> list[str]:
    """What Landlock ABI ``abi`` plus the seccomp filter give (docs/design/sandbox.md)."""
    out = ["fs_write", "fs_hide_data_dir", "net_tcp", "net_all", "unix_sockets"]
    return [*out, "signals"] if abi >= 6 else out


_ATTACKS = (
    ATTEMPT
    + r"""
import errno, os, socket, subprocess, sys
outside, ws, log = sys.argv[1:4]
sleeper, port = int(sys.argv[4]), int(sys.argv[5])
def write_new():
    open(os.path.join(os.path.dirname(outside), "new"), "w").close()
def append():
    with open(outside, "a") as f: f.write("x")
attempt("write_new", write_new)
attempt("append", append)
attempt("truncate", lambda: os.truncate(outside, 0))
cmd = subprocess.run(["truncate", "-s", "0", outside], stderr=subprocess.DEVNULL)
print("truncate_cmd", "ok" if cmd.returncode == 0 else "blocked")
attempt("open_rdonly_trunc", lambda: os.close(os.open(outside, os.O_RDONLY | os.O_TRUNC)))
attempt("open_mode3_trunc", lambda: os.close(os.open(outside, 3 | os.O_TRUNC)))
attempt("truncate_log", lambda: os.truncate(log, 0))
attempt("truncate_inside", lambda: os.truncate(os.path.join(ws, "mine"), 1))
def write_trunc_inside():
    with open(os.path.join(ws, "mine"), "w") as f: f.write("rewritten")
attempt("write_trunc_inside", write_trunc_inside)
attempt("rename_across", lambda: os.rename(os.path.join(ws, "a", "f"), os.path.join(ws, "b", "f")))
def tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.settimeout(2)
    s.connect(("127.0.0.1", port)); s.close()
attempt("tcp", tcp)
attempt("signal_outside", lambda: os.kill(sleeper, 0))
"""
)


def _results(output: str) -> dict[str, str]:
    return {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in output.splitlines() if " " in ln}


@pytest.mark.parametrize("cgroup", ["auto", "off"])
@pytest.mark.parametrize("cap", CAPS)
async def test_a_capped_abi_reports_and_holds_what_that_abi_gives(base, cap, cgroup):
    if KERNEL_ABI < 1:
        pytest.fail("this test needs a kernel with Landlock")
    abi = min(cap, KERNEL_ABI)
    ws, out = os.path.join(base, "ws"), os.path.join(base, "out")
    for d in (ws, os.path.join(ws, "a"), os.path.join(ws, "b"), out):
        os.mkdir(d)
    outside = os.path.join(out, "f")
    with open(outside, "w") as f:
        f.write("keep me\n")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    sleeper = subprocess.Popen(["sleep", "60"])
    runs: dict[str, dict[str, str]] = {}
    try:
        settings = {"sandbox": "workspace-write", "cgroup": cgroup}
        async with conch.Runtime(_cfg(base, cap, "allow", **settings)) as rt:
            info = (await rt.info())["sandbox"]
            log = (await rt.exec(command="echo secret-log"))["log_path"]
            for network in ("on", "off"):
                for name, text in (("mine", "0123456789"), ("a/f", "moved")):
                    with open(os.path.join(ws, name), "w") as f:
                        f.write(text)
                if os.path.exists(os.path.join(ws, "b", "f")):
                    os.remove(os.path.join(ws, "b", "f"))
                argv = [PY, "-c", _ATTACKS, outside, ws, log, str(sleeper.pid)]
                argv.append(str(listener.getsockname()[1]))
                r = await rt.exec(argv=argv, network=network)
                runs[network] = _results(r["output"])
                with open(os.path.join(ws, "mine")) as f:
                    runs[network]["mine"] = f.read()
                assert r["exit_code"] == 0, r
            with open(log) as f:
                assert "secret-log" in f.read()
        refused = ""
        async with conch.Runtime(
            _cfg(base, cap, "refuse", sandbox="read-only", cgroup=cgroup)
        ) as rt:
            try:
                await rt.exec(command="true")
            except ConchError as e:
                refused = f"{e.code}: {e.message}"
        assert sleeper.poll() is None
    finally:
        listener.close()
        sleeper.kill()
        sleeper.wait()
    assert info["backend"] == "landlock", info
    assert info["landlock_abi"] == abi and info["landlock_abi_kernel"] == KERNEL_ABI, info
    assert info["guarantees"] == _expected_guarantees(abi), info
    with open(outside) as f:
        assert f.read() == "keep me\n", "a sandboxed job changed a file outside the workspace"
    assert sorted(os.listdir(out)) == ["f"]
    for network, got in runs.items():
        where = (cap, network, got)
        for k in ("write_new", "append", "truncate", "open_rdonly_trunc", "open_mode3_trunc"):
            assert got[k] == "blocked EACCES", (k, where)
        assert got["truncate_cmd"] == "blocked", where  # (coreutils: a write open)
        assert got["truncate_log"] == "blocked EACCES", where  # (the data dir: never granted)
        # below 3 the filter cannot tell a path inside from one outside: truncate(2) by path
        # is refused everywhere (a write open and ftruncate, coreutils' truncate, still work)
        assert got["truncate_inside"] == ("ok" if abi >= 3 else "blocked EACCES"), where
        assert got["write_trunc_inside"] == "ok" and got["mine"] == "rewritten", where
        # ABI 1 refuses every rename or link into another directory (no REFER right)
        assert got["rename_across"] == ("ok" if abi >= 2 else "blocked EXDEV"), where
        # not scoped below 6: the signal reaches the sleeper (signal 0: it lives on)
        assert got["signal_outside"] == ("blocked EPERM" if abi >= 6 else "ok"), where
    assert runs["on"]["tcp"] == "ok", runs
    assert runs["off"]["tcp"] == "blocked EAFNOSUPPORT", runs  # (the filter, at every ABI)
    if abi >= 6:
        assert refused == "", refused
    else:
        assert refused.startswith("sandbox_unavailable:") and "signals" in refused, refused
        assert f"Landlock ABI {abi}, capped by landlock_abi_max={cap}" in refused, refused
        assert "sandbox_partial" in refused, refused


def test_landlock_abi_max_is_checked_at_startup():
    for bad in (-1, 8):
        with pytest.raises(conch.ConfigError, match="landlock_abi_max"):
            conch.Config(landlock_abi_max=bad)
    assert conch.Config().landlock_abi_max == 0


# -- the seccomp program, run through a classic BPF interpreter ----------------------------------

# syscall numbers from the kernel's own tables (x86_64: arch/x86/entry/syscalls/syscall_64.tbl,
# as in asm/unistd_64.h; aarch64: include/uapi/asm-generic/unistd.h), written out here rather
# than taken from lockdown, so a wrong number there fails
_NR = {
    "x86_64": {
        "read": 0, "open": 2, "socket": 41, "connect": 42, "sendto": 44, "sendmsg": 46,
        "socketpair": 53, "truncate": 76, "ftruncate": 77, "creat": 85, "openat": 257,
        "sendmmsg": 307, "io_uring_setup": 425, "openat2": 437,
    },
    "aarch64": {
        "read": 63, "truncate": 45, "ftruncate": 46, "openat": 56, "socket": 198,
        "socketpair": 199, "connect": 203, "sendto": 206, "sendmsg": 211, "sendmmsg": 269,
        "io_uring_setup": 425, "openat2": 437,
    },
}  # fmt: skip
_AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_OPS = {0x20, 0x54, 0x15, 0x35, 0x06}  # LD|W|ABS, ALU|AND|K, JMP|JEQ|K, JMP|JGE|K, RET|K
ALLOW, KILL = 0x7FFF0000, 0x80000000
O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_CLOEXEC = 0, 1, 2, 0o100, 0o1000, 0o2000000


def _err(e: int) -> int:
    return 0x00050000 | e


def _run(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """The verdict of ``prog`` on one ``seccomp_data``; fails on a jump out of the program,
    an instruction seccomp would not take, or running off its end."""
    ins = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    assert ins and len(prog) % 8 == 0 and len(ins) <= 4096
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args, *([0] * (6 - len(args))))
    a, pc = 0, 0
    for _ in range(len(ins)):
        assert 0 <= pc < len(ins), f"pc {pc} outside a program of {len(ins)}"
        code, jt, jf, k = ins[pc]
        assert code in _OPS, f"instruction {pc}: opcode {code:#x}"
        if code != 0x15 and code != 0x35:
            assert jt == jf == 0, f"instruction {pc}: jump offsets on a non-jump"
        if code == 0x06:
            return k
        if code == 0x20:
            assert k % 4 == 0 and k + 4 <= len(data), f"instruction {pc}: load at {k}"
            a = struct.unpack_from("=I", data, k)[0]
        elif code == 0x54:
            a &= k
        else:
            taken = a == k if code == 0x15 else a >= k
            assert pc + 1 + max(jt, jf) < len(ins), f"instruction {pc}: jump past the end"
            pc += jt if taken else jf
        pc += 1
    raise AssertionError("no RET reached")


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize(
    ("net_off", "truncate"),
    [(True, False), (False, True), (True, True)],
    ids=["net", "trunc", "both"],
)
def test_every_seccomp_variant_jumps_in_range_and_gives_its_verdicts(arch, net_off, truncate):
    prog = sc.seccomp_program(arch, net_off=net_off, truncate=truncate)
    nr, audit = _NR[arch], _AUDIT[arch]
    other = _AUDIT["aarch64" if arch == "x86_64" else "x86_64"]

    def verdict(name: str, *args: int) -> int:
        return _run(prog, nr[name], audit, args)

    assert _run(prog, nr["read"], other) == KILL
    assert _run(prog, 0x40000000 | nr["read"], audit) == (KILL if arch == "x86_64" else ALLOW)
    assert verdict("read", 0, 0, 10) == ALLOW
    assert verdict("io_uring_setup") == _err(errno.ENOSYS)
    assert verdict("ftruncate", 3, 0) == ALLOW
    # -- network off
    net = {
        ("socket", socket.AF_INET, socket.SOCK_STREAM): _err(errno.EAFNOSUPPORT),
        ("socket", socket.AF_INET6, socket.SOCK_DGRAM): _err(errno.EAFNOSUPPORT),
        ("socket", socket.AF_UNIX, socket.SOCK_STREAM): ALLOW,
        ("socketpair", socket.AF_UNIX, socket.SOCK_STREAM): ALLOW,
        ("socketpair", socket.AF_INET, socket.SOCK_STREAM): _err(errno.EAFNOSUPPORT),
        ("connect", 3, 0x1000, 16): _err(errno.EACCES),
        ("sendmsg", 3, 0x1000, 0): _err(errno.EACCES),
        ("sendmmsg", 3, 0x1000, 1): _err(errno.EACCES),
        ("sendto", 3, 0x1000, 1, 0, 0x2000, 16): _err(errno.EACCES),
        ("sendto", 3, 0x1000, 1, 0, 0x7F00_0000_0000, 16): _err(errno.EACCES),  # (high word)
        ("sendto", 3, 0x1000, 1, 0, 0, 0): ALLOW,
    }
    for (name, *args), want in net.items():
        assert verdict(name, *args) == (want if net_off else ALLOW), (name, args)
    # -- the truncate guard (Landlock below ABI 3)
    opens = {
        O_RDONLY | O_TRUNC: _err(errno.EACCES),
        O_RDONLY | O_TRUNC | O_CLOEXEC | O_CREAT: _err(errno.EACCES),
        3 | O_TRUNC: _err(errno.EACCES),
        O_WRONLY | O_TRUNC: ALLOW,
        O_RDWR | O_TRUNC | O_CREAT: ALLOW,
        O_RDONLY | O_CLOEXEC: ALLOW,
        O_RDWR: ALLOW,
        (1 << 32) | O_RDONLY: ALLOW,  # (flags are an int: the high word is not read)
    }
    for flags, want in opens.items():
        want = want if truncate else ALLOW
        assert verdict("openat", 0xFFFFFF9C, 0x1000, flags, 0) == want, oct(flags)
        if "open" in nr:
            assert verdict("open", 0x1000, flags, 0o644) == want, oct(flags)
            # (openat's flags are args[2]: the open's check must not read them there)
            assert verdict("open", 0x1000, O_WRONLY, flags) == ALLOW, oct(flags)
    assert verdict("truncate", 0x1000, 0) == (_err(errno.EACCES) if truncate else ALLOW)
    # (its flags and mode are in a struct: ENOSYS in every variant, libc falls back to openat)
    assert verdict("openat2", 0xFFFFFF9C, 0x1000, 0x2000, 24) == _err(errno.ENOSYS)
    if "creat" in nr:  # O_CREAT|O_WRONLY|O_TRUNC: a write, Landlock's WRITE_FILE decides
        assert verdict("creat", 0x1000, 0o644) == ALLOW


def test_the_default_program_is_the_network_off_filter_bwrap_reads():
    assert sc.seccomp_program() == sc.seccomp_program(sc.ARCH, net_off=True, truncate=False)
    assert sc.seccomp_program("x86_64") != sc.seccomp_program("x86_64", truncate=True)


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_brokered_pair_hands_connect_to_conch_and_nothing_else(arch):
    """``sandbox_sockets``: the listener's filter stops ``connect`` alone (USER_NOTIF); the
    network-off filter loaded after it lets ``connect`` through and still refuses the rest.
    The kernel takes the strictest verdict of the two (ERRNO over USER_NOTIF over ALLOW)."""
    notify, net = sc.notify_program(arch), sc.seccomp_program(arch, connect_ok=True)
    nr, audit = _NR[arch], _AUDIT[arch]
    other = _AUDIT["aarch64" if arch == "x86_64" else "x86_64"]
    user_notif = 0x7FC00000
    assert _run(notify, nr["connect"], audit, (3, 0x1000, 16)) == user_notif
    assert _run(net, nr["connect"], audit, (3, 0x1000, 16)) == ALLOW
    for name in ("read", "sendto", "sendmsg", "socket", "openat"):
        assert _run(notify, nr[name], audit, (3, 0x1000, 16)) == ALLOW, name
    assert _run(net, nr["sendmsg"], audit, (3, 0x1000, 0)) == _err(errno.EACCES)
    assert _run(net, nr["socket"], audit, (socket.AF_INET, 1)) == _err(errno.EAFNOSUPPORT)
    assert _run(notify, nr["connect"], other) == KILL
    if arch == "x86_64":
        assert _run(notify, 0x40000000 | nr["connect"], audit) == KILL


_META_NR = {
    "x86_64": {
        "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94, "utime": 132,
        "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197,
        "lremovexattr": 198, "fremovexattr": 199, "utimes": 235, "fchownat": 260,
        "futimesat": 261, "fchmodat": 268, "utimensat": 280, "fchmodat2": 452,
        "setxattrat": 463, "removexattrat": 466,
    },
    "aarch64": {
        "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15,
        "fremovexattr": 16, "fchmod": 52, "fchmodat": 53, "fchownat": 54, "fchown": 55,
        "utimensat": 88, "fchmodat2": 452, "setxattrat": 463, "removexattrat": 466,
    },
}  # fmt: skip


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_metadata_rules_refuse_all_or_only_the_setid_bits(arch):
    """``read-only``: every metadata change is EPERM; otherwise only a mode with S_ISUID or
    S_ISGID (the mode is args[1] of chmod/fchmod, args[2] of the *at calls: the rules every
    job has)."""
    nr, audit = _META_NR[arch], _AUDIT[arch]
    every = sc.seccomp_program(arch, net_off=False, metadata="all")
    setid = sc.seccomp_program(arch, net_off=False)
    eperm = _err(errno.EPERM)
    for name, number in nr.items():
        assert _run(every, number, audit, (3, 0x1000, 0o644, 0)) == eperm, name
    mode_at = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2}
    for name, at in mode_at.items():
        if name not in nr:
            continue
        for mode, want in ((0o755, ALLOW), (0o4755, eperm), (0o2755, eperm), (0o1777, ALLOW)):
            args = [3, 0x1000, 0, 0]
            args[at] = mode
            assert _run(setid, nr[name], audit, tuple(args)) == want, (name, oct(mode))
    for name in ("chown", "fchownat", "utimensat", "setxattr"):
        if name in nr:
            assert _run(setid, nr[name], audit, (3, 0x1000, 0o4755, 0)) == ALLOW, name
    assert _run(setid, _NR[arch]["io_uring_setup"], audit) == _err(errno.ENOSYS)
    with pytest.raises(ValueError, match="metadata"):
        sc.seccomp_program(arch, metadata="some")
    with pytest.raises(ValueError, match="metadata"):
        sc.seccomp_program(arch, metadata="setid")  # (what every program does now)


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_brokered_metadata_pair_hands_modes_and_times_to_conch(arch):
    """``workspace-write`` with the broker: the listener's filter stops the mode and time
    calls (and ``connect`` only with ``sandbox_sockets``); the main filter lets those through
    and still refuses owners and extended attributes."""
    nr, audit = _META_NR[arch], _AUDIT[arch]
    user_notif = 0x7FC00000
    notify = sc.notify_program(arch, connect=False, metadata=True)
    main = sc.seccomp_program(arch, net_off=False, metadata="brokered")
    handed = {"chmod", "fchmod", "fchmodat", "fchmodat2", "utime", "utimes", "futimesat"}
    handed.add("utimensat")
    for name, number in nr.items():
        want = user_notif if name in handed else ALLOW
        assert _run(notify, number, audit, (3, 0x1000, 0o4755, 0)) == want, name
        assert _run(main, number, audit, (3, 0x1000, 0o644, 0)) == (
            ALLOW if name in handed else _err(errno.EPERM)
        ), name
    # a setuid/setgid mode never reaches Conch: the kernel takes the strictest verdict
    for name in ("chmod", "fchmod", "fchmodat", "fchmodat2"):
        if name in nr:
            args = (3, 0o4755, 0o4755, 0)
            assert _run(main, nr[name], audit, args) == _err(errno.EPERM), name
    assert _run(notify, _NR[arch]["connect"], audit, (3, 0x1000, 16)) == ALLOW
    both = sc.notify_program(arch, connect=True, metadata=True)
    assert _run(both, _NR[arch]["connect"], audit, (3, 0x1000, 16)) == user_notif
    assert _run(both, _NR[arch]["read"], audit) == ALLOW


_BASE_NR = {
    "x86_64": {
        "open": 2, "fcntl": 72, "mkdir": 83, "creat": 85, "chmod": 90, "fchmod": 91,
        "mknod": 133, "unshare": 272, "clone": 56, "openat": 257, "mkdirat": 258,
        "mknodat": 259, "fchmodat": 268, "clone3": 435, "openat2": 437, "fchmodat2": 452,
        "setxattr": 188, "fsetxattr": 190, "flock": 73,
    },
    "aarch64": {
        "fcntl": 25, "mknodat": 33, "mkdirat": 34, "fchmod": 52, "fchmodat": 53, "openat": 56,
        "unshare": 97, "clone": 220, "clone3": 435, "openat2": 437, "fchmodat2": 452,
        "setxattr": 5, "fsetxattr": 7, "flock": 32,
    },
}  # fmt: skip
O_TMPFILE = 0o20200000  # (__O_TMPFILE | O_DIRECTORY)
CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x00020000, 17
F_SETLK, F_SETFL, F_SETLEASE, F_GETLEASE, F_RDLCK = 6, 4, 1024, 1025, 0
VARIANTS = [
    {"net_off": False},
    {},
    {"net_off": False, "truncate": True},
    {"metadata": "all", "truncate": True},
    {"net_off": False, "metadata": "brokered"},
    {"others": True, "connect_ok": True},
]


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize("kw", VARIANTS, ids=["plain", "net", "trunc", "ro", "brokered", "others"])
def test_every_program_refuses_setid_modes_leases_and_user_namespaces(arch, kw):
    """The rules of every sandboxed job, whatever else the program holds: a mode with S_ISUID
    or S_ISGID is EPERM in each call that sets a mode (the mode changes, mknod(at),
    mkdir(at), creat, and open/openat when they create: O_CREAT or O_TMPFILE), openat2 is
    ENOSYS; fcntl(F_SETLEASE) is EPERM (F_SETLK and the rest pass); unshare and clone with
    CLONE_NEWUSER are EPERM, clone3 ENOSYS (glibc falls back to clone)."""
    nr, audit = _BASE_NR[arch], _AUDIT[arch]
    prog = sc.seccomp_program(arch, **kw)
    eperm, enosys = _err(errno.EPERM), _err(errno.ENOSYS)
    ro = kw.get("metadata") == "all"

    def verdict(name: str, *args: int) -> int:
        return _run(prog, nr[name], audit, args)

    modes = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2, "creat": 1, "mknod": 1}
    modes |= {"mknodat": 2, "mkdir": 1, "mkdirat": 2}
    for name, at in modes.items():
        if name not in nr:
            continue
        for mode, setid in ((0o755, False), (0o4755, True), (0o2775, True), (0o6000, True),
                            (0o100644, False), (0o104755, True), (0o1777, False)):  # fmt: skip
            args = [3, 0x1000, 0, 0]
            args[at] = mode
            plain = eperm if ro and "chmod" in name else ALLOW
            assert verdict(name, *args) == (eperm if setid else plain), (name, oct(mode))
    for name, flags_at in (("open", 1), ("openat", 2)):
        if name not in nr:
            continue
        for flags in (O_CREAT | O_WRONLY, O_CREAT | O_RDWR | O_TRUNC, O_TMPFILE | O_RDWR):
            args = [3, 0x1000, 0, 0]
            args[flags_at], args[flags_at + 1] = flags, 0o4755
            assert verdict(name, *args) == eperm, (name, oct(flags))
            args[flags_at + 1] = 0o2755
            assert verdict(name, *args) == eperm, (name, oct(flags))
            args[flags_at + 1] = 0o755
            assert verdict(name, *args) == ALLOW, (name, oct(flags))
        # without O_CREAT the mode is not used: whatever it holds, the open passes
        args = [3, 0x1000, 0, 0]
        args[flags_at], args[flags_at + 1] = O_WRONLY | O_CLOEXEC, 0o7777
        assert verdict(name, *args) == ALLOW, name
    assert verdict("openat2", 0xFFFFFF9C, 0x1000, 0x2000, 24) == enosys
    assert verdict("fcntl", 3, F_SETLEASE, F_RDLCK) == eperm
    assert verdict("fcntl", 3, F_SETLEASE | (1 << 32), F_RDLCK) == eperm  # (an int: low word)
    for cmd in (F_SETLK, F_SETFL, F_GETLEASE):
        assert verdict("fcntl", 3, cmd, 0x1000) == ALLOW, cmd
    assert verdict("flock", 3, 2) == ALLOW
    for name in ("unshare", "clone"):
        assert verdict(name, CLONE_NEWUSER) == eperm, name
        assert verdict(name, CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD) == eperm, name
        assert verdict(name, CLONE_NEWNS) == ALLOW, name  # (needs a capability: none left)
    assert verdict("clone", 0x01000000 | 0x00200000 | SIGCHLD, 0, 0, 0, 0) == ALLOW  # fork
    assert verdict("clone", 0x3D0F00, 0x7F00_0000_1000, 0x1000, 0x1000, 0x2000) == ALLOW
    assert verdict("clone3", 0x1000, 88) == enosys
    # the extended attribute calls are left to the capabilities (security.capability needs
    # CAP_SETFCAP, which no sandboxed job holds): only read-only refuses them here
    want = eperm if kw.get("metadata") in ("all", "brokered") else ALLOW
    assert verdict("setxattr", 0x1000, 0x2000, 0x3000, 20, 0) == want


_OTHERS_NR = {
    "x86_64": {
        "setpriority": 141, "sched_setparam": 142, "sched_setscheduler": 144,
        "sched_setaffinity": 203, "ioprio_set": 251, "prlimit64": 302, "sched_setattr": 314,
        "setrlimit": 160, "getpriority": 140, "sched_getaffinity": 204,
    },
    "aarch64": {
        "ioprio_set": 30, "sched_setparam": 118, "sched_setscheduler": 119,
        "sched_setaffinity": 122, "setpriority": 140, "prlimit64": 261, "sched_setattr": 274,
        "setrlimit": 164, "getpriority": 141, "sched_getaffinity": 123,
    },
}  # fmt: skip


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize(
    "kw",
    [{}, {"net_off": False}, {"truncate": True, "metadata": "all"}, {"metadata": "brokered"}],
    ids=["net", "plain", "trunc-meta", "brokered"],
)
def test_the_others_rules_refuse_calls_on_other_processes_alone(arch, kw):
    """``others`` (every Landlock job): EPERM for a pid (args[0]) other than 0 of the
    sched_set* calls, for prlimit64 with a pid other than 0 *and* a new limit (args[2], both
    words), for setpriority/ioprio_set with a ``who`` (args[1]) other than 0 or a whole user;
    the same calls on the caller itself, reads, and everything else pass. Combined with each
    other rule set, whose verdicts stay as they were."""
    nr, audit = _OTHERS_NR[arch], _AUDIT[arch]
    prog = sc.seccomp_program(arch, others=True, **kw)
    without = sc.seccomp_program(arch, **kw)
    eperm = _err(errno.EPERM)
    cases = {
        ("sched_setaffinity", 4242, 8, 0x1000): eperm,
        ("sched_setaffinity", 0, 8, 0x1000): ALLOW,
        ("sched_setaffinity", 1 << 32, 8, 0x1000): ALLOW,  # (a pid is an int: the low word)
        ("sched_setscheduler", 1, 5, 0x1000): eperm,
        ("sched_setscheduler", 0, 5, 0x1000): ALLOW,
        ("sched_setparam", 0xFFFFFFFF, 0x1000): eperm,
        ("sched_setparam", 0, 0x1000): ALLOW,
        ("sched_setattr", 77, 0x1000, 0): eperm,
        ("sched_setattr", 0, 0x1000, 0): ALLOW,
        ("prlimit64", 4242, 7, 0x1000, 0): eperm,
        ("prlimit64", 4242, 0, 0x7F00_0000_0000, 0): eperm,  # (the high word of the pointer)
        ("prlimit64", 4242, 7, 0, 0x1000): ALLOW,  # (a read)
        ("prlimit64", 0, 7, 0x1000, 0x2000): ALLOW,
        ("setpriority", 0, 4242, 19): eperm,
        ("setpriority", 1, 4242, 19): eperm,
        ("setpriority", 2, 0, 19): eperm,  # PRIO_USER 0: every process of the uid
        ("setpriority", 2, 1000, 19): eperm,
        ("setpriority", 0, 0, 19): ALLOW,
        ("setpriority", 1, 0, 19): ALLOW,  # (its own process group)
        ("ioprio_set", 1, 4242, 3 << 13): eperm,
        ("ioprio_set", 2, 4242, 3 << 13): eperm,
        ("ioprio_set", 3, 0, 3 << 13): eperm,  # IOPRIO_WHO_USER 0
        ("ioprio_set", 1, 0, 3 << 13): ALLOW,
        ("ioprio_set", 2, 0, 3 << 13): ALLOW,
        ("setrlimit", 7, 0x1000): ALLOW,
        ("getpriority", 0, 4242): ALLOW,
        ("sched_getaffinity", 4242, 8, 0x1000): ALLOW,
    }
    for (name, *args), want in cases.items():
        assert _run(prog, nr[name], audit, tuple(args)) == want, (name, args)
        assert _run(without, nr[name], audit, tuple(args)) == ALLOW, (name, args)
    # the other rules hold as before (a sample of each)
    net = _run(prog, _NR[arch]["connect"], audit, (3, 0x1000, 16))
    assert net == _run(without, _NR[arch]["connect"], audit, (3, 0x1000, 16))
    for number in _META_NR[arch].values():
        args = (3, 0x1000, 0o4755, 0)
        assert _run(prog, number, audit, args) == _run(without, number, audit, args)
    assert _run(prog, _NR[arch]["read"], audit) == ALLOW


def test_signals_hold_under_landlock_only_with_its_filter():
    """``signals`` means no process outside is signalled or changed: ABI 6 scopes signals,
    the filter refuses prlimit64 on another process (RLIMIT_CPU there is the kernel's
    SIGKILL) and the other calls on other processes; without the filter it does not hold."""
    from conch.core.containment import backends as ll

    assert "signals" in ll.landlock_guarantees(6, seccomp=True)
    assert "signals" not in ll.landlock_guarantees(6, seccomp=False)
    assert "signals" not in ll.landlock_guarantees(5, seccomp=True)
