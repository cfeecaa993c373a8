"""The real Codex CLI (pinned 0.171.0) as the MCP host of Conch, driven offline by a scripted
fake model: each test asserts on the exact ``function_call_output.output`` Codex hands the model
for Conch's results, against golden files (golden/<scenario>.json; CONCH_UPDATE_GOLDEN=1
rewrites them)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from codex_exec import (
    BINARY_GLOB,
    CODEX_CUT,
    LOAD_CONCH,
    MODEL,
    PACKAGE,
    VERSION,
    CodexRun,
    long_text,
    matches_golden,
    normalize,
    run_codex,
    step_record,
)
from fake_responses import NAMESPACE, Call, FakeResponses, Say, Step

pytestmark = pytest.mark.slow

CONCH_TOOLS = {"exec", "read", "write", "signal", "list", "shell_open", "search", "changes"}


@pytest.fixture(scope="session")
def codex(npm_install) -> Path:
    return npm_install("codex", PACKAGE, VERSION, BINARY_GLOB)


@pytest.fixture
def drive(codex: Path, tmp_path: Path, loopback, logged_conch, spawn):
    """``drive(script, tool_timeout_sec=None)``: one ``codex exec`` run through ``script``."""

    def run(script: list[Step], **kwargs: Any) -> CodexRun:
        return run_codex(
            codex,
            script,
            tmp=tmp_path,
            loopback=loopback,
            conch=logged_conch,
            spawn=spawn,
            **kwargs,
        )

    return run


def scenario(run: CodexRun, tmp: Path, *, long: bool = False) -> dict[str, Any]:
    """The golden record of a run: each tool call and what Codex showed the model for it."""
    steps = []
    for i, step in enumerate(run.fake.script):
        if step is LOAD_CONCH:
            continue  # tools.json holds what tool_search returns
        output = run.fake.output(i)
        shown = None if output is None else output.get("output")
        if long and isinstance(shown, str):
            shown = long_text(normalize(shown, tmp))
        steps.append(normalize(step_record(step, shown, run.fake, i), tmp))
    return {"codex": VERSION, "model": MODEL, "steps": steps}


def job_id(step: int) -> Any:
    """Arguments maker: the ``job_id`` Conch returned for script step ``step``."""
    return lambda fake: fake.output_json(step)["job_id"]


def with_job(step: int, **args: Any) -> Any:
    return lambda fake: {"job_id": job_id(step)(fake), **args}


# --- what the model is shown of Conch -------------------------------------------------------------


def test_codex_lists_conch_tools_to_the_model(drive, tmp_path: Path, logged_conch):
    run = drive([LOAD_CONCH, Call("list", {"info": True}), Say("loaded")])
    first = run.fake.requests[0]
    deferred = [
        line
        for item in first["input"]
        if item.get("type") == "message"
        for part in item.get("content", [])
        for line in part.get("text", "").splitlines()
        if line.startswith(f"- {NAMESPACE}:")
    ]
    search = run.fake.output(0)
    assert search is not None and search["type"] == "tool_search_output", search
    (namespace,) = [t for t in search["tools"] if t.get("name") == NAMESPACE]
    tools = [{"name": t["name"], "description": t["description"]} for t in namespace["tools"]]
    assert {t["name"] for t in tools} == CONCH_TOOLS
    (initialize,) = logged_conch.requests("initialize")
    client = initialize["params"]["clientInfo"]
    assert client["name"] and client["version"], client
    print(f"Codex initialize clientInfo: {json.dumps(client)}")
    # the horizon Conch picks for this Codex from its clientInfo: its 300 s cut, less 10 s
    assert run.json(1)["info"]["host"] == {
        "name": "Codex",
        "timeout_ms": 300_000,
        "horizon_ms": 290_000,
        "source": "known host",
    }
    matches_golden(
        "tools",
        normalize(
            {
                "codex": VERSION,
                "model": MODEL,
                "initialize": initialize["params"],
                "codex_own_tools": [t.get("name", t["type"]) for t in first["tools"]],
                "deferred_listing": deferred,
                "namespace": {"name": namespace["name"], "description": namespace["description"]},
                "tools": tools,
            },
            tmp_path,
        ),
    )


def test_a_deferred_tool_is_called_from_the_listing_alone(drive):
    """Before any tool_search the model knows of Conch only the listing's line (the first 247
    characters of the instructions). Conch's call sheet there names exec and its arguments,
    and Codex runs a call to the still-deferred tool: the turn a tool_search costs is saved."""
    run = drive([Call("exec", {"command": "echo hi", "yield_ms": 5000}), Say("done")])
    listing = [
        line
        for item in run.fake.requests[0]["input"]
        if item.get("type") == "message"
        for part in item.get("content", [])
        for line in part.get("text", "").splitlines()
        if line.startswith(f"- {NAMESPACE}:")
    ]
    assert len(listing) == 1 and "exec{command,yield_ms," in listing[0], listing
    assert not any(t.get("name") == NAMESPACE for t in run.fake.requests[0]["tools"])
    out = run.output(0)
    assert isinstance(out, str) and out.startswith("Wall time: "), out
    body = json.loads(out.split("Output:\n", 1)[1])
    assert body["state"] == "exited" and body["output"] == "hi\n", body


# --- exec -----------------------------------------------------------------------------------------


def test_exec_echo_hi(drive, tmp_path: Path):
    run = drive([LOAD_CONCH, Call("exec", {"command": "echo hi"}), Say("ok")])
    assert run.json(1) | {"job_id": "-"} == {
        "job_id": "-",
        "state": "exited",
        "exit_code": 0,
        "output": "hi\n",
    }
    matches_golden("exec_echo_hi", scenario(run, tmp_path))


def test_exec_with_a_non_zero_exit_is_a_normal_result(drive, tmp_path: Path):
    run = drive([LOAD_CONCH, Call("exec", {"command": "ls /nonexistent; exit 3"}), Say("ok")])
    result = run.json(1)
    assert (result["state"], result["exit_code"]) == ("exited", 3)
    assert "error" not in result
    matches_golden("exec_nonzero_exit", scenario(run, tmp_path))


def test_a_long_job_yields_then_read_waits_for_its_exit(drive, tmp_path: Path):
    run = drive(
        [
            LOAD_CONCH,
            Call("exec", {"command": "sleep 2; echo done", "yield_ms": 500}),
            Call("read", with_job(1, wait_ms=10000, until="exit")),
            Say("ok"),
        ]
    )
    assert run.json(1)["state"] == "running"
    done = run.json(2)
    assert (done["state"], done["exit_code"], done["output"]) == ("exited", 0, "done\n")
    matches_golden("long_job", scenario(run, tmp_path))


# --- errors ---------------------------------------------------------------------------------------


def test_every_error_the_model_can_meet(drive, tmp_path: Path):
    run = drive(
        [
            LOAD_CONCH,
            Call("read", {"job_id": "j_doesnotexist"}),
            Call("exec", {"bogus_arg": 1}),
            Call("no_such_tool", {}),
            Call("exec", '{"command": "echo never'),  # arguments that are not JSON
            Say("ok"),
        ]
    )
    assert run.json(1)["error"]["code"] == "not_found"
    assert run.json(2)["error"]["code"] == "invalid_argument"
    assert run.output(3) == f"unsupported call: {NAMESPACE}no_such_tool"
    matches_golden("errors", scenario(run, tmp_path))


# --- large outputs --------------------------------------------------------------------------------

SEQ = {"command": "seq 1 100000"}


def test_a_large_exec_output_reaches_the_model_whole(drive, tmp_path: Path):
    run = drive([LOAD_CONCH, Call("exec", SEQ), Say("ok")])
    result = run.json(1)  # Codex did not cut it: the JSON after "Output:\n" parses
    assert result["state"] == "exited" and result["truncated"] is True
    # Conch's window stays below Codex's cut (8 KiB for Codex, issue 20.2): its marker is whole
    marker = re.search(
        r"\[\.\.\. (\d+) bytes omitted: read cursor (\d+)-(\d+) \.\.\.\]", result["output"]
    )
    assert marker is not None, result["output"][:300]
    omitted, start, end = map(int, marker.groups())
    assert end - start == omitted == result["omitted_bytes"]
    assert len(result["output"].encode()) <= 8192 + 100
    assert not CODEX_CUT.search(run.output(1))
    matches_golden("large_exec_output", scenario(run, tmp_path, long=True))


def test_a_large_read_as_codex_shows_it(drive, tmp_path: Path):
    """Codex cuts a result over its 10000-token budget in the middle (a 400000-byte read
    reached the model as broken JSON): Conch keeps the window below the cut (issue 20.2), so
    the JSON parses and says where to go on."""
    run = drive(
        [
            LOAD_CONCH,
            Call("exec", SEQ),
            Call("read", with_job(1, cursor=0, max_bytes=400000)),
            Say("ok"),
        ]
    )
    assert isinstance(run.output(2), str) and not CODEX_CUT.search(run.output(2))
    window = run.json(2)
    assert 0 < window["next_cursor"] == len(window["output"].encode()) <= 8192
    matches_golden("large_read", scenario(run, tmp_path, long=True))


# --- terminals ------------------------------------------------------------------------------------


def test_a_pty_prompt_is_answered_with_write(drive, tmp_path: Path):
    run = drive(
        [
            LOAD_CONCH,
            Call(
                "exec",
                {"command": "read -p 'Name: ' n; echo hello $n", "pty": True, "yield_ms": 1000},
            ),
            Call("write", with_job(1, text="Conch", keys=["enter"])),
            Say("ok"),
        ]
    )
    prompt = run.json(1)
    assert (prompt["state"], prompt["output"]) == ("running", "Name: ")
    assert "hello Conch" in run.json(2)["output"]
    matches_golden("pty_prompt", scenario(run, tmp_path))


# --- the host's own timeout -----------------------------------------------------------------------


def _running_or_exited(fake: FakeResponses) -> dict[str, Any]:
    jobs = fake.last_output_json()["jobs"]
    return {"job_id": jobs[0]["job_id"], "wait_ms": 15000, "until": "exit"}


def test_a_host_timeout_shorter_than_the_call_does_not_lose_the_job(
    drive, tmp_path: Path, logged_conch
):
    """With `tool_timeout_sec` lowered and Conch told the same (`host_timeout_ms`, which
    `conch install` passes), the setting wins over Codex's default: no wait reaches Codex's
    timeout, the exec returns `running` first, saying that is no error."""
    run = drive(
        [
            LOAD_CONCH,
            Call("exec", {"command": "sleep 6; echo survived", "yield_ms": 10000}),
            Call("list", {"state": "all"}),
            Call("read", _running_or_exited),
            Say("ok"),
        ],
        tool_timeout_sec=5,
        conch_env={"CONCH_HOST_TIMEOUT_MS": "5000"},
    )
    cancelled = [m["params"] for m in logged_conch.requests("notifications/cancelled")]
    assert cancelled == []
    assert "timed out" not in json.dumps(run.output(1))
    first = run.json(1)
    assert first["state"] == "running", first
    assert first["note"] == "still running — not an error; read to wait on", first
    (job,) = run.json(2)["jobs"]
    assert job["state"] in ("running", "exited"), job
    final = run.json(3)
    assert (final["state"], final["output"]) == ("exited", "survived\n"), final
    matches_golden("host_timeout", scenario(run, tmp_path))


def _detached_job(fake: FakeResponses) -> dict[str, Any]:
    """``read`` of the job the previous `list` names (what the model learns of it there)."""
    listed = fake.last_output_json()
    found = re.search(r"\bj_[0-9a-f]{10}\b", listed.get("detached", ""))
    job_id = found.group(0) if found else listed["jobs"][0]["job_id"]
    return {"job_id": job_id, "wait_ms": 4000, "until": "exit"}


def test_a_host_timeout_conch_was_not_told_of_never_loses_the_job(
    drive, tmp_path: Path, logged_conch
):
    """Codex cuts the exec at its `tool_timeout_sec` (5 s; Conch was not told, so its horizon
    is Codex's default) and cancels it with the reason it also gives a person's interrupt: the
    job runs on, detached; the next result says so and how to stop it; its output is read."""
    run = drive(
        [
            LOAD_CONCH,
            Call("exec", {"command": "sleep 7; echo late", "yield_ms": 10000}),
            Call("list", {"state": "all"}),
            Call("read", _detached_job),
            Say("ok"),
        ],
        tool_timeout_sec=5,
    )
    cancelled = [m["params"] for m in logged_conch.requests("notifications/cancelled")]
    assert [c["reason"] for c in cancelled] == ["MCP request cancelled by caller"]
    assert "timed out awaiting tools/call after 5s" in json.dumps(run.output(1))
    listed = run.json(2)
    (job,) = listed["jobs"]
    assert job["state"] == "running", listed
    j = job["job_id"]
    assert listed["detached"] == (
        f"{j} kept running after the host stopped waiting for the call that started it (not an "
        f"error): read {j} to follow it, signal {j} to stop it."
    ), listed
    final = run.json(3)
    assert (final["job_id"], final["state"], final["output"]) == (j, "exited", "late\n"), final
    matches_golden("host_timeout_detached", scenario(run, tmp_path))


def _long_read(fake: FakeResponses) -> dict[str, Any]:
    """A long ``read`` of the job the previous result names (a read's, or a list's)."""
    last = fake.last_output_json()
    if "job_id" in last:
        return {"job_id": last["job_id"], "wait_ms": 20000, "until": "exit"}
    return {**_detached_job(fake), "wait_ms": 20000}


def test_after_one_cut_every_wait_ends_before_the_hosts_timeout(
    drive, tmp_path: Path, logged_conch
):
    """Conch learns the cut: the host cut the exec at 5 s (its `tool_timeout_sec`, which
    Conch was not told), so the next waits of that client end before 5 s, still running and
    no error, instead of being cut again; the job is followed to its end without a second
    cancel."""
    run = drive(
        [
            LOAD_CONCH,
            Call("exec", {"command": "sleep 11; echo late", "yield_ms": 10000}),
            Call("list", {"state": "all"}),
            Call("read", _long_read),
            Call("read", _long_read),
            Call("read", _long_read),
            Say("ok"),
        ],
        tool_timeout_sec=5,
    )
    cancelled = [m["params"] for m in logged_conch.requests("notifications/cancelled")]
    assert len(cancelled) == 1, cancelled  # the exec only: no read was cut
    reads = [run.json(i) for i in (3, 4, 5)]
    assert all("error" not in r for r in reads), reads
    assert reads[0]["state"] == "running" and "not an error" in reads[0].get("note", ""), reads
    assert any(r["state"] == "exited" and "late" in r["output"] for r in reads), reads


def test_codex_words_a_persons_interrupt_as_it_words_its_timeout(
    codex: Path, tmp_path: Path, loopback, logged_conch, spawn
):
    """The fact the detach rests on, measured: a person's Ctrl-C (SIGINT to `codex exec`)
    while Conch runs a call sends the same `notifications/cancelled` reason as Codex's own
    timeout above, so Conch cannot tell the two apart."""

    def interrupted(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = spawn(argv, **kwargs)

        def interrupt() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                if any(m["params"]["name"] == "exec" for m in logged_conch.requests("tools/call")):
                    time.sleep(1.0)
                    proc.send_signal(signal.SIGINT)
                    return
                time.sleep(0.05)

        threading.Thread(target=interrupt, daemon=True).start()
        return proc

    script = [
        LOAD_CONCH,
        Call("exec", {"command": "sleep 30; echo never", "yield_ms": 20000}),
        Say("ok"),
    ]
    with pytest.raises(AssertionError, match="codex exec failed"):  # Ctrl-C ends the run
        run_codex(
            codex,
            script,
            tmp=tmp_path,
            loopback=loopback,
            conch=logged_conch,
            spawn=interrupted,
            timeout=30,
        )
    cancelled = [m["params"] for m in logged_conch.requests("notifications/cancelled")]
    [call] = [m for m in logged_conch.requests("tools/call") if m["params"]["name"] == "exec"]
    assert cancelled == [{"requestId": call["id"], "reason": "MCP request cancelled by caller"}]
