"""The system tools the suite drives (``system-tools.txt``, shared with ``bin/test``).

A test that needs one is marked ``@pytest.mark.needs("bwrap")``. Where the tool is missing the
test skips with a reason naming the Debian package and the command that installs it; under
``CI=true`` it fails instead, so CI can never go green with a group of tests skipped. The same
holds for any other missing prerequisite that goes through :func:`unavailable`.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

LIST = Path(__file__).with_name("system-tools.txt")
PREFIX = "missing prerequisite:"


@dataclass(frozen=True)
class Tool:
    command: str
    package: str
    purpose: str


def tools() -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for line in LIST.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command, package, purpose = line.split(None, 2)
        out[command] = Tool(command, package, purpose.strip())
    return out


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(what: str, remedy: str) -> NoReturn:
    """Skip the running test for a missing prerequisite, or fail it under ``CI=true``."""
    reason = f"{PREFIX} {what} ({remedy})"
    if in_ci():
        pytest.fail(f"{reason}; CI=true makes a missing prerequisite a failure", pytrace=False)
    pytest.skip(reason)


def missing_tools(commands: tuple[str, ...]) -> list[Tool]:
    known = tools()
    unknown = [c for c in commands if c not in known]
    if unknown:
        raise ValueError(f"not in {LIST.name}: {unknown}")
    return [known[c] for c in commands if shutil.which(c) is None]


def require(*commands: str) -> None:
    """Skip (or under CI fail) the running test unless every command is on PATH."""
    missing = missing_tools(commands)
    if missing:
        names = ", ".join(f"{t.command} (Debian package {t.package})" for t in missing)
        packages = " ".join(t.package for t in missing)
        unavailable(f"needs {names}", f"install with: sudo apt-get install {packages}")


def summary_line(reasons: list[str]) -> str:
    """One line for the end of a run: each missing prerequisite and how many tests it cost."""
    counts: dict[str, int] = {}
    for r in reasons:
        counts[r] = counts.get(r, 0) + 1
    parts = [f"{r.removeprefix(PREFIX).strip()} x{n}" for r, n in sorted(counts.items())]
    return "skipped for missing prerequisites: " + "; ".join(parts)
