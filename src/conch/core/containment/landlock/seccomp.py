"""The seccomp filters of a sandboxed job, assembled as classic BPF by pure functions: bytes out,
no system call (conch/core/containment/landlock/lockdown.py loads them; bwrap reads them as
``--seccomp FD``). ``seccomp_program`` is every sandboxed job's filter on both backends,
``notify_program`` the filter whose calls wait for Conch's answer (core/containment/unotify.py,
metaops.py). ``SYSCALLS`` holds the numbers the filters name, per architecture.
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import struct
from typing import Any

#: the system calls the filters name, by architecture
SYSCALLS = {
    "x86_64": {
        "clone": 56,
        "clone3": 435,
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
        "clone": 220,
        "clone3": 435,
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
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

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
    nr = SYSCALLS[arch]
    prog: list[tuple[int, int, int, int]] = []

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> None:
        prog.append((code, jt, jf, k))

    # seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 i (low word first: little endian)
    op(_LD_ABS_W, 4)
    op(_JEQ, AUDIT_ARCH[arch], 1, 0)
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
        (_JEQ, 1, 0, AUDIT_ARCH[arch]),
        (_RET, 0, 0, RET_KILL),
        (_LD_ABS_W, 0, 0, 0),
    ]
    if arch == "x86_64":
        prog += [(_JGE, 0, 1, _X32_BIT), (_RET, 0, 0, RET_KILL)]
    trapped = [SYSCALLS[arch]["connect"]] if connect else []
    if metadata:
        trapped += [SYSCALLS[arch][n] for n in BROKERED_METADATA if n in SYSCALLS[arch]]
    for i, nr in enumerate(trapped):  # each: to the USER_NOTIF at the end
        prog.append((_JEQ, len(trapped) - i, 0, nr))
    prog += [(_RET, 0, 0, RET_ALLOW), (_RET, 0, 0, RET_USER_NOTIF)]
    return b"".join(struct.pack("=HBBI", c, jt, jf, k) for c, jt, jf, k in prog)
