"""The plain host-shell model of tasks 12-14 (``codex-plain@codex``, ``claude-plain@claude`` in
bench/agent_tasks.py): what it reads from the host's window decides whether it answers or looks
again, and its second and third calls are generic, never the task's own pattern.

The texts are shaped as the real hosts showed them in the recorded run
(bench/results/2026-12-08-agent-tasks-installed-digests.md): Claude Code's ``Exit code N`` and
``[... N characters truncated ...]``, Codex's ``Warning: truncated output``, pytest's, cargo's and
grep -n's own lines. The policy is driven as the fake model drives it: it yields a call and is
sent the text the host showed for it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import agent_tasks_tasks as tasks  # noqa: E402
from agent_tasks_hosts import Call  # noqa: E402
from agent_tasks_toolsets import ClaudeTools, CodexTools  # noqa: E402

CUT = "\n\n... [19873 characters truncated] ...\n\n"
FAILED = [f"tests/test_mod{m:02d}.py::test_case[{m}]" for m in range(3)]
SUMMARY = "=================== 3 failed, 297 passed, 1 error in 7.81s ==================="
REASON = "E   ModuleNotFoundError: No module named 'plugin_registry_v2'"
CARGO_TAIL = 'error: could not compile `noisy` (bin "noisy") due to 3 previous errors'


def _drive(task_key: str, ts: Any, shown: list[str]) -> tuple[list[Call], str]:
    """Runs the task's policy for ``ts``, sending it ``shown`` in turn; returns its calls and
    its answer."""
    task = next(t for t in tasks.TASKS if t.key == task_key)
    gen = task.policy(ts, Path("/nonexistent"), tasks.Setup({}))
    calls = [next(gen)]
    try:
        for text in shown:
            calls.append(gen.send(text))
    except StopIteration as stop:
        return calls, str(stop.value)
    raise AssertionError(f"the policy made more calls than were answered: {calls}")


def test_cut_markers_of_both_hosts() -> None:
    assert tasks._whole("Exit code 2\nmake: Target 'all' not remade because of errors.\n")
    assert not tasks._whole("Exit code 2\nhead" + CUT + "tail")
    assert not tasks._whole("Warning: truncated output (original token count: 10777)\n…")
    assert not tasks._whole("src/f14.c:11:7: warn…777 tokens truncated…for each function")


def test_pytest_window_without_the_collection_error_reason_is_not_enough() -> None:
    tail = "\n".join(f"FAILED {i} - AssertionError: x" for i in FAILED)
    tail += "\nERROR tests/test_plugins.py\n" + SUMMARY
    assert tasks.asked_pytest(tail) == (False, [])
    assert tasks.asked_pytest(REASON + "\n" + tail) == (True, [])
    # one id short of pytest's own count: not done, even with the reason
    assert tasks.asked_pytest(REASON + "\n" + tail.split("\n", 1)[1])[0] is False
    # no totals shown at all: nothing proves the window complete
    assert tasks.asked_pytest("FAILED " + FAILED[0]) == (False, [])


def test_grep_lines_of_failures_without_their_reason_are_looked_at() -> None:
    grep = "\n".join(
        [
            "exit=1",
            "6:collected 300 items / 1 error",
            "70:____________________ ERROR collecting tests/test_plugins.py ____________________",
            *(f"{642 + k}:FAILED {i} - AssertionError: x" for k, i in enumerate(FAILED)),
            f"700:{SUMMARY}",
        ]
    )
    assert tasks.asked_pytest(grep) == (False, [70])
    cargo = "exit=101\n402:error[E0308]: mismatched types\n410:error[E0308]: mismatched types\n"
    cargo += "418:error[E0308]: mismatched types\n827:" + CARGO_TAIL
    assert tasks.asked_cargo(cargo) == (False, [402, 410, 418])
    located = "error[E0308]: mismatched types\n  --> src/main.rs:43:25\n" * 3 + CARGO_TAIL
    assert tasks.asked_cargo(located) == (True, [])
    # make prints no count: only a whole text is known to hold every error
    assert tasks.asked_make("src/f14.c:12:10: error: x\nsrc/f16.c:12:10: error: y") == (False, [])


def test_a_whole_window_is_the_answer() -> None:
    window = "Exit code 2\nsrc/f14.c:12:10: error: a\nsrc/f16.c:12:10: error: b\n"
    calls, answer = _drive("t12", ClaudeTools(None, plain=True), [window])
    assert len(calls) == 1 and calls[0].args["command"] == "make"
    assert "src/f16.c:12" in answer


def test_a_cut_window_costs_a_generic_grep_then_the_lines_it_lacks() -> None:
    window = "Exit code 101\n   Compiling noisy v0.1.0" + CUT + "warning: generated binding 274"
    grep = (
        "exit=101\n402:error[E0308]: mismatched types\n410:error[E0308]: mismatched types\n"
        "418:error[E0308]: mismatched types\n827:" + CARGO_TAIL + "\n"
    )
    lines = "".join(f"error[E0308]: mismatched types\n  --> src/main.rs:{n}:25\n" for n in (43, 79))
    calls, answer = _drive("t14", ClaudeTools(None, plain=True), [window, grep, lines])
    run, again, look = (c.args["command"] for c in calls)
    assert run == "CARGO_TARGET_DIR=target cargo build --offline --color never"
    assert again.startswith(run + " > build.log 2>&1")
    assert f"grep -n -E {tasks.GENERIC} build.log" in again
    assert "^error" not in again  # not the best case's task-shaped pattern
    # up to the next failure, never overlapping (sed would print a line twice)
    assert look == "sed -n '402,409p;410,417p;418,430p' build.log"
    assert "src/main.rs:79" in answer and "could not compile" in answer


@pytest.mark.parametrize("tools", [CodexTools, ClaudeTools])
def test_best_case_policies_are_unchanged(tools: Any) -> None:
    """``codex@codex``/``claude@claude`` keep the one call with the task's own pattern."""
    task = next(t for t in tasks.TASKS if t.key == "t13")
    gen = task.policy(tools(None), Path("/nonexistent"), tasks.Setup({}))
    call = next(gen)
    command = call.args.get("cmd") or call.args.get("command")
    assert "'^(FAILED|ERROR)|^E +.*Error'" in command
