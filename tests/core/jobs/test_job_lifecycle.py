"""docs/spec.md §2: the job model, yield vs deadline, completion, process hygiene."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time

import psutil
import pytest

import conch
from conch import ConchError

pytestmark = pytest.mark.anyio


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def wait_gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        await asyncio.sleep(0.02)
    return gone(pid)


async def test_job_ids_are_random_and_not_pids(rt):
    a = await rt.exec(command="true")
    b = await rt.exec(command="true")
    assert re.match(r"^j_[0-9a-f]{10}$", a["job_id"]) and a["job_id"] != b["job_id"]
    assert str(a["pid"]) not in a["job_id"]


async def test_yield_returns_running_and_job_continues(rt):
    r = await rt.exec(command="echo start; sleep 0.5; echo end", yield_ms=100)
    assert r["state"] == "running" and r["output"] == "start\n" and r["exit_code"] is None
    done = await rt.read(r["job_id"], wait_ms=5000, until="exit")
    assert done["state"] == "exited" and done["output"] == "end\n" and done["eof"]


async def test_polling_never_reruns_the_command(rt, tmp_path):
    counter = tmp_path / "count"
    r = await rt.exec(command=f"echo x >> {counter}; sleep 0.3", yield_ms=0)
    for _ in range(5):
        await rt.read(r["job_id"], wait_ms=100)
    await rt.read(r["job_id"], wait_ms=3000, until="exit")
    await rt.read(r["job_id"])
    assert counter.read_text() == "x\n"


async def test_finished_results_never_change(rt):
    r = await rt.exec(command="echo hi; exit 7")
    await asyncio.sleep(0.2)
    a = await rt.read(r["job_id"], cursor=0)
    await asyncio.sleep(0.2)
    b = await rt.read(r["job_id"], cursor=0)
    for k in ("state", "exit_code", "duration_ms", "output", "total_bytes", "started_at", "ok"):
        assert a[k] == b[k] == r[k], k


async def test_deadline_kills_tree_and_reports_timed_out(rt):
    r = await rt.exec(command="echo before; sleep 30", timeout_ms=300, yield_ms=10000)
    assert r["state"] == "timed_out" and r["output"] == "before\n"
    assert r["duration_ms"] < 3000


async def test_yield_and_deadline_are_independent(rt):
    r = await rt.exec(command="sleep 0.6; echo done", yield_ms=50, timeout_ms=10000)
    assert r["state"] == "running"
    r = await rt.read(r["job_id"], wait_ms=5000, until="exit")
    assert r["state"] == "exited" and r["output"] == "done\n"


async def test_term_ignoring_grandchild_gone_after_deadline(rt):
    r = await rt.exec(
        command="trap 'exit 0' TERM; bash -c 'trap \"\" TERM; echo $$; sleep 30' & wait",
        timeout_ms=1500,  # (300 ms was before the grandchild printed its pid, under load)
        yield_ms=10000,
    )
    assert r["state"] == "timed_out"
    gpid = int(r["output"].split()[0])
    # TERM-ignoring: gone within kill_grace_ms (2 s) + 1 s, reaped (ESRCH)
    assert await wait_gone(gpid, 3.5)


async def test_setsid_daemon_gone_after_signal(rt):
    r = await rt.exec(
        command="setsid bash -c 'trap \"\" TERM HUP; echo $$; exec sleep 30' </dev/null & sleep 30",
        yield_ms=500,
    )
    pid = int(r["output"].split()[0])
    assert not gone(pid)
    s = await rt.signal(r["job_id"], "terminate", wait_ms=5000)
    assert s["state"] == "cancelled"
    assert await wait_gone(pid, 3.5)


async def test_double_forked_escapee_gone_after_kill(rt):
    r = await rt.exec(command="(setsid sh -c 'sleep 30 & echo $!' &) ; sleep 30", yield_ms=500)
    pid = int(r["output"].split()[0])
    await rt.signal(r["job_id"], "kill", wait_ms=5000)
    assert await wait_gone(pid, 2.5)


async def test_grandchild_holding_pipe_does_not_delay_result(rt):
    t0 = time.monotonic()
    r = await rt.exec(command="(sleep 5; echo late) & echo early", yield_ms=10000)
    assert time.monotonic() - t0 < 1.0
    assert r["state"] == "exited" and r["exit_code"] == 0 and r["output"] == "early\n"
    assert len(r["lingering_pids"]) >= 1
    assert r["eof"] is False  # the pipe is still held: more output may come
    s = await rt.signal(r["job_id"], "terminate", wait_ms=3000)
    assert s["state"] == "exited"  # terminal states never change
    for pid in r["lingering_pids"]:
        assert await wait_gone(pid, 3.5)


async def test_lingering_output_still_reaches_the_log(rt):
    r = await rt.exec(command="(sleep 0.3; echo late) & echo early")
    assert r["output"] == "early\n"
    r2 = await rt.read(r["job_id"], wait_ms=5000)
    assert r2["output"] == "late\n"
    r3 = await rt.read(r["job_id"], wait_ms=2000)
    assert r3["eof"] is True and r3["output"] == ""


async def test_signal_interrupt_cancels(rt):
    r = await rt.exec(command="sleep 30", yield_ms=100)
    s = await rt.signal(r["job_id"], "interrupt", wait_ms=3000)
    assert s["state"] == "cancelled" and s["signal"] == "SIGINT"


async def test_signal_stop_and_continue(rt):
    r = await rt.exec(command="sleep 0.5; echo ok", yield_ms=50)
    await rt.signal(r["job_id"], "stop", wait_ms=0)
    p = psutil.Process(r["pid"])
    await asyncio.sleep(0.1)
    assert p.status() == psutil.STATUS_STOPPED
    await rt.signal(r["job_id"], "continue", wait_ms=0)
    done = await rt.read(r["job_id"], wait_ms=5000, until="exit")
    assert done["state"] == "exited" and done["exit_code"] == 0


async def test_kill_of_stopped_tree_works(rt):
    r = await rt.exec(command="trap '' TERM; sleep 30", yield_ms=100)
    await rt.signal(r["job_id"], "stop", wait_ms=0)
    t0 = time.monotonic()
    s = await rt.signal(r["job_id"], "terminate", wait_ms=5000)
    assert s["state"] == "cancelled" and time.monotonic() - t0 < 3.5


async def test_unknown_job_is_not_found(rt):
    with pytest.raises(ConchError) as e:
        await rt.read("j_0000000000")
    assert e.value.code == "not_found"


async def test_names_address_jobs_and_are_unique_among_live_jobs(rt):
    r = await rt.exec(command="sleep 5", name="web", yield_ms=0)
    got = await rt.read("web")
    assert got["job_id"] == r["job_id"] and got["name"] == "web"
    with pytest.raises(ConchError) as e:
        await rt.exec(command="true", name="web")
    assert e.value.code == "invalid_argument"
    await rt.signal("web", "kill")
    again = await rt.exec(command="echo second", name="web")
    assert (await rt.read("web", cursor=0))["job_id"] == again["job_id"]


async def test_admission_is_busy_never_queued(tmp_path):
    async with conch.Runtime(
        conch.Config(result_detail="full", data_dir=str(tmp_path / "d"), max_running=2)
    ) as rt:
        a = await rt.exec(command="sleep 5", yield_ms=0)
        b = await rt.exec(command="sleep 5", yield_ms=0)
        with pytest.raises(ConchError) as e:
            await rt.exec(command="true")
        assert e.value.code == "busy" and e.value.retryable
        await rt.signal(a["job_id"], "kill")
        r = await rt.exec(command="echo ok")
        assert r["output"] == "ok\n"
        await rt.signal(b["job_id"], "kill")


async def test_retention_and_eviction(tmp_path):
    cfg = conch.Config(
        result_detail="full", data_dir=str(tmp_path / "d"), max_jobs=3, retention_s=3600
    )
    async with conch.Runtime(cfg) as rt:
        ids = [(await rt.exec(command=f"echo {i}"))["job_id"] for i in range(5)]
        with pytest.raises(ConchError):
            await rt.read(ids[0])
        assert (await rt.read(ids[-1], cursor=0))["output"] == "4\n"
        assert len((await rt.list())["jobs"]) == 3
    cfg = conch.Config(result_detail="full", data_dir=str(tmp_path / "e"), retention_s=0)
    async with conch.Runtime(cfg) as rt:
        r = await rt.exec(command="echo x")
        with pytest.raises(ConchError) as e:
            await rt.read(r["job_id"])
        assert e.value.code == "not_found"
        log = r["log_path"]
        assert not os.path.exists(log)


async def test_running_jobs_are_never_evicted(tmp_path):
    cfg = conch.Config(
        result_detail="full", data_dir=str(tmp_path / "d"), max_jobs=1, retention_s=0
    )
    async with conch.Runtime(cfg) as rt:
        a = await rt.exec(command="sleep 5", yield_ms=0)
        await rt.exec(command="true")
        await rt.exec(command="true")
        assert (await rt.read(a["job_id"]))["state"] == "running"
        await rt.signal(a["job_id"], "kill")


async def test_shutdown_with_running_jobs_leaves_nothing(tmp_path):
    rt = conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path / "d")))
    await rt.start()
    pids = []
    for cmd in (
        "sleep 30",
        "trap '' TERM; sleep 30",
        "setsid sleep 30 & sleep 30",
        "(sleep 30 &) ; echo forked",
    ):
        r = await rt.exec(command=cmd, yield_ms=200)
        pids.append(r["pid"])
    await rt.exec(command="(sleep 30; echo late) & echo early")
    t0 = time.monotonic()
    await rt.aclose()
    assert time.monotonic() - t0 < 3.0
    assert psutil.Process().children(recursive=True) == []
    assert os.listdir(tmp_path / "d" / "tmp") == []


async def test_shutdown_of_term_ignoring_shells_pipes_and_ptys_stays_bounded(tmp_path):
    # every owner has a tree that ignores TERM and a grace far longer than shutdown may take
    rt = conch.Runtime(
        conch.Config(result_detail="full", data_dir=str(tmp_path / "d"), kill_grace_ms=30_000)
    )
    await rt.start()
    stubborn = "trap '' TERM; sleep 30"
    sid = (await rt.shell_open())["shell_id"]
    jobs = [
        await rt.exec(shell_id=sid, command=stubborn, yield_ms=200),
        await rt.exec(command=stubborn, yield_ms=200),
        await rt.exec(command=stubborn, pty=True, yield_ms=200),
    ]
    done = await rt.exec(command="exit 4")
    t0 = time.monotonic()
    await rt.aclose()
    assert time.monotonic() - t0 < 3.0
    assert psutil.Process().children(recursive=True) == []
    states = {j.job_id: j.state for j in rt.engine.jobs}
    assert [states[j["job_id"]] for j in jobs] == ["cancelled"] * 3
    assert states[done["job_id"]] == "exited"  # a finished job keeps how it ended


async def test_a_job_ending_while_shells_close_keeps_its_own_end(tmp_path):
    # the job has the shell's grace, less 0.2 s, to see its gate and exit: the default 2 s was
    # too short for it on the loaded box of the whole suite (the close killed it first)
    cfg = conch.Config(result_detail="full", data_dir=str(tmp_path / "d"), kill_grace_ms=5000)
    rt = conch.Runtime(cfg)
    await rt.start()
    gate = tmp_path / "gate"
    closing = None
    try:
        sid = (await rt.shell_open())["shell_id"]
        cmd = "trap '' TERM HUP; echo set; sleep 30"  # closing the shell takes its grace
        assert (await rt.exec(shell_id=sid, command=cmd, ready={"pattern": "set"}))["ready"]
        # the job ends only once the gate exists, opened after the close has begun (a fixed
        # 0.1 s let it end before its own ready answer on a loaded box)
        wait = f"while [ ! -e {gate} ]; do sleep 0.01; done"
        r = await rt.exec(command=f"echo up; {wait}; exit 5", ready={"pattern": "up"})
        assert r["state"] == "running"
        closing = asyncio.ensure_future(rt.aclose())
        await asyncio.sleep(0.2)  # inside the shell's grace
        assert not closing.done()
        gate.touch()
        job = next(j for j in rt.engine.jobs if j.job_id == r["job_id"])
        while not job.terminal and not closing.done():  # it ends while the shell still closes
            await asyncio.sleep(0.01)
        assert not closing.done(), "the close ended before the job saw its gate"
        await closing
    finally:
        gate.touch()
        await (closing if closing is not None else rt.aclose())
    job = next(j for j in rt.engine.jobs if j.job_id == r["job_id"])
    # the shells close first; a pipe job that ends meanwhile is not counted as cancelled
    assert (job.state, job.exit_code) == ("exited", 5)


async def test_shutdown_kills_whatever_carries_the_instance_tag(tmp_path):
    rt = conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path / "d")))
    await rt.start()
    # a process no driver or shell owns, tagged as this runtime's (what rg or a runaway is)
    env = {**os.environ, "CONCH_TAG": f"{rt.engine.instance}/nobody"}
    stray = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
    try:
        await rt.aclose()
        assert await wait_gone(stray.pid, 1)
    finally:
        stray.kill()
        stray.wait()


async def test_calls_after_close_raise_and_close_is_idempotent(tmp_path):
    rt = conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path / "d")))
    await rt.start()
    await asyncio.gather(rt.aclose(), rt.aclose())
    await rt.aclose()
    with pytest.raises(conch.RuntimeClosedError, match="closed"):
        await rt.exec(command="true")
    assert (await rt.call_tool("info", {}))["error"]["code"] == "closed"


async def test_aclose_completes_when_cancelled(tmp_path):
    rt = conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path / "d")))
    await rt.start()
    await rt.exec(command="trap '' TERM; sleep 30", yield_ms=100)
    task = asyncio.ensure_future(rt.aclose())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await rt.aclose()
    assert psutil.Process().children(recursive=True) == []


async def test_ids_from_one_runtime_are_unknown_to_another(tmp_path):
    async with (
        conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path / "a"))) as a,
        conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path / "b"))) as b,
    ):
        r = await a.exec(command="true")
        with pytest.raises(ConchError):
            await b.read(r["job_id"])


async def test_exec_cancelled_by_caller_kills_its_job(rt):
    task = asyncio.ensure_future(rt.exec(command="echo $$; sleep 30", yield_ms=60000))
    await asyncio.sleep(0.3)
    job = list(rt.engine.jobs)[-1]
    pid = job.pid
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert job.state == "cancelled"
    assert await wait_gone(pid, 2)


async def test_runtime_does_not_block_the_event_loop(rt):
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    t = asyncio.ensure_future(ticker())
    await rt.exec(command="sleep 0.5")
    t.cancel()
    assert ticks > 20


async def test_shutdown_time_does_not_grow_with_retained_jobs(tmp_path):
    rt = conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path / "d")))
    await rt.start()
    for _ in range(300):
        await rt.exec(argv=["true"])
    await rt.exec(command="sleep 30", yield_ms=0)
    await rt.exec(command="(sleep 30 &); echo bg")
    t0 = time.monotonic()
    await rt.aclose()
    assert time.monotonic() - t0 < 1.5
    assert psutil.Process().children(recursive=True) == []


async def test_runtime_starts_on_first_use_without_async_with(tmp_path):
    rt = conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path / "d")))
    try:
        r = await rt.exec(command="echo lazy")
        assert r["output"] == "lazy\n"
        assert (await rt.call_tool("info", {}))["containment"]
    finally:
        await rt.aclose()


async def test_concurrent_first_calls_start_the_runtime_once(tmp_path):
    rt = conch.Runtime(conch.Config(result_detail="full", data_dir=str(tmp_path / "d")))
    try:
        a, b, s = await asyncio.gather(
            rt.exec(command="echo a"),
            rt.exec(command="echo b"),
            rt.search(pattern="nothing-here-xyz", path=str(tmp_path)),
        )
        assert (a["output"], b["output"], s["matches"]) == ("a\n", "b\n", [])
    finally:
        await rt.aclose()


async def test_signal_kill_is_sigkill_at_once(rt):
    r = await rt.exec(command="trap 'echo got-term' TERM; sleep 30 & wait", yield_ms=200)
    s = await rt.signal(r["job_id"], "kill", wait_ms=3000)
    assert s["state"] == "cancelled" and s["signal"] == "SIGKILL"
    assert "got-term" not in s["output"]  # no TERM came first
