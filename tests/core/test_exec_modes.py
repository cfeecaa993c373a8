"""docs/spec.md §3: one-shot execution modes."""

from __future__ import annotations

import os
import sys

import pytest
from job_ends import until_exit

from conch import ConchError

pytestmark = pytest.mark.anyio


async def test_command_reports_exit_code_and_output(rt):
    r = await rt.exec(command="echo hi; echo oops >&2; exit 3")
    assert r["state"] == "exited" and r["exit_code"] == 3 and r["ok"] is False
    assert r["output"] == "hi\noops\n"
    assert (r["stdout_bytes"], r["stderr_bytes"]) == (3, 5)
    assert r["eof"] is True and r["signal"] is None


async def test_zero_exit_is_ok(rt):
    r = await rt.exec(command="true")
    assert r["ok"] is True and r["exit_code"] == 0 and r["output"] == ""


async def test_leader_killed_by_foreign_signal_reports_signal(rt):
    r = await rt.exec(command="kill -KILL $$")
    assert r["state"] == "exited" and r["exit_code"] is None and r["signal"] == "SIGKILL"
    assert r["ok"] is False


async def test_argv_is_literal(rt, tmp_path):
    marker = tmp_path / "injected"
    r = await rt.exec(argv=["printf", "%s|", f"$(touch {marker})", "*", "", "a b", ";ls"])
    assert r["output"] == f"$(touch {marker})|*||a b|;ls|"
    assert not marker.exists()


@pytest.mark.parametrize("argv", [[], [""], ["echo", "a\x00b"]])
async def test_bad_argv_is_rejected_before_running(rt, argv):
    with pytest.raises(ConchError) as e:
        await rt.exec(argv=argv)
    assert e.value.code == "invalid_argument"
    assert len(rt.engine.jobs) == 0


async def test_missing_program_is_spawn_failed_naming_it(rt):
    with pytest.raises(ConchError) as e:
        await rt.exec(argv=["definitely-not-a-program-xyz"])
    assert e.value.code == "spawn_failed" and "definitely-not-a-program-xyz" in e.value.message
    assert len(rt.engine.jobs) == 0


async def test_exactly_one_mode(rt):
    with pytest.raises(ConchError) as e:
        await rt.exec(command="true", argv=["true"])
    assert e.value.code == "invalid_argument"


async def test_script_runs_multiline_bash(rt):
    r = await rt.exec(script="set -e\nx=1\nfor i in 1 2; do echo $((x+i)); done\n")
    assert r["output"] == "2\n3\n" and r["mode"] == "script"


async def test_script_syntax_error_runs_nothing(rt, tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(ConchError) as e:
        await rt.exec(script=f"touch {marker}\nif then fi\n")
    assert e.value.code == "syntax_error"
    assert "syntax error" in e.value.message
    assert not marker.exists()


async def test_stdin_is_exact_bytes_then_eof(rt):
    text = "héllo\n\twörld\r\nno newline at end"
    r = await rt.exec(argv=["od", "-An", "-tx1", "-v"], stdin=text)
    got = bytes(int(x, 16) for x in r["output"].split())
    assert got == text.encode("utf-8")


async def test_absent_stdin_reads_eof_at_once(rt):
    r = await rt.exec(command="cat; echo done", yield_ms=5000)
    assert r["state"] == "exited" and r["output"] == "done\n"


async def test_stdin_is_never_spliced_into_a_script(rt):
    r = await rt.exec(script='read -r line\necho "got:$line"\n', stdin="$(echo injected)\n")
    assert r["output"] == "got:$(echo injected)\n"


async def test_stdin_open_then_write_and_eof(rt):
    r = await rt.exec(
        command='while read -r l; do echo "<$l>"; done; echo end', stdin_open=True, yield_ms=100
    )
    assert r["state"] == "running"
    w = await rt.write(r["job_id"], text="a\nb\n", yield_ms=2000)
    assert w["output"] == "<a>\n<b>\n"
    w = await until_exit(rt, await rt.write(r["job_id"], eof=True, yield_ms=2000))
    assert w["state"] == "exited" and w["output"] == "end\n"


async def test_write_after_eof_is_stdin_closed(rt):
    r = await rt.exec(command="sleep 5", stdin_open=True, yield_ms=0)
    await rt.write(r["job_id"], eof=True, yield_ms=0)
    with pytest.raises(ConchError) as e:
        await rt.write(r["job_id"], text="x")
    assert e.value.code == "stdin_closed"
    await rt.signal(r["job_id"], "kill")


async def test_write_to_finished_job_is_not_running(rt):
    r = await rt.exec(command="true")
    with pytest.raises(ConchError) as e:
        await rt.write(r["job_id"], text="x")
    assert e.value.code == "not_running"


async def test_awaiting_input_on_blocked_stdin_read(rt):
    if not sys.platform.startswith("linux"):
        pytest.skip("awaiting_input for pipes needs /proc")
    r = await rt.exec(argv=["cat"], stdin_open=True, yield_ms=300)
    assert r["state"] == "running" and r["awaiting_input"] is True
    await rt.write(r["job_id"], eof=True)


async def test_cwd_relative_to_default_and_missing_cwd(rt, tmp_path):
    (tmp_path / "sub").mkdir()
    r = await rt.exec(command="pwd", cwd="sub")
    assert r["output"].strip() == os.path.realpath(tmp_path / "sub")
    with pytest.raises(ConchError) as e:
        await rt.exec(command="pwd", cwd="nope")
    assert e.value.code == "cwd_not_found"


async def test_env_rules(rt, monkeypatch):
    monkeypatch.setenv("BASH_ENV", "/tmp/evil")
    monkeypatch.setenv("CONCH_AUTH_TOKEN", "sekrit")
    monkeypatch.setenv("KEEP_ME", "yes")
    r = await rt.exec(
        command='echo "$PAGER|$GIT_PAGER|$GIT_TERMINAL_PROMPT|$TERM|${BASH_ENV-unset}'
        '|${CONCH_AUTH_TOKEN-unset}|$KEEP_ME|$X|$AI_ASSISTANT_CALLER_SESSION_ID"',
        env={"X": "1"},
    )
    assert r["output"] == "cat|cat|0|dumb|unset|unset|yes|1|\n"


@pytest.mark.parametrize("env", [{"1BAD": "x"}, {"A-B": "x"}, {"OK": "a\x00b"}])
async def test_bad_env_is_rejected(rt, env):
    with pytest.raises(ConchError) as e:
        await rt.exec(command="true", env=env)
    assert e.value.code == "invalid_argument"


async def test_output_format_json_and_jsonl(rt):
    r = await rt.exec(command="echo '{\"a\": [1, 2]}'", output_format="json")
    assert r["data"] == {"a": [1, 2]} and r["parse_error"] is None
    r = await rt.exec(command='printf \'{"a":1}\\n\\n{"b":2}\\n\'', output_format="jsonl")
    assert r["data"] == [{"a": 1}, {"b": 2}]
    r = await rt.exec(command="echo not-json; exit 4", output_format="json")
    assert r["data"] is None and r["parse_error"] and r["exit_code"] == 4
    r = await rt.exec(command="echo not-json", output_format="auto")
    assert r["data"] is None and r["parse_error"] is None
    r = await rt.exec(command="echo '[1]'; echo noise >&2", output_format="auto")
    assert r["data"] == [1]


async def test_cut_output_is_never_parsed(tmp_path):
    import conch

    cfg = conch.Config(result_detail="full", data_dir=str(tmp_path / "d"), max_log_bytes=1000)
    async with conch.Runtime(cfg) as rt:
        r = await rt.exec(command="yes '[1,2,3]' | head -c 5000; echo", output_format="jsonl")
        assert r["state"] == "output_limit"
        assert r["data"] is None and "truncated" in r["parse_error"]


async def test_ready_pattern_returns_while_running(rt):
    r = await rt.exec(
        command="echo booting; sleep 0.2; echo 'Listening on 8080'; sleep 30",
        ready={"pattern": r"Listening on \d+"},
        yield_ms=10000,
    )
    assert r["state"] == "running" and r["ready"] is True
    assert "Listening on 8080" in r["output"]
    await rt.signal(r["job_id"], "kill")


async def test_ready_false_when_job_ends_first(rt):
    r = await rt.exec(command="echo nope", ready={"pattern": "never"}, yield_ms=5000)
    assert r["state"] == "exited" and r["ready"] is False


async def test_ready_pattern_matches_across_escape_and_utf8_cut_between_writes(rt):
    # the output arrives as "Listen\x1b[" + "1ming on caf\xc3" + "\xa9\n": normalized chunk by
    # chunk, the escape and the character would be lost at the cuts
    r = await rt.exec(
        command=(
            "printf 'Listen\\033['; sleep 0.3; printf '1ming on caf\\303'; sleep 0.3; "
            "printf '\\251\\n'; sleep 30"
        ),
        ready={"pattern": "Listening on café$"},
        yield_ms=10000,
    )
    assert r["state"] == "running" and r["ready"] is True
    await rt.signal(r["job_id"], "kill")


async def test_ready_port(rt):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    code = (
        f"import socket,time; time.sleep(0.3); s=socket.socket(); "
        f"s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f"s.bind(('127.0.0.1',{port})); s.listen(); time.sleep(30)"
    )
    r = await rt.exec(argv=[sys.executable, "-c", code], ready={"port": port}, yield_ms=10000)
    assert r["state"] == "running" and r["ready"] is True
    await rt.signal(r["job_id"], "kill")


async def test_keys_on_a_pipe_job_mean_what_they_would_to_a_person(rt):
    r = await rt.exec(command="read -r a; echo got:$a; cat", stdin_open=True, yield_ms=50)
    w = await rt.write(r["job_id"], text="x", keys=["enter"], yield_ms=1000)
    assert w["output"] == "got:x\n"
    w = await rt.write(r["job_id"], keys=["ctrl-d"], yield_ms=2000)
    assert w["state"] == "exited" and w["exit_code"] == 0
    r = await rt.exec(command="sleep 30", stdin_open=True, yield_ms=50)
    w = await rt.write(r["job_id"], keys=["ctrl-c"], yield_ms=2000)
    assert w["state"] == "cancelled" and w["signal"] == "SIGINT"


async def test_read_until_pattern_looks_at_new_output_only(rt):
    r = await rt.exec(command="echo ready-1; sleep 0.3; echo ready-2; sleep 5", yield_ms=100)
    assert r["output"] == "ready-1\n"
    w = await rt.read(r["job_id"], wait_ms=5000, until={"pattern": "ready-"})
    assert w["output"] == "ready-2\n"
    await rt.signal(r["job_id"], "kill")


async def test_script_files_never_outlive_their_job(rt, tmp_path):
    tmp = tmp_path / "data" / "tmp"
    r = await rt.exec(script="echo ok\n")
    assert r["output"] == "ok\n"
    with pytest.raises(ConchError):
        await rt.exec(script="if then\n")
    with pytest.raises(ConchError):
        await rt.exec(script="echo x\n", cwd="missing-dir")
    assert os.listdir(tmp) == []


async def test_ready_url(rt, tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    (tmp_path / "index.html").write_text("hi")
    r = await rt.exec(
        command=f"sleep 0.3; exec {sys.executable} -m http.server {port} --bind 127.0.0.1",
        ready={"url": f"http://127.0.0.1:{port}/"},
        yield_ms=15000,
    )
    assert r["state"] == "running" and r["ready"] is True
    await rt.signal(r["job_id"], "kill")


async def test_ready_times_out_at_yield_with_ready_null(rt):
    r = await rt.exec(command="sleep 30", ready={"pattern": "never"}, yield_ms=200)
    assert r["state"] == "running" and r["ready"] is None
    await rt.signal(r["job_id"], "kill")


async def test_a_command_longer_than_the_argv_limit_still_runs(rt):
    # one argv string may not exceed 128 KiB on Linux; such commands run from a file
    payload = "x" * 300_000
    r = await rt.exec(command=f"s='{payload}'; echo ${{#s}}")
    assert r["state"] == "exited" and r["output"] == "300000\n"


async def test_stdin_larger_than_a_pipe_buffer_still_ends_with_eof(rt):
    r = await rt.exec(command="wc -c", stdin="x" * 300_000, yield_ms=10000)
    assert r["state"] == "exited" and r["output"].strip() == "300000"


async def test_eof_after_a_large_write_closes_once_everything_is_written(rt):
    r = await rt.exec(command="wc -c", stdin_open=True, yield_ms=0)
    await rt.write(r["job_id"], text="y" * 500_000, eof=True, yield_ms=10000)
    done = await rt.read(r["job_id"], cursor=0, wait_ms=10000, until="exit")
    assert done["state"] == "exited" and done["output"].strip() == "500000"


async def test_script_syntax_check_gets_the_child_env_without_conch_secrets(tmp_path, monkeypatch):
    import conch

    secret = "tok-5e1f0a9d77"
    monkeypatch.setenv("CONCH_AUTH_TOKEN", secret)
    monkeypatch.setenv("SOMETHING_ELSE", secret)
    seen = tmp_path / "env.txt"
    bash = tmp_path / "bash"  # records the environment of `bash -n`, then is bash
    bash.write_text(f'#!/bin/sh\nif [ "$3" = "-n" ]; then env > {seen}; fi\nexec /bin/bash "$@"\n')
    bash.chmod(0o755)
    cfg = conch.Config(result_detail="full", data_dir=str(tmp_path / "d"), auth_token=secret)
    async with conch.Runtime(cfg) as rt:
        rt.engine.bash = rt.engine.starter.bash = str(bash)
        r = await rt.exec(script="echo ok\n")
    assert r["output"] == "ok\n"
    env = seen.read_text()
    assert secret not in env and "CONCH_AUTH_TOKEN" not in env
    assert "CONCH_TAG=" in env  # tagged like every child: a shutdown sweep finds it
