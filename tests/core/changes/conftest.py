"""An engine on a workspace of its own (tmp_path/ws) with the data dir beside it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import conch
from conch.core.engine import Engine
from conch.core.requests import ExecRequest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


def config(tmp_path: Path, ws: Path, **settings: object) -> conch.Config:
    return conch.Config(data_dir=str(tmp_path / "data"), default_cwd=str(ws), **settings)  # type: ignore[arg-type]


@pytest.fixture
async def engine(tmp_path: Path, ws: Path) -> AsyncIterator[Engine]:
    async with Engine(config(tmp_path, ws)) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        yield e


async def run(e: Engine, command: str, **kw: object) -> dict:
    """A command run to its end; its result (what the test wrote before is taken in first,
    as a person's edits well before the job would be)."""
    if e.tracker is not None and e.tracker.on:
        e.tracker.settle_now()
    r = dict(await e.exec(ExecRequest(command=command, yield_ms=60_000, **kw)))  # type: ignore[arg-type]
    assert r["state"] == "exited", r
    return r
