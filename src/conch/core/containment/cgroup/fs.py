"""The small reads and writes of cgroup files and directories that every other file here
shares: a missing or unreadable file reads as empty, a directory made or removed says whether
it is there (or gone) rather than raising."""

from __future__ import annotations

import contextlib
import os


def write(path: str, text: str) -> None:
    """One write of ``text`` (a cgroup file takes each write as one command)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def read(path: str) -> str:
    """The file's text, or "" where it cannot be read."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def keyed(text: str, key: str) -> int:
    """The number after ``key`` in a flat-keyed file (``cgroup.events``), 0 without one."""
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            try:
                return int(v)
            except ValueError:
                return 0
    return 0


def pids_in(d: str) -> set[int]:
    """The processes in cgroup ``d`` now."""
    out: set[int] = set()
    for line in read(os.path.join(d, "cgroup.procs")).split():
        with contextlib.suppress(ValueError):
            out.add(int(line))
    return out


def rmdir_tree(d: str) -> bool:
    """Remove a cgroup directory and its (empty) children; True when it is gone."""
    try:
        entries = list(os.scandir(d))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            rmdir_tree(e.path)
    try:
        os.rmdir(d)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def mkdir(d: str) -> bool:
    """Make ``d`` (or find it made); False where it cannot be."""
    try:
        os.mkdir(d, 0o755)
    except FileExistsError:
        return True
    except OSError:
        return False
    return True


def mkdir_strict(d: str) -> str:
    """Make ``d`` (or find it made), raising OSError where it cannot be; ``d``."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(d, 0o755)
    return d


def subdirs(d: str) -> list[str]:
    """The child cgroups of ``d`` (none where it cannot be read)."""
    try:
        return [e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
