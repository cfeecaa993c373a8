"""The ``codex`` profile against the real thing: the same scripted calls go once to Codex CLI
0.171.0's built-in ``exec_command`` / ``write_stdin`` (a plain ``function_call``) and once to
Conch's profile served as Codex's MCP server (``--profile codex``, namespace ``mcp__conch``),
and what the model is shown must be the same, up to the differences listed in
``ACCEPTED_DIFFERENCES`` (each with its reason; docs/profile-codex.md says the same).

Codex wraps a text-only MCP result as ``[{"input_text": "Wall time: …\\nOutput:"},
{"input_text": <the tool's text>}]``: the second item is compared with the built-in's string.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from codex_exec import BINARY_GLOB, LOAD_CONCH, PACKAGE, VERSION, CodexRun, run_codex
from fake_responses import NAMESPACE, Call, FakeResponses, Say, Step

pytestmark = pytest.mark.slow

# What may differ between Codex's own tool and Conch's profile, and why. Everything else must be
# byte-equal once these are normalized.
ACCEPTED_DIFFERENCES = {
    "chunk_id": "Chunk ID is random in both (6 hex digits)",
    "wall_time": "Wall time is measured, never the same twice",
    "session_id": "session ids are random in both (1000-99999)",
    "pts_number": "each side's terminal is whichever /dev/pts/N the kernel hands out",
    "stream_order": (
        "both read a command's stdout and stderr from two pipes, so lines the two streams "
        "write within a moment of each other can come out either way (Codex was seen giving "
        "err1 err2 out1 and err1 out1 err2, Conch too under load): compared as the same lines"
    ),
    "where_line": (
        "SPEC: Nothing is lost. A cut output gets one more line under Codex's warning saying "
        "which bytes of the job's lossless log were left out (for Conch's `read`)"
    ),
}
_NORMALIZE: list[tuple[str, re.Pattern[str], str]] = [
    ("chunk_id", re.compile(r"^Chunk ID: [0-9a-f]{6}$", re.M), "Chunk ID: <hex>"),
    ("wall_time", re.compile(r"^Wall time: [0-9]+\.[0-9]{4} seconds$", re.M), "Wall time: <s>"),
    ("session_id", re.compile(r"session ID [0-9]+|Unknown process id [0-9]+"), "<session>"),
    ("pts_number", re.compile(r"/dev/pts/[0-9]+"), "/dev/pts/<n>"),
    ("where_line", re.compile(r"\nConch kept every byte: [^\n]*(?=\n\n)"), ""),
]
# stream_order is not a text substitution: see same_lines
assert {name for name, _, _ in _NORMALIZE} | {"stream_order"} == set(ACCEPTED_DIFFERENCES)
MCP_HEADER = re.compile(r"\AWall time: [0-9]+\.[0-9]+ seconds\nOutput:\Z")


def normalized(text: str) -> str:
    for _, pattern, replacement in _NORMALIZE:
        text = pattern.sub(replacement, text)
    return text


@pytest.fixture(scope="session")
def codex(npm_install) -> Path:
    return npm_install("codex", PACKAGE, VERSION, BINARY_GLOB)


# --- the scripts ---------------------------------------------------------------------------------

# a scenario is a list of calls: (tool, arguments); arguments may name the session id an earlier
# call of the scenario returned, as SessionOf(k) (k: the index of that call in the scenario)


class SessionOf:
    """In a scenario's arguments: the session id that call ``call`` of the scenario returned."""

    def __init__(self, call: int) -> None:
        self.call = call


Scenario = list[tuple[str, dict[str, Any]]]


def shown(fake: FakeResponses, step: int) -> str:
    """The text the model read for a step: the built-in's string, or the tool's text that
    Codex put after its own MCP header."""
    item = fake.output(step)
    assert item is not None, f"step {step} never answered"
    out = item["output"]
    if isinstance(out, str):
        return out
    header, text = out  # exactly two items for a text-only MCP result
    assert MCP_HEADER.match(header["text"]), header
    return str(text["text"])


def _session_of(text: str) -> int:
    m = re.search(r"Process running with session ID ([0-9]+)", text)
    assert m is not None, f"no session id in {text!r}"
    return int(m.group(1))


def script(scenario: Scenario, *, mcp: bool) -> tuple[list[Step], list[int]]:
    """The model's script for ``scenario`` against the built-in (``mcp=False``) or Conch's
    profile, and the script step of each call."""
    steps: list[Step] = [LOAD_CONCH] if mcp else []
    at: list[int] = []
    for name, args in scenario:

        def arguments(fake: FakeResponses, args: dict[str, Any] = args) -> dict[str, Any]:
            return {
                k: _session_of(shown(fake, at[v.call])) if isinstance(v, SessionOf) else v
                for k, v in args.items()
            }

        at.append(len(steps))
        steps.append(Call(name, arguments, namespace=NAMESPACE if mcp else None))
    steps.append(Say("ok"))
    return steps, at


@pytest.fixture
def both(codex: Path, tmp_path: Path, loopback, logged_conch, spawn, request):
    """``both(scenario)``: run it through the built-in tools, then through Conch's profile
    (each a ``codex exec`` run of its own); the texts the model read, per call, each side."""

    def run(scenario: Scenario) -> tuple[list[str], list[str]]:
        texts = []
        for mcp in (False, True):
            steps, at = script(scenario, mcp=mcp)
            tmp = tmp_path / ("conch" if mcp else "builtin")
            tmp.mkdir()
            result: CodexRun = run_codex(
                codex,
                steps,
                tmp=tmp,
                loopback=loopback,
                conch=logged_conch,
                spawn=spawn,
                conch_env={"CONCH_PROFILES": "codex"},
                timeout=180,
            )
            texts.append([shown(result.fake, i) for i in at])
        return texts[0], texts[1]

    return run


def assert_same(builtin: list[str], conch: list[str]) -> None:
    for i, (b, c) in enumerate(zip(builtin, conch, strict=True)):
        assert normalized(c) == normalized(b), f"call {i}:\n codex: {b!r}\n conch: {c!r}"


def same_lines(builtin: str, conch: str) -> None:
    """The same text but for the order of its output lines (``stream_order``)."""
    b_head, _, b_out = normalized(builtin).partition("Output:\n")
    c_head, _, c_out = normalized(conch).partition("Output:\n")
    assert (c_head, sorted(c_out.splitlines())) == (b_head, sorted(b_out.splitlines()))


def wall(text: str) -> float:
    m = re.search(r"^Wall time: ([0-9.]+) seconds$", text, re.M)
    assert m is not None, text
    return float(m.group(1))


# --- the scenarios -------------------------------------------------------------------------------


def test_plain_commands_read_the_same(both):
    builtin, conch = both(
        [
            ("exec_command", {"cmd": "echo hi"}),
            ("exec_command", {"cmd": "ls /nonexistent; exit 3"}),
            ("exec_command", {"cmd": "echo err1 >&2; echo out1; echo err2 >&2"}),
            ("exec_command", {"cmd": "kill -TERM $$"}),
            ("exec_command", {"cmd": "printf 'no newline'", "login": False}),
        ]
    )
    assert builtin[0].endswith("Process exited with code 0\nOriginal token count: 1\nOutput:\nhi\n")
    same_lines(builtin[2], conch[2])
    assert_same(builtin[:2] + builtin[3:], conch[:2] + conch[3:])


def test_a_long_command_yields_then_a_poll_waits_for_its_exit(both):
    builtin, conch = both(
        [
            ("exec_command", {"cmd": "sleep 2; echo done", "yield_time_ms": 500}),
            ("write_stdin", {"session_id": SessionOf(0), "chars": "", "yield_time_ms": 1000}),
            ("write_stdin", {"session_id": SessionOf(0), "chars": ""}),
            ("write_stdin", {"session_id": 987654, "chars": ""}),
        ]
    )
    assert "Process running with session ID" in builtin[0]
    assert builtin[2].startswith("write_stdin failed: Unknown process id ")
    for side in (builtin, conch):
        assert 0.4 <= wall(side[0]) < 1.5, side[0]
        assert 0.5 <= wall(side[1]) < 3.5, side[1]  # an empty poll returns at the exit
    assert_same(builtin, conch)


def test_a_write_to_a_command_without_a_terminal(both):
    builtin, conch = both(
        [
            ("exec_command", {"cmd": "sleep 1; echo end", "yield_time_ms": 250}),
            ("write_stdin", {"session_id": SessionOf(0), "chars": "hello\n"}),
            ("write_stdin", {"session_id": SessionOf(0), "chars": "", "yield_time_ms": 5000}),
        ]
    )
    assert_same(builtin, conch)


def test_terminals_read_the_same(both):
    builtin, conch = both(
        [
            ("exec_command", {"cmd": "tty; echo on-a-tty", "tty": True}),
            ("exec_command", {"cmd": "cat", "tty": True, "yield_time_ms": 1000}),
            ("write_stdin", {"session_id": SessionOf(1), "chars": "typed line\n"}),
            ("write_stdin", {"session_id": SessionOf(1), "chars": "\u0003"}),
        ]
    )
    assert builtin[0].endswith("Output:\n/dev/pts/" + builtin[0].split("/dev/pts/")[1])
    assert "\r\n" in builtin[0]
    assert_same(builtin, conch)


def test_large_outputs_are_cut_the_same(both):
    builtin, conch = both(
        [
            ("exec_command", {"cmd": "seq 1 100000"}),
            ("exec_command", {"cmd": "seq 1 100000", "max_output_tokens": 200}),
        ]
    )
    assert "…137224 tokens truncated…" in builtin[0]
    assert "…147024 tokens truncated…" in builtin[1]
    for text in conch:
        assert re.search(r"\nConch kept every byte: the [0-9]+ left out are bytes", text), text
    assert_same(builtin, conch)


def test_yields_are_clamped_the_same(both):
    builtin, conch = both(
        [
            ("exec_command", {"cmd": "sleep 2; echo late", "yield_time_ms": 100}),
            ("write_stdin", {"session_id": SessionOf(0), "chars": ""}),
            ("exec_command", {"cmd": "sleep 40", "tty": True, "yield_time_ms": 45000}),
            ("write_stdin", {"session_id": SessionOf(2), "chars": "\u0003"}),
        ]
    )
    for side in (builtin, conch):
        assert 0.24 <= wall(side[0]) < 0.6, side[0]  # 100 was raised to 250
        assert 29.9 <= wall(side[2]) < 31.5, side[2]  # 45000 was clamped to 30000
    assert_same(builtin, conch)
