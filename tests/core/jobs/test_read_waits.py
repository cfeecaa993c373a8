"""docs/spec.md §6 / issue 21: the waits of `read` that cost no model turns: `quiet`, `input`, a
list of conditions, several jobs at once, and an unchanged job's result under 100 bytes."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

pytestmark = pytest.mark.anyio


@pytest.fixture
def rt_settings() -> dict[str, str]:
    """Results at Config's default detail (lean), as a model gets them."""
    return {"result_detail": "lean"}


def compact(r: dict[str, Any]) -> int:
    return len(json.dumps(r, separators=(",", ":"), ensure_ascii=False))


async def read(rt, **args: Any) -> tuple[dict[str, Any], float]:
    t = time.monotonic()
    r = await rt.call_tool("read", args)
    return r, time.monotonic() - t


async def test_quiet_returns_once_the_output_stops_and_not_before(rt):
    job = await rt.exec(
        command="for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.15; done; echo done; sleep 30",
        yield_ms=0,
    )
    r, took = await read(rt, job_id=job["job_id"], wait_ms=20000, until="quiet", quiet_ms=600)
    assert r["state"] == "running"
    # every tick came before the spell of quiet (the ticks are 150 ms apart, under 600)
    assert r["output"].splitlines() == [*(f"tick {i}" for i in range(1, 9)), "done"]
    assert 1.2 + 0.6 <= took < 15
    await rt.signal(job["job_id"], "kill")


async def test_quiet_holds_at_once_for_a_job_silent_long_enough(rt):
    job = await rt.exec(command="echo hi; sleep 30", yield_ms=300)
    r, took = await read(rt, job_id=job["job_id"], wait_ms=20000, until="quiet", quiet_ms=100)
    assert r["state"] == "running" and r["output"] == "" and took < 5
    await rt.signal(job["job_id"], "kill")


async def test_input_returns_when_a_pipe_job_blocks_reading_its_stdin(rt):
    job = await rt.exec(command="sleep 0.5; read x; echo got $x", stdin_open=True, yield_ms=0)
    assert "awaiting_input" not in job
    r, took = await read(rt, job_id=job["job_id"], wait_ms=20000, until="input")
    assert r["state"] == "running" and r["awaiting_input"] is True and took < 15
    w = await rt.write(job["job_id"], text="yes\n")
    r, _ = await read(rt, job_id=job["job_id"], wait_ms=20000, until="exit")
    assert r["state"] == "exited" and w["output"] + r["output"] == "got yes\n"


async def test_input_sees_a_password_prompt_on_a_terminal(rt):
    job = await rt.exec(
        command="sleep 0.3; python3 -c 'import getpass; getpass.getpass(\"pw: \")'",
        pty=True,
        yield_ms=0,
    )
    r, took = await read(rt, job_id=job["job_id"], wait_ms=20000, until="input")
    assert r["awaiting_input"] is True and r["awaiting_secret"] is True and took < 15
    assert "pw: " in r["output"]
    await rt.signal(job["job_id"], "kill")


@pytest.mark.parametrize(
    ("command", "options", "prompt"),
    [
        ("sleep 0.2; printf 'pw: '; stty -echo; read x", {"pty": True}, b"pw: "),
        ("sleep 0.2; printf 'name? '; read x", {"stdin_open": True}, b"name? "),
    ],
    ids=["terminal", "pipe"],
)
async def test_a_job_found_waiting_has_its_prompt_taken_first(rt, command, options, prompt):
    """The prompt a job printed before it blocked can still sit in the kernel (terminal master
    or pipe) when the wait sees the block; the state that says it waits takes it first. The
    event loop is held here (no await), so only that taking can bring it in."""
    job = await rt.exec(command=command, yield_ms=0, **options)
    live = rt.engine.jobs.get(job["job_id"])
    deadline = time.monotonic() + 15
    while not live.input_state()[0]:
        assert time.monotonic() < deadline, "the job never blocked reading its input"
        time.sleep(0.01)
    with open(live.log.path, "rb") as f:
        assert prompt in f.read()
    await rt.signal(job["job_id"], "kill")


async def test_a_list_of_conditions_ends_at_the_first_that_holds(rt):
    job = await rt.exec(command="sleep 0.3; echo no banner here; exit 4", yield_ms=0)
    r, took = await read(
        rt, job_id=job["job_id"], wait_ms=20000, until=[{"pattern": "^listening"}, "exit"]
    )
    assert r["state"] == "exited" and r["exit_code"] == 4 and took < 15
    assert r["output"] == "no banner here\n"
    job = await rt.exec(command="sleep 0.3; echo listening on 8000; sleep 30", yield_ms=0)
    r, _ = await read(
        rt, job_id=job["job_id"], wait_ms=20000, until=["exit", {"pattern": "^listening"}]
    )
    assert r["state"] == "running" and "listening on 8000" in r["output"]
    await rt.signal(job["job_id"], "kill")


async def test_every_wait_ends_when_the_job_ends(rt):
    for until in ("quiet", "input", {"pattern": "never printed"}, "change"):
        job = await rt.exec(command="sleep 0.3", yield_ms=0)  # no output: no `change`
        r, took = await read(rt, job_id=job["job_id"], wait_ms=20000, until=until, quiet_ms=60000)
        assert r["state"] == "exited" and took < 15, until


async def test_several_jobs_return_the_first_ready_and_move_only_its_cursor(rt):
    slow = await rt.exec(command="echo slow started; sleep 30", yield_ms=200)
    fast = await rt.exec(command="echo fast started; sleep 0.5; echo fast done", yield_ms=200)
    watcher = await rt.exec(command="echo watching; sleep 30", yield_ms=200)
    ids = [slow["job_id"], fast["job_id"], watcher["job_id"]]
    r, took = await read(rt, job_ids=ids, wait_ms=20000, until="exit")
    assert r["job_id"] == fast["job_id"] and r["state"] == "exited" and took < 15
    assert r["output"] == "fast done\n"
    # the others' cursors did not move: their next read starts where theirs stopped
    r = await rt.call_tool("read", {"job_id": slow["job_id"]})
    assert r["output"] == "" and r["next_cursor"] == len("slow started\n")
    for job_id in (slow["job_id"], watcher["job_id"]):
        await rt.signal(job_id, "kill")


async def test_several_jobs_with_none_ready_give_the_first_listed(rt):
    a = await rt.exec(command="sleep 30", yield_ms=0)
    b = await rt.exec(command="sleep 30", yield_ms=0)
    r, took = await read(rt, job_ids=[b["job_id"], a["job_id"]], wait_ms=400, until="exit")
    assert r["job_id"] == b["job_id"] and r["state"] == "running" and took >= 0.35
    for job in (a, b):
        await rt.signal(job["job_id"], "kill")


async def test_several_jobs_by_new_output(rt):
    a = await rt.exec(command="sleep 30", yield_ms=0)
    b = await rt.exec(command="sleep 0.4; echo from b; sleep 30", yield_ms=0)
    r, took = await read(rt, job_ids=[a["job_id"], b["job_id"]], wait_ms=20000)
    assert r["job_id"] == b["job_id"] and r["output"] == "from b\n" and took < 15
    for job in (a, b):
        await rt.signal(job["job_id"], "kill")


async def test_an_unchanged_job_costs_under_100_bytes_and_repeats_nothing(rt):
    job = await rt.exec(
        command="head -c 3000000 /dev/zero | tr '\\0' x; echo; sleep 30",
        name="big-builder",
        yield_ms=3000,
        max_output_bytes=1000,
    )
    assert job["name"] == "big-builder"  # said by exec (and list), not again by every read
    first = await rt.call_tool("read", {"job_id": job["job_id"], "tail": True, "max_bytes": 10})
    assert "name" not in first
    assert first["next_cursor"] >= 3_000_001
    again, _ = await read(rt, job_id=job["job_id"], wait_ms=200)
    assert again["output"] == "" and again["state"] == "running"
    assert compact(again) <= 100, (compact(again), again)
    again, _ = await read(rt, job_id=job["job_id"])
    assert again["output"] == "" and compact(again) <= 100
    await rt.signal(job["job_id"], "kill")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({}, "job_id"),
        ({"job_id": "j_1", "job_ids": ["j_2"]}, "job_id"),
        ({"job_ids": []}, "job_ids"),
        ({"job_ids": ["j_1", "j_1"]}, "job_ids"),
        ({"job_ids": ["j_1"], "cursor": 0}, "cursor"),
        ({"job_id": "j_1", "until": []}, "until"),
        ({"job_id": "j_1", "until": ["exit", "soon"]}, "until"),
        ({"job_id": "j_1", "until": [{"pattern": "a"}, {"pattern": "b"}]}, "until"),
        ({"job_id": "j_1", "until": "quiet", "quiet_ms": 5}, "quiet_ms"),
        ({"job_id": "j_1", "quiet_ms": 120001}, "quiet_ms"),
        ({"job_id": "j_1", "until": [{"pattern": "(?<=a)b"}]}, "until"),
    ],
)
async def test_bad_waits_are_refused_before_anything_waits(rt, args, field):
    r = await rt.call_tool("read", args)
    assert r["error"]["code"] == "invalid_argument", r
    assert field.split(".")[0] in r["error"]["message"] or field == "until", r


async def test_an_unknown_job_among_several_is_not_found(rt):
    a = await rt.exec(command="true")
    r = await rt.call_tool("read", {"job_ids": [a["job_id"], "j_0000000000"], "wait_ms": 100})
    assert r["error"]["code"] == "not_found" and "j_0000000000" in r["error"]["message"]
