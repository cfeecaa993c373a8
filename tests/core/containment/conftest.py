"""Containment and sandbox tests (docs/spec.md §9a) run at the levels this host has.

This machine and CI are a hybrid host: a writable cgroup v2 tree without controllers at
/sys/fs/cgroup/unified tracks and kills jobs (``cgroup.kill``), the v1 memory and pids
controllers apply the limits. Each test module's docstring says which level it exercised.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import conch


@pytest.fixture
def workspace(tmp_path) -> str:
    ws = tmp_path / "ws"
    ws.mkdir()
    return str(ws)


@pytest.fixture
def sandbox_settings() -> dict[str, object]:
    """Settings every ``config`` of a test starts from; a module that runs its tests on each
    sandbox backend overrides it with its parametrized backend's."""
    return {}


@pytest.fixture
def config(tmp_path, workspace, sandbox_settings) -> Callable[..., conch.Config]:
    """A Config on a private data dir with the workspace as default cwd, plus ``settings``."""

    def make(**settings: object) -> conch.Config:
        return conch.Config(
            result_detail="full",
            data_dir=str(tmp_path / "data"),
            default_cwd=workspace,
            **{**sandbox_settings, **settings},  # type: ignore[arg-type]
        )

    return make


@pytest.fixture
def rt_settings(workspace) -> dict[str, object]:
    """The ``rt`` of tests/conftest.py runs in the workspace."""
    return {"default_cwd": workspace}
