"""The ``claude-code`` profile against the original: the real Claude Code 2.1.197 plays the same
script twice, once calling its own built-in ``Bash`` / ``TaskOutput`` / ``TaskStop`` and once
calling Conch's profile as MCP tools (``conch serve --profile claude-code``:
``mcp__conch__Bash`` ...), and what the model was shown is compared, call by call.

On success the host shows a text-only MCP result as a block array
(``[{"type": "text", "text": ...}]``) and its own tools' results as a string; on ``isError``
both as the text with ``is_error: true``. Both are read back as (text, is_error). Only the
differences listed in :data:`ACCEPTED` are normalised away, each for its reason (the same
list is in docs/profile-claude-code.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from claude_host import Run
from fake_messages import Block, Say, ToolUse

pytestmark = pytest.mark.slow

Claude = Callable[..., Run]
PREFIX = "mcp__conch__"
# both runs use bash: Claude Code runs the user's $SHELL (it picked zsh here when none was
# set), Conch runs bash; with the same shell, the shells' own messages are the same too
ENV = {"SHELL": "/bin/bash"}

# Each accepted difference: why, and the normalisation that hides it (pattern, placeholder).
SUBSTITUTED: list[tuple[str, re.Pattern[str], str]] = [
    (
        "task ids are random in both (9 characters, 'b' and 8 base-36 ones, in both)",
        re.compile(r"\bb[0-9a-z]{8}\b"),
        "<task>",
    ),
    (
        "a background task's output file: Claude Code writes <CLAUDE_CODE_TMPDIR>/claude-<uid>/"
        "<cwd-slug>/<session>/tasks/<id>.output, Conch hands out the job's own log in its data "
        "dir (<data>/logs/<stamp>-j_<id>.log): a real file that grows as the job writes, same "
        "user, readable by the host's Read tool",
        re.compile(
            r"(Output is being written to: |\[Truncated\. Full output: )/\S+?(\.|\])(?= |\n)"
        ),
        r"\1<output-file>\2",
    ),
    (
        "a large output's saved copy: Claude Code saves <config>/projects/<slug>/<session>/"
        "tool-results/<id>.txt, Conch names the job's log (the same bytes) in its data dir",
        re.compile(r"Full output saved to: /\S+\n"),
        "Full output saved to: <saved-file>\n",
    ),
]
TAIL = re.compile(r"(\[Truncated\. Full output: <output-file>\]\n\n)(.*)(\n</output>)$", re.S)


def _same_tail(text: str) -> str:
    return TAIL.sub(lambda m: m.group(1) + m.group(2)[-30000:] + m.group(3), text)


ACCEPTED: list[tuple[str, Callable[[str], str]]] = [
    (reason, lambda text, p=pattern, r=placeholder: p.sub(r, text))
    for reason, pattern, placeholder in SUBSTITUTED
] + [
    (
        "TaskOutput's tail of a long output is 32000 characters with the pointer to the file "
        "in front, so its length depends on the path's: the last 30000 are compared",
        _same_tail,
    )
]
# Not a difference of the tools: this machine's ~/.bashrc runs `pyenv init`, whose rehash,
# racing another one's lock (other tests start shells meanwhile), can print these into whatever
# command the shell runs then (seen once, in the built-in run's timed-out `sleep 5`)
MACHINE_NOISE = re.compile(
    r"^(?:rm: cannot remove '[^'\n]*/\.pyenv/shims/[^'\n]*': No such file or directory"
    r"|pyenv: cannot rehash: [^\n]*)\n?",
    re.MULTILINE,
)
# Not normalised because it is not in what the tool returns: the original's completion
# notification (a system message '<task-notification>' the host adds to the conversation when
# a background task ends). An MCP server cannot put a message into the host's conversation, so
# Conch's background tasks are polled (TaskOutput, or reading the output file); the test
# checks the notification reaches the model only in the built-in run.


def ids(results: list[Block | None], step: int) -> str:
    match = re.search(r"with ID: (b[0-9a-z]{8})\.", text_of(results[step])[0])
    assert match, text_of(results[step])
    return match.group(1)


def task(step: int, **args: Any) -> Callable[[list[Block | None]], dict[str, Any]]:
    return lambda results: {"task_id": ids(results, step), **args}


# (tool, input): the script both runs play
SCRIPT: list[tuple[str, dict[str, Any] | Callable[[list[Block | None]], dict[str, Any]]]] = [
    ("Bash", {"command": "echo hi"}),  # 0
    ("Bash", {"command": "ls /nonexistent; exit 3"}),  # 1
    ("Bash", {"command": "echo err1 >&2; echo out1; echo err2 >&2"}),  # 2
    ("Bash", {"command": "sleep 5", "timeout": 1000}),  # 3
    # (the output before a timeout: 3 s, so a loaded box still prints it in time on both sides)
    ("Bash", {"command": "echo partial; sleep 10", "timeout": 3000}),  # 4
    ("Bash", {"command": "sleep 2; echo done", "run_in_background": True}),  # 5
    ("TaskOutput", task(5, block=False, timeout=0)),  # 6
    ("TaskOutput", task(5, block=True, timeout=10000)),  # 7
    ("Bash", {"command": "sleep 30; echo never", "run_in_background": True}),  # 8
    ("TaskOutput", task(8, block=True, timeout=500)),  # 9
    ("TaskStop", task(8)),  # 10
    ("TaskOutput", task(8, block=False, timeout=0)),  # 11
    ("TaskOutput", {"task_id": "bnotask123"}),  # 12
    ("TaskStop", {"task_id": "bnotask123"}),  # 13
    ("Bash", {"command": "sleep 1; echo bad; exit 4", "run_in_background": True}),  # 14
    ("TaskOutput", task(14, block=True, timeout=10000)),  # 15
    ("Bash", {"command": "seq 1 100000"}),  # 16
    ("Bash", {"command": "seq 1 3000; exit 1"}),  # 17
    ("Bash", {"command": "mkdir -p sub && cd sub && pwd"}),  # 18
    ("Bash", {"command": "pwd"}),  # 19
    ("Bash", {"command": "cd .. ; false"}),  # 20
    ("Bash", {"command": "pwd"}),  # 21
    ("Bash", {"command": "cd /tmp && pwd"}),  # 22
    ("Bash", {"command": "pwd; true"}),  # 23
    ("Bash", {"command": "true"}),  # 24
    ("Bash", {"command": "printf '\\n\\n  a  \\nb  \\n\\n'"}),  # 25
    ("Bash", {"command": "echo early; sleep 3", "timeout": 1000}),  # 26
    ("Bash", {"command": "echo hi", "bogus": 1}),  # 27
    ("Bash", {}),  # 28
    ("TaskOutput", {"task_id": 5}),  # 29
    ("TaskStop", {}),  # 30
    ("Bash", {"command": "sleep 1; seq 1 100000", "run_in_background": True}),  # 31
    ("TaskOutput", task(31, block=True, timeout=10000)),  # 32
]


def script(prefix: str) -> list[ToolUse | Say]:
    return [ToolUse(prefix + name, args) for name, args in SCRIPT] + [Say("ok")]


def text_of(block: Block | None) -> tuple[str, bool]:
    """What the model read: the text, and whether it was flagged an error."""
    assert block is not None, "the host sent no tool_result for this call"
    content = block["content"]
    if isinstance(content, list):  # an MCP text-only result on success: the block array
        assert all(b.get("type") == "text" for b in content), content
        content = "".join(b["text"] for b in content)
    return content, bool(block.get("is_error"))


def normalized(run: Run) -> list[dict[str, Any]]:
    out = []
    for i, (name, _) in enumerate(SCRIPT):
        text, is_error = text_of(run.fake.tool_result(i))
        text = MACHINE_NOISE.sub("", text).rstrip("\n") if MACHINE_NOISE.search(text) else text
        for _, accept in ACCEPTED:
            text = accept(text)
        text = text.replace(str(run.dir), "<run>")
        given = json.dumps(run.fake.inputs.get(i))
        out.append(
            {
                "step": i,
                "tool": name,
                "input": json.loads(SUBSTITUTED[0][1].sub(SUBSTITUTED[0][2], given)),
                "text": text,
                "is_error": is_error,
            }
        )
    return out


def notified(run: Run) -> bool:
    return any(
        "<task-notification>" in json.dumps(m)
        for body in run.fake.turns()
        for m in body.get("messages", [])
        if m.get("role") == "system"
    )


def test_the_profile_shows_the_model_what_claude_codes_own_tools_show(
    claude: Claude, tmp_path: Path
):
    builtin = claude(script(""), env=ENV, timeout=180)
    profile = claude(script(PREFIX), env=ENV, timeout=180, conch_args=("--profile", "claude-code"))
    # the profile's calls all went to Conch, none to the host's own tools
    called = [m["params"]["name"] for m in profile.to_conch() if m.get("method") == "tools/call"]
    assert called == [name for name, _ in SCRIPT]
    original, ours = normalized(builtin), normalized(profile)
    (tmp_path / "diff.json").write_text(json.dumps({"builtin": original, "conch": ours}, indent=1))
    differing = [(a, b) for a, b in zip(original, ours, strict=True) if a != b]
    assert differing == [], json.dumps(differing, indent=1)[:6000]
    # the one difference not in the results: only the original notifies on completion
    assert notified(builtin) and not notified(profile)
    # the facts the script is about, so that a run where both failed alike cannot pass
    texts = [s["text"] for s in ours]
    assert texts[0] == "hi" and texts[2] == "err1\nout1\nerr2"
    assert texts[3] == "Exit code 143\nCommand timed out after 1s"
    assert texts[19] == "<run>/project/sub" and texts[23] == "<run>/project"
    assert "<status>failed</status>\n\n<exit_code>4</exit_code>" in texts[15]


def test_the_profile_lists_the_originals_schemas(claude: Claude):
    builtin = claude([Say("nothing to do")], env=ENV)
    profile = claude([Say("nothing to do")], env=ENV, conch_args=("--profile", "claude-code"))
    own = {t["name"]: t for t in builtin.fake.turns()[0]["tools"]}
    ours = {t["name"]: t for t in profile.fake.turns()[0]["tools"] if t["name"].startswith(PREFIX)}
    assert sorted(ours) == [PREFIX + n for n in ("Bash", "TaskOutput", "TaskStop")]
    for name in ("Bash", "TaskOutput", "TaskStop"):
        theirs, mine = own[name]["input_schema"], ours[PREFIX + name]["input_schema"]
        # the same properties, types, defaults, limits and required lists; the words are Conch's
        strip = lambda s: {  # noqa: E731
            **s,
            "properties": {
                k: {a: b for a, b in v.items() if a != "description"}
                for k, v in s["properties"].items()
            },
        }
        assert strip(mine) == strip(theirs), name
        assert ours[PREFIX + name]["description"] != own[name]["description"]
