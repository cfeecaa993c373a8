"""What ``/bin/sh`` (dash) does to the environment it passes on to the program it execs.

A tiny sh stands between Conch and some programs: the one that enters a job's cgroup before it
execs the program (containment.py), the warm sh of ``argv`` jobs (warm.py). dash imports the
environment and re-exports it, except that it resets ``IFS``, ``OPTIND`` and ``PPID`` (and
refuses to start on an ``OPTIND`` that is not a number), drops variables whose names are not
identifiers, and sets ``PWD`` when the one given does not name its working directory. The
program must get the environment a direct spawn would give it (docs/spec.md §2), so these functions
say whether dash keeps an environment, and how to give the program what it would lose.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

#: variables dash sets itself whatever it inherits
SH_SETS = frozenset({"IFS", "OPTIND", "PPID"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _keeps_pwd(pwd: str | None, cwd: str) -> bool:
    """dash keeps an inherited ``PWD`` that is absolute, normalized and names ``cwd``."""
    if pwd is None or not pwd.startswith("/") or pwd.startswith("//"):
        return False
    if os.path.normpath(pwd) != pwd:
        return False
    try:
        return os.path.samefile(pwd, cwd)
    except OSError:
        return False


def _changed(env: Mapping[str, str], reserved: frozenset[str]) -> list[str]:
    return [k for k in env if k in SH_SETS or k in reserved or not _NAME.fullmatch(k)]


def keeps_env(env: Mapping[str, str], cwd: str, reserved: frozenset[str] = frozenset()) -> bool:
    """Whether dash, started with ``env`` in ``cwd``, passes exactly ``env`` on to what it
    execs (``reserved``: variables the sh's own script sets)."""
    return not _changed(env, reserved) and _keeps_pwd(env.get("PWD"), cwd)


def restore(env: Mapping[str, str], cwd: str, env_prog: str) -> tuple[list[str], dict[str, str]]:
    """For a program dash will exec: the argv prefix that gives it ``env`` exactly (``env_prog``
    setting what dash would change, ``-u PWD`` when there was none) and the environment to start
    dash with (without the variables the prefix sets). ``([], env)`` when dash keeps ``env``."""
    changed = _changed(env, frozenset())
    keeps_pwd = _keeps_pwd(env.get("PWD"), cwd)
    if not changed and keeps_pwd:
        return [], dict(env)
    prefix = [env_prog]
    if not keeps_pwd:
        if "PWD" in env:
            changed.append("PWD")
        else:
            prefix += ["-u", "PWD"]
    # a name starting with `-` would read as an option of env: it is lost, as dash loses it
    prefix += [f"{k}={env[k]}" for k in changed if not k.startswith("-")]
    start = {k: v for k, v in env.items() if k not in changed}
    return prefix, start


def runs_directly(path: str) -> bool | None:
    """Whether ``path`` is a file a direct exec runs (a binary or a ``#!`` script), not one sh
    would run itself (dash runs a file the kernel refuses, ``ENOEXEC``, as a script of its
    own); None when it cannot be read here."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return None
    return head.startswith(b"#!") or head == b"\x7fELF"
