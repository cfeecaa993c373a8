"""The environment a job gets (core/env.py, docs/spec.md §2 "Environment"): Conch's own secrets are
never inherited."""

from __future__ import annotations

import asyncio
import os

import conch


def test_secrets_are_not_inherited(tmp_path, monkeypatch):
    monkeypatch.setenv("SOME_COPY", "tok-123")

    async def main() -> str:
        cfg = conch.Config(result_detail="full", data_dir=str(tmp_path / "d"), auth_token="tok-123")
        async with conch.Runtime(cfg) as rt:
            r = await rt.exec(command="env")
            return r["output"]

    out = asyncio.run(main())
    assert "tok-123" not in out
    assert os.environ["SOME_COPY"] == "tok-123"
