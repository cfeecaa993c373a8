"""The real Claude Code (pinned in claude_host.py) as the MCP host of this checkout's Conch.

Each test runs ``claude -p`` offline against a scripted fake model and checks the exact
``tool_result`` the host handed the model for each Conch call against
``golden/<scenario>.json`` (``CONCH_UPDATE_GOLDEN=1`` rewrites them), besides the few facts
each scenario is about.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from claude_golden import check, normalize
from claude_host import Run
from fake_messages import Block, Say, ToolUse

pytestmark = pytest.mark.slow

Claude = Callable[..., Run]
PREFIX = "mcp__conch__"
Args = dict[str, Any] | Callable[[list[Block | None]], dict[str, Any]]


def conch(tool: str, args: Args) -> ToolUse:
    return ToolUse(PREFIX + tool, args)


def structured(block: Block | None) -> Any:
    """What Conch returned, read back from the host's tool_result: on success the host hands
    the model Conch's structuredContent as JSON text."""
    assert block is not None, "the host sent no tool_result for this call"
    assert isinstance(block["content"], str), block
    return json.loads(block["content"])


def job_of(step: int, **args: Any) -> Callable[[list[Block | None]], dict[str, Any]]:
    """Arguments naming the job the call of ``step`` started, plus ``args``."""

    def make(results: list[Block | None]) -> dict[str, Any]:
        return {"job_id": structured(results[step])["job_id"], **args}

    return make


def kept(block: Block | None) -> Block | None:
    """What of a tool_result block the model reads (not its id or cache marks)."""
    return None if block is None else {k: block[k] for k in ("content", "is_error") if k in block}


def shown(run: Run) -> list[dict[str, Any]]:
    """Each tool call of the run and the tool_result the model got for it, normalized."""
    steps = [
        {
            "tool_use": {"name": step.name, "input": run.fake.inputs.get(i)},
            "tool_result": kept(run.fake.tool_result(i)),
        }
        for i, step in enumerate(run.fake.script)
        if isinstance(step, ToolUse)
    ]
    return normalize(steps, run.dir)


def cancellations(run: Run, tool: str) -> list[dict[str, Any]]:
    """The ``notifications/cancelled`` the host sent Conch for its call of ``tool``, with the
    request id (a counter) left out."""
    [call] = [m for m in sent_to_conch(run, "tools/call") if m["params"]["name"] == tool]
    return [
        {k: v for k, v in m["params"].items() if k != "requestId"}
        for m in sent_to_conch(run, "notifications/cancelled")
        if m["params"].get("requestId") == call["id"]
    ]


def sent_to_conch(run: Run, method: str) -> list[dict[str, Any]]:
    return [m for m in run.to_conch() if m.get("method") == method]


# ---- the tools ---------------------------------------------------------------------------


def test_conch_tools_reach_the_model_verbatim(claude: Claude):
    run = claude([conch("list", {"info": True}), Say("nothing to do")])
    # the horizon Conch picks for this Claude Code from its clientInfo: none (no call limit)
    assert structured(run.results()[0])["info"]["host"] == {
        "name": "Claude Code",
        "timeout_ms": None,
        "horizon_ms": None,
        "source": "known host",
    }
    [listing] = [m["result"]["tools"] for m in run.from_conch() if "tools" in m.get("result", {})]
    first = run.fake.turns()[0]
    listed = [t for t in first["tools"] if t["name"].startswith(PREFIX)]
    assert sorted(listed, key=lambda t: t["name"]) == sorted(
        (
            {
                "name": PREFIX + t["name"],
                "description": t["description"],
                "input_schema": t["inputSchema"],
            }
            for t in listing
        ),
        key=lambda t: t["name"],
    )
    # the server's instructions, verbatim, go into a system message under "## conch"
    [served] = [m["result"] for m in run.from_conch() if "serverInfo" in m.get("result", {})]
    [system] = [
        block["text"]
        for m in first["messages"]
        if m["role"] == "system"
        for block in (m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}])
        if "\n## conch\n" + served["instructions"] in block.get("text", "")
    ]
    section = system[system.index("# MCP Server Instructions") :]
    section = section[: section.index(served["instructions"]) + len(served["instructions"])]
    [initialize] = sent_to_conch(run, "initialize")
    check(
        "tools",
        normalize(
            {"initialize": initialize["params"], "instructions": section, "tools": listed},
            run.dir,
        ),
    )


# ---- exec --------------------------------------------------------------------------------


def test_exec_echo(claude: Claude):
    run = claude([conch("exec", {"command": "echo hi"}), Say("ok")])
    result = run.results()[0]
    assert "is_error" not in result
    assert structured(result) | {"job_id": "-"} == {
        "job_id": "-",
        "state": "exited",
        "exit_code": 0,
        "output": "hi\n",
    }
    check("exec_echo", shown(run))


def test_a_nonzero_exit_is_a_plain_result(claude: Claude):
    run = claude([conch("exec", {"command": "ls /nonexistent; exit 3"}), Say("ok")])
    result = run.results()[0]
    assert "is_error" not in result
    assert structured(result)["exit_code"] == 3
    check("exec_nonzero_exit", shown(run))


def test_a_long_job_yields_then_read_waits_for_its_exit(claude: Claude):
    run = claude(
        [
            conch("exec", {"command": "sleep 2; echo done", "yield_ms": 500}),
            conch("read", job_of(0, wait_ms=10000, until="exit")),
            Say("ok"),
        ]
    )
    yielded, finished = run.results()[:2]
    assert structured(yielded)["state"] == "running"
    assert structured(finished) | {"job_id": "-"} == {
        "job_id": "-",
        "state": "exited",
        "exit_code": 0,
        "output": "done\n",
    }
    check("long_job", shown(run))


# ---- errors ------------------------------------------------------------------------------


def test_every_error_the_model_can_meet(claude: Claude):
    run = claude(
        [
            conch("read", {"job_id": "j_doesnotexist"}),
            conch("exec", {"bogus_arg": 1}),
            conch("no_such_tool", {}),
            Say("ok"),
        ]
    )
    unknown_job, bad_argument, unknown_tool = run.results()[:3]
    # Conch's errors: its text rendering, flagged; the structured error is not shown
    assert unknown_job["is_error"] is True
    assert unknown_job["content"].startswith("[error not_found] ")
    assert bad_argument["is_error"] is True
    assert bad_argument["content"].startswith("[error invalid_argument] ")
    # a tool Conch does not have never reaches it: the host answers
    assert unknown_tool["is_error"] is True
    assert "No such tool available: mcp__conch__no_such_tool" in unknown_tool["content"]
    assert [m["params"]["name"] for m in sent_to_conch(run, "tools/call")] == ["read", "exec"]
    check("errors", shown(run))


# ---- large output ------------------------------------------------------------------------

OMITTED = re.compile(r"\[\.\.\. (\d+) bytes omitted: read cursor (\d+)-(\d+) \.\.\.\]")


def test_a_large_output_reaches_the_model_intact(claude: Claude):
    run = claude(
        [
            conch("exec", {"command": "seq 1 100000"}),
            conch("read", job_of(0, cursor=0, max_bytes=400000)),
            Say("ok"),
        ]
    )
    inline, big_read = run.results()[:2]
    # Conch's 16 KiB inline window arrives whole, its marker of what it left out included
    result = structured(inline)
    full = "".join(f"{n}\n" for n in range(1, 100001))
    [(omitted, start, end)] = OMITTED.findall(result["output"])
    head, tail = result["output"].split(OMITTED.search(result["output"]).group(0))
    assert full.startswith(head) and full.endswith(tail.lstrip("\n"))
    assert result["truncated"] is True and result["omitted_bytes"] == int(omitted)
    assert int(end) - int(start) == int(omitted)
    # a 400000-byte read would be over the host's 25000-token limit for an MCP result (the
    # model would get a note, the result a file): Conch keeps the window below it (32 KiB for
    # Claude Code, issue 20.2), so the model reads it whole, with the cursor to go on from
    sized = [r for r in run.fake.requests if r.path.startswith("/v1/messages/count_tokens")]
    assert sized == []
    window = structured(big_read)
    assert "is_error" not in big_read and full.startswith(window["output"])
    assert window["next_cursor"] == len(window["output"].encode()) <= 32768
    check("large_output", shown(run))


# ---- a terminal ----------------------------------------------------------------------------


def test_a_pty_prompt_is_answered_with_write(claude: Claude):
    run = claude(
        [
            conch(
                "exec",
                {"command": "read -p 'Name: ' n; echo hello $n", "pty": True, "yield_ms": 1000},
            ),
            conch("write", job_of(0, text="World", keys=["enter"])),
            Say("ok"),
        ]
    )
    prompted, answered = run.results()[:2]
    assert structured(prompted)["state"] == "running"
    assert structured(prompted)["output"].endswith("Name: ")
    assert "hello World" in structured(answered)["output"]
    check("pty_prompt", shown(run))


# ---- the host's own timeout ----------------------------------------------------------------


def listed_job(step: int, **args: Any) -> Callable[[list[Block | None]], dict[str, Any]]:
    """Arguments naming the first job that the `list` call of ``step`` returned."""

    def make(results: list[Block | None]) -> dict[str, Any]:
        jobs = structured(results[step]).get("jobs") or [{"job_id": "j_none_listed"}]
        return {"job_id": jobs[0]["job_id"], **args}

    return make


def test_a_host_timeout_does_not_lose_the_job(claude: Claude):
    run = claude(
        [
            conch("exec", {"command": "sleep 8; echo survived", "yield_ms": 10000}),
            conch("list", {"state": "all"}),
            conch("read", listed_job(1, wait_ms=10000, until="exit")),
            Say("ok"),
        ],
        env={"MCP_TOOL_TIMEOUT": "5000"},
    )
    timed_out, listed, read = run.results()[:3]
    # what the host does is the host's: the model sees a timeout error, Conch a cancellation
    assert timed_out is not None and timed_out.get("is_error") is True
    cancelled = cancellations(run, "exec")
    assert len(cancelled) == 1
    check("host_timeout", {"steps": shown(run)[:1], "cancelled": cancelled})
    # and the job must live on for the model to find: running, or done with its output; the
    # next result says so (the model saw only the host's timeout, without the job's id)
    [job] = structured(listed)["jobs"]
    assert job["state"] in ("running", "exited"), job
    assert structured(listed)["detached"].startswith(job["job_id"]), structured(listed)
    assert structured(read) | {"job_id": "-"} == {
        "job_id": "-",
        "state": "exited",
        "exit_code": 0,
        "output": "survived\n",
    }


# ---- a person interrupting ---------------------------------------------------------------


def test_a_person_interrupting_cancels_the_call(claude: Claude):
    # Ctrl-C (SIGINT) while Conch runs the call: the host cancels the request, tells the model
    # the person stopped it, and ends the run
    run = claude(
        [conch("exec", {"command": "sleep 30; echo never", "yield_ms": 20000}), Say("ok")],
        interrupt_on="exec",
    )
    cancelled = cancellations(run, "exec")
    assert [c["reason"] for c in cancelled] == ["AbortError: user-cancel"]
    # the run ends there: no model turn gets the result, the stream shows what it would be
    assert len(run.fake.turns()) == 1
    [shown_result] = [
        kept(block)
        for e in run.events
        if e.get("type") == "user"
        for block in e["message"]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    [result] = [e for e in run.events if e.get("type") == "result"]
    assert result["subtype"] == "error_during_execution"
    check(
        "person_interrupts",
        normalize({"tool_result": shown_result, "cancelled": cancelled}, run.dir),
    )
