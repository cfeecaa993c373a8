"""Turning an exec request into something to run: the argv of each mode, script files."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
from collections.abc import Mapping

from conch.core.datadir import DataDir
from conch.core.jobs.job import Job
from conch.core.process.hygiene import child_signal_reset
from conch.core.process.program import executable
from conch.errors import ConchError

BIG_COMMAND = 100_000  # above this a command goes through a file: argv strings are capped


SHELL_DIRS = ("/bin", "/usr/bin", "/usr/local/bin", "/opt/homebrew/bin")


def find_shell(kind: str) -> str | None:
    """The one way Conch finds a shell (``bash``, ``zsh``): the system's first, then PATH."""
    for d in SHELL_DIRS:
        p = os.path.join(d, kind)
        if os.access(p, os.X_OK):
            return p
    return shutil.which(kind)


def find_bash() -> str | None:
    return find_shell("bash")


def plan(
    bash: str | None, command: str | None, argv: list[str] | None, script: str | None
) -> tuple[str, list[str], str | None]:
    """(mode, argv to run, script text to run from a file instead) for one exec request."""
    if argv is not None:
        if not isinstance(argv, list) or not argv:
            raise ConchError("invalid_argument", "argv must be a non-empty list of strings")
        for a in argv:
            if not isinstance(a, str):
                raise ConchError("invalid_argument", "argv elements must be strings")
            if "\x00" in a:
                raise ConchError("invalid_argument", "argv must not contain NUL")
        if argv[0] == "":
            raise ConchError("invalid_argument", "argv[0] (the program) must not be empty")
        return "argv", list(argv), None
    shell = bash or "/bin/sh"
    flags = ["--noprofile", "--norc"] if bash else []
    if command is not None:
        if "\x00" in command:
            raise ConchError("invalid_argument", "command must not contain NUL")
        if command.strip() == "":
            raise ConchError("invalid_argument", "command must not be empty")
        if len(command) > BIG_COMMAND and len(command.encode()) > BIG_COMMAND:
            return "command", [], command
        return "command", [shell, *flags, "-c", command], None
    assert script is not None
    if "\x00" in script:
        raise ConchError("invalid_argument", "script must not contain NUL")
    if script.strip() == "":
        raise ConchError("invalid_argument", "script must not be empty")
    return "script", [], script


async def prepare_script(
    data: DataDir,
    bash: str | None,
    job: Job,
    text: str,
    cwd: str,
    *,
    check: bool,
    env: dict[str, str],
) -> list[str]:
    """Write the script to a private file; with ``check``, check it with `bash -n` first (runs
    no user code). ``env`` is the child environment every process of Conch gets."""
    path, fd = data.new_file(data.tmp, job.job_id, "sh")
    job.tmp_files.append(path)
    try:
        data.write_all(fd, text.encode("utf-8", "surrogateescape"))
        data.check_path(path, fd)
    finally:
        os.close(fd)
    job.on_finish(lambda j: remove_tmp_files(j, data))
    shell = bash or "/bin/sh"
    flags = ["--noprofile", "--norc"] if bash else []
    if check:
        proc = await asyncio.create_subprocess_exec(
            shell,
            *flags,
            "-n",
            path,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=child_signal_reset(),
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            diag = err.decode("utf-8", "replace").replace(path, "script").strip()
            raise ConchError(
                "syntax_error",
                diag[:65536] or "bash -n reported a syntax error",
                field="script",
                # bash's own text, naming the script file (bytes kept: surrogateescape)
                value=err.decode("utf-8", "surrogateescape"),
            )
    return [shell, *flags, path]


def remove_tmp_files(job: Job, data: DataDir) -> None:
    """Remove the files a job needed only while it ran (its script)."""
    for path in job.tmp_files:
        data.unlink(path)
    job.tmp_files.clear()


def check_program(program: str, env: Mapping[str, str], cwd: str) -> str:
    """The path ``program`` runs from, or ``spawn_failed`` now if it cannot be exec'd (for a
    program that a wrapper, not Popen, will exec: a cgroup-entering sh, the sandbox, the warm
    sh)."""
    path = env.get("PATH") or os.environ.get("PATH", os.defpath)
    if "/" in program:
        full: str | None = os.path.join(cwd, program)
    else:  # the one lookup Popen uses too (remembered per PATH), else a full search
        full = executable(program, path) or shutil.which(program, path=path)
    if full is not None:
        try:
            os.stat(full)
        except OSError as e:
            if e.errno != errno.ENOENT:  # e.g. a path through a file (ENOTDIR), as exec says
                raise ConchError(
                    "spawn_failed",
                    f"could not start {program}: {e.strerror}",
                    field="argv",
                    value=errno.errorcode.get(e.errno or 0),
                ) from None
            full = None
    if full is None:
        raise ConchError(
            "spawn_failed", f"program not found: {program}", field="argv", value="not found"
        )
    if os.path.isdir(full) or not os.access(full, os.X_OK):
        raise ConchError(
            "spawn_failed", f"permission denied: {program}", field="argv", value="not permitted"
        )
    return full
