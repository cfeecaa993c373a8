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

import errno
import fcntl
import subprocess
import termios
from collections.abc import Callable

from conch.core.process import libc_spawn, program
from conch.core.process.hygiene import spawning
from conch.errors import ConchError

Stdio = int  # a file descriptor


def _take_terminal() -> None:  # runs in the child between fork and exec (Popen's path)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def spawn(
    argv: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    stdin: Stdio,
    stdout: Stdio,
    stderr: Stdio,
    terminal: str | None = None,
    cgroup: str | None = None,
    spawner: Callable[..., int] | None = None,
) -> int:
    """Start ``argv``; its pid. A failure to start is ``spawn_failed``. ``terminal``: the path
    of the PTY slave the three descriptors are, which becomes the child's controlling terminal.
    ``cgroup``: the cgroup v2 directory the child starts in (only where
    ``SpawnFence.prepare`` said so for this argv and env). ``spawner``: what starts it instead
    (``SpawnFence.spawner``: the landlock backend, which fences the child before its program),
    called as ``libc_spawn.spawn`` is."""
    try:
        path = program.resolved(argv[0], env)
        if spawner is not None:
            if path is None:
                raise FileNotFoundError(errno.ENOENT, "not found", argv[0])
            return spawner(
                path,
                argv,
                env=env,
                cwd=cwd,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                terminal=terminal,
            )
        if path is not None and libc_spawn.available():
            # default signals, an empty mask, the session (and the controlling terminal,
            # opened after setsid) are all set up by glibc: no swap, no preexec, no fork
            return libc_spawn.spawn(
                path,
                argv,
                env=env,
                cwd=cwd,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                terminal=terminal,
                cgroup=cgroup,
            )
        if cgroup is not None:
            raise ConchError("spawn_failed", "a spawn into a cgroup needs glibc's posix_spawn")
        preexec_fn = _take_terminal if terminal is not None else None
        with spawning() as reset:  # None: nothing to undo in the child, vfork stays possible
            setup = preexec_fn
            if reset is not None and preexec_fn is not None:
                after = preexec_fn

                def setup() -> None:  # runs in the child between fork and exec
                    assert reset is not None
                    reset()
                    after()

            elif reset is not None:
                setup = reset
            proc = subprocess.Popen(
                argv,
                # found once per PATH (core/process/program.py), not by trying every directory
                executable=path,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                cwd=cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
                restore_signals=True,
                preexec_fn=setup,
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
