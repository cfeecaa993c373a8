"""Digests in exec and read results (docs/spec.md §5 "faithful on red"), through the embedded API:
real compilers and test runners, lean and text views, the schema, the costs."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import conch
from conch.tools.call import call_tool_full, text_block

pytestmark = pytest.mark.anyio


@pytest.fixture
def rt_settings() -> dict[str, str]:
    """Results at Config's default detail (lean), as a model gets them."""
    return {"result_detail": "lean"}


def snapshot_schema(rt: conch.Runtime) -> dict[str, Any]:
    return next(t["outputSchema"]["anyOf"][0] for t in rt.tools() if t["name"] == "exec")


def c_project(root: Path, warnings: int = 300) -> None:
    """Two files of unused variables (a warning each) around one with two errors."""
    half = warnings // 2
    for name in ("w1", "w2"):
        body = "".join(f"  int v{i} = {i};\n" for i in range(half))
        (root / f"{name}.c").write_text(f"int {name}(void) {{\n{body}  return 0;\n}}\n")
    (root / "bad.c").write_text(
        "int bad(void) {\n  int a = 1;\n  return a + missing_one;\n}\n"
        "int worse(void) {\n  return undefined_two * 2;\n}\n"
    )


async def test_a_build_with_300_warnings_names_its_2_errors(rt, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc (apt package gcc)")
    c_project(tmp_path)
    r = await rt.call_tool("exec", {"command": "gcc -Wall -c w1.c bad.c w2.c", "yield_ms": 60000})
    assert r["exit_code"] == 1 and r["truncated"]
    d = r["digest"]
    errors = [e["text"] for e in d["lines"]]
    assert any(t.startswith("bad.c:3:") and "missing_one" in t for t in errors)
    assert any(t.startswith("bad.c:6:") and "undefined_two" in t for t in errors)
    assert not any("warning" in t for t in errors)  # listed only when nothing failed
    warned = next(o for o in d["omitted"] if o["kind"] == "warning")
    assert warned["lines"] == 302  # 300 unused variables, 2 functions without a return
    assert "counts" not in d  # gcc prints no totals, so there are none
    # each cursor leads `read` to that line
    for e in d["lines"]:
        again = await rt.call_tool(
            "read", {"job_id": r["job_id"], "cursor": e["cursor"], "max_bytes": 400}
        )
        assert again["output"].startswith(e["text"])
        assert "digest" not in again  # shown once; digest: true asks again
    jsonschema.validate(r, snapshot_schema(rt))


async def test_the_text_view_shows_the_digest_beside_the_exit_code(rt, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc (apt package gcc)")
    c_project(tmp_path)
    out = await call_tool_full(
        rt.engine, rt.registry, "exec", {"command": "gcc -Wall -c w1.c bad.c w2.c"}
    )
    text = text_block(rt.registry, "exec", out)
    head = next(line for line in text.splitlines() if line.startswith("[digest:"))
    assert "302 more warning lines at @" in head and head.endswith("exit 1]")
    shown = [line for line in text.splitlines() if line.startswith("@")]
    assert any("missing_one" in line for line in shown)
    assert any("undefined_two" in line for line in shown)
    jsonschema.validate(out.full, snapshot_schema(rt))


async def test_output_that_fits_gets_no_digest_and_no_digest_work(rt):
    r = await rt.call_tool("exec", {"command": "echo 'a.c:1:1: error: boom'; exit 1"})
    assert "digest" not in r
    assert rt.engine.jobs.get(r["job_id"]).digest is None  # nothing was read for it
    asked = await rt.call_tool("read", {"job_id": r["job_id"], "digest": True})
    assert asked["digest"]["lines"] == [{"cursor": 0, "text": "a.c:1:1: error: boom"}]


async def test_digest_false_turns_it_off(rt):
    command = "for i in $(seq 3000); do echo noise $i; done; echo 'x.c:9:1: error: e'; exit 1"
    r = await rt.call_tool("exec", {"command": command, "digest": False})
    assert r["truncated"] and "digest" not in r
    assert rt.engine.jobs.get(r["job_id"]).digest is None
    again = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0, "digest": False})
    assert "digest" not in again


async def test_a_read_that_leaves_output_out_carries_the_digest_once(rt):
    command = "echo 'x.c:9:1: error: e'; seq 1 20000; exit 1"
    r = await rt.call_tool("exec", {"command": command, "digest": False})
    first = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0, "max_bytes": 100})
    assert [e["text"] for e in first["digest"]["lines"]] == ["x.c:9:1: error: e"]
    second = await rt.call_tool("read", {"job_id": r["job_id"], "max_bytes": 100})
    assert "digest" not in second
    third = await rt.call_tool("read", {"job_id": r["job_id"], "max_bytes": 100, "digest": True})
    assert third["digest"] == first["digest"]


async def test_a_running_job_has_no_digest(rt):
    r = await rt.call_tool(
        "exec", {"command": "seq 1 30000; echo 'error: x'; sleep 30", "yield_ms": 1500}
    )
    assert r["state"] == "running" and "digest" not in r
    read = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0, "digest": True})
    assert "digest" not in read
    await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "kill"})


async def test_a_pytest_collection_error_never_reads_as_passing(rt, tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_many.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('i', range(400))\n"
        "def test_n(i):\n    print('x' * 100)\n"
    )
    (tests / "test_broken.py").write_text("import module_that_is_not_there\n")
    command = f"{sys.executable} -m pytest -p no:cacheprovider -rA tests"
    r = await rt.call_tool(
        "exec", {"command": command, "yield_ms": 120000, "max_output_bytes": 800}
    )
    assert r["exit_code"] == 2  # interrupted: collection errors
    d = r["digest"]
    texts = [e["text"] for e in d["lines"]]
    assert any("ERROR collecting tests/test_broken.py" in t for t in texts)
    assert any(
        "ModuleNotFoundError: No module named 'module_that_is_not_there'" in t for t in texts
    )
    assert d["counts"] == {"errors": 1}
    assert not any("no tests" in t.lower() for t in texts)


@pytest.fixture
async def small_log_rt(tmp_path) -> AsyncIterator[conch.Runtime]:
    cfg = conch.Config(
        data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path), max_log_bytes=200_000
    )
    async with conch.Runtime(cfg) as runtime:
        yield runtime


async def test_a_job_cut_at_max_log_bytes_has_a_digest_that_says_so(small_log_rt):
    rt = small_log_rt
    r = await rt.call_tool(
        "exec", {"command": "echo 'm.py:3: error: first'; yes 'all good so far'", "yield_ms": 30000}
    )
    assert r["state"] == "output_limit"
    d = r["digest"]
    assert d["lines"] == [{"cursor": 0, "text": "m.py:3: error: first"}]
    assert "max_log_bytes (200000 bytes)" in d["incomplete"]


# -- faithful on red, short beside it: the window of a failed job that carries a digest


def compact(result: dict[str, Any]) -> int:
    import json

    return len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())


async def test_a_failed_build_with_a_digest_shows_a_short_tail_not_16_kb(rt, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc (apt package gcc)")
    c_project(tmp_path)
    r = await rt.call_tool("exec", {"command": "gcc -Wall -c w1.c bad.c w2.c", "yield_ms": 60000})
    assert r["exit_code"] == 1 and r["truncated"]
    errors = [e["text"] for e in r["digest"]["lines"]]
    assert any("missing_one" in t for t in errors) and any("undefined_two" in t for t in errors)
    # the window: the marker naming the cursor range left out, then a short tail
    marker, _, tail = r["output"].partition("\n")
    at = r["omitted_bytes"]
    assert marker == f"[... {at} bytes omitted: read cursor 0-{at} ...]"
    assert len(tail.encode()) <= 512 and tail.count("\n") <= 3
    assert compact(r) < 2500, compact(r)  # (a 16 KB head-and-tail window before)
    # nothing lost: the range the marker names reads back, and ends where the tail starts
    whole = await rt.call_tool("read", {"job_id": r["job_id"], "cursor": 0, "max_bytes": 1 << 20})
    assert whole["output"].endswith(tail) and not whole.get("truncated")
    jsonschema.validate(r, snapshot_schema(rt))


async def test_the_short_tail_does_not_repeat_the_digest_lines(rt):
    command = (
        "for i in $(seq 2000); do echo noise $i; done; echo 'x.c:9:1: error: e'; "
        "echo after one; echo after two; exit 1"
    )
    r = await rt.call_tool("exec", {"command": command})
    assert [e["text"] for e in r["digest"]["lines"]] == ["x.c:9:1: error: e"]
    assert r["output"].split("\n", 1)[1] == "after one\nafter two\n"
    # a digest line at the very end: the marker alone
    r = await rt.call_tool("exec", {"command": "seq 1 5000; echo 'x.c:9:1: error: e'; exit 1"})
    assert r["output"].count("\n") == 1 and r["output"].startswith("[... ")


async def test_a_red_read_after_a_running_exec_shrinks_from_its_own_cursor(rt):
    command = "echo started; sleep 1; seq 1 5000; echo 'x.c:9:1: error: e'; echo bye; exit 2"
    r = await rt.call_tool("exec", {"command": command, "yield_ms": 300})
    assert r["state"] == "running"
    done = await rt.call_tool("read", {"job_id": r["job_id"], "until": "exit", "wait_ms": 30000})
    start = r["next_cursor"]
    assert done["exit_code"] == 2 and done["cursor"] == start
    marker, _, tail = done["output"].partition("\n")
    assert marker.startswith(f"[... {done['omitted_bytes']} bytes omitted: read cursor {start}-")
    assert tail == "bye\n"


async def test_a_green_job_or_a_window_the_caller_chose_keeps_its_window(rt):
    # exit 0: the output may be what was asked for (a file, a listing)
    ok = "seq 1 5000; echo 'x.c:9:1: error: only mentioned'"
    r = await rt.call_tool("exec", {"command": ok})
    assert r["exit_code"] == 0 and "digest" in r and len(r["output"]) > 10000
    red = "seq 1 5000; echo 'x.c:9:1: error: e'; exit 1"
    r = await rt.call_tool("exec", {"command": red, "max_output_bytes": 4000})
    assert "digest" in r and len(r["output"]) > 3000
    r = await rt.call_tool("exec", {"command": red, "digest": False})
    assert "digest" not in r and len(r["output"]) > 10000


async def test_adjacent_digest_lines_are_one_entry_in_the_lean_view(rt, tmp_path):
    """40 failures in a pytest short summary: one entry, not 40 objects; each line's text as
    the log holds it at the entry's cursor; the full view lists every line."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_many.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('i', range(400))\n"
        "def test_n(i):\n    print('x' * 100)\n    assert i % 10, f'case {i} is wrong'\n"
    )
    # (not in CI mode, where pytest adds the assertion on a line of its own after each)
    command = f"env -u CI {sys.executable} -m pytest -p no:cacheprovider --color=no tests"
    out = await call_tool_full(
        rt.engine, rt.registry, "exec", {"command": command, "yield_ms": 120000}
    )
    lean, full = out.result, out.full
    assert full is not None and lean["exit_code"] == 1
    failed = [e for e in full["digest"]["lines"] if e["text"].startswith("FAILED ")]
    assert len(failed) == 40
    runs = [e for e in lean["digest"]["lines"] if "FAILED " in e["text"]]
    assert len(runs) == 1 and runs[0]["cursor"] == failed[0]["cursor"]
    assert all(e["text"] in runs[0]["text"].split("\n") for e in failed)
    # the entry is the log's text at its cursor, line for line
    again = await rt.call_tool(
        "read", {"job_id": lean["job_id"], "cursor": runs[0]["cursor"], "max_bytes": 1 << 16}
    )
    assert again["output"].startswith(runs[0]["text"] + "\n")
    assert compact(lean["digest"]) < compact(full["digest"]) - 40 * 20
    jsonschema.validate(lean, snapshot_schema(rt))


async def test_lines_that_are_not_adjacent_stay_apart(rt):
    command = (
        "echo 'a.c:1:1: error: one'; printf '\\033[1mb.c:2:1: error: two\\033[0m\\n'; "
        "echo 'c.c:3:1: error: three'; seq 1 5000; echo 'd.c:4:1: error: four'; exit 1"
    )
    r = await rt.call_tool("exec", {"command": command})
    texts = [e["text"] for e in r["digest"]["lines"]]
    # a.c and b.c are adjacent; b.c's escapes make its raw line longer than its text, so
    # c.c starts a new entry; d.c is far from it
    assert texts == [
        "a.c:1:1: error: one\nb.c:2:1: error: two",
        "c.c:3:1: error: three",
        "d.c:4:1: error: four",
    ], texts
