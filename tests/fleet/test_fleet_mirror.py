"""The fleet's mirrors of its nodes' jobs (conch.fleet.mirror), no cluster needed: which
reports are news, so that front ends hear of a change once."""

from __future__ import annotations

from typing import Any

from conch.fleet.mirror import Mirrors


def snap(version: int, **changes: Any) -> dict[str, Any]:
    base = {
        "job_id": "j_0a1b2c3d4e",
        "name": None,
        "mode": "command",
        "shell_id": None,
        "cwd": "/",
        "state": "running",
        "exit_code": None,
        "signal": None,
        "started_at": 0.0,
        "terminal": False,
        "streams": False,
        "duration_ms": 5,
        "version": version,
        "output_format": "text",
        "last_line": "",
        "input_state": (True, False),
    }
    return {**base, **changes}


def test_a_report_is_news_only_when_it_says_something_new() -> None:
    m = Mirrors(keep=10)
    assert m.update("j.n1", "n1", snap(1)) is True  # a job not heard of
    # the node reports the start the call's reply brought: only its running time grew
    assert m.update("j.n1", "n1", snap(1, duration_ms=40)) is False
    assert m.update("j.n1", "n1", snap(2, last_line="hello")) is True
    assert m.update("j.n1", "n1", snap(1)) is False  # overtaken by a newer one
    assert m.get("j.n1") is not None and m.get("j.n1").log.read(0, 100) == b"hello\n"  # type: ignore[union-attr]
    done = snap(3, state="exited", exit_code=0, terminal=True, last_line="hello")
    assert m.update("j.n1", "n1", done) is True
    assert m.get("j.n1").terminal  # type: ignore[union-attr]
