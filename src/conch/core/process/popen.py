"""Starting a child process: the one place pipe jobs, PTY jobs and shells are spawned.

Each child leads a new session (its tree can be found and killed as one), inherits no file
descriptor but the three it is given, starts with default signal dispositions and an empty
signal mask (hygiene.spawning), and is reaped by its owner (an ExitWatch), never by
``subprocess``. ripgrep and ``bash -n`` run through asyncio with the same reset and the same
child environment (core/spawn.py).
"""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Callable

from conch.core.process import libc_spawn, program
from conch.core.process.hygiene import spawning
from conch.errors import ConchError

Stdio = int  # a file descriptor


def spawn(
    argv: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    stdin: Stdio,
    stdout: Stdio,
    stderr: Stdio,
    preexec_fn: Callable[[], None] | None = None,
    cgroup: str | None = None,
) -> int:
    """Start ``argv``; its pid. A failure to start is ``spawn_failed``. ``preexec_fn`` runs in
    the child after its signals are reset (a PTY takes its controlling terminal there).
    ``cgroup``: the cgroup v2 directory the child starts in (only where :func:`can_place`
    said so for this argv and env)."""
    try:
        path = _program(argv[0], env)
        if preexec_fn is None and path is not None and libc_spawn.available():
            # default signals and an empty mask are in its attributes: no swap, no preexec
            return libc_spawn.spawn(
                path,
                argv,
                env=env,
                cwd=cwd,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                cgroup=cgroup,
            )
        if cgroup is not None:
            raise ConchError("spawn_failed", "a spawn into a cgroup needs glibc's posix_spawn")
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
    except FileNotFoundError:
        raise ConchError(
            "spawn_failed", f"program not found: {argv[0]}", field="argv", value="not found"
        ) from None
    except PermissionError:
        raise ConchError(
            "spawn_failed", f"permission denied: {argv[0]}", field="argv", value="not permitted"
        ) from None
    except (OSError, subprocess.SubprocessError) as e:
        detail = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        code = errno.errorcode.get(e.errno or 0) if isinstance(e, OSError) else None
        # value: the errno's name (ENOTDIR, E2BIG, ...), for profiles that word it themselves
        raise ConchError(
            "spawn_failed", f"could not start {argv[0]}: {detail}", field="argv", value=code
        ) from None
    proc.returncode = 0  # Popen must never reap this pid: its owner does
    return proc.pid


def _program(name: str, env: dict[str, str]) -> str | None:
    path = program.executable(name, env.get("PATH"))
    return name if path is None and "/" in name else path


def can_place(argv: list[str], env: dict[str, str]) -> bool:
    """Whether :func:`spawn` can start this argv (no preexec function) inside a cgroup by
    itself: glibc 2.39+ and a program it finds (containment.py otherwise enters the cgroup
    with a sh)."""
    return libc_spawn.into_cgroup_available() and _program(argv[0], env) is not None
