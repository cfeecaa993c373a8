"""Persistent shells (docs/spec.md §4), through the tool layer, on real bash and zsh."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import psutil
import pytest
from job_ends import until_exit

import conch

ZSH = pytest.param("zsh", marks=pytest.mark.needs("zsh"))
KINDS = ["bash", ZSH]


@pytest.fixture
def rt_settings() -> dict[str, Any]:
    # these tests read every snapshot field: full detail (lean results: test_lean_results.py)
    return {"default_cwd": ""}


async def open_shell(rt: conch.Runtime, kind: str = "bash", **kw: Any) -> str:
    r = await rt.call_tool("shell_open", {"shell": kind, **kw})
    assert "error" not in r, r
    assert r["shell"] == kind and r["state"] == "ready" and r["version"]
    return str(r["shell_id"])


async def run(rt: conch.Runtime, sid: str, command: str, **kw: Any) -> dict[str, Any]:
    r = await rt.call_tool("exec", {"shell_id": sid, "command": command, **kw})
    assert "error" not in r, r
    return r


def tagged(shell_id: str) -> list[int]:
    out = []
    for p in psutil.process_iter():
        try:
            if shell_id in p.environ().get("CONCH_TAG", ""):
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", KINDS)
async def test_cwd_env_and_functions_persist(rt: conch.Runtime, kind: str, tmp_path: Any) -> None:
    sid = await open_shell(rt, kind)
    r = await run(rt, sid, f"cd {tmp_path} && export X=42 && greet() {{ echo hi $1; }}")
    assert r["state"] == "exited" and r["exit_code"] == 0 and r["mode"] == "shell"
    assert r["shell_id"] == sid and r["cwd"] == str(tmp_path)
    r = await run(rt, sid, "echo $X; pwd; greet you")
    assert r["output"] == f"42\n{tmp_path}\nhi you\n"


@pytest.mark.parametrize("kind", KINDS)
async def test_output_is_exactly_what_the_command_printed(rt: conch.Runtime, kind: str) -> None:
    sid = await open_shell(rt, kind)
    r = await run(rt, sid, "echo hi; printf 'no newline'")
    assert r["output"] == "hi\nno newline"
    raw = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0, "raw": True})
    assert raw["output"] == "hi\nno newline"  # no echo, prompt, marker, \r or paste noise


@pytest.mark.parametrize("kind", KINDS)
async def test_fake_marker_and_prompt_do_not_end_the_job(rt: conch.Runtime, kind: str) -> None:
    sid = await open_shell(rt, kind)
    fake = "printf '\\036%s:%s:0\\037' \"$__conch_t\" 0123456789ab; printf 'user@host:~$ '"
    t0 = time.monotonic()
    r = await run(rt, sid, f"{fake}; sleep 0.3; (exit 7)")
    assert time.monotonic() - t0 >= 0.3
    assert r["state"] == "exited" and r["exit_code"] == 7
    assert r["output"].endswith("user@host:~$ ")


@pytest.mark.parametrize("kind", KINDS)
async def test_interrupt_stops_the_rest_of_the_command_line(
    rt: conch.Runtime, kind: str, tmp_path: Any
) -> None:
    sid = await open_shell(rt, kind, cwd=str(tmp_path))
    await run(rt, sid, "export KEEP=yes")
    r = await run(rt, sid, "echo a; sleep 30; echo b", yield_ms=200)
    assert r["state"] == "running"
    t0 = time.monotonic()
    s = await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "interrupt"})
    assert time.monotonic() - t0 < 2
    assert s["state"] == "cancelled"
    await asyncio.sleep(0.1)
    full = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0})
    assert "b" not in full["output"].replace("\n", "").replace("a", "", 1)
    r = await run(rt, sid, "echo $KEEP; pwd")
    assert r["output"] == f"yes\n{tmp_path}\n"


@pytest.mark.parametrize("signal", ["terminate", "kill"])
async def test_terminate_and_kill_stop_a_term_ignoring_command_line(
    rt: conch.Runtime, signal: str
) -> None:
    sid = await open_shell(rt)
    await run(rt, sid, "export KEEP=1")
    r = await run(rt, sid, "trap '' TERM; echo a; sleep 30; echo b", yield_ms=200)
    t0 = time.monotonic()
    s = await rt.call_tool("signal", {"job_id": r["job_id"], "signal": signal})
    assert s["state"] == "cancelled" and time.monotonic() - t0 < 2
    full = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0})
    assert full["output"].strip() == "a"
    assert (await run(rt, sid, "echo $KEEP"))["output"] == "1\n"


async def test_kill_of_a_command_ignoring_int_and_term(rt: conch.Runtime) -> None:
    sid = await open_shell(rt)
    await run(rt, sid, "cd /tmp; export KEEP=1")
    cmd = (
        "python3 -c 'import signal,time; signal.signal(2, 1); signal.signal(15, 1); "
        'print("up", flush=True); time.sleep(30)\'; echo after'
    )
    r = await run(rt, sid, cmd, yield_ms=3000, ready={"pattern": "up"})
    t0 = time.monotonic()
    s = await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "terminate"})
    assert s["state"] == "cancelled" and time.monotonic() - t0 < 2.5
    r = await run(rt, sid, "pwd; echo ${KEEP-gone}")
    assert r["output"] in ("/tmp\n1\n", "/tmp\ngone\n")  # restarted shells say so
    assert r["restarted"] == (r["output"] == "/tmp\ngone\n") or s["restarted"]


@pytest.mark.parametrize("kind", KINDS)
async def test_heredoc_quotes_and_multiline(rt: conch.Runtime, kind: str) -> None:
    sid = await open_shell(rt, kind)
    cmd = "cat <<'EOF'\nline 'one' \"two\" $HOME\n\tthree\nEOF\nfor i in 1 2; do\n  echo $i\ndone"
    r = await run(rt, sid, cmd)
    assert r["output"] == "line 'one' \"two\" $HOME\n\tthree\n1\n2\n"
    assert r["exit_code"] == 0


async def test_syntax_error_exits_2(rt: conch.Runtime) -> None:
    sid = await open_shell(rt)
    r = await run(rt, sid, "if then fi")
    assert r["state"] == "exited" and r["exit_code"] == 2 and "syntax error" in r["output"]
    assert (await run(rt, sid, "echo ok"))["output"] == "ok\n"


async def test_set_euo_pipefail_keeps_the_machinery(rt: conch.Runtime, tmp_path: Any) -> None:
    sid = await open_shell(rt, cwd=str(tmp_path))
    r = await run(rt, sid, "set -euo pipefail; echo ok")
    assert r["output"] == "ok\n" and r["exit_code"] == 0
    r = await run(rt, sid, "true | true; echo still")
    assert r["output"] == "still\n"
    r = await run(rt, sid, "false")  # set -e makes the interactive shell exit
    assert r["state"] == "exited" and r["exit_code"] == 1
    r = await run(rt, sid, "pwd")
    assert r["restarted"] is True and r["output"] == f"{tmp_path}\n"


@pytest.mark.parametrize("kind", KINDS)
async def test_command_reading_stdin_gets_written_text(rt: conch.Runtime, kind: str) -> None:
    sid = await open_shell(rt, kind)
    r = await run(rt, sid, "read -r v; echo got:$v", yield_ms=300)
    assert r["state"] == "running" and r["awaiting_input"] and not r["awaiting_secret"]
    w = await until_exit(
        rt, await rt.call_tool("write", {"job_id": r["job_id"], "text": "héllo\n"})
    )
    assert w["state"] == "exited" and w["output"].endswith("got:héllo\n")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_shell_opened_without_echo_never_shows_written_text(
    rt: conch.Runtime, kind: str
) -> None:
    r = await rt.shell_open(shell=kind, echo=False)
    sid = r["shell_id"]
    r = await run(rt, sid, "read -r v; echo got:$v", yield_ms=300)
    assert r["state"] == "running"
    w = await until_exit(
        rt, await rt.call_tool("write", {"job_id": r["job_id"], "text": "héllo\n"})
    )
    assert w["state"] == "exited" and w["output"] == "got:héllo\n"
    r = await run(rt, sid, "cat", yield_ms=200)  # still off for the next command
    w = await rt.call_tool("write", {"job_id": r["job_id"], "text": "abc\n", "eof": True})
    assert w["output"] == "abc\n"


async def test_a_shell_can_be_opened_with_another_terminal_size(rt: conch.Runtime) -> None:
    default = await run(rt, await open_shell(rt), "stty size")
    assert default["output"] == "50 200\n"
    sid = (await rt.shell_open(size=(24, 80)))["shell_id"]
    assert (await run(rt, sid, "stty size"))["output"] == "24 80\n"
    with pytest.raises(conch.ConchError):
        await rt.shell_open(size=(0, 80))


async def test_read_s_reports_awaiting_secret(rt: conch.Runtime) -> None:
    sid = await open_shell(rt)
    r = await run(rt, sid, "read -s pw; echo got:$pw", yield_ms=300)
    assert r["awaiting_input"] and r["awaiting_secret"]
    w = await rt.call_tool("write", {"job_id": r["job_id"], "text": "hunter2\n"})
    assert w["output"] == "got:hunter2\n"


async def test_sleeping_command_is_not_awaiting_input(rt: conch.Runtime) -> None:
    sid = await open_shell(rt)
    r = await run(rt, sid, "sleep 5", yield_ms=200)
    assert r["state"] == "running" and not r["awaiting_input"]
    await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "interrupt"})


@pytest.mark.parametrize("kind", KINDS)
async def test_exit_n_reports_n_and_next_exec_restarts_in_last_cwd(
    rt: conch.Runtime, kind: str, tmp_path: Any
) -> None:
    sid = await open_shell(rt, kind)
    await run(rt, sid, f"cd {tmp_path}")
    r = await run(rt, sid, "exit 3")
    assert r["state"] == "exited" and r["exit_code"] == 3 and r["output"] == ""
    listed = (await rt.call_tool("list", {}))["shells"]
    assert [s["state"] for s in listed if s["shell_id"] == sid] == ["exited"]
    r = await run(rt, sid, "pwd")
    assert r["restarted"] is True and r["output"] == f"{tmp_path}\n"
    assert (await run(rt, sid, "true"))["restarted"] is False


@pytest.mark.parametrize("kind", KINDS)
async def test_deadline_interrupts_and_keeps_the_shell(rt: conch.Runtime, kind: str) -> None:
    sid = await open_shell(rt, kind)
    await run(rt, sid, "cd /tmp && export X=7")
    t0 = time.monotonic()
    r = await run(rt, sid, "sleep 30; echo never", timeout_ms=300, yield_ms=5000)
    assert r["state"] == "timed_out" and time.monotonic() - t0 < 2
    assert "never" not in r["output"]
    r = await run(rt, sid, "echo $X; pwd")
    assert r["output"] == "7\n/tmp\n" and r["restarted"] is False


async def test_deadline_on_an_unstoppable_shell_restarts_it(rt: conch.Runtime) -> None:
    sid = await open_shell(rt, cwd="/tmp")
    t0 = time.monotonic()
    r = await run(rt, sid, "trap '' INT TERM; while :; do :; done", timeout_ms=300, yield_ms=5000)
    assert r["state"] == "timed_out" and time.monotonic() - t0 < 3
    r2 = await run(rt, sid, "pwd")
    assert r2["output"] == "/tmp\n"


async def test_busy_shell_is_shell_busy(rt: conch.Runtime) -> None:
    sid = await open_shell(rt)
    r = await run(rt, sid, "sleep 5", yield_ms=0)
    busy = await rt.call_tool("exec", {"shell_id": sid, "command": "true"})
    assert busy["error"]["code"] == "shell_busy" and busy["error"]["retryable"] is True
    await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "interrupt"})


@pytest.mark.parametrize("kind", KINDS)
async def test_background_output_goes_to_the_next_job(rt: conch.Runtime, kind: str) -> None:
    sid = await open_shell(rt, kind)
    r = await run(rt, sid, "{ sleep 0.3; echo LATE; } &")
    assert r["state"] == "exited" and r["output"] == "" and r["duration_ms"] < 250
    await asyncio.sleep(0.5)
    r = await run(rt, sid, "echo next")
    assert r["output"] == "LATE\nnext\n"  # nothing dropped, no [1]+ Done notice


async def test_background_process_keeps_running_until_close(rt: conch.Runtime) -> None:
    sid = await open_shell(rt)
    await run(rt, sid, "cd /tmp; sleep 60 & echo $! > bgpid")
    r = await run(rt, sid, "kill -0 $(cat bgpid) && echo alive; rm bgpid")
    assert r["output"] == "alive\n"
    assert tagged(sid)
    await rt.call_tool("shell_close", {"shell_id": sid})
    assert tagged(sid) == []


async def test_close_of_a_busy_term_ignoring_shell_is_quick(rt: conch.Runtime) -> None:
    sid = await open_shell(rt)
    await run(rt, sid, "(trap '' TERM HUP; sleep 60) & (sleep 61 & kill -STOP $!) ")
    r = await run(rt, sid, "trap '' TERM; sleep 30", yield_ms=100)
    t0 = time.monotonic()
    c = await rt.call_tool("shell_close", {"shell_id": sid})
    assert time.monotonic() - t0 < 2.0
    assert c == {"shell_id": sid, "state": "closed", "cleanup_complete": True}
    assert tagged(sid) == []
    job = await rt.call_tool("read", {"job_id": r["job_id"]})
    assert job["state"] == "cancelled"
    again = await rt.call_tool("exec", {"shell_id": sid, "command": "true"})
    assert again["error"]["code"] == "not_found"


async def test_capacity(tmp_path: Any) -> None:
    cfg = conch.Config(result_detail="full", data_dir=str(tmp_path / "data"), max_shells=2)
    async with conch.Runtime(cfg) as rt:
        await open_shell(rt)
        await open_shell(rt)
        r = await rt.call_tool("shell_open", {})
        assert r["error"]["code"] == "capacity" and r["error"]["retryable"] is True
    assert psutil.Process().children(recursive=True) == []


async def test_two_shells_are_isolated(rt: conch.Runtime) -> None:
    a, b = await open_shell(rt), await open_shell(rt, name="other")
    await run(rt, a, "cd /tmp; export ONLY_A=1")
    r = await run(rt, "other", "echo ${ONLY_A-none}; pwd")
    assert r["output"].startswith("none\n") and r["shell_id"] == b
    assert r["output"] != "none\n/tmp\n" or os.getcwd() == "/tmp"


async def test_per_call_env_is_set_for_that_command_only(rt: conch.Runtime) -> None:
    sid = await open_shell(rt)
    await run(rt, sid, "export KEPT=old")
    r = await run(rt, sid, "echo $KEPT $NEW", env={"KEPT": "new'q", "NEW": "n"})
    assert r["output"] == "new'q n\n"
    r = await run(rt, sid, "echo $KEPT ${NEW-unset} ${AI_ASSISTANT_CALLER_SESSION_ID-x}")
    assert r["output"] == "old unset\n"


async def test_startup_command_runs_and_its_failure_is_spawn_failed(rt: conch.Runtime) -> None:
    sid = await open_shell(rt, startup_command="export FROM_STARTUP=1; cd /tmp")
    assert (await run(rt, sid, "echo $FROM_STARTUP; pwd"))["output"] == "1\n/tmp\n"
    r = await rt.call_tool("shell_open", {"startup_command": "echo boom; false"})
    assert r["error"]["code"] == "spawn_failed" and "boom" in r["error"]["message"]
    assert len((await rt.call_tool("list", {}))["shells"]) == 1


async def test_bad_cwd_and_unknown_ids(rt: conch.Runtime) -> None:
    r = await rt.call_tool("shell_open", {"cwd": "/no/such/dir"})
    assert r["error"]["code"] == "cwd_not_found"
    r = await rt.call_tool("exec", {"shell_id": "s_0000000000", "command": "true"})
    assert r["error"]["code"] == "not_found"
    r = await rt.call_tool("shell_close", {"shell_id": "s_0000000000"})
    assert r["error"]["code"] == "not_found"


async def test_list_and_info_show_shells_without_secrets(rt: conch.Runtime) -> None:
    sid = await open_shell(rt, env={"SECRET_VALUE": "xyzzy"}, startup_command="true # hidden")
    listed = await rt.call_tool("list", {})
    assert [s["shell_id"] for s in listed["shells"]] == [sid]
    assert "xyzzy" not in repr(listed) and "hidden" not in repr(listed)
    info = await rt.call_tool("info", {})
    names = [s["name"] for s in info["shells"]]
    assert "bash" in names and all(s["path"] and s["version"] for s in info["shells"])


async def test_aclose_leaves_no_process(tmp_path: Any) -> None:
    fds_before = set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()
    async with conch.Runtime(
        conch.Config(result_detail="full", data_dir=str(tmp_path / "data"))
    ) as rt:
        sids = [await open_shell(rt) for _ in range(3)]
        for sid in sids:
            await run(rt, sid, "(trap '' TERM; sleep 60) & sleep 61 &")
        await run(rt, sids[0], "trap '' TERM; sleep 30", yield_ms=0)
        await rt.call_tool("exec", {"command": "sleep 30", "pty": True, "yield_ms": 0})
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 3
    assert psutil.Process().children(recursive=True) == []
    assert all(tagged(s) == [] for s in sids)
    assert os.listdir(tmp_path / "data" / "tmp") == []
    if fds_before:
        leaked = set(os.listdir("/proc/self/fd")) - fds_before
        assert not {
            os.readlink(f"/proc/self/fd/{fd}")
            for fd in leaked
            if os.path.exists(f"/proc/self/fd/{fd}")
        } - {""}


@pytest.mark.anyio
async def test_startup_command_cd_is_reported_at_open(tmp_path):
    import conch

    (tmp_path / "proj").mkdir()
    async with conch.Runtime(
        conch.Config(result_detail="full", data_dir=str(tmp_path / "d"))
    ) as rt:
        s = await rt.shell_open(cwd=str(tmp_path), startup_command="cd proj")
        assert s["cwd"] == os.path.realpath(tmp_path / "proj")
        await rt.shell_close(s["shell_id"])


@pytest.mark.anyio
async def test_syntax_errors_do_not_show_the_private_command_file(tmp_path):
    async with conch.Runtime(
        conch.Config(result_detail="full", data_dir=str(tmp_path / "d"))
    ) as rt:
        s = await rt.shell_open(shell="bash")
        r = await rt.exec(shell_id=s["shell_id"], command="if then fi")
        assert r["exit_code"] == 2
        assert r["output"].startswith("bash: line 1: syntax error near unexpected token")
        assert str(tmp_path) not in r["output"]
        await rt.shell_close(s["shell_id"])


async def test_list_shows_when_a_shell_opened_and_its_latest_command(rt: conch.Runtime) -> None:
    from datetime import datetime, timezone

    before = datetime.now(timezone.utc)
    sid = await open_shell(rt)

    def listed(shells: list[dict[str, Any]]) -> dict[str, Any]:
        return next(s for s in shells if s["shell_id"] == sid)

    first = listed((await rt.call_tool("list", {}))["shells"])
    assert first["last_job_id"] is None
    opened = datetime.fromisoformat(first["created_at"].replace("Z", "+00:00"))
    assert first["created_at"].endswith("Z") and before.replace(microsecond=0) <= opened
    a = await run(rt, sid, "true")
    b = await run(rt, sid, "exit 3")  # the shell dies; a restart keeps its opening time
    await run(rt, sid, "sleep 30", yield_ms=0)
    now = listed((await rt.call_tool("list", {}))["shells"])
    assert b["job_id"] != a["job_id"] and now["job_id"] == now["last_job_id"] != b["job_id"]
    assert now["created_at"] == first["created_at"]
    await rt.signal(now["job_id"], "kill")
    done = listed((await rt.call_tool("list", {}))["shells"])
    assert done["job_id"] is None and done["last_job_id"] == now["job_id"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["interrupt", "terminate", "kill", "deadline"])
async def test_a_stopped_command_line_adds_no_line_break_of_the_shell(
    rt: conch.Runtime, kind: str, how: str
) -> None:
    """docs/spec.md §4: output is exactly what the command printed. Interactive bash prints a line
    break of its own as Ctrl-C ends a command line; it is terminal noise, not output."""
    sid = await open_shell(rt, kind)
    for prefix, want in (("", ""), ("printf 'a\\nb'; ", "a\nb"), ("echo a; ", "a\n")):
        if how == "deadline":
            r = await run(rt, sid, prefix + "sleep 30", timeout_ms=400, yield_ms=5000)
            assert r["state"] == "timed_out"
        else:
            r = await run(rt, sid, prefix + "sleep 30", yield_ms=300)
            assert r["state"] == "running"
            await rt.call_tool("signal", {"job_id": r["job_id"], "signal": how})
        r = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0, "until": "exit"})
        assert r["output"] == want, (how, prefix, r)
    # output printed after the interrupt is the command's own, line breaks included (the
    # trap handles the interrupt, so the command line goes on)
    r = await run(rt, sid, "trap 'echo; echo bye' INT; sleep 30; echo after", yield_ms=300)
    await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "interrupt"})
    r = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0, "until": "exit"})
    assert r["output"].endswith("\nbye\nafter\n"), r
    await run(rt, sid, "trap - INT")
    r = await run(rt, sid, "echo fine")
    assert r["output"] == "fine\n"


def _files_holding(root: str, needle: bytes) -> list[str]:
    found = []
    for d, _, names in os.walk(root):
        for n in names:
            try:
                with open(os.path.join(d, n), "rb") as f:
                    if needle in f.read():
                        found.append(os.path.join(d, n))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("kind", KINDS)
async def test_a_commands_env_values_leave_the_disk_once_used(rt: conch.Runtime, kind: str) -> None:
    """Issue 18.9: a shell command's `env` (a token, often) is not left in the data dir: bash
    removes it from the command file as the command starts, and every shell's file is blanked
    when the command ends (its output is the job's, not the command file's)."""
    sid = await open_shell(rt, kind)
    secret = "hunter2-" + "q7Zx" * 4
    data = str(rt.config.resolved_data_dir)
    r = await run(
        rt, sid, "sleep 1; echo ${SECRET_X#hunter2-}", env={"SECRET_X": secret}, yield_ms=400
    )
    if kind == "bash":
        assert r["state"] == "running" and _files_holding(data, secret.encode()) == []
    r = await rt.call_tool(
        "read", {"job_id": r["job_id"], "cursor": 0, "until": "exit", "wait_ms": 10000}
    )
    assert r["output"] == "q7Zx" * 4 + "\n", r
    assert _files_holding(data, secret.encode()) == []
    r = await run(rt, sid, "echo ${SECRET_X-gone}")
    assert r["output"] == "gone\n"
