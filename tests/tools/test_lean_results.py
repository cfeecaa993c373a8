"""docs/spec.md §6 "Lean results" through the embedded API: fields at their default left out, the
output schemas state every default, `result_detail: full` restores every field."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import pytest

import conch
from conch.config import Config, parse_setting
from conch.errors import ConfigError
from conch.tools.call import call_tool_full
from conch.tools.lean import FULL_ONLY
from conch.tools.render import render

pytestmark = pytest.mark.anyio


@pytest.fixture
def rt_settings() -> dict[str, str]:
    """Results at Config's default detail (lean), as a model gets them."""
    return {"result_detail": "lean"}


SNAPSHOT_TOOLS = ("exec", "read", "write", "signal")


@pytest.fixture
async def full_rt(tmp_path) -> AsyncIterator[conch.Runtime]:
    cfg = conch.Config(
        data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path), result_detail="full"
    )
    async with conch.Runtime(cfg) as runtime:
        yield runtime


def schemas(rt: conch.Runtime) -> dict[str, dict[str, Any]]:
    return {t["name"]: t["outputSchema"]["anyOf"][0] for t in rt.tools() if t["name"] != "info"}


def compact(result: dict[str, Any]) -> int:
    return len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())


def assert_lean_of(lean: dict[str, Any], full: dict[str, Any], schema: dict[str, Any], rt) -> None:
    """Every lean field is the full one; every field left out is at its documented default."""
    props = schema["properties"]
    for k, v in lean.items():
        assert full[k] == v, k
    for k, v in full.items():
        if k in lean or k in FULL_ONLY:
            continue
        if k == "next_cursor":
            assert full["eof"] is True, k  # left out only once everything was read
        elif k == "total_bytes":  # ... or, while running, when it is next_cursor
            assert full["eof"] is True or v == full["next_cursor"], k
        elif k == "cursor":  # at 0, an empty window (where it ends), or nothing left out
            assert v in (0, full["next_cursor"]) or not full["truncated"], k
        elif k == "eof":  # true, or false while the job runs (its output has not ended)
            assert v is True or full["state"] == "running", k
        elif k == "cwd":
            assert v == rt.default_cwd and full["shell_id"] is None
        elif k in ("mode", "shell_id"):  # a snapshot: the call that started the job chose them
            pass
        else:
            assert v == props[k]["default"], (k, v)


async def test_echo_hi_is_the_four_field_result(rt):
    r = await rt.call_tool("exec", {"command": "echo hi"})
    assert r == {"job_id": r["job_id"], "state": "exited", "exit_code": 0, "output": "hi\n"}
    assert compact(r) - len("hi\\n") <= 80


async def test_small_calls_stay_within_the_byte_targets_in_both_views(rt):
    for cmd in ("echo hi", "ls /nonexistent-lean", "exit 2", "seq 1 200", "echo out; echo e >&2"):
        out = await call_tool_full(rt.engine, rt.registry, "exec", {"command": cmd})
        output = out.result["output"]
        body = len(json.dumps(output, ensure_ascii=False).encode()) - 2
        assert compact(out.result) - body <= 80, out.result
        text = render("exec", out.result, is_error=False, full=out.full)
        assert len(text.encode()) - len(output.encode()) <= 40, text


async def test_full_detail_restores_every_snapshot_field(full_rt):
    r = await full_rt.call_tool("exec", {"command": "echo hi"})
    props = schemas(full_rt)["exec"]["properties"]
    # (secret_page and detached are the MCP front end's, added where a prompt needs a
    # person's page or a host stopped waiting for a job; note, where a wait ended early;
    # changes, where the job changed files)
    assert set(r) == set(props) - {"secret_page", "detached", "note", "shell_opened", "changes"}
    assert r["ok"] is True and r["eof"] is True and r["total_bytes"] == 3
    assert r["lingering_pids"] == [] and r["name"] is None and r["log_path"]


async def test_every_lean_field_equals_the_full_one_and_every_absent_one_is_its_default(
    rt, tmp_path
):
    schema = schemas(rt)["exec"]
    cases = [
        {"command": "echo hi"},
        {"command": "echo out; echo err >&2; exit 3"},
        {"argv": ["printf", "x"], "name": "named"},
        {"command": "seq 1 5000", "max_output_bytes": 100},
        {"command": "sleep 5", "yield_ms": 50},
        {"command": "echo '{\"a\": 1}'", "output_format": "json"},
        {"command": "echo notjson", "output_format": "json"},
        {"command": "pwd", "cwd": "/"},
    ]
    for args in cases:
        out = await call_tool_full(rt.engine, rt.registry, "exec", args)
        assert out.full is not None and not out.is_error
        assert_lean_of(out.result, out.full, schema, rt)
        jsonschema.validate(out.result, schema)
        jsonschema.validate(out.full, schema)
        if out.result["state"] == "running":
            await rt.call_tool("signal", {"job_id": out.result["job_id"], "signal": "kill"})


async def test_a_running_job_always_says_where_to_read_next(rt):
    r = await rt.call_tool("exec", {"command": "echo started; sleep 5", "yield_ms": 300})
    assert r["state"] == "running" and "exit_code" not in r
    assert "eof" not in r and r["next_cursor"] == len("started\n")  # running: not ended
    assert "total_bytes" not in r  # it is next_cursor: everything printed so far was read
    stopped = await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "kill"})
    assert stopped["state"] == "cancelled" and stopped["signal"].startswith("SIG")
    assert "eof" not in stopped  # everything was read and the job is over


async def test_cut_output_carries_truncated_omitted_bytes_and_the_marker(rt):
    r = await rt.call_tool("exec", {"command": "seq 1 20000", "max_output_bytes": 200})
    assert r["truncated"] is True and r["omitted_bytes"] > 0
    assert f"{r['omitted_bytes']} bytes omitted" in r["output"]
    first = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0, "max_bytes": 100})
    assert first["eof"] is False and first["truncated"] is True
    assert first["next_cursor"] < first["total_bytes"]
    assert first["omitted_bytes"] == first["total_bytes"] - first["next_cursor"]


async def test_shell_jobs_say_their_shell_and_cwd_and_nothing_else_extra(rt):
    sh = await rt.call_tool("shell_open", {})
    assert "name" not in sh and sh["cwd"] == rt.default_cwd
    r = await rt.call_tool("exec", {"shell_id": sh["shell_id"], "command": "cd /; echo hi"})
    # (its shell is the one the exec named: said by `list`, not again here)
    assert r == {
        "job_id": r["job_id"],
        "state": "exited",
        "exit_code": 0,
        "output": "hi\n",
        "cwd": "/",
    }
    # the shell's cwd is said again only when a command changes it
    same = await rt.call_tool("exec", {"shell_id": sh["shell_id"], "command": "echo again"})
    assert "cwd" not in same and same["output"] == "again\n", same
    back = await rt.call_tool("exec", {"shell_id": sh["shell_id"], "command": "cd /tmp"})
    assert back["cwd"] == "/tmp", back
    last = await rt.call_tool("exec", {"shell_id": sh["shell_id"], "command": "cd /"})
    listing = await rt.call_tool("list", {})
    assert next(j for j in listing["jobs"] if j["job_id"] == r["job_id"]) == {
        "job_id": r["job_id"],
        "shell_id": sh["shell_id"],
        "state": "exited",
        "exit_code": 0,
        "total_bytes": len("hi\n"),
        "cwd": "/",
    }
    # (a list summary says a shell job's cwd: it does not know where the job started)
    assert all("cwd" in j for j in listing["jobs"]), listing
    assert listing["shells"] == [
        {
            "shell_id": sh["shell_id"],
            "shell": sh["shell"],
            "state": "ready",
            "cwd": "/",
            "last_job_id": last["job_id"],
        }
    ]
    closed = await rt.call_tool("shell_close", {"shell_id": sh["shell_id"]})
    assert closed == {"shell_id": sh["shell_id"], "state": "closed"}


async def test_list_summaries_are_lean_and_full_detail_restores_them(rt, full_rt):
    for runtime in (rt, full_rt):
        await runtime.call_tool("exec", {"command": "true"})
    lean = (await rt.call_tool("list", {}))["jobs"][0]
    full = (await full_rt.call_tool("list", {}))["jobs"][0]
    assert set(lean) == {"job_id", "state", "exit_code"}
    assert {"ok", "started_at", "duration_ms", "pid", "cwd", "name", "mode"} <= set(full)
    jsonschema.validate(await rt.call_tool("list", {}), schemas(rt)["list"])


async def test_search_results_are_lean(rt, tmp_path):
    (tmp_path / "a.txt").write_text("one needle\ntwo\n")
    r = await rt.call_tool("search", {"pattern": "needle"})
    assert r == {
        "matches": [
            {
                "path": "a.txt",
                "line": 1,
                "column": 5,
                "text": "one needle",
                "submatches": [{"start": 4, "end": 10, "text": "needle"}],
            }
        ]
    }
    files = await rt.call_tool("search", {"pattern": "needle", "mode": "files"})
    assert files == {"mode": "files", "files": ["a.txt"]}
    jsonschema.validate(r, schemas(rt)["search"])


async def test_every_optional_result_field_states_its_default(rt):
    def walk(schema: dict[str, Any], where: str) -> None:
        required = set(schema.get("required", ()))
        for name, prop in schema.get("properties", {}).items():
            if name not in required:
                assert "default" in prop, f"{where}.{name}"
            if prop.get("type") == "object" or "properties" in prop:
                walk(prop, f"{where}.{name}")
            if isinstance(prop.get("items"), dict):
                walk(prop["items"], f"{where}.{name}[]")

    for name, schema in schemas(rt).items():
        walk(schema, name)
    for t in rt.tools():
        if t["name"] in (*SNAPSHOT_TOOLS, "list", "search"):
            assert "default" in t["description"], t["name"]


def test_result_detail_is_one_setting_three_ways():
    assert Config().result_detail == "lean"
    assert Config(result_detail="full").result_detail == "full"
    assert Config.from_sources(environ={"CONCH_RESULT_DETAIL": "full"}).result_detail == "full"
    assert parse_setting("result_detail", "full") == "full"
    with pytest.raises(ConfigError, match="result_detail"):
        Config(result_detail="short")


async def test_the_typed_methods_return_what_call_tool_returns(rt, tmp_path):
    """docs/spec.md §6: the embedded API returns the same dictionaries (lean by default)."""
    r = await rt.exec(command="echo hi")
    assert r == {"job_id": r["job_id"], "state": "exited", "exit_code": 0, "output": "hi\n"}
    a = await rt.exec(argv=["echo", "hi"])
    assert a == {**r, "job_id": a["job_id"]}  # (its mode is the call's: `list` says it)
    t = await rt.call_tool("exec", {"command": "echo hi"})
    assert set(t) == set(r)
    # an empty window's cursor is where it ends: said by nothing, as nothing is left to read
    assert set(await rt.read(r["job_id"])) == {"job_id", "state", "exit_code", "output"}
    listed = await rt.list()
    assert listed == await rt.call_tool("list", {})
    sh = await rt.shell_open()
    assert "name" not in sh and "job_id" not in sh
    assert await rt.shell_close(sh["shell_id"]) == {"shell_id": sh["shell_id"], "state": "closed"}
    (tmp_path / "f.txt").write_text("needle\n")
    found = await rt.search(pattern="needle", path=str(tmp_path))
    assert found == await rt.call_tool("search", {"pattern": "needle", "path": str(tmp_path)})
    assert rt.exec.__name__ == "exec" and "Run a command" in (rt.exec.__doc__ or "")


async def test_full_detail_restores_every_field_in_the_typed_methods(tmp_path):
    cfg = conch.Config(data_dir=str(tmp_path / "d"), result_detail="full")
    async with conch.Runtime(cfg) as rt:
        r = await rt.exec(command="echo hi")
        assert {"pid", "log_path", "ok", "duration_ms", "stdout_bytes", "eof"} <= set(r)
        assert (await rt.shell_close((await rt.shell_open())["shell_id"]))["cleanup_complete"]


async def test_a_shell_named_in_exec_opens_on_first_use(tmp_path):
    """One call instead of shell_open + exec: a new name opens a shell of that name (in the
    exec's cwd) and says so once; later calls by the name run in it; an id that is gone stays
    not_found (a typo of an id never opens a shell)."""
    import conch

    async with conch.Runtime(conch.Config(data_dir=str(tmp_path / "data"))) as rt:
        first = await rt.call_tool(
            "exec", {"shell_id": "git", "cwd": str(tmp_path), "command": "export Q=5; pwd"}
        )
        assert first["shell_opened"] is True and first["output"] == f"{tmp_path}\n", first
        again = await rt.call_tool("exec", {"shell_id": "git", "command": "echo $Q; pwd"})
        assert "shell_opened" not in again and again["output"] == f"5\n{tmp_path}\n", again
        jobs = {j["job_id"]: j for j in (await rt.call_tool("list", {}))["jobs"]}
        assert jobs[again["job_id"]]["shell_id"] == jobs[first["job_id"]]["shell_id"]
        gone = await rt.call_tool("exec", {"shell_id": "s_0123456789", "command": "true"})
        assert gone["error"]["code"] == "not_found", gone
        shells = (await rt.call_tool("list", {}))["shells"]
        assert [s["name"] for s in shells] == ["git"], shells


async def test_a_snapshot_says_nothing_the_call_that_started_the_job_chose(rt):
    """mode and shell_id are the exec's own arguments (`list` says them); a running job's
    eof (it has not ended) and a continuing read's cursor (where the last one stopped) are
    known to the caller: all left out, so a background job's result is its id, state and
    output with where to read next."""
    p = await rt.call_tool("exec", {"command": "read x; echo got $x", "pty": True, "yield_ms": 300})
    assert p == {
        "job_id": p["job_id"],
        "state": "running",
        "awaiting_input": True,
        "output": "",
        "next_cursor": 0,
    }, p
    w = await rt.call_tool("write", {"job_id": p["job_id"], "text": "one\n"})
    assert "mode" not in w and "cursor" not in w and w["output"].endswith("got one\n"), w
    listed = {j["job_id"]: j for j in (await rt.call_tool("list", {}))["jobs"]}
    assert listed[p["job_id"]]["mode"] == "pty"
    sh = await rt.call_tool("exec", {"shell_id": "work", "command": "echo in"})
    assert "shell_id" not in sh and sh["shell_opened"] is True, sh
    listed = {j["job_id"]: j for j in (await rt.call_tool("list", {}))["jobs"]}
    assert listed[sh["job_id"]]["shell_id"].startswith("s_")
    # a tail read still says where its window starts
    long = await rt.call_tool("exec", {"command": "seq 1 5000"})
    tail = await rt.call_tool("read", {"job_id": long["job_id"], "tail": True, "max_bytes": 20})
    assert tail["cursor"] == tail["omitted_bytes"] > 0, tail


async def test_an_exec_whose_own_yield_ran_out_has_no_note(tmp_path):
    """The note ('still running — not an error') is for an early return the caller did not
    choose: the default wait (or one the host's horizon cut: test_host_aware.py). A yield_ms
    the caller gave and got is its own choice: `state: running` says it all."""
    cfg = conch.Config(
        data_dir=str(tmp_path / "d"), default_cwd=str(tmp_path), default_yield_ms=300
    )
    async with conch.Runtime(cfg) as rt:
        own = await rt.call_tool("exec", {"command": "sleep 30", "yield_ms": 300})
        assert own["state"] == "running" and "note" not in own, own
        dflt = await rt.call_tool("exec", {"command": "sleep 30"})
        assert dflt["state"] == "running" and "not an error" in dflt["note"], dflt
        for r in (own, dflt):
            await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "kill"})
