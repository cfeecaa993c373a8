"""Starting a child process: the one place pipe jobs, PTY jobs and shells are spawned.

Each child leads a new session (its tree can be found and killed as one), inherits no file
descriptor but the three it is given, starts with default signal dispositions and an empty
signal mask (hygiene.child_signal_reset), and is reaped by its owner (an ExitWatch), never by
``subprocess``. ripgrep and ``bash -n`` run through asyncio with the same reset and the same
child environment (core/spawn.py).
"""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Callable

from conch.core.process.hygiene import child_signal_reset
from conch.errors import ConchError

Stdio = int  # a file descriptor, or subprocess.DEVNULL


def spawn(
    argv: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    stdin: Stdio,
    stdout: Stdio,
    stderr: Stdio,
    preexec_fn: Callable[[], None] | None = None,
) -> int:
    """Start ``argv``; its pid. A failure to start is ``spawn_failed``. ``preexec_fn`` runs in
    the child after its signals are reset (a PTY takes its controlling terminal there)."""
    reset = child_signal_reset()
    setup = preexec_fn
    if reset is not None and preexec_fn is not None:
        after = preexec_fn

        def setup() -> None:  # runs in the child between fork and exec
            reset()
            after()

    elif reset is not None:
        setup = reset
    try:
        proc = subprocess.Popen(
            argv,
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
