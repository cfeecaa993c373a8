"""What must run where Conch cannot be imported: the Landlock system calls through ctypes,
loading a seccomp filter and dropping capabilities (``Restriction``: the steps both spawn
paths take), and the fork server that applies them before a job's program runs where a job
must start in its cgroup (the ``landlock`` backend). Standard library only: Conch imports it,
it runs on its own as the fork server (``python -I -S lockdown.py FD``), and the socket
broker's shim in a bwrap sandbox (shim.py) imports it; small processes that start quickly and
never import Conch. The filters themselves are built by Conch (seccomp.py) and handed over:
in the job's spec to the fork server, over its channel to the shim.

Most landlock jobs are started by a thread of Conch's that restricts itself and calls
``posix_spawn`` (landlock/spawner.py, ``RestrictedSpawner``). That spawn cannot start a
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

# -- Landlock ------------------------------------------------------------------------------------

#: the system calls made here, by architecture (the filters' own: seccomp.py)
SYSCALLS = {
    "x86_64": {
        "create_ruleset": 444,
        "add_rule": 445,
        "restrict_self": 446,
        "clone": 56,
        "clone3": 435,
        "capset": 126,
        "seccomp": 317,
    },
    "aarch64": {
        "create_ruleset": 444,
        "add_rule": 445,
        "restrict_self": 446,
        "clone": 220,
        "clone3": 435,
        "capset": 91,
        "seccomp": 277,
    },
}
ARCH = os.uname().machine


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


_libc: Any = None


def load_libc(kind: Any = ctypes.CDLL) -> Any:
    """libc with ``syscall`` and ``prctl`` typed for the restriction's calls (``kind``:
    ``ctypes.PyDLL`` for one whose calls keep the GIL)."""
    lib = kind(None, use_errno=True)
    lib.syscall.restype = ctypes.c_long
    lib.prctl.restype = ctypes.c_int
    lib.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    return lib


def _lib() -> Any:
    global _libc
    if _libc is None:
        _libc = load_libc()
    return _libc


def syscall_nr(name: str) -> int:
    return SYSCALLS[ARCH][name]


def _check(ret: int, what: str) -> int:
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
    return ret


def abi_version() -> tuple[int, str]:
    """(Landlock ABI of this kernel, why 0 when it has none)."""
    if not sys.platform.startswith("linux"):
        return 0, f"Landlock is Linux only (this is {sys.platform})"
    if ARCH not in SYSCALLS:
        return 0, f"no Landlock syscall table for {ARCH}"
    lib = _lib()
    ret = lib.syscall(syscall_nr("create_ruleset"), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
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
    ret = _lib().syscall(syscall_nr("create_ruleset"), ctypes.byref(attr), size, ctypes.c_uint32(0))
    return _check(int(ret), "landlock_create_ruleset")


def add_path_rule(ruleset: int, fd: int, access: int) -> None:
    attr = _PathBeneath(access, fd)
    ret = _lib().syscall(
        syscall_nr("add_rule"), ruleset, ctypes.c_int(1), ctypes.byref(attr), ctypes.c_uint32(0)
    )
    _check(int(ret), "landlock_add_rule")


def restrict_self(ruleset: int) -> None:
    """Restrict the calling thread by ``ruleset`` (the undo's confined writer, core/changes;
    a job's restriction is ``Restriction.apply``)."""
    _check(
        int(_lib().syscall(syscall_nr("restrict_self"), ruleset, ctypes.c_uint32(0))), "restrict"
    )


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


# -- loading filters, dropping capabilities -------------------------------------------------------

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3


def load_notify_filter(program: bytes) -> int:
    """Load ``program`` with a listener (needs ``no_new_privs`` first); the listener's fd."""
    prog, _ = fprog(program)
    fd = _lib().syscall(
        syscall_nr("seccomp"),
        ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
        ctypes.c_uint(SECCOMP_FILTER_FLAG_NEW_LISTENER),
        ctypes.byref(prog),
    )
    return _check(int(fd), "seccomp")


class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@functools.lru_cache(maxsize=16)
def fprog(program: bytes) -> tuple[Fprog, Any]:
    """The ``sock_fprog`` of ``program`` and the buffer it points into, made once: the fork
    server makes it before it clones, so a job's child only passes its address (building it
    there, in a copy-on-write Python, cost more than loading the filter); Conch's spawning
    thread only passes its address too (its caller keeps the pair while it may be used)."""
    buf = ctypes.create_string_buffer(program, len(program))
    return Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p)), buf


PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4


def no_new_privs() -> None:
    _check(_lib().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")


def load_seccomp(program: bytes) -> None:
    """Load ``program`` for this thread (needs ``no_new_privs`` first)."""
    prog, _ = fprog(program)
    _check(
        _lib().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0),
        "PR_SET_SECCOMP",
    )


_LAST_CAP: list[int] = []


def last_cap() -> int:
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
    if all(lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0 for cap in range(last_cap() + 1)):
        _BOUNDING_EMPTY.append(True)


class Restriction:
    """One job's restriction, its arguments built ahead (``apply`` allocates nothing that
    matters): ``no_new_privs``, the Landlock ruleset, the filter that hands calls to Conch
    (its listener), the job's seccomp filter and, for a root server, no capability (as bwrap's
    ``--cap-drop ALL``: the bounding set emptied, ambient cleared, then permitted, effective
    and inheritable all zero). The same steps on both spawn paths: the restricted thread
    (spawner.py) and the fork server's child (``_child``). Results: ``stage`` and ``errno`` of
    the step that failed, ``listener`` (the notify filter's, or -1)."""

    __slots__ = (
        "caps",
        "capset",
        "drop_caps",
        "errno",
        "listener",
        "notify",
        "programs",
        "ruleset",
        "seccomp",
        "stage",
    )

    def __init__(self, ruleset: int, seccomp: bytes, notify: bytes, drop_caps: bool) -> None:
        self.ruleset = ruleset
        # (each sock_fprog and its buffer kept here while a thread may use them)
        sec = fprog(seccomp) if seccomp else None
        note = fprog(notify) if notify else None
        self.programs = [p for p in (sec, note) if p is not None]
        self.seccomp = ctypes.addressof(sec[0]) if sec is not None else 0
        self.notify = ctypes.byref(note[0]) if note is not None else None
        self.drop_caps = drop_caps
        # (the fork server empties its own bounding set once: then its children skip it)
        self.caps = range(last_cap() + 1) if drop_caps and not _BOUNDING_EMPTY else range(0)
        header = struct.pack("=Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
        self.capset = (
            ctypes.create_string_buffer(header, 8),
            ctypes.create_string_buffer(bytes(24), 24),  # every set empty
        )
        self.stage = ""
        self.errno = 0
        self.listener = -1

    def apply(self, lib: Any, handoff: Callable[[int], None] | None = None) -> bool:
        """Restrict the calling thread (each step is per thread; a child it then starts
        inherits them all) through ``lib`` (libc); False at the first step that fails, with
        ``stage`` and ``errno``. ``handoff`` takes the notify filter's listener before the
        seccomp filter loads (that one refuses ``sendmsg`` under ``network: off``)."""
        self.stage = "no_new_privs"
        if lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            return self._failed()
        self.stage = "landlock"
        if lib.syscall(syscall_nr("restrict_self"), self.ruleset, ctypes.c_uint32(0)):
            return self._failed()
        self.stage = "seccomp"
        if self.notify is not None:
            fd = lib.syscall(
                syscall_nr("seccomp"),
                ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
                ctypes.c_uint(SECCOMP_FILTER_FLAG_NEW_LISTENER),
                self.notify,
            )
            if fd < 0:
                return self._failed()
            self.listener = fd
            if handoff is not None:
                handoff(fd)
        if self.seccomp and lib.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self.seccomp, 0, 0):
            return self._failed()
        if self.drop_caps:
            self.stage = "capabilities"
            for cap in self.caps:
                lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
            lib.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
            if lib.syscall(syscall_nr("capset"), *self.capset):
                return self._failed()
        return True

    def _failed(self) -> bool:
        self.errno = ctypes.get_errno() or errno.EIO
        return False


# -- the fork server -----------------------------------------------------------------------------

_CLONE_PARENT = 0x00008000
_MAX_MSG = 1 << 20


_Fds = list[tuple[int, bool]]  # (O_PATH descriptor, is a directory)


class Plans:
    """Which paths a rule needs (``cover``), opened once (O_PATH) and kept while the
    directories walked to find them are unchanged."""

    def __init__(self) -> None:
        self._plans: dict[tuple[str, tuple[str, ...]], tuple[list[tuple], _Fds]] = {}

    def get(self, root: str, holes: Sequence[str]) -> _Fds:
        """(One caller at a time: the fork server is single-threaded, Conch's spawner holds
        its lock.)"""
        key = (root, tuple(sorted(holes)))
        now = stamps(walked(root, key[1]))
        plan = self._plans.get(key)
        if plan is not None and plan[0] == now:
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
        self._plans[key] = (now, fds)
        return fds

    def close(self) -> None:
        for _, fds in self._plans.values():
            for fd, _ in fds:
                os.close(fd)
        self._plans.clear()


def stamps(dirs: Sequence[str]) -> list[tuple]:
    out = []
    for d in dirs:
        try:
            st = os.stat(d)
            out.append((d, st.st_ino, st.st_mtime_ns))
        except OSError:
            out.append((d, 0, 0))
    return out


def build_ruleset(spec: Mapping[str, Any], plans: Plans) -> int:
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


def _child(
    spec: dict[str, Any], fds: list[int], restriction: Restriction, err_w: int, placed: bool
) -> None:
    """In the cloned child: fence in (``restriction``, made ready before the clone), exec.
    Never returns. ``placed``: clone3 started it in its cgroup, so it enters none itself."""
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
        stage = "signals"  # (every disposition is already the default: ``main``)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())

        def handoff(listener: int) -> None:  # (the connect filter's listener, to Conch)
            out = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=os.dup(chan))
            socket.send_fds(out, [b"L"], [listener])
            os.close(listener)

        try:
            restricted = restriction.apply(_lib(), handoff if chan >= 0 else None)
        finally:
            stage = restriction.stage
        if not restricted:
            raise OSError(restriction.errno, os.strerror(restriction.errno))
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
            syscall_nr("clone3"), ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args))
        )
        return _check(int(pid), "clone3")
    pid = _lib().syscall(
        syscall_nr("clone"),
        ctypes.c_ulong(_CLONE_PARENT | signal.SIGCHLD),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )
    return _check(int(pid), "clone")


def spawn_one(spec: dict[str, Any], fds: list[int], plans: Plans) -> tuple[int, str, int, str]:
    """Start one job; (pid, stage, errno, message): errno 0 when its program runs, else the
    stage that failed (the child, a zombie of Conch's, is left for Conch to reap)."""
    try:
        ruleset = build_ruleset(spec, plans)
    except OSError as e:
        return 0, "landlock", e.errno or errno.EIO, str(e)
    # made here: what the child would otherwise build in its copy-on-write memory
    restriction = Restriction(
        ruleset, spec["seccomp"], spec.get("notify") or b"", spec["drop_caps"]
    )
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
                _child(spec, fds, restriction, err_w, placed)
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
    plans = Plans()
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


def main(argv: list[str]) -> None:
    """The fork server (``lockdown.py FD``): it serves the socket ``FD`` until it closes."""
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
    last_cap()
    if os.geteuid() == 0:  # (then every job drops them all: landlock/spawner.py)
        empty_bounding_set()
    # no collection in a child, and none touching (so copying) every object's page before it
    gc.disable()
    gc.freeze()
    serve(int(argv[1]))


if __name__ == "__main__":
    main(sys.argv)
