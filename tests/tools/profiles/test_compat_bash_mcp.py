"""Profile `bash-mcp` (docs/spec.md §7, seed-contracts §3): the bash.* methods with the seed's
results, codes and isError convention; the seed's bridge tests ported."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import psutil
import pytest

import conch
from conch.tools.call import ToolOutcome, call_tool_full

pytestmark = pytest.mark.anyio


def settings(tmp_path: Any, **kw: Any) -> dict[str, Any]:
    work = tmp_path / "work"
    (work / "child").mkdir(parents=True, exist_ok=True)
    return {"default_cwd": str(work), "profiles": ["bash-mcp"], "result_detail": "lean", **kw}


def make_config(tmp_path: Any, **kw: Any) -> conch.Config:
    return conch.Config(data_dir=str(tmp_path / "data"), **settings(tmp_path, **kw))


@pytest.fixture
def rt_settings(tmp_path: Any) -> dict[str, Any]:
    return settings(tmp_path, kill_grace_ms=300)


async def invoke(rt: conch.Runtime, method: str, params: dict[str, Any]) -> ToolOutcome:
    outcome = await call_tool_full(rt.engine, rt.registry, method, params)
    assert outcome.is_error is (outcome.result.get("success") is False)
    return outcome


async def poll(rt: conch.Runtime, r: dict[str, Any], limit_s: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + limit_s
    while r["status"] == "running":
        assert time.monotonic() < deadline
        assert r["next_method"] == "bash.job_get"
        r = (await invoke(rt, r["next_method"], r["next_params"])).result
    return r


async def test_six_methods_with_the_seeds_annotations(rt):
    tools = {t["name"]: t for t in rt.tools()}
    assert list(tools) == [
        "bash.exec",
        "bash.job_get",
        "bash.job_cancel",
        "bash.jobs",
        "bash.search",
        "bash.info",
    ]
    for name, t in tools.items():
        assert t["annotations"]["openWorldHint"] is True
        read_only = name in ("bash.job_get", "bash.jobs", "bash.search", "bash.info")
        assert t["annotations"]["readOnlyHint"] is read_only
        assert t["inputSchema"]["additionalProperties"] is False


async def test_bash_syntax_stderr_and_exit_code_and_no_persistent_cwd(rt, tmp_path):
    cmd = 'cd child; printf "$BASH_VERSION"; printf error >&2; exit 7'
    outcome = await invoke(rt, "bash.exec", {"command": cmd})
    r = outcome.result
    assert outcome.is_error and r["success"] is False
    assert r["status"] == "completed" and r["exit_code"] == 7 and r["signal"] is None
    assert r["stderr"] == "error" and r["stdout"][0].isdigit()
    assert r["kind"] == "exec" and r["finished_at"] is not None and "next_method" not in r
    r = (await invoke(rt, "bash.exec", {"command": "pwd"})).result
    assert r["stdout"] == f"{tmp_path / 'work'}\n" and r["success"] is True


async def test_success_is_not_an_error_and_exit_9_is(rt):
    outcome = await invoke(rt, "bash.exec", {"command": "echo hi"})
    assert outcome.is_error is False and outcome.result["stdout"] == "hi\n"
    outcome = await invoke(rt, "bash.exec", {"command": "exit 9"})
    assert outcome.is_error is True and outcome.result["exit_code"] == 9


async def test_argv_is_literal(rt, tmp_path):
    target = tmp_path / "injected"
    r = (await invoke(rt, "bash.exec", {"argv": ["printf", "%s", f"$(touch {target})"]})).result
    assert r["success"] is True and r["stdout"] == f"$(touch {target})"
    assert not target.exists()


async def test_stdin_into_cat_parsed_as_json_and_jsonl(rt):
    r = (
        await invoke(
            rt, "bash.exec", {"argv": ["cat"], "stdin": '{"a": 1}', "output_format": "json"}
        )
    ).result
    assert r["data"] == {"a": 1} and r["success"] is True
    r = (
        await invoke(
            rt,
            "bash.exec",
            {"argv": ["cat"], "stdin": '{"a": 1}\r\n\n[2]\n', "output_format": "jsonl"},
        )
    ).result
    assert r["data"] == [{"a": 1}, [2]]
    r = (await invoke(rt, "bash.exec", {"command": "printf plain"})).result
    assert r["output_format"] == "auto" and "data" not in r and r["success"] is True


async def test_invalid_json_is_invalid_output_with_the_exit_code(rt):
    outcome = await invoke(rt, "bash.exec", {"command": "printf not-json", "output_format": "json"})
    r = outcome.result
    assert outcome.is_error and r["code"] == "INVALID_OUTPUT" and r["exit_code"] == 0
    assert r["parse_error"] and "data" not in r


async def test_long_job_returns_promptly_and_polling_never_replays_it(rt, tmp_path):
    log = tmp_path / "runs.txt"
    cmd = f"echo run >> {log}; sleep 0.4; printf '{{\"done\":true}}'"
    t0 = time.monotonic()
    r = (await invoke(rt, "bash.exec", {"command": cmd, "wait_ms": 0})).result
    assert time.monotonic() - t0 < 0.5
    assert r["status"] == "running" and r["success"] is True and r["finished_at"] is None
    assert r["next_params"] == {"job_id": r["job_id"], "wait_ms": 1000}
    r = await poll(rt, r)
    assert r["data"] == {"done": True} and r["status"] == "completed"
    again = (await invoke(rt, "bash.job_get", {"job_id": r["job_id"]})).result
    assert again["data"] == {"done": True} and again["duration_ms"] == r["duration_ms"]
    assert log.read_text() == "run\n"


async def test_deadline_kills_term_ignoring_descendants(rt):
    cmd = "trap 'exit 0' TERM; bash -c 'trap \"\" TERM; echo $$; sleep 20' & wait"
    r = (await invoke(rt, "bash.exec", {"command": cmd, "timeout_ms": 150})).result
    r = await poll(rt, r)
    assert r["status"] == "timed_out" and r["timed_out"] is True
    assert r["code"] == "COMMAND_TIMEOUT" and r["success"] is False
    grandchild = int(r["stdout"].split()[0])  # partial stdout is kept
    deadline = time.monotonic() + 2
    while psutil.pid_exists(grandchild) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    with pytest.raises(ProcessLookupError):
        os.kill(grandchild, 0)


async def test_cancel_and_shutdown(tmp_path):
    async with conch.Runtime(make_config(tmp_path, kill_grace_ms=300)) as rt:
        r = (await invoke(rt, "bash.exec", {"command": "sleep 20", "wait_ms": 0})).result
        outcome = await invoke(rt, "bash.job_cancel", {"job_id": r["job_id"]})
        c = outcome.result
        assert outcome.is_error and c["status"] == "cancelled" and c["cancelled"] is True
        assert c["code"] == "CANCELLED"
        r = (await invoke(rt, "bash.exec", {"command": "sleep 20", "wait_ms": 0})).result
        pid = r["pid"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    outcome = await invoke(rt, "bash.info", {})
    assert outcome.result == {
        "success": False,
        "code": "SERVICE_CLOSED",
        "error": outcome.result["error"],
    }


async def test_utf8_bounds_per_stream(rt):
    cmd = "printf '你%.0s' $(seq 2000); printf '错%.0s' $(seq 1000) >&2"
    r = (await invoke(rt, "bash.exec", {"command": cmd, "max_output_bytes": 1024})).result
    assert r["truncated"] and r["stdout_truncated"] and r["stderr_truncated"]
    assert r["stdout_bytes"] == 6000 and r["stderr_bytes"] == 3000
    for stream in ("stdout", "stderr"):
        assert len(r[stream].encode()) <= 1024 and "\ufffd" not in r[stream]
        assert len(r[stream].encode()) > 1000
    big = "[" + ",".join(["1"] * 1000) + "]"
    outcome = await invoke(
        rt,
        "bash.exec",
        {"command": f"printf '{big}'", "max_output_bytes": 1024, "output_format": "json"},
    )
    assert outcome.is_error and outcome.result["parse_error"] and "data" not in outcome.result
    r = (
        await invoke(rt, "bash.exec", {"command": f"printf '{big}'", "max_output_bytes": 1024})
    ).result
    assert r["success"] is True and "data" not in r  # auto: cut output stays text


async def test_search(rt, tmp_path):
    work = tmp_path / "work"
    (work / 'odd "name".ts').write_text("first\nTODO [a] here\n")
    (work / "other.py").write_text("TODO [a] not this one\n")
    (work / "two.ts").write_text("x1\nx2\n")
    r = (await invoke(rt, "bash.search", {"pattern": "TODO [a]", "glob": ["*.ts"]})).result
    assert r["success"] is True and r["count"] == 1 and r["exit_code"] == 0
    (m,) = r["matches"]
    assert m["path"] == 'odd "name".ts' and m["path_data"] == {"text": 'odd "name".ts'}
    assert m["line_number"] == 2 and m["text"] == "TODO [a] here"
    assert m["submatches"] == [
        {"start": 0, "end": 8, "text": "TODO [a]", "match_data": {"text": "TODO [a]"}}
    ]
    outcome = await invoke(rt, "bash.search", {"pattern": "nothing-matches-this"})
    r = outcome.result
    assert not outcome.is_error and r["exit_code"] == 1 and r["matches"] == []
    outcome = await invoke(rt, "bash.search", {"pattern": "[", "regex": True})
    assert outcome.is_error and outcome.result["exit_code"] == 2
    r = (
        await invoke(rt, "bash.search", {"pattern": "x", "path": "two.ts", "max_matches": 1})
    ).result
    assert r["count"] == 1 and r["truncated"] is True
    outcome = await invoke(rt, "bash.search", {"pattern": "x", "path": "missing-dir"})
    assert outcome.is_error and outcome.result["code"] == "INVALID_ARGUMENT"


async def test_non_utf8_search_data_is_base64(rt, tmp_path):
    (tmp_path / "work" / "latin1.txt").write_bytes(b"caf\xe9 needle\n")
    r = (await invoke(rt, "bash.search", {"pattern": "needle"})).result
    (m,) = r["matches"]
    assert m["text"].startswith("[base64:") and "bytes" in m["text_data"]


@pytest.mark.parametrize(
    "params,message",
    [
        ({"command": "true", "argv": ["true"]}, None),
        ({"command": "true", "timeout_ms": 0}, None),
        ({"argv": []}, None),
        ({"argv": [" "]}, None),
        ({"command": "true", "bogus": 1}, "Unknown parameter: bogus"),
        ({"command": "true", "host": "x"}, "Unknown parameter: host"),
        ({"command": "true", "wait_ms": 1001}, None),
        ({"command": "true", "max_output_bytes": 1023}, None),
    ],
)
async def test_bad_arguments_are_invalid_argument(rt, tmp_path, params, message):
    outcome = await invoke(rt, "bash.exec", params)
    assert outcome.is_error and outcome.result["code"] == "INVALID_ARGUMENT"
    if message:
        assert outcome.result["error"] == message


async def test_missing_parameter_and_missing_executable(rt):
    outcome = await invoke(rt, "bash.job_get", {})
    assert outcome.result["error"] == "Missing parameter: job_id"
    outcome = await invoke(rt, "bash.exec", {"argv": ["no-such-program-x"]})
    assert outcome.is_error and "ENOENT" in outcome.result["error"]


async def test_busy_is_never_queued(tmp_path):
    async with conch.Runtime(make_config(tmp_path, max_running=1)) as rt:
        first = (await invoke(rt, "bash.exec", {"command": "sleep 20", "wait_ms": 0})).result
        outcome = await invoke(rt, "bash.exec", {"command": "true"})
        assert outcome.is_error and outcome.result["code"] == "BUSY"
        await invoke(rt, "bash.job_cancel", {"job_id": first["job_id"]})


async def test_job_not_found_after_retention(tmp_path):
    async with conch.Runtime(make_config(tmp_path, retention_s=1, kill_grace_ms=300)) as rt:
        r = (await invoke(rt, "bash.exec", {"command": "sleep 20", "wait_ms": 0})).result
        await invoke(rt, "bash.job_cancel", {"job_id": r["job_id"]})
        await asyncio.sleep(1.1)
        outcome = await invoke(rt, "bash.job_get", {"job_id": r["job_id"]})
        assert outcome.is_error and outcome.result["code"] == "JOB_NOT_FOUND"
        outcome = await invoke(rt, "bash.job_cancel", {"job_id": "nope"})
        assert outcome.result["code"] == "JOB_NOT_FOUND"


async def test_jobs_and_info(rt, tmp_path):
    r = (await invoke(rt, "bash.exec", {"command": "true"})).result
    jobs = (await invoke(rt, "bash.jobs", {})).result
    assert jobs["success"] is True
    assert [j["job_id"] for j in jobs["jobs"]] == [r["job_id"]]
    assert set(jobs["jobs"][0]) == {
        "success",
        "job_id",
        "status",
        "pid",
        "cwd",
        "kind",
        "started_at",
        "finished_at",
        "duration_ms",
    }
    info = (await invoke(rt, "bash.info", {})).result
    assert info["success"] is True and info["cwd"] == str(tmp_path / "work")
    assert info["limits"]["max_timeout_ms"] == 300000 and info["search"]["available"] is True
    assert {"version", "platform", "arch", "shell", "execution_isolation"} <= set(info)


async def test_child_environment_drops_jest_worker_id_and_the_bash_startup_variables(
    rt, monkeypatch
):
    """seed-contracts §3: process.env minus BASH_ENV, ENV, SHELLOPTS, BASHOPTS, JEST_WORKER_ID."""
    for name in ("JEST_WORKER_ID", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS"):
        monkeypatch.setenv(name, "/dev/null" if name.endswith("ENV") else "3")
    monkeypatch.setenv("KEPT_BY_BASH_MCP", "yes")
    names = "JEST_WORKER_ID BASH_ENV ENV SHELLOPTS BASHOPTS KEPT_BY_BASH_MCP"
    script = f'for v in {names}; do echo "$v=${{!v-unset}}"; done'
    for params in ({"command": script}, {"argv": ["bash", "-c", script]}):
        r = (await invoke(rt, "bash.exec", params)).result
        lines = r["stdout"].splitlines()
        assert "JEST_WORKER_ID=unset" in lines, r
        assert "KEPT_BY_BASH_MCP=yes" in lines
        assert "BASH_ENV=unset" in lines and "ENV=unset" in lines
    # the other profiles keep it (docs/spec.md §2 drops only the bash startup variables)
    async with conch.Runtime(conch.Config(data_dir=rt.config.data_dir)) as plain:
        s = await plain.exec(command='echo "${JEST_WORKER_ID-unset}"')
    assert s["output"] == "3\n"
