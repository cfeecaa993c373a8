"""The front-end independent resource views (conch.tools.resources), in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

from conch import Config
from conch.errors import ConchError
from conch.runtime import Runtime
from conch.tools import resources

pytestmark = pytest.mark.anyio


async def test_log_over_the_cap_shows_the_tail_after_a_note(tmp_path: Path):
    async with Runtime(Config(data_dir=str(tmp_path))) as rt:
        r = await rt.exec(command="yes 0123456789abcdef | head -c 1200000; echo END")
        text = resources.log_text(rt.engine, r["job_id"], cap=1024 * 1024)
        assert text.startswith(f"[... first {1200004 - 1024 * 1024} bytes omitted")
        assert text.endswith("END\n") and len(text.encode()) < 1024 * 1024 + 200
        with pytest.raises(ConchError):
            resources.read_resource(rt.engine, rt.registry, "conch://jobs/j_unknown/log")
        with pytest.raises(ConchError):
            resources.read_resource(rt.engine, rt.registry, "conch://elsewhere")


async def test_overview_fences_output_that_contains_backticks(tmp_path: Path):
    async with Runtime(Config(data_dir=str(tmp_path))) as rt:
        await rt.exec(command="printf '```\\nnot markdown\\n'", name="ticks")
        mime, text = resources.read_resource(rt.engine, rt.registry, resources.JOBS_URI)
    assert mime == "text/markdown"
    assert "````text\n```\nnot markdown\n````" in text
    assert "(ticks)" in text


def test_log_uri_round_trip():
    assert resources.parse_log_uri(resources.log_uri("j_1a2b")) == "j_1a2b"
    assert resources.parse_log_uri("conch://jobs") is None
    assert resources.parse_log_uri("conch://jobs/a/b/log") is None
