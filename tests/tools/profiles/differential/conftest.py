"""Fixtures of the differential suite: one shared working directory and environment for
the original and the profile under test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import shared_env


@pytest.fixture
def diff_cwd(tmp_path: Path) -> Iterator[Path]:
    """A fresh directory both servers start in (physical path, so `pwd -P` agrees)."""
    cwd = Path(os.path.realpath(tmp_path)) / "work"
    cwd.mkdir()
    yield cwd


@pytest.fixture
def diff_env(diff_cwd: Path) -> dict[str, str]:
    """The environment both servers get (HOME is the shared directory's parent)."""
    return shared_env(diff_cwd.parent)
