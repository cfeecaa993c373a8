"""The system call numbers the seccomp filters name, by architecture (x86_64 and aarch64), and
the architecture tags a filter checks first. Data only: seccomp.py says what is done to each."""

from __future__ import annotations

import os

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
#: this machine's architecture, the filters' default
ARCH = os.uname().machine
#: the architecture a filter checks first (``seccomp_data.arch``): AUDIT_ARCH_X86_64, _AARCH64
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
