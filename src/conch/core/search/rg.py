"""Locating the ripgrep binary: ``rg`` on PATH, else the one the ``ripgrep`` wheel installs.

Nothing here runs at import time; :func:`find_rg` does its lookup (and runs ``rg --version``)
once, on first call, and caches the answer for the life of the process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from dataclasses import dataclass

from conch.core.process.hygiene import child_signal_reset

__all__ = ["RgInfo", "candidate_paths", "find_rg", "probe_rg"]

_VERSION_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RgInfo:
    """A usable ripgrep binary: absolute ``path`` and its ``version`` (e.g. ``"14.1.0"``)."""

    path: str
    version: str


_lock = threading.Lock()
_cached: RgInfo | None = None
_cached_done = False


def _is_executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def candidate_paths() -> list[str]:
    """Where ``rg`` may be, best first, without duplicates: PATH, then wheel script dirs."""
    found: list[str] = []
    on_path = shutil.which("rg")
    if on_path:
        found.append(os.path.abspath(on_path))
    dirs: list[str] = []
    scripts = sysconfig.get_path("scripts")
    if scripts:
        dirs.append(scripts)
    if sys.executable:
        dirs.append(os.path.dirname(sys.executable))
    try:
        user_scripts = sysconfig.get_path("scripts", f"{os.name}_user")
    except KeyError:  # pragma: no cover - scheme missing on exotic builds
        user_scripts = None
    if user_scripts:
        dirs.append(user_scripts)
    for d in dirs:
        cand = os.path.abspath(os.path.join(d, "rg"))
        if cand not in found and _is_executable_file(cand):
            found.append(cand)
    return found


def _parse_version(first_line: str) -> str:
    # "ripgrep 14.1.0" or "ripgrep 14.1.0 (rev 1234abcd)"
    parts = first_line.split()
    if len(parts) >= 2 and parts[0] == "ripgrep":
        return parts[1]
    return first_line.strip() or "unknown"


def probe_rg(path: str) -> RgInfo | None:
    """Run ``path --version``; an :class:`RgInfo` if it runs at all, else ``None``."""
    env = {"PATH": os.environ.get("PATH", "")}  # a version probe needs nothing else
    try:
        proc = subprocess.run(
            [path, "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            preexec_fn=child_signal_reset(),
            timeout=_VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = proc.stdout.decode("utf-8", "replace")
    first = text.splitlines()[0] if text.strip() else ""
    if proc.returncode != 0 and not first:
        return None
    return RgInfo(path=path, version=_parse_version(first))


def find_rg() -> RgInfo | None:
    """The ripgrep to use, or ``None`` when there is none. Cached after the first call."""
    global _cached, _cached_done
    if _cached_done:
        return _cached
    with _lock:
        if not _cached_done:
            result: RgInfo | None = None
            for cand in candidate_paths():
                result = probe_rg(cand)
                if result is not None:
                    break
            _cached = result
            _cached_done = True
    return _cached
