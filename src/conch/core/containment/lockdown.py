"""Landlock and seccomp through ctypes, and the fork server that applies them before a job's
program runs where a job must start in its cgroup (docs/spec.md §9a, the ``landlock`` backend).
Standard library only: Conch imports it, and it also runs on its own as the fork server
(``python -I -S lockdown.py FD``) and as the socket broker's shim in a bwrap sandbox
(``--broker``), small processes that start quickly and never import Conch.

Most landlock jobs are started by a thread of Conch's that restricts itself and calls
``posix_spawn`` (conch/core/containment/landlock.py, ``Spawner``). That spawn cannot start a
child inside a cgroup: before glibc 2.39 it has no way to (``posix_spawnattr_setcgroup_np``),
and from 2.39 it would need ``clone3``, which the thread's filter (the job's, loaded before the
spawn) refuses; moving the child in afterwards (a write to ``cgroup.procs``) waits for an RCU
grace period after an idle spell (~11 ms here). So where a job has a cgroup v2 directory to
start in, this fork server starts it: for each job it receives the spec and the three
descriptors over a socketpair, builds the ruleset, and clones a child with
``clone3(CLONE_INTO_CGROUP)`` and ``CLONE_PARENT``, so the job is Conch's own child (reaped and
watched by its pidfd like every other), not the fork server's. The child takes its terminal or
descriptors, its directory, default signals, ``no_new_privs``, drops every capability (a root
server), restricts itself (Landlock), loads the seccomp filter, closes every other descriptor
and execs. An exec that fails comes back as its errno through a close-on-exec pipe. The child
restricts itself, so no thread outside the job ever shares its Landlock domain.

Landlock (Linux 5.13+) has no deny rule: access is granted beneath the directories given. A
hidden directory (Conch's data dir) is kept out by granting every sibling along its path and
never the path itself (``cover``); so the directories above it cannot be listed inside. A hole
that does not exist is kept out the same way, so it cannot be made (a workspace's ``.git``).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import gc
import marshal
import os
import signal
import socket
import stat
import struct
import sys
from collections.abc import Iterable, Sequence
from typing import Any

# -- Landlock ------------------------------------------------------------------------------------

_SYS = {
    "x86_64": {
        "create_ruleset": 444,
        "add_rule": 445,
        "restrict_self": 446,
        "clone": 56,
        "clone3": 435,
        "capset": 126,
        "socket": 41,
        "connect": 42,
        "sendto": 44,
        "sendmsg": 46,
        "socketpair": 53,
        "sendmmsg": 307,
        "io_uring_setup": 425,
        "open": 2,
        "openat": 257,
        "openat2": 437,
        "truncate": 76,
        "seccomp": 317,
        # calls that make a file or directory with a mode (and clone/unshare, fcntl)
        "creat": 85,
        "mkdir": 83,
        "mknod": 133,
        "mkdirat": 258,
        "mknodat": 259,
        "fcntl": 72,
        "unshare": 272,
        # metadata changes (Landlock handles none of them)
        "chmod": 90,
        "fchmod": 91,
        "chown": 92,
        "fchown": 93,
        "lchown": 94,
        "utime": 132,
        "setxattr": 188,
        "lsetxattr": 189,
        "fsetxattr": 190,
        "removexattr": 197,
        "lremovexattr": 198,
        "fremovexattr": 199,
        "utimes": 235,
        "fchownat": 260,
        "futimesat": 261,
        "fchmodat": 268,
        "utimensat": 280,
        "fchmodat2": 452,
        "setxattrat": 463,
        "removexattrat": 466,
        # calls on another process's limits, priority, scheduling (Landlock scopes none)
        "setpriority": 141,
        "sched_setparam": 142,
        "sched_setscheduler": 144,
        "sched_setaffinity": 203,
        "ioprio_set": 251,
        "prlimit64": 302,
        "sched_setattr": 314,
    },
    "aarch64": {
        "create_ruleset": 444,
        "add_rule": 445,
        "restrict_self": 446,
        "clone": 220,
        "clone3": 435,
        "capset": 91,
        "socket": 198,
        "connect": 203,
        "sendto": 206,
        "sendmsg": 211,
        "socketpair": 199,
        "sendmmsg": 269,
        "io_uring_setup": 425,
        # (no open: openat only; truncate is the generic table's __NR3264_truncate)
        "openat": 56,
        "openat2": 437,
        "truncate": 45,
        "seccomp": 277,
        # calls that make a file or directory with a mode (and clone/unshare, fcntl; the
        # generic table has no creat, mkdir, mknod)
        "mkdirat": 34,
        "mknodat": 33,
        "fcntl": 25,
        "unshare": 97,
        # metadata changes (the generic table: no chmod, chown, lchown, utime, utimes)
        "setxattr": 5,
        "lsetxattr": 6,
        "fsetxattr": 7,
        "removexattr": 14,
        "lremovexattr": 15,
        "fremovexattr": 16,
        "fchmod": 52,
        "fchmodat": 53,
        "fchownat": 54,
        "fchown": 55,
        "utimensat": 88,
        "fchmodat2": 452,
        "setxattrat": 463,
        "removexattrat": 466,
        # calls on another process's limits, priority, scheduling
        "ioprio_set": 30,
        "sched_setparam": 118,
        "sched_setscheduler": 119,
        "sched_setaffinity": 122,
        "setpriority": 140,
        "prlimit64": 261,
        "sched_setattr": 274,
    },
}
ARCH = os.uname().machine
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# access rights (include/uapi/linux/landlock.h), with the ABI that introduced them
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
#: what a file (not a directory) rule may grant
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV


def fs_rights(abi: int) -> int:
    """Every filesystem right this ABI knows (all of them handled: what is not granted is
    denied). IOCTL_DEV (ABI 5) is left out: ioctls on devices opened inside stay as they are
    (a terminal's), and the devices a job may open at all are few (``DEVICES``)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights


def write_rights(abi: int) -> int:
    return fs_rights(abi) & ~READ


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

_libc: Any = None


def _lib() -> Any:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.syscall.restype = ctypes.c_long
        lib.prctl.restype = ctypes.c_int
        lib.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        _libc = lib
    return _libc


def _sys(name: str) -> int:
    return _SYS[ARCH][name]


def _check(ret: int, what: str) -> int:
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
    return ret


def abi_version() -> tuple[int, str]:
    """(Landlock ABI of this kernel, why 0 when it has none)."""
    if not sys.platform.startswith("linux"):
        return 0, f"Landlock is Linux only (this is {sys.platform})"
    if ARCH not in _SYS:
        return 0, f"no Landlock syscall table for {ARCH}"
    lib = _lib()
    ret = lib.syscall(_sys("create_ruleset"), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if ret < 0:
        e = ctypes.get_errno()
        if e == errno.ENOSYS:
            return 0, "the kernel has no Landlock (Linux < 5.13, or built without it)"
        if e == errno.EOPNOTSUPP:
            return 0, "Landlock is built in but disabled (add landlock to the lsm= boot option)"
        return 0, f"Landlock: {os.strerror(e)}"
    return int(ret), ""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def ruleset_size(abi: int) -> int:
    """The attribute size this ABI takes (the net field from ABI 4, scoped from ABI 6)."""
    return 24 if abi >= 6 else 16 if abi >= 4 else 8


def create_ruleset(abi: int, fs: int, net: int = 0, scoped: int = 0) -> int:
    attr = _RulesetAttr(fs, net if abi >= 4 else 0, scoped if abi >= 6 else 0)
    size = ctypes.c_size_t(ruleset_size(abi))
    ret = _lib().syscall(_sys("create_ruleset"), ctypes.byref(attr), size, ctypes.c_uint32(0))
    return _check(int(ret), "landlock_create_ruleset")


def add_path_rule(ruleset: int, fd: int, access: int) -> None:
    attr = _PathBeneath(access, fd)
    ret = _lib().syscall(
        _sys("add_rule"), ruleset, ctypes.c_int(1), ctypes.byref(attr), ctypes.c_uint32(0)
    )
    _check(int(ret), "landlock_add_rule")


def restrict_self(ruleset: int) -> None:
    _check(int(_lib().syscall(_sys("restrict_self"), ruleset, ctypes.c_uint32(0))), "restrict")


def cover(root: str, holes: Iterable[str]) -> list[str]:
    """The paths whose hierarchies together make ``root`` without ``holes``: ``root`` itself
    when no hole lies inside it, else every entry of it that is no hole, walking down into
    those with a hole below (symbolic links are left out: what they point at is covered, or
    not, by its own path). A hole that does not exist counts as well: its directory is never
    granted, so it cannot be made (a workspace's ``.git``). Sorted, for a stable plan."""
    root = root.rstrip("/") or "/"
    inside = [h for h in holes if h == root or h.startswith(root.rstrip("/") + "/")]
    if not inside:
        return [root]
    if root in inside:
        return []
    out: list[str] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        if entry.is_symlink():
            continue
        out += cover(entry.path, inside)
    return out


def walked(root: str, holes: Iterable[str]) -> list[str]:
    """The directories ``cover`` lists (their mtime says when a plan must be made again)."""
    root = root.rstrip("/") or "/"
    out = []
    for h in holes:
        if not h.startswith(root.rstrip("/") + "/"):
            continue
        d = os.path.dirname(h)
        while True:
            out.append(d)
            if d == root or d == "/":
                break
            d = os.path.dirname(d)
    return sorted(set(out))


# -- seccomp -------------------------------------------------------------------------------------

_LD_ABS_W = 0x20
_AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K
_JEQ = 0x15
_JGE = 0x35
_RET = 0x06
RET_ALLOW = 0x7FFF0000
RET_KILL = 0x80000000
_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000
# open flags, the same on x86_64 and aarch64 (asm-generic/fcntl.h)
_O_ACCMODE = 0o3
_O_TRUNC = 0o1000
_O_CREAT = 0o100
_O_TMPFILE = 0o20000000  # (__O_TMPFILE: O_TMPFILE is it with O_DIRECTORY)


def _errno(e: int) -> int:
    return _RET_ERRNO | e


_SETID = 0o6000  # S_ISUID | S_ISGID
#: the calls that change a file's metadata (mode, owner, times, extended attributes)
_METADATA = (
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
)


def _open_tail(flags_arg: int, mode_arg: int, truncate: bool) -> list[tuple[Any, ...]]:
    """A tail for ``open``/``openat``: with ``truncate``, EACCES when the flags in
    args[``flags_arg``] (an int: the low word) have O_TRUNC with an access mode that is not a
    write (O_RDONLY, or 3: Landlock checks no file right for it); then EPERM when they create
    (O_CREAT, O_TMPFILE) with a mode (args[``mode_arg``]) that has S_ISUID or S_ISGID; else
    allow."""
    out: list[tuple[Any, ...]] = []
    if truncate:
        out += [
            (_LD_ABS_W, 16 + 8 * flags_arg),
            (_AND_K, _O_TRUNC | _O_ACCMODE),
            (_JEQ, _O_TRUNC, "eacces", None),
            (_JEQ, _O_TRUNC | _O_ACCMODE, "eacces", None),
        ]
    return [
        *out,
        (_LD_ABS_W, 16 + 8 * flags_arg),
        (_AND_K, _O_CREAT | _O_TMPFILE),
        (_JEQ, 0, "allow", None),
        *_setid_mode(mode_arg),
    ]


def _setid_mode(arg: int) -> list[tuple[Any, ...]]:
    """A tail: EPERM when the mode in args[``arg``] has S_ISUID or S_ISGID, else allow."""
    return [(_LD_ABS_W, 16 + 8 * arg), (_AND_K, _SETID), (_JEQ, 0, "allow", "eperm")]


#: the calls that act on another process's scheduling when their pid (args[0]) is not 0
_OTHERS_BY_PID = ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr")
_PRIO_USER = 2  # setpriority's ``which``: PRIO_PROCESS 0, PRIO_PGRP 1, PRIO_USER 2
_IOPRIO_WHO_USER = 3  # ioprio_set's: IOPRIO_WHO_PROCESS 1, IOPRIO_WHO_PGRP 2, IOPRIO_WHO_USER 3
_F_SETLEASE = 1024
_CLONE_NEWUSER = 0x10000000
#: the calls whose mode argument (by index) may carry S_ISUID/S_ISGID: the mode changes, and
#: those that make a file, a node or a directory (open/openat: ``_open_tail``, with the flags)
_MODE_ARG = {
    "chmod": 1,
    "fchmod": 1,
    "fchmodat": 2,
    "fchmodat2": 2,
    "creat": 1,
    "mknod": 1,
    "mknodat": 2,
    "mkdir": 1,
    "mkdirat": 2,
}


@functools.lru_cache(maxsize=16)
def seccomp_program(
    arch: str = ARCH,
    *,
    net_off: bool = True,
    truncate: bool = False,
    connect_ok: bool = False,
    metadata: str = "",
    others: bool = False,
) -> bytes:
    """A job's seccomp filter, as the bytes of its ``sock_filter`` array (what bwrap's
    ``--seccomp FD`` reads, and what ``load_seccomp`` loads): another architecture's syscalls
    and x32 are killed, then the rules of every sandboxed job, on both backends:

    no setuid or setgid file: a mode with S_ISUID or S_ISGID fails with EPERM in every call
    that sets one (``chmod``, ``fchmod``, ``fchmodat``, ``fchmodat2``), makes a node or a
    directory (``mknod``, ``mknodat``, ``mkdir``, ``mkdirat``, ``creat``) or a file
    (``open``/``openat`` with O_CREAT or O_TMPFILE); ``openat2``, whose mode and flags are in a
    struct the filter cannot read, is ENOSYS, so libc falls back to ``openat``;

    no lease: ``fcntl(F_SETLEASE)`` fails with EPERM (a lease, even a read lease taken through a
    read-only descriptor, makes every other opener for writing wait ``lease-break-time``);

    no user namespace: ``unshare`` and ``clone`` with CLONE_NEWUSER fail with EPERM, and
    ``clone3`` (its flags in a struct) is ENOSYS, so glibc falls back to ``clone`` (its
    ``fork``, ``posix_spawn`` and ``pthread_create`` do; a spawn into a cgroup needs clone3,
    so no job's spawn happens under this filter: the filter is loaded after it);

    ``io_uring_setup`` is ENOSYS (its operations would pass every rule here);

    ``net_off`` (``network: off``): ``socket``/``socketpair`` of any family but AF_UNIX fail
    with EAFNOSUPPORT (no UDP, no raw or INET6 socket); ``connect``, ``sendto`` with an address,
    ``sendmsg`` and ``sendmmsg`` fail with EACCES, so no Unix socket of the host, filesystem or
    abstract, is reached (a socketpair and inherited sockets still work: ``send``/``write``);

    ``truncate`` (Landlock below ABI 3, which does not handle truncation, so ``fs_write`` holds
    anyway): ``truncate(path)`` fails with EACCES, so does ``open``/``openat`` with O_TRUNC and
    no write access mode (Linux truncates on a read-only open where DAC permits; a write open
    needs Landlock's WRITE_FILE, and ``ftruncate`` a descriptor open for writing);

    ``connect_ok``: ``connect`` passes this filter, for a job that also has the
    ``notify_program`` filter (``sandbox_sockets``): Conch then decides each connect.

    ``metadata`` (Landlock handles no metadata change, so a job could chmod, chown, touch or
    set extended attributes of files its uid owns outside the writable roots): ``all``
    (``read-only``) refuses every such call with EPERM; ``brokered`` (``workspace-write`` with
    the ``notify_program`` filter) refuses owners and extended attributes and lets the mode
    and time calls through to Conch (a setuid/setgid mode still fails here).

    ``others`` (every Landlock job: Landlock scopes signals and ptrace, not these; under bwrap
    the PID namespace hides every process outside): a call that would change another
    process's resources fails with EPERM, the job's own still work. ``prlimit64`` with a pid
    other than 0 and a new limit (RLIMIT_NOFILE at 16 breaks the server, RLIMIT_CPU kills
    it; reading one is left alone), ``sched_setaffinity``, ``sched_setscheduler``,
    ``sched_setparam`` and ``sched_setattr`` with a pid other than 0, ``setpriority`` and
    ``ioprio_set`` with a ``who`` other than 0 or for a whole user (``PRIO_USER``,
    ``IOPRIO_WHO_USER``: 0 there is every process of the job's uid). The filter cannot tell the
    job's own pids from others, so ``renice``/``taskset -p``/``prlimit --pid`` of the job's
    own children, and the pthread calls that name a thread by its id
    (``pthread_setaffinity_np``, ``pthread_setschedparam``), fail too."""
    nr = _SYS[arch]
    prog: list[tuple[int, int, int, int]] = []

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> None:
        prog.append((code, jt, jf, k))

    # seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 i (low word first: little endian)
    op(_LD_ABS_W, 4)
    op(_JEQ, _AUDIT_ARCH[arch], 1, 0)
    op(_RET, RET_KILL)
    op(_LD_ABS_W, 0)
    if arch == "x86_64":
        op(_JGE, _X32_BIT, 0, 1)
        op(_RET, RET_KILL)
    if metadata not in ("", "brokered", "all"):
        raise ValueError(f"metadata must be '', 'brokered' or 'all', not {metadata!r}")
    # a jump table to the tails below: syscall -> tail (one entry each: the strictest rule)
    table: dict[int, str] = {}

    def rule(name: str, tail: str) -> None:
        if name in nr:
            table[nr[name]] = tail

    for name, arg in _MODE_ARG.items():
        rule(name, f"mode{arg}")
    rule("open", "open")
    rule("openat", "openat")
    rule("openat2", "enosys")
    rule("fcntl", "lease")
    rule("unshare", "userns")
    rule("clone", "userns")
    rule("clone3", "enosys")
    rule("io_uring_setup", "enosys")
    if net_off:
        rule("socket", "family")
        rule("socketpair", "family")
        rule("connect", "allow" if connect_ok else "eacces")
        rule("sendmsg", "eacces")
        rule("sendmmsg", "eacces")
        rule("sendto", "address")
    if truncate:
        rule("truncate", "eacces")
    if metadata == "all":
        for name in _METADATA:
            rule(name, "eperm")
    elif metadata == "brokered":  # (modes and times go to Conch: notify_program)
        for name in _METADATA:
            if name not in BROKERED_METADATA:
                rule(name, "eperm")
    if others:
        for name in _OTHERS_BY_PID:
            rule(name, "pid0")
        rule("prlimit64", "prlimit")
        rule("setpriority", "prio")
        rule("ioprio_set", "ioprio")
    # each instruction: (code, k) or (code, k, jump-if-true tail, jump-if-false tail), a tail
    # None being the next instruction
    tails: dict[str, list[tuple[Any, ...]]] = {
        # args[0] (the family) must be AF_UNIX
        "family": [
            (_LD_ABS_W, 16),
            (_JEQ, socket.AF_UNIX, "allow", None),
            (_RET, _errno(errno.EAFNOSUPPORT)),
        ],
        # args[4] (dest_addr, 64 bits) must be NULL
        "address": [
            (_LD_ABS_W, 16 + 8 * 4),
            (_JEQ, 0, None, "eacces"),
            (_LD_ABS_W, 20 + 8 * 4),
            (_JEQ, 0, "allow", "eacces"),
        ],
        "open": _open_tail(1, 2, truncate),  # open(path, flags, mode)
        "openat": _open_tail(2, 3, truncate),  # openat(dirfd, path, flags, mode)
        # the mode in args[1] (chmod, fchmod, creat, mknod, mkdir) or args[2] (the *at calls)
        "mode1": _setid_mode(1),
        "mode2": _setid_mode(2),
        # fcntl(fd, cmd, arg): cmd (args[1]) no F_SETLEASE
        "lease": [(_LD_ABS_W, 16 + 8), (_JEQ, _F_SETLEASE, "eperm", "allow")],
        # unshare(flags), clone(flags, ...): no CLONE_NEWUSER in args[0]
        "userns": [(_LD_ABS_W, 16), (_AND_K, _CLONE_NEWUSER), (_JEQ, 0, "allow", "eperm")],
        # args[0], a pid (an int: the low word), must be 0 (the caller)
        "pid0": [(_LD_ABS_W, 16), (_JEQ, 0, "allow", "eperm")],
        # prlimit64(pid, resource, new, old): pid 0, or no new limit (args[2], 64 bits, NULL)
        "prlimit": [
            (_LD_ABS_W, 16),
            (_JEQ, 0, "allow", None),
            (_LD_ABS_W, 16 + 8 * 2),
            (_JEQ, 0, None, "eperm"),
            (_LD_ABS_W, 20 + 8 * 2),
            (_JEQ, 0, "allow", "eperm"),
        ],
        # setpriority(which, who, prio): who (args[1]) 0, and which no PRIO_USER
        "prio": [
            (_LD_ABS_W, 16 + 8),
            (_JEQ, 0, None, "eperm"),
            (_LD_ABS_W, 16),
            (_JGE, _PRIO_USER, "eperm", "allow"),
        ],
        # ioprio_set(which, who, ioprio): the same, IOPRIO_WHO_USER refused
        "ioprio": [
            (_LD_ABS_W, 16 + 8),
            (_JEQ, 0, None, "eperm"),
            (_LD_ABS_W, 16),
            (_JGE, _IOPRIO_WHO_USER, "eperm", "allow"),
        ],
        "allow": [(_RET, RET_ALLOW)],
        "eacces": [(_RET, _errno(errno.EACCES))],
        "eperm": [(_RET, _errno(errno.EPERM))],
        "enosys": [(_RET, _errno(errno.ENOSYS))],
    }
    # (jumps go forward only: the tails that jump come first, the RETs they reach last)
    used = set(table.values())
    used |= {t for name in used for ins in tails[name] for t in ins[2:] if t is not None}
    returns = ("allow", "eacces", "enosys", "eperm")
    order = [n for n in tails if n in used and n not in returns] + list(returns)
    start = len(prog) + len(table) + 1  # after the table and its fall-through RET ALLOW
    where: dict[str, int] = {}
    at = start
    for name in order:
        where[name] = at
        at += len(tails[name])
    for sysno, tail in table.items():
        here = len(prog)
        op(_JEQ, sysno, where[tail] - here - 1, 0)
    op(_RET, RET_ALLOW)
    for name in order:
        for ins in tails[name]:
            here = len(prog)
            if len(ins) == 4:
                code, k, jt, jf = ins
                t = 0 if jt is None else where[jt] - here - 1
                f = 0 if jf is None else where[jf] - here - 1
                op(code, k, t, f)
            else:
                op(ins[0], ins[1])
    assert len(prog) == at
    assert all(0 <= jt < 256 and 0 <= jf < 256 for _, jt, jf, _ in prog)
    # every jump lands inside the program (on a later instruction), and it ends with a RET
    jumps = [(i, jt, jf) for i, (c, jt, jf, _) in enumerate(prog) if c & 7 == 5]  # BPF_JMP
    assert all(i + 1 + max(jt, jf) < len(prog) for i, jt, jf in jumps)
    assert prog[-1][0] == _RET
    return b"".join(struct.pack("=HBBI", c, jt, jf, k) for c, jt, jf, k in prog)


#: the filter's verdict that hands the call to Conch (seccomp_unotify(2))
RET_USER_NOTIF = 0x7FC00000
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3


#: the metadata calls a ``workspace-write`` job hands to Conch (conch/core/containment/metaops.py)
BROKERED_METADATA = (
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
)


@functools.lru_cache(maxsize=8)
def notify_program(arch: str = ARCH, *, connect: bool = True, metadata: bool = False) -> bytes:
    """The filter whose calls wait for Conch's answer on its listener
    (conch/core/containment/unotify.py): ``connect`` (``sandbox_sockets``: Conch connects the
    job's socket itself when the path is on the allow-list) and, with ``metadata``, the mode
    and time calls of ``BROKERED_METADATA`` (a ``workspace-write`` job's: metaops.py).
    Everything else passes to the filter loaded after it (``seccomp_program``, with
    ``connect_ok`` and ``metadata="brokered"`` letting those calls through to this one)."""
    prog = [
        (_LD_ABS_W, 0, 0, 4),
        (_JEQ, 1, 0, _AUDIT_ARCH[arch]),
        (_RET, 0, 0, RET_KILL),
        (_LD_ABS_W, 0, 0, 0),
    ]
    if arch == "x86_64":
        prog += [(_JGE, 0, 1, _X32_BIT), (_RET, 0, 0, RET_KILL)]
    trapped = [_SYS[arch]["connect"]] if connect else []
    if metadata:
        trapped += [_SYS[arch][n] for n in BROKERED_METADATA if n in _SYS[arch]]
    for i, nr in enumerate(trapped):  # each: to the USER_NOTIF at the end
        prog.append((_JEQ, len(trapped) - i, 0, nr))
    prog += [(_RET, 0, 0, RET_ALLOW), (_RET, 0, 0, RET_USER_NOTIF)]
    return b"".join(struct.pack("=HBBI", c, jt, jf, k) for c, jt, jf, k in prog)


def load_notify_filter(program: bytes) -> int:
    """Load ``program`` with a listener (needs ``no_new_privs`` first); the listener's fd."""
    fprog, _ = _fprog(program)
    fd = _lib().syscall(
        _sys("seccomp"),
        ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_uint(_SECCOMP_FILTER_FLAG_NEW_LISTENER),
        ctypes.byref(fprog),
    )
    return _check(int(fd), "seccomp")


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@functools.lru_cache(maxsize=16)
def _fprog(program: bytes) -> tuple[_Fprog, Any]:
    """The ``sock_fprog`` of ``program`` and the buffer it points into, made once: the fork
    server makes it before it clones, so a job's child only passes its address (building it
    there, in a copy-on-write Python, cost more than loading the filter); Conch's spawning
    thread only passes its address too (its caller keeps the pair while it may be used)."""
    buf = ctypes.create_string_buffer(program, len(program))
    return _Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p)), buf


_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4


def no_new_privs() -> None:
    _check(_lib().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")


def load_seccomp(program: bytes) -> None:
    """Load ``program`` for this thread (needs ``no_new_privs`` first)."""
    fprog, _ = _fprog(program)
    _check(
        _lib().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0),
        "PR_SET_SECCOMP",
    )


_LAST_CAP: list[int] = []


def _last_cap() -> int:
    if not _LAST_CAP:
        try:
            with open("/proc/sys/kernel/cap_last_cap") as f:
                _LAST_CAP.append(int(f.read()))
        except (OSError, ValueError):
            _LAST_CAP.append(63)
    return _LAST_CAP[0]


_BOUNDING_EMPTY: list[bool] = []


def empty_bounding_set() -> None:
    """Drop every capability from this process's bounding set, which its children inherit
    (what it holds itself stays): the fork server does it once, so each job's child skips it
    (a prctl per capability). Where a drop is refused, each child still tries them all."""
    lib = _lib()
    if all(lib.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0 for cap in range(_last_cap() + 1)):
        _BOUNDING_EMPTY.append(True)


def drop_capabilities() -> None:
    """No capability, now or after exec (a root server's job stays uid 0 but powerless, as
    bwrap's ``--cap-drop ALL`` leaves it): the bounding set emptied, ambient cleared, then
    permitted/effective/inheritable all zero."""
    lib = _lib()
    if not _BOUNDING_EMPTY:
        for cap in range(_last_cap() + 1):
            lib.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    lib.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = struct.pack("=Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)  # two (effective, permitted, inheritable) triples of zeros
    hb, db = ctypes.create_string_buffer(header, 8), ctypes.create_string_buffer(data, 24)
    _check(int(lib.syscall(_sys("capset"), hb, db)), "capset")


# -- the fork server -----------------------------------------------------------------------------

_CLONE_PARENT = 0x00008000
_MAX_MSG = 1 << 20


_Fds = list[tuple[int, bool]]  # (O_PATH descriptor, is a directory)


class _Plans:
    """Which paths a rule needs (``cover``), opened once (O_PATH) and kept while the
    directories walked to find them are unchanged."""

    def __init__(self) -> None:
        self._plans: dict[tuple[str, tuple[str, ...]], tuple[list[tuple], _Fds]] = {}

    def get(self, root: str, holes: Sequence[str]) -> _Fds:
        """(One caller at a time: the fork server is single-threaded, Conch's spawner holds
        its lock.)"""
        key = (root, tuple(sorted(holes)))
        stamps = _stamps(walked(root, key[1]))
        plan = self._plans.get(key)
        if plan is not None and plan[0] == stamps:
            return plan[1]
        if plan is not None:  # (stale: its fds go, and so does its entry)
            for fd, _ in self._plans.pop(key)[1]:
                os.close(fd)
        fds = []
        for path in cover(root, key[1]):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                isdir = stat.S_ISDIR(os.fstat(fd).st_mode)
            except OSError:
                continue
            fds.append((fd, isdir))
        if len(self._plans) > 64:
            self.close()
        self._plans[key] = (stamps, fds)
        return fds

    def close(self) -> None:
        for _, fds in self._plans.values():
            for fd, _ in fds:
                os.close(fd)
        self._plans.clear()


def _stamps(dirs: Sequence[str]) -> list[tuple]:
    out = []
    for d in dirs:
        try:
            st = os.stat(d)
            out.append((d, st.st_ino, st.st_mtime_ns))
        except OSError:
            out.append((d, 0, 0))
    return out


def build_ruleset(spec: dict[str, Any], plans: _Plans) -> int:
    """The ruleset fd of one job's spec (see ``serve``)."""
    abi = spec["abi"]
    fs = fs_rights(abi)
    net = (NET_BIND_TCP | NET_CONNECT_TCP) if spec["net_off"] else 0
    rs = create_ruleset(abi, fs, net, spec["scoped"])
    try:
        grants: list[tuple[Sequence[tuple[int, bool]], int]] = []
        for root, holes, access in spec["trees"]:
            grants.append((plans.get(root, holes), access & fs))
        for fd_list, access in grants:
            for fd, isdir in fd_list:
                add_path_rule(rs, fd, access if isdir else access & FILE_RIGHTS)
        for path, access in spec["paths"]:  # per job (its TMPDIR, its script): opened now
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                isdir = stat.S_ISDIR(os.fstat(fd).st_mode)
                add_path_rule(rs, fd, (access & fs) if isdir else access & fs & FILE_RIGHTS)
            finally:
                os.close(fd)
    except BaseException:
        os.close(rs)
        raise
    return rs


def _child(spec: dict[str, Any], fds: list[int], ruleset: int, err_w: int, placed: bool) -> None:
    """In the cloned child: fence in, exec. Never returns. ``placed``: clone3 started it in
    its cgroup, so it enters none itself."""
    stage = "setup"
    try:
        os.setsid()
        stage = "cgroup"
        for procs in () if placed else spec["procs"]:
            fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        chan = -1
        if spec.get("notify"):  # (its channel to Conch comes after the job's descriptors)
            chan = fds[-1]
            fds = fds[:-1]
        stage = "stdio"
        tty = spec["tty"]
        if tty is not None:  # after setsid: opening it makes it the controlling terminal
            t = os.open(tty, os.O_RDWR)
            for n in (0, 1, 2):
                os.dup2(t, n)
            if t > 2:
                os.close(t)
        else:
            # (move them above 2 first: one of them may already sit on 0-2)
            high = [os.dup(fd) for fd in fds]
            for n, fd in enumerate(high):
                os.dup2(fd, n)
        stage = "cwd"
        os.chdir(spec["cwd"])
        stage = "signals"  # (every disposition is already the default: ``_main``)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        stage = "no_new_privs"
        no_new_privs()
        stage = "landlock"
        restrict_self(ruleset)
        if chan >= 0:
            # the connect filter first, its listener handed to Conch (sendmsg still works:
            # the network-off filter, which refuses it, comes next)
            stage = "seccomp"
            listener = load_notify_filter(spec["notify"])
            out = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=os.dup(chan))
            socket.send_fds(out, [b"L"], [listener])
            os.close(listener)
        if spec["seccomp"]:
            stage = "seccomp"
            load_seccomp(spec["seccomp"])
        if spec["drop_caps"]:
            stage = "capabilities"
            drop_capabilities()
        stage = "exec"
        os.closerange(3, err_w)
        os.closerange(err_w + 1, 1 << 20)
        os.execve(spec["path"], spec["argv"], spec["env"])
    except OSError as e:
        try:
            os.write(err_w, marshal.dumps((stage, e.errno or errno.EIO, e.strerror or str(e))))
        finally:
            os._exit(127)
    except BaseException as e:
        try:
            os.write(err_w, marshal.dumps((stage, errno.EIO, repr(e))))
        finally:
            os._exit(127)


_CLONE_INTO_CGROUP = 0x200000000


class _CloneArgs(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "flags",
            "pidfd",
            "child_tid",
            "parent_tid",
            "exit_signal",
            "stack",
            "stack_size",
            "tls",
            "set_tid",
            "set_tid_size",
            "cgroup",
        )
    ]


def _clone_parent(cgroup_fd: int = -1) -> int:
    """fork(), except that the child's parent is our parent (Conch): it reaps and watches it.
    A raw clone: this process is single-threaded, so nothing but the interpreter runs. With
    ``cgroup_fd`` (a cgroup v2 directory), clone3 starts the child inside it (Linux 5.7+): no
    migration afterwards, which after an idle spell waits for an RCU grace period."""
    if cgroup_fd >= 0:
        # (with CLONE_PARENT the exit signal must be 0: the child gets our own, SIGCHLD)
        args = _CloneArgs(flags=_CLONE_PARENT | _CLONE_INTO_CGROUP, cgroup=cgroup_fd)
        pid = _lib().syscall(
            _sys("clone3"), ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args))
        )
        return _check(int(pid), "clone3")
    pid = _lib().syscall(
        _sys("clone"),
        ctypes.c_ulong(_CLONE_PARENT | signal.SIGCHLD),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )
    return _check(int(pid), "clone")


def spawn_one(spec: dict[str, Any], fds: list[int], plans: _Plans) -> tuple[int, str, int, str]:
    """Start one job; (pid, stage, errno, message): errno 0 when its program runs, else the
    stage that failed (the child, a zombie of Conch's, is left for Conch to reap)."""
    try:
        ruleset = build_ruleset(spec, plans)
    except OSError as e:
        return 0, "landlock", e.errno or errno.EIO, str(e)
    # what the child would otherwise build in its copy-on-write memory, made here once
    for program in (spec["seccomp"], spec.get("notify")):
        if program:
            _fprog(program)
    if spec["drop_caps"]:
        _last_cap()
    cgroup_fd = -1
    try:
        if spec.get("cgroup"):
            cgroup_fd = os.open(spec["cgroup"], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        try:
            placed = cgroup_fd >= 0
            try:
                pid = _clone_parent(cgroup_fd)
            except OSError:
                if not placed:
                    raise
                # a cgroup the kernel will not start a child in (or no clone3): the child
                # writes itself into its cgroup.procs instead
                placed = False
                pid = _clone_parent()
            if pid == 0:
                os.close(err_r)
                _child(spec, fds, ruleset, err_w, placed)
            os.close(err_w)
            err_w = -1
            got = b""
            while True:
                chunk = os.read(err_r, 65536)
                if not chunk:
                    break
                got += chunk
        finally:
            os.close(err_r)
            if err_w >= 0:
                os.close(err_w)
    except OSError as e:
        return 0, "clone", e.errno or errno.EIO, str(e)
    finally:
        os.close(ruleset)
        if cgroup_fd >= 0:
            os.close(cgroup_fd)
    if not got:
        return pid, "", 0, ""
    stage, code, message = marshal.loads(got)
    return pid, stage, code, message


def serve(sock_fd: int) -> None:
    """Answer spawn requests on ``sock_fd`` (SOCK_SEQPACKET) until it closes: each request a
    marshalled spec with the job's three descriptors (none for a terminal), and for
    ``sandbox_sockets`` the channel its filter's listener goes back on, each answer
    ``(pid, stage, errno, message)``."""
    sock = socket.socket(fileno=sock_fd)
    plans = _Plans()
    fdsize = struct.calcsize("i")
    while True:
        try:
            msg, anc, _, _ = sock.recvmsg(_MAX_MSG, socket.CMSG_SPACE(4 * fdsize))
        except InterruptedError:
            continue
        if not msg:
            return
        fds: list[int] = []
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                n = len(data) // fdsize
                fds += list(struct.unpack(f"{n}i", data[: n * fdsize]))
        try:
            spec = marshal.loads(msg)
            answer = spawn_one(spec, fds, plans)
        except Exception as e:  # a bad request: said, never fatal
            answer = (0, "request", errno.EINVAL, repr(e))
        finally:
            for fd in fds:
                os.close(fd)
        sock.sendall(marshal.dumps(answer))


def broker_shim(channel: str, argv: list[str]) -> None:
    """``sandbox_sockets`` under bwrap (``python -I -S lockdown.py --broker CHANNEL -- ARGV``),
    the first program inside the sandbox: hand the connect filter's listener to Conch over
    ``channel`` (a socket bound for this one job, taken once), load the ``network: off``
    filter that lets ``connect`` through to it, exec ``argv``. It fails closed: anything that
    goes wrong ends it (125) before the program runs. Never returns."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(channel)
            no_new_privs()
            listener = load_notify_filter(notify_program())
            socket.send_fds(sock, [b"L"], [listener])
            os.close(listener)
            if sock.recv(1) != b"K":
                raise OSError(errno.EPROTO, "Conch did not take the listener")
        load_seccomp(seccomp_program(net_off=True, connect_ok=True))
    except OSError as e:
        os.write(2, f"conch: the sandbox's socket broker failed: {e}\n".encode())
        os._exit(125)
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        os.write(2, f"conch: {argv[0]}: {e.strerror}\n".encode())
        os._exit(126 if e.errno == errno.EACCES else 127)


def _main(argv: list[str]) -> None:
    if len(argv) > 4 and argv[1] == "--broker" and argv[3] == "--":
        broker_shim(argv[2], argv[4:])
    # every disposition at its default (Python ignores SIGPIPE itself, a supervisor or nohup
    # may have left others ignored), once: each child inherits them. It ends when Conch's end
    # of the socket closes, however Conch ended (no PDEATHSIG: that follows the spawning
    # thread, not the process).
    for s in range(1, signal.NSIG):
        try:
            signal.signal(s, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    _lib()
    _last_cap()
    if os.geteuid() == 0:  # (then every job drops them all: conch/core/containment/landlock.py)
        empty_bounding_set()
    # no collection in a child, and none touching (so copying) every object's page before it
    gc.disable()
    gc.freeze()
    serve(int(argv[1]))


if __name__ == "__main__":
    _main(sys.argv)
