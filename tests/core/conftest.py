from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import conch


@pytest.fixture
async def rt(tmp_path) -> AsyncIterator[conch.Runtime]:
    async with conch.Runtime(
        conch.Config(
            result_detail="full", data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path)
        )
    ) as runtime:
        yield runtime
