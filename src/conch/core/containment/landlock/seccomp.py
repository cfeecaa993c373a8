"""The seccomp filters of a sandboxed job: which system call gets which answer, built by pure
functions, bytes out, no system call (landlock/lockdown.py loads them; bwrap reads them as
``--seccomp FD``). ``seccomp_program`` is every sandboxed job's filter on both backends,
``notify_program`` the filter whose calls wait for Conch's answer (core/containment/unotify.py,
metaops.py). The numbers of the calls are syscalls.py's; bpf.py assembles the instructions.
"""

from __future__ import annotations

import errno
import functools
import socket
from typing import Any

from conch.core.containment.landlock.bpf import (
    AND_K,
    JEQ,
    JGE,
    LD_ABS_W,
    RET,
    RET_ALLOW,
    RET_KILL,
    RET_USER_NOTIF,
    arg,
    assemble,
    head,
    ret_errno,
)
from conch.core.containment.landlock.syscalls import ARCH, AUDIT_ARCH, SYSCALLS

__all__ = [
    "ARCH",
    "BROKERED_METADATA",
    "RET_ALLOW",
    "RET_KILL",
    "RET_USER_NOTIF",
    "SYSCALLS",
    "notify_program",
    "seccomp_program",
]

# open flags, the same on x86_64 and aarch64 (asm-generic/fcntl.h)
_O_ACCMODE = 0o3
_O_TRUNC = 0o1000
_O_CREAT = 0o100
_O_TMPFILE = 0o20000000  # (__O_TMPFILE: O_TMPFILE is it with O_DIRECTORY)


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
            (LD_ABS_W, arg(flags_arg)),
            (AND_K, _O_TRUNC | _O_ACCMODE),
            (JEQ, _O_TRUNC, "eacces", None),
            (JEQ, _O_TRUNC | _O_ACCMODE, "eacces", None),
        ]
    return [
        *out,
        (LD_ABS_W, arg(flags_arg)),
        (AND_K, _O_CREAT | _O_TMPFILE),
        (JEQ, 0, "allow", None),
        *_setid_mode(mode_arg),
    ]


def _setid_mode(mode: int) -> list[tuple[Any, ...]]:
    """A tail: EPERM when the mode in args[``mode``] has S_ISUID or S_ISGID, else allow."""
    return [(LD_ABS_W, arg(mode)), (AND_K, _SETID), (JEQ, 0, "allow", "eperm")]


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
    if metadata not in ("", "brokered", "all"):
        raise ValueError(f"metadata must be '', 'brokered' or 'all', not {metadata!r}")
    # a jump table to the tails below: syscall -> tail (one entry each: the strictest rule)
    table: dict[int, str] = {}

    def rule(name: str, tail: str) -> None:
        if name in nr:
            table[nr[name]] = tail

    for name, index in _MODE_ARG.items():
        rule(name, f"mode{index}")
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
            (LD_ABS_W, arg(0)),
            (JEQ, socket.AF_UNIX, "allow", None),
            (RET, ret_errno(errno.EAFNOSUPPORT)),
        ],
        # args[4] (dest_addr, 64 bits) must be NULL
        "address": [
            (LD_ABS_W, arg(4)),
            (JEQ, 0, None, "eacces"),
            (LD_ABS_W, arg(4) + 4),
            (JEQ, 0, "allow", "eacces"),
        ],
        "open": _open_tail(1, 2, truncate),  # open(path, flags, mode)
        "openat": _open_tail(2, 3, truncate),  # openat(dirfd, path, flags, mode)
        # the mode in args[1] (chmod, fchmod, creat, mknod, mkdir) or args[2] (the *at calls)
        "mode1": _setid_mode(1),
        "mode2": _setid_mode(2),
        # fcntl(fd, cmd, arg): cmd (args[1]) no F_SETLEASE
        "lease": [(LD_ABS_W, arg(1)), (JEQ, _F_SETLEASE, "eperm", "allow")],
        # unshare(flags), clone(flags, ...): no CLONE_NEWUSER in args[0]
        "userns": [(LD_ABS_W, arg(0)), (AND_K, _CLONE_NEWUSER), (JEQ, 0, "allow", "eperm")],
        # args[0], a pid (an int: the low word), must be 0 (the caller)
        "pid0": [(LD_ABS_W, arg(0)), (JEQ, 0, "allow", "eperm")],
        # prlimit64(pid, resource, new, old): pid 0, or no new limit (args[2], 64 bits, NULL)
        "prlimit": [
            (LD_ABS_W, arg(0)),
            (JEQ, 0, "allow", None),
            (LD_ABS_W, arg(2)),
            (JEQ, 0, None, "eperm"),
            (LD_ABS_W, arg(2) + 4),
            (JEQ, 0, "allow", "eperm"),
        ],
        # setpriority(which, who, prio): who (args[1]) 0, and which no PRIO_USER
        "prio": [
            (LD_ABS_W, arg(1)),
            (JEQ, 0, None, "eperm"),
            (LD_ABS_W, arg(0)),
            (JGE, _PRIO_USER, "eperm", "allow"),
        ],
        # ioprio_set(which, who, ioprio): the same, IOPRIO_WHO_USER refused
        "ioprio": [
            (LD_ABS_W, arg(1)),
            (JEQ, 0, None, "eperm"),
            (LD_ABS_W, arg(0)),
            (JGE, _IOPRIO_WHO_USER, "eperm", "allow"),
        ],
        "allow": [(RET, RET_ALLOW)],
        "eacces": [(RET, ret_errno(errno.EACCES))],
        "eperm": [(RET, ret_errno(errno.EPERM))],
        "enosys": [(RET, ret_errno(errno.ENOSYS))],
    }
    start = head(AUDIT_ARCH[arch], x32=arch == "x86_64")
    return assemble(start, table, tails, ("allow", "eacces", "enosys", "eperm"))


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
    trapped = [SYSCALLS[arch]["connect"]] if connect else []
    if metadata:
        trapped += [SYSCALLS[arch][n] for n in BROKERED_METADATA if n in SYSCALLS[arch]]
    # each: to the USER_NOTIF after the fall-through RET ALLOW
    table = dict.fromkeys(trapped, "notify")
    start = head(AUDIT_ARCH[arch], x32=arch == "x86_64")
    return assemble(start, table, {"notify": [(RET, RET_USER_NOTIF)]}, ("notify",))
