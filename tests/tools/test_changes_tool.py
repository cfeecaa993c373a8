"""The `changes` tool of the default profile, and `Runtime.changes`: a real job changes real
files; the change set, its text view, undo, redo, a conflict and bad input, through the
embedded API's call_tool (the MCP, HTTP and dashboard front ends: tests/mcp, tests/http)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import jsonschema
import pytest

import conch
from conch.errors import ConchError
from conch.tools.call import call_tool_full
from conch.tools.render import render

pytestmark = pytest.mark.anyio

JOB = "echo two >> a.txt; rm b.txt; printf 'new\\n' > c.txt; chmod 600 a.txt"


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("keep\n")
    return ws


@pytest.fixture
async def ws_rt(tmp_path: Path) -> AsyncIterator[tuple[conch.Runtime, Path]]:
    ws = workspace(tmp_path)
    cfg = conch.Config(data_dir=str(tmp_path / "data"), default_cwd=str(ws))
    async with conch.Runtime(cfg) as rt:
        yield rt, ws


def before(ws: Path) -> None:
    assert (ws / "a.txt").read_text() == "one\n"
    assert (ws / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (ws / "b.txt").read_text() == "keep\n"
    assert not (ws / "c.txt").exists()


async def test_a_jobs_changes_listed_diffed_and_undone(ws_rt) -> None:
    rt, ws = ws_rt
    os.chmod(ws / "a.txt", 0o644)
    ran = await rt.call_tool("exec", {"command": JOB})
    assert ran["changes"] == {"added": 1, "modified": 1, "deleted": 1}, ran
    got = await rt.call_tool("changes", {"job_id": ran["job_id"]})
    assert (got["job_id"], got["added"], got["modified"], got["deleted"]) == (
        ran["job_id"],
        1,
        1,
        1,
    )
    files = {f["path"]: (f["change"], f["type"]) for f in got["files"]}
    assert files == {
        "a.txt": ("modified", "file"),
        "b.txt": ("deleted", "file"),
        "c.txt": ("added", "file"),
    }
    assert "+two\n" in got["diff"] and "-keep\n" in got["diff"] and "+new\n" in got["diff"]
    assert any("outside" in n["reason"] for n in got["not_covered"]), got["not_covered"]
    schema = next(t["outputSchema"] for t in rt.tools() if t["name"] == "changes")
    jsonschema.validate(got, schema)

    undone = await rt.call_tool("changes", {"job_id": ran["job_id"], "undo": True})
    assert undone["job_id"] != ran["job_id"] and undone["undo_of"] == ran["job_id"], undone
    before(ws)
    files = {f["path"]: f["change"] for f in undone["files"]}
    assert files == {"a.txt": "modified", "b.txt": "added", "c.txt": "deleted"}
    # an undo is a change set of its own: undoing it redoes the job
    await rt.call_tool("changes", {"job_id": undone["job_id"], "undo": True})
    assert (ws / "a.txt").read_text() == "one\ntwo\n" and (ws / "c.txt").read_text() == "new\n"
    assert not (ws / "b.txt").exists()


async def test_the_text_view_is_a_compact_list_then_the_diff(ws_rt) -> None:
    rt, _ = ws_rt
    ran = await rt.call_tool("exec", {"command": JOB})
    out = await call_tool_full(rt.engine, rt.registry, "changes", {"job_id": ran["job_id"]})
    text = render("changes", out.result, is_error=False, full=out.full)
    lines = text.splitlines()
    assert lines[0] == f"[changes of {ran['job_id']}: 1 added, 1 modified, 1 deleted]", text
    assert lines[1:4] == ["M a.txt", "D b.txt", "A c.txt"], text
    assert lines[4].startswith("not covered: tracking covers the workspace only"), text
    assert lines[5] == "--- a/a.txt" and "+two" in lines, text
    # the job's own result says it changed files, in both views
    exec_text = render("exec", ran, is_error=False)
    assert "changed 1 added, 1 modified, 1 deleted" in exec_text.splitlines()[0], exec_text
    undone = await rt.call_tool("changes", {"job_id": ran["job_id"], "undo": True})
    head = render("changes", undone, is_error=False).splitlines()[0]
    counted = f"changes of {undone['job_id']}: 1 added, 1 modified, 1 deleted"
    assert head == f"[{counted} · the undo of {ran['job_id']}]", head


async def test_a_conflict_names_the_path_writes_nothing_and_force_takes_it_back(ws_rt) -> None:
    rt, ws = ws_rt
    ran = await rt.call_tool("exec", {"command": JOB})
    (ws / "a.txt").write_text("a person's edit\n")
    refused = await rt.call_tool("changes", {"job_id": ran["job_id"], "undo": True})
    assert refused["error"]["code"] == "conflict" and "a.txt" in refused["error"]["message"]
    assert refused["error"]["retryable"] is False
    assert (ws / "c.txt").exists() and not (ws / "b.txt").exists()  # nothing written
    with pytest.raises(ConchError) as raised:
        await rt.changes(ran["job_id"], undo=True)
    assert raised.value.code == "conflict"
    forced = await rt.call_tool(
        "changes", {"job_id": ran["job_id"], "undo": True, "force": ["a.txt"]}
    )
    assert "error" not in forced, forced
    before(ws)


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"job_id": ""},
        {"job_id": "j_1", "bogus": 1},
        {"job_id": "j_1", "undo": "yes"},
        {"job_id": "j_1", "undo": 1},
        {"job_id": "j_1", "force": "a.txt"},
        {"job_id": "j_1", "force": [1]},
        {"job_id": "j_1", "force": ["a\x00b"]},
        {"job_id": "j_1", "cursor": 3},
        {"job_id": "j_1", "max_bytes": 0},
        {"job_id": "j_1", "max_bytes": True},
        {"job_id": "j_1", "max_bytes": 1048577},
    ],
)
async def test_bad_arguments_are_invalid_argument_before_anything_runs(ws_rt, args) -> None:
    rt, _ = ws_rt
    r = await rt.call_tool("changes", args)
    assert r["error"]["code"] == "invalid_argument", (args, r)


async def test_unknown_untracked_and_running_jobs_are_refused(ws_rt) -> None:
    rt, ws = ws_rt
    assert (await rt.call_tool("changes", {"job_id": "j_0000000000"}))["error"]["code"] == (
        "not_found"
    )
    off = await rt.call_tool("exec", {"command": "echo x > d.txt", "changes": False})
    assert "changes" not in off and (ws / "d.txt").exists()
    r = await rt.call_tool("changes", {"job_id": off["job_id"], "undo": True})
    assert r["error"]["code"] == "not_found" and (ws / "d.txt").exists(), r
    running = await rt.call_tool("exec", {"command": "sleep 30", "yield_ms": 0})
    try:
        r = await rt.call_tool("changes", {"job_id": running["job_id"]})
        assert r["error"]["code"] == "conflict" and "running" in r["error"]["message"], r
    finally:
        await rt.signal(running["job_id"], "kill")


async def test_the_typed_method_takes_the_tools_arguments(tmp_path: Path) -> None:
    """`rt.changes(job_id, undo=False, force=())` returns what call_tool returns, in the
    configured detail (full: every field at its default too)."""
    ws = workspace(tmp_path)
    cfg = conch.Config(data_dir=str(tmp_path / "data"), default_cwd=str(ws), result_detail="full")
    async with conch.Runtime(cfg) as rt:
        ran = await rt.exec(command="echo more >> a.txt")
        got = await rt.changes(ran["job_id"])
        assert got == await rt.call_tool("changes", {"job_id": ran["job_id"]})
        assert [f["path"] for f in got["files"]] == ["a.txt"] and got["modified"] == 1
        assert (got["added"], got["deleted"], got["next_cursor"], got["overlapping_jobs"]) == (
            0,
            0,
            None,
            [],
        )
        undone = await rt.changes(ran["job_id"], True)
        assert (ws / "a.txt").read_text() == "one\n" and undone["undo_of"] == ran["job_id"]
        (ws / "a.txt").write_text("edited\n")
        with pytest.raises(ConchError) as raised:
            await rt.changes(undone["job_id"], undo=True)
        assert raised.value.code == "conflict" and "a.txt" in raised.value.message
        await rt.changes(undone["job_id"], undo=True, force=["a.txt"])
        assert (ws / "a.txt").read_text() == "one\nmore\n"
