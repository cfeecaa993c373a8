from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import conch


@pytest.fixture
async def rt(request, tmp_path) -> AsyncIterator[conch.Runtime]:
    """A runtime on a private data dir, default cwd tmp_path. Results in full detail (these
    tests read pid, log_path, duration_ms), unless the module sets ``RESULT_DETAIL`` (None:
    the detail a Config gives by default)."""
    detail = getattr(request.module, "RESULT_DETAIL", "full")
    settings = {} if detail is None else {"result_detail": detail}
    cfg = conch.Config(data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path), **settings)
    async with conch.Runtime(cfg) as runtime:
        yield runtime
