"""One-shot jobs on a pseudo-terminal: `exec {pty: true}` (docs/spec.md §3, §4 "Awaiting input")."""

from __future__ import annotations

import sys
import time
from typing import Any

import psutil
import pytest
from job_ends import until_exit

import conch

pytestmark = pytest.mark.anyio


@pytest.fixture
def rt_settings() -> dict[str, Any]:
    # these tests read every snapshot field: full detail (lean results: test_lean_results.py)
    return {"default_cwd": ""}


async def pty(rt: conch.Runtime, **args: Any) -> dict[str, Any]:
    r = await rt.call_tool("exec", {"pty": True, **args})
    assert "error" not in r, r
    return r


async def test_python_repl_driven_with_write_and_eof(rt: conch.Runtime) -> None:
    r = await pty(rt, argv=[sys.executable, "-i", "-q"], yield_ms=1000)
    assert r["mode"] == "pty" and r["state"] == "running"
    assert r["output"].endswith(">>> ") and r["awaiting_input"]
    assert not r["awaiting_secret"]
    w = await rt.call_tool("write", {"job_id": r["job_id"], "text": "print(6 * 7)\n"})
    assert "42\n" in w["output"] and "\r" not in w["output"]
    # (a write returns once the output has settled, 50 ms quiet: the interpreter's exit after
    # its last newline may come later on a loaded box, so the end is waited for)
    w = await rt.call_tool("write", {"job_id": r["job_id"], "eof": True})
    w = await until_exit(rt, w)
    assert w["state"] == "exited" and w["exit_code"] == 0


async def test_password_prompt_is_awaiting_secret(rt: conch.Runtime) -> None:
    r = await pty(rt, command="read -s -p 'Password: ' pw; echo; echo got:$pw", yield_ms=300)
    assert r["output"] == "Password: "
    assert r["awaiting_input"] and r["awaiting_secret"]
    w = await rt.call_tool("write", {"job_id": r["job_id"], "text": "s3cret\n"})
    w = await until_exit(rt, w)
    assert w["state"] == "exited" and w["output"].endswith("got:s3cret\n")
    assert "s3cret\n" not in w["output"].replace("got:s3cret\n", "")


async def test_getpass_reading_dev_tty_is_awaiting_secret(rt: conch.Runtime) -> None:
    code = "import getpass; print('got:' + getpass.getpass('Secret: '))"
    r = await pty(rt, argv=[sys.executable, "-c", code], yield_ms=1000)
    assert r["output"] == "Secret: "
    assert r["awaiting_input"] and r["awaiting_secret"]  # getpass reads /dev/tty, not fd 0
    w = await rt.call_tool("write", {"job_id": r["job_id"], "text": "s3\n"})
    w = await until_exit(rt, w)
    assert w["state"] == "exited" and "got:s3" in w["output"]


async def test_stdin_string_is_typed_at_start(rt: conch.Runtime) -> None:
    r = await pty(rt, command="read -r v; echo got:$v", stdin="abc\n")
    assert r["state"] == "exited" and r["output"].endswith("got:abc\n")


async def test_script_runs_on_a_terminal(rt: conch.Runtime) -> None:
    r = await pty(rt, script="test -t 1 && echo tty\necho $TERM")
    assert r["mode"] == "pty" and r["output"] == "tty\nxterm-256color\n"


async def test_interrupt_ends_a_pty_job(rt: conch.Runtime) -> None:
    r = await pty(rt, command="sleep 30", yield_ms=100)
    assert not r["awaiting_input"]
    s = await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "interrupt"})
    assert s["state"] == "cancelled" and s["signal"] == "SIGINT"


async def test_terminate_of_a_term_ignoring_pty_job(tmp_path: Any) -> None:
    cfg = conch.Config(result_detail="full", data_dir=str(tmp_path / "data"), kill_grace_ms=300)
    async with conch.Runtime(cfg) as rt:
        r = await pty(rt, command="trap '' TERM INT; sleep 30", yield_ms=100)
        t0 = time.monotonic()
        s = await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "terminate"})
        assert s["state"] == "cancelled" and time.monotonic() - t0 < 1.5
    assert psutil.Process().children(recursive=True) == []


async def test_deadline_kills_a_pty_job(rt: conch.Runtime) -> None:
    t0 = time.monotonic()
    r = await pty(rt, command="sleep 30", timeout_ms=200, yield_ms=5000)
    assert r["state"] == "timed_out" and time.monotonic() - t0 < 3


async def test_missing_program_is_spawn_failed(rt: conch.Runtime) -> None:
    r = await rt.call_tool("exec", {"argv": ["/no/such/program"], "pty": True})
    assert r["error"]["code"] == "spawn_failed"


@pytest.mark.anyio
async def test_pty_stdin_without_stdin_open_ends_with_eof(tmp_path):
    import conch

    async with conch.Runtime(
        conch.Config(result_detail="full", data_dir=str(tmp_path / "d"))
    ) as rt:
        r = await rt.exec(
            command="cat >/dev/null; echo done", pty=True, stdin="a\nb", yield_ms=5000
        )
        assert r["state"] == "exited" and r["output"].endswith("done\n")
        r = await rt.exec(
            command="read -r x; echo got:$x", pty=True, stdin="hi\n", stdin_open=True, yield_ms=5000
        )
        assert r["state"] == "exited" and "got:hi" in r["output"]
