"""Starting a pipe child with glibc's ``posix_spawn``, called through ctypes.

``subprocess.Popen`` costs about twice a bare spawn here: it builds the child's setup in
Python and reads an error pipe afterwards. glibc's ``posix_spawn`` does the same setup in C (a
new session, the three descriptors, the working directory, every other descriptor closed,
default signal dispositions, an empty signal mask). The call keeps the GIL, as Popen's vfork
does: released, a worker thread (housekeeping's rmdir of cgroups) takes it, and the loop then
waits to get it back (measured: 4% fewer calls/s under 8 callers at the cgroup level).

Used where every piece is there: Linux with glibc's ``addchdir_np`` and ``addclosefrom_np``
(2.34+), and a program found already (core/process/program.py finds it once per PATH; the
caller keeps Popen otherwise). What the child gets is what ``popen.spawn`` gives it: its signal
dispositions all default (not only those Popen resets), which is what ``hygiene.spawning``
otherwise arranges with a preexec function or a moment's swap.

With glibc 2.39+ (``posix_spawnattr_setcgroup_np``) it can also start the child inside a
cgroup v2 directory: ``clone3(CLONE_INTO_CGROUP)``, so the child is in its job's cgroup from
its first instruction, without the ``sh`` that otherwise enters the cgroup and then execs the
program (core/containment/fence.py): one exec per job fewer.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import sys
from collections.abc import Sequence
from typing import Any

from conch.core.process.spec import SpawnSpec

#: <spawn.h>
_SETSIGDEF = 0x04
_SETSIGMASK = 0x08
_SETSID = 0x80
_SETCGROUP = 0x100  # glibc 2.39+
#: glibc's types are 336 / 80 / 128 bytes on x86_64 and aarch64; room to spare
_ATTR_SIZE = 1024
_ACTIONS_SIZE = 512
_SIGSET_SIZE = 256

_libc: Any = None
_attr: Any = None  # one attribute set, read-only once made: every child's session and signals
_sigsets: tuple[Any, Any] = (None, None)  # (every signal, none): for a per-call attribute set
_into_cgroup = False
_failed = False


def _load() -> bool:
    global _libc, _attr, _sigsets, _into_cgroup, _failed
    if _libc is not None:
        return True
    if _failed or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.PyDLL(None, use_errno=True)  # (PyDLL: the GIL stays held)
        for name in (
            "posix_spawn",
            "posix_spawn_file_actions_init",
            "posix_spawn_file_actions_destroy",
            "posix_spawn_file_actions_adddup2",
            "posix_spawn_file_actions_addopen",
            "posix_spawn_file_actions_addclose",
            "posix_spawn_file_actions_addchdir_np",
            "posix_spawn_file_actions_addclosefrom_np",
            "posix_spawnattr_init",
            "posix_spawnattr_destroy",
            "posix_spawnattr_setflags",
            "posix_spawnattr_setsigdefault",
            "posix_spawnattr_setsigmask",
            "sigfillset",
            "sigemptyset",
        ):
            getattr(libc, name)
    except (OSError, AttributeError):
        _failed = True
        return False
    vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    libc.posix_spawn.argtypes = [ctypes.POINTER(i), cp, vp, vp, vp, vp]
    libc.posix_spawn_file_actions_init.argtypes = [vp]
    libc.posix_spawn_file_actions_destroy.argtypes = [vp]
    libc.posix_spawn_file_actions_adddup2.argtypes = [vp, i, i]
    libc.posix_spawn_file_actions_addclose.argtypes = [vp, i]
    libc.posix_spawn_file_actions_addopen.argtypes = [vp, i, cp, i, ctypes.c_uint]
    libc.posix_spawn_file_actions_addchdir_np.argtypes = [vp, cp]
    libc.posix_spawn_file_actions_addclosefrom_np.argtypes = [vp, i]
    libc.posix_spawnattr_init.argtypes = [vp]
    libc.posix_spawnattr_destroy.argtypes = [vp]
    libc.posix_spawnattr_setflags.argtypes = [vp, ctypes.c_short]
    libc.posix_spawnattr_setsigdefault.argtypes = [vp, vp]
    libc.posix_spawnattr_setsigmask.argtypes = [vp, vp]
    libc.sigfillset.argtypes = [vp]
    libc.sigemptyset.argtypes = [vp]
    every, none = (
        ctypes.create_string_buffer(_SIGSET_SIZE),
        ctypes.create_string_buffer(_SIGSET_SIZE),
    )
    if libc.sigfillset(every) or libc.sigemptyset(none):
        _failed = True
        return False
    # sigfillset leaves out glibc's own two signals (32, 33), and posix_spawn's child sets
    # those to *ignored* unless they are in this set (an ignored signal stays ignored across
    # exec): in, so the program starts with every disposition at its default
    bits = 8 * ctypes.sizeof(ctypes.c_ulong)
    words = (ctypes.c_ulong * 2).from_buffer(every)
    for sig in (32, 33):
        words[(sig - 1) // bits] |= 1 << ((sig - 1) % bits)
    _sigsets = (every, none)
    try:
        attr = _new_attr(libc)
    except OSError:
        _failed = True
        return False
    setcgroup = getattr(libc, "posix_spawnattr_setcgroup_np", None)
    if setcgroup is not None:
        setcgroup.argtypes = [vp, i]
    _attr, _into_cgroup = attr, setcgroup is not None
    _libc = libc  # last: a loaded module has every piece
    return True


def available() -> bool:
    """Whether :func:`spawn` can be used on this system."""
    return _load()


def into_cgroup_available() -> bool:
    """Whether :func:`spawn` can start a child inside a cgroup (glibc 2.39+; the kernel's
    support, Linux 5.7+, is for the caller to find out)."""
    return _load() and _into_cgroup


def forgo_cgroup_spawn() -> None:
    """Start no child inside a cgroup from now on in this process, as with glibc before 2.39:
    the path of an older glibc (a ``sh`` enters the cgroup) can then be run on a newer one."""
    global _into_cgroup
    _load()
    _into_cgroup = False


def _new_attr(libc: Any, cgroup_fd: int | None = None) -> Any:
    """An attribute set: a new session, every signal at its default, an empty mask (and the
    cgroup directory ``cgroup_fd`` to start in). The one without a cgroup is made once and
    shared; one with a cgroup is made per spawn."""
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    every, none = _sigsets
    flags = _SETSID | _SETSIGDEF | _SETSIGMASK
    err = (
        libc.posix_spawnattr_init(attr)
        or libc.posix_spawnattr_setsigdefault(attr, every)
        or libc.posix_spawnattr_setsigmask(attr, none)
    )
    if not err and cgroup_fd is not None:
        flags |= _SETCGROUP
        err = libc.posix_spawnattr_setcgroup_np(attr, cgroup_fd)
    err = err or libc.posix_spawnattr_setflags(attr, flags)
    if err:
        raise OSError(err, os.strerror(err))
    return attr


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


#: what os.fsencode does, without its per-call checks where the encoding is UTF-8 (84 calls a
#: spawn with a typical environment)
_encode = _utf8 if sys.getfilesystemencoding() == "utf-8" else os.fsencode


def _strings(items: Sequence[bytes]) -> Any:
    array = (ctypes.c_char_p * (len(items) + 1))(*items)
    array[len(items)] = None
    return array


class Prepared:
    """One ``posix_spawn`` call made ready: its strings encoded, its file actions and attribute
    set built, so that :meth:`run` is a single foreign call that allocates nothing (the landlock
    spawner runs it on a thread that has just restricted itself: core/containment/landlock.py).
    :meth:`close` frees what it holds; a ``Prepared`` runs at most once."""

    def __init__(self, spec: SpawnSpec) -> None:
        if spec.path is None:
            raise ValueError("posix_spawn needs the program's path")
        path, terminal, cgroup, fds, first_fd = (
            spec.path,
            spec.terminal,
            spec.cgroup,
            spec.fds,
            spec.first_fd,
        )
        enc = _encode
        args = [enc(a) for a in spec.argv]
        envp = [enc(k) + b"=" + enc(v) for k, v in spec.env.items()]
        where, tty = enc(spec.cwd), enc(terminal) if terminal is not None else b""
        for word in (*args, *envp, where, tty):
            if b"\0" in word:
                raise ValueError("embedded null byte")
        if not _load():
            raise OSError(errno.ENOSYS, "glibc's posix_spawn with addchdir_np/addclosefrom_np")
        if cgroup is not None and not _into_cgroup:
            raise OSError(errno.ENOSYS, "glibc cannot spawn into a cgroup (2.39+)", cgroup)
        libc = _libc
        self._cgroup_fd = -1
        self._attr = _attr
        self._moved: list[int] = []  # copies of ``fds`` made above the numbers they go to
        actions = ctypes.create_string_buffer(_ACTIONS_SIZE)
        if libc.posix_spawn_file_actions_init(actions):
            raise OSError(ctypes.get_errno(), "posix_spawn_file_actions_init")
        self._actions: Any = actions
        try:
            if terminal is not None:  # (glibc calls setsid before the file actions)
                err = (
                    libc.posix_spawn_file_actions_addopen(actions, 0, tty, os.O_RDWR, 0)
                    or libc.posix_spawn_file_actions_adddup2(actions, 0, 1)
                    or libc.posix_spawn_file_actions_adddup2(actions, 0, 2)
                )
            else:
                err = (
                    libc.posix_spawn_file_actions_adddup2(actions, spec.stdin, 0)
                    or libc.posix_spawn_file_actions_adddup2(actions, spec.stdout, 1)
                    or libc.posix_spawn_file_actions_adddup2(actions, spec.stderr, 2)
                )
            # the extra descriptors become first_fd, first_fd + 1, ...: one that sits where
            # an earlier one goes would be overwritten first, so each is copied above them all
            top = first_fd + len(fds)
            for n, fd in enumerate(fds):
                if fd < top:
                    fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, top)
                    self._moved.append(fd)
                err = err or libc.posix_spawn_file_actions_adddup2(actions, fd, first_fd + n)
            for fd in range(3, first_fd if fds else 3):  # (glibc ignores EBADF here)
                err = err or libc.posix_spawn_file_actions_addclose(actions, fd)
            err = (
                err
                or libc.posix_spawn_file_actions_addchdir_np(actions, where)
                or libc.posix_spawn_file_actions_addclosefrom_np(actions, top)
            )
            if err:
                raise OSError(err, os.strerror(err))
            if cgroup is not None:
                self._cgroup_fd = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                self._attr = _new_attr(libc, self._cgroup_fd)
            self._pid = ctypes.c_int()
            self._call = (
                libc.posix_spawn,
                ctypes.byref(self._pid),
                enc(path),
                actions,
                self._attr,
                _strings(args),
                _strings(envp),
            )
        except BaseException:
            self.close()
            raise

    def run(self) -> int:
        """Spawn; 0 (the child's pid is :attr:`pid`) or the errno of what failed (the program,
        the directory, the cgroup)."""
        call, *args = self._call
        return int(call(*args))

    @property
    def pid(self) -> int:
        return self._pid.value

    def close(self) -> None:
        if self._actions is not None:
            _libc.posix_spawn_file_actions_destroy(self._actions)
            self._actions = None
        if self._attr is not _attr:
            _libc.posix_spawnattr_destroy(self._attr)
            self._attr = _attr
        if self._cgroup_fd >= 0:
            os.close(self._cgroup_fd)
            self._cgroup_fd = -1
        for fd in self._moved:
            os.close(fd)
        self._moved.clear()


def spawn(spec: SpawnSpec) -> int:
    """Start ``spec.path`` with its argv and exactly its env, in its cwd, as the leader of a
    new session with its three descriptors (or its terminal, opened after setsid: its
    controlling terminal), its ``fds`` and no other, inside its cgroup v2 directory when it
    names one; its pid. A failure (the program, the directory, the cgroup) is the ``OSError``
    Popen would raise. Needs :func:`available` (and :func:`into_cgroup_available` for a
    cgroup)."""
    call = Prepared(spec)
    try:
        err = call.run()
    finally:
        call.close()
    if err:
        raise OSError(err, os.strerror(err), spec.path)
    return call.pid
