"""Starting a child process: the one place pipe jobs, PTY jobs and shells are spawned.

Each child leads a new session (its tree can be found and killed as one), inherits no file
descriptor but the three it is given, starts with default signal dispositions and an empty
signal mask, and is reaped by its owner (an ExitWatch), never by ``subprocess``. With glibc
(2.34+) the spawn is ``posix_spawn`` (core/process/libc_spawn.py); elsewhere ``Popen``, with
``hygiene.spawning`` for the signals and a preexec function for a PTY's controlling
terminal (which makes Popen fork the whole server). ripgrep and ``bash -n`` run through
asyncio with the same reset and the same child environment (core/spawn.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import functools
import os
import subprocess
import termios
from collections.abc import Callable, Iterable

from conch.core.process import libc_spawn, program
from conch.core.process.hygiene import spawning
from conch.core.process.spec import Spawner, SpawnSpec
from conch.errors import ConchError


def _take_terminal() -> None:  # runs in the child between fork and exec (Popen's path)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _keep(fd: int, number: int) -> None:  # runs in the child between fork and exec (Popen's)
    """``fd`` as ``number``, and every other descriptor the program would inherit closed, as
    ``close_fds`` does (which would close ``number`` too; those closed on exec, Popen's error
    pipe among them, go by themselves)."""
    os.dup2(fd, number)
    try:
        fds: Iterable[int] = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = range(3, os.sysconf("SC_OPEN_MAX"))
    for other in fds:
        if other > 2 and other != number:
            with contextlib.suppress(OSError):
                if os.get_inheritable(other):
                    os.close(other)


def spawn(spec: SpawnSpec, *, spawner: Spawner | None = None) -> int:
    """Start the child ``spec`` describes (its ``path`` None: ``argv[0]`` found on its env's
    PATH); its pid. A failure to start is ``spawn_failed``. ``spec.cgroup`` only where
    ``SpawnFence.prepare`` said so for this argv and env. ``spawner``: what starts it instead
    (``SpawnFence.spawner``: the landlock backend, which fences the child before its program);
    it passes no descriptor but the three (``fds`` must be empty). Without glibc's
    posix_spawn, ``fds`` holds at most one descriptor."""
    if spawner is not None and spec.fds:
        raise ValueError("a spawner passes no other descriptor")
    if len(spec.fds) > 1:
        raise ValueError("popen passes at most one other descriptor")
    argv, cgroup = spec.argv, spec.cgroup
    try:
        path = spec.path or program.resolved(argv[0], spec.env)
        if spawner is not None:
            if path is None:
                raise FileNotFoundError(errno.ENOENT, "not found", argv[0])
            return spawner(dataclasses.replace(spec, path=path))
        if path is not None and libc_spawn.available():
            # default signals, an empty mask, the session (and the controlling terminal,
            # opened after setsid) are all set up by glibc: no swap, no preexec, no fork
            return libc_spawn.spawn(spec if spec.path else dataclasses.replace(spec, path=path))
        if cgroup is not None:
            raise ConchError("spawn_failed", "a spawn into a cgroup needs glibc's posix_spawn")
        keep = (spec.fds[0], spec.first_fd) if spec.fds else None
        steps: list[Callable[[], None]] = [_take_terminal] if spec.terminal is not None else []
        if keep is not None:
            steps.append(functools.partial(_keep, *keep))
        with spawning() as reset:  # None: nothing to undo in the child, vfork stays possible
            if reset is not None:
                steps.insert(0, reset)

            def setup() -> None:  # runs in the child between fork and exec
                for step in steps:
                    step()

            proc = subprocess.Popen(
                list(argv),
                # found once per PATH (core/process/program.py), not by trying every directory
                executable=path,
                stdin=spec.stdin,
                stdout=spec.stdout,
                stderr=spec.stderr,
                cwd=spec.cwd,
                env=dict(spec.env),
                start_new_session=True,
                close_fds=keep is None,  # (else _keep closes them: Popen would close it too)
                restore_signals=True,
                preexec_fn=(steps[0] if len(steps) == 1 else setup) if steps else None,
            )
    except OSError as e:
        raise _failed(argv[0], e, cgroup) from None
    except subprocess.SubprocessError as e:
        raise ConchError(
            "spawn_failed", f"could not start {argv[0]}: {e}", field="argv", value=None
        ) from None
    proc.returncode = 0  # Popen must never reap this pid: its owner does
    return proc.pid


def _failed(program_name: str, e: OSError, cgroup: str | None) -> ConchError:
    """``spawn_failed`` for an OSError of a spawn, worded by what failed."""
    if cgroup is not None and e.filename == cgroup:
        return ConchError("spawn_failed", f"cannot start the job in its cgroup: {e.strerror}")
    if isinstance(e, FileNotFoundError):
        return ConchError(
            "spawn_failed", f"program not found: {program_name}", field="argv", value="not found"
        )
    if isinstance(e, PermissionError):
        return ConchError(
            "spawn_failed",
            f"permission denied: {program_name}",
            field="argv",
            value="not permitted",
        )
    # value: the errno's name (ENOTDIR, E2BIG, ...), for profiles that word it themselves
    return ConchError(
        "spawn_failed",
        f"could not start {program_name}: {e.strerror or e}",
        field="argv",
        value=errno.errorcode.get(e.errno or 0),
    )
