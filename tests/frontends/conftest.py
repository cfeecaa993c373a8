"""Fixtures of the front-end tests; the helpers live in frontend_servers.py (a module name of
its own, so test files import them whatever other test directories are collected with them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from frontend_servers import HttpServer, kill_group, start_http


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    srv = start_http(tmp_path)
    try:
        yield srv
    finally:
        kill_group(srv.proc)


@pytest.fixture
def serve_args(tmp_path: Path) -> list[str]:
    """Arguments of `python -m conch serve` over stdio with a private data dir."""
    return ["-m", "conch", "serve", "--data-dir", str(tmp_path / "data")]
