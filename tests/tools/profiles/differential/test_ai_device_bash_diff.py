"""`conch serve --profile ai-device-bash` against the published ai-device-bash 0.2.0 (docs/spec.md
§7): the same call sequences through the official MCP client over stdio, volatile values
normalized, every remaining difference on `allowed_ai_device_bash.ALLOWED` or a failure."""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from allowed_ai_device_bash import ALLOWED
from harness import (
    Call,
    Normalizer,
    Server,
    Session,
    _dump,
    compare,
    open_session,
    original_venv,
    reap_adopted_orphans,
    run_sequence,
    venv_script,
)
from mcp import MCPError

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

REQUIREMENT = "ai-device-bash[mcp]==0.2.0"
ORIGINAL_PYTHON = "3.13"  # the package requires Python >= 3.13
ORIGINAL = ("ai-device-bash", ORIGINAL_PYTHON, REQUIREMENT)  # original_venv's arguments


@pytest.fixture(scope="module")
def original_env_dir() -> Path:
    """The original's venv, with the `.env` it reads (it reads no environment variables: only
    `<site-packages>/../.env`): no server log file in the working directory, output and
    artifact directories of its own."""
    venv = original_venv(*ORIGINAL)
    (lib,) = glob.glob(str(venv / "lib" / "python3.*"))
    dotenv = Path(lib) / ".env"
    want = (
        "SERVER_LOG_ENABLED=false\n"
        f"BASH_OUTPUT_DIR={venv / 'outputs'}\n"
        f"BASH_ARTIFACT_DIR={venv / 'artifacts'}\n"
    )
    if not dotenv.exists() or dotenv.read_text() != want:
        dotenv.write_text(want)
    return venv


@pytest.fixture
def servers(original_env_dir: Path, diff_cwd: Path, diff_env: dict[str, str]) -> list[Server]:
    (diff_cwd / "sub").mkdir()
    (diff_cwd / "link").symlink_to("sub")  # a cwd that is a symlink: `pwd` is the real path
    original = Server(
        "ai-device-bash 0.2.0",
        venv_script(original_env_dir, "mcp-server-bash"),
        [],
        diff_env,
        str(diff_cwd),
    )
    return [original, Server.conch("ai-device-bash", str(diff_cwd), diff_env)]


# -- recording ---------------------------------------------------------------------------------


def _result_json(entry: dict[str, Any]) -> dict[str, Any] | None:
    content = entry.get("content") or []
    if content and isinstance(content[0], dict) and isinstance(content[0].get("json"), dict):
        return content[0]["json"]
    return None


_SCRIPT_PATH = re.compile(r"/[^\s:]*?(?:/artifacts/[0-9a-f]{32}/script\.sh|/tmp/[\w.-]+\.sh)")


def _check_output_file(label: str, r: dict[str, Any]) -> None:
    """Both sides: a finished call's output_path is a file holding its total_bytes (more, on
    Conch's side, when descendants of a finished command wrote on: docs/spec.md §2 "Completion")."""
    path = r.get("output_path")
    if path is None or r.get("code") in ("BACKGROUND", "RUNNING"):
        return
    assert os.path.isfile(path), (label, r)
    assert os.path.getsize(path) >= r["total_bytes"], (label, r)


def _unpath_diagnostics(r: dict[str, Any]) -> None:
    """bash's diagnostics name the managed script file, whose path (and so the byte counts)
    differs per side: compare them with the path replaced, sizes recounted."""
    path = r.get("output_path")
    if not path or r.get("code") in ("BACKGROUND", "RUNNING"):
        return
    with open(path, "rb") as f:
        content = f.read().decode("utf-8", "replace")
    if not _SCRIPT_PATH.search(content):
        return
    if r["total_bytes"] == len(content.encode()):
        r["total_bytes"] = len(_SCRIPT_PATH.sub("<script>", content).encode())
    r["output"] = _SCRIPT_PATH.sub("<script>", r["output"])
    r["returned_output_bytes"] = len(r["output"].encode())


def scrub(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Volatile values the shared normalizer does not know: output file paths (each side has
    its own directory and file names), managed script paths in bash's diagnostics, and the
    background pid where it is echoed in text (messages, `get <pid>` summaries)."""
    pids = set()
    for e in entries:
        r = _result_json(e)
        if r is not None:
            _check_output_file(str(e.get("call")), r)
            _unpath_diagnostics(r)
            if isinstance(r.get("background_pid"), int):
                pids.add(str(r["background_pid"]))

    def text(s: str, key: str) -> str:
        s = _SCRIPT_PATH.sub("<script>", s)
        if key == "output":
            return s  # what the command printed: `seq 1 2000` prints a pid below 2001 too
        for pid in pids:
            # a pid as a word of its own, not a piece of a date or version (a pid of 2025 once
            # turned protocolVersion "2025-11-25" into "<pid>-11-25")
            s = re.sub(rf"(?<![\w-]){pid}(?![\w-])", "<pid>", s)
        return s

    def walk(v: Any, key: str = "") -> Any:
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, key) for x in v]
        if key == "output_path" and isinstance(v, str):
            return "<output_path>"
        if isinstance(v, str):
            return text(v, key)
        return v

    return [walk(e) for e in entries]


async def _calls_with_meta(session: Session, calls: Sequence[tuple[str, str, dict, Any]]) -> list:
    """Calls that carry request `_meta` (the shared runner sends none)."""
    from harness import _tool_result

    out = []
    for label, name, args, meta in calls:
        r = await session.client.call_tool(name, args, meta=meta)
        out.append({"call": label, **_tool_result(r)})
    return out


async def record(
    server: Server,
    calls: Sequence[Call] = (),
    meta_calls: Sequence[tuple[str, str, dict, Any]] = (),
) -> list[dict[str, Any]]:
    async with open_session(server) as s:
        out = [{"call": "initialize", **s.initialize}]
        out += await run_sequence(s, calls)
        out += await _calls_with_meta(s, meta_calls)
        if not calls and not meta_calls:  # what the announced capabilities promise
            client = s.client
            for label, request in (
                ("prompts/list", lambda: client.list_prompts()),
                ("prompts/get", lambda: client.get_prompt("nosuch")),
                ("logging/setLevel", lambda: client.set_logging_level("warning")),
                ("resources/subscribe", lambda: client.subscribe_resource("conch://jobs")),
            ):
                try:
                    out.append({"call": label, "result": _dump(await request())})
                except MCPError as e:
                    out.append({"call": label, "error": [e.error.code, e.error.message]})
    return out


async def differential(
    servers: list[Server],
    calls: Sequence[Call] = (),
    meta_calls: Sequence[tuple[str, str, dict, Any]] = (),
) -> list[dict[str, Any]]:
    sides = []
    for server in servers:
        raw = await record(server, calls, meta_calls)
        await reap_adopted_orphans()
        home = server.env.get("HOME", "")
        sides.append(Normalizer({server.cwd: "<cwd>", home: "<home>"})(scrub(raw)))
    compare(sides[0], sides[1], ALLOWED)
    return sides[1]


def bash(key: str, **args: Any) -> Call:
    return Call("bash", args, key=key)


def run(key: str, **args: Any) -> Call:
    return Call("run", args, key=key)


def script(key: str, **args: Any) -> Call:
    return Call("script", args, key=key)


def get(key: str, **args: Any) -> Call:
    return Call("get", args, key=key)


# -- the sequences -------------------------------------------------------------------------------


async def test_initialize_tools_list_resources_and_unknown_tools_match(servers):
    ours = await differential(
        servers,
        [
            Call(method="tools/list"),
            Call(method="resources/list"),
            Call(method="resources/templates/list"),
            Call(method="resources/read", uri="conch://jobs", key="read_conch_jobs"),
            Call("nosuch", {}, key="unknown_tool"),
        ],
    )
    assert ours[0]["serverInfo"] == {"name": "bash", "version": "3.4.11"}
    assert "instructions" not in ours[0]
    assert [t["name"] for t in ours[1]["result"]["tools"]] == ["bash", "run", "script", "get"]
    assert ours[2]["result"]["resources"] == []
    assert ours[4]["error"]["code"] == -32002
    assert ours[5]["content"] == [{"text": "Unknown tool: 'nosuch'"}]


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")  # logging/setLevel (SEP-2577)
async def test_announced_prompts_and_logging_answer_as_the_original(servers):
    ours = await differential(servers)
    assert ours[1]["result"]["prompts"] == []


async def test_bash_results_checks_and_previews_match(servers, diff_cwd):
    await differential(
        servers,
        [
            bash("ok", command="echo out; echo err >&2"),
            bash("exit3", command="echo no; exit 3"),
            bash("signal", command="kill -9 $$"),
            bash("empty", command=""),
            bash("blank", command="  \n "),
            bash("nul", command="echo a\x00b"),
            bash("lone_cr", command="printf 'a\\rb\\r\\nc\\r'"),
            bash("ansi", command="printf '\\033[31mred\\033[0m \\033]0;t\\007x\\033(B'"),
            bash("bad_utf8", command="printf '\\xff\\xfe'"),
            bash("cwd_tilde", command="pwd", cwd="~"),
            bash("cwd_missing", command="pwd", cwd="/no/such/dir"),
            bash("cwd_empty", command="pwd", cwd=""),
            bash("cwd_relative", command="pwd", cwd="sub"),
            bash("cwd_symlink", command="pwd; echo $PWD", cwd="link"),
            bash("cwd_symlink_absolute", command="pwd", cwd=str(diff_cwd / "link")),
            bash("cwd_nul", command="pwd", cwd="a\x00b"),
            bash("cwd_file", command="pwd", cwd="/etc/passwd"),
            bash("purpose_trimmed", command="true", purpose="  check it  "),
            bash("purpose_blank", command="true", purpose="   "),
            bash("purpose_long", command="true", purpose="x" * 201),
            bash("purpose_200", command="true", purpose="x" * 200),
            bash("purpose_number", command="true", purpose=5),
            bash("purpose_list", command="true", purpose=["a"]),
            bash("purpose_null", command="true", purpose=None),
            bash("caller_var_empty", command='echo "[$AI_ASSISTANT_CALLER_SESSION_ID]"'),
            bash("shell_flags", command='echo "$0 $- $SHLVL"; shopt -p | md5sum; set -o | md5sum'),
            bash("stdin_is_empty", command="cat; echo end"),
            bash("own_session", command="ps -o sid=,pgid=,pid= -p $$ | awk '{print ($1==$3)}'"),
            bash("seq_default", command="seq 1 10000"),
            *[bash(f"seq_bytes_{n}", command="seq 1 3000", bytes=n) for n in _BUDGETS],
            bash("cjk_40", command="printf '\\xe4\\xbd\\xa0%.0s' $(seq 1 100)", bytes=40),
            bash("cjk_41", command="printf '\\xe4\\xbd\\xa0%.0s' $(seq 1 100)", bytes=41),
            bash("cjk_tiny", command="printf '\\xe4\\xbd\\xa0%.0s' $(seq 1 100)", bytes=7),
            bash("bytes_negative", command="echo x", bytes=-1),
            bash("bytes_negative_cwd_missing", command="echo x", bytes=-1, cwd="/no/such"),
            bash("timeout_negative", command="true", timeout=-1),
            bash("timeout_zero", command="sleep 0.2; echo z", timeout=0),
            bash("timeout_null", command="sleep 0.2; echo z", timeout=None),
            bash("timeout_huge", command="sleep 0.2; echo z", timeout=1e308),
            bash(
                "timeout_huge_kill",
                command="sleep 0.2; echo z",
                timeout=1e308,
                timeout_behavior="kill",
            ),
            bash("kill_fast", command="echo k", timeout=5, timeout_behavior="kill"),
            bash("longest_command", command=": " + "x" * (131071 - 2)),
            bash("command_too_long", command=": " + "x" * (131072 - 2)),
            # where docs/spec.md §2 decides otherwise (see the allow-list)
            bash("agent_env", command=_ENV_PROBE),
            bash("grandchild_holds_stdout", command="(sleep 1; echo late) & echo early"),
            bash(
                "kill_term_trap",
                command="trap 'echo term' TERM; echo x; sleep 5",
                timeout=1.5,
                timeout_behavior="kill",
            ),
        ],
    )


_BUDGETS = [0, 1, 10, 25, 26, 27, 30, 100, 8192, 10**6]
_ENV_PROBE = (
    'for v in TERM PAGER GIT_PAGER GIT_TERMINAL_PROMPT HOME LANG; do echo "$v=${!v-unset}"; done'
)


async def test_lax_argument_parsing_and_pydantic_errors_match(servers):
    """What FastMCP/pydantic (lax mode) accepts and rejects, and its error text."""
    await differential(
        servers,
        [
            bash("timeout_str", command="echo t", timeout="5"),
            bash("timeout_str_spaces", command="echo t", timeout=" 5 "),
            bash("timeout_true", command="echo t", timeout=True),
            bash("timeout_false", command="echo t", timeout=False),
            bash("timeout_inf", command="echo t", timeout="inf"),
            bash("timeout_nan", command="echo t", timeout="nan"),
            bash("timeout_word", command="echo t", timeout="soon"),
            bash("timeout_list", command="echo t", timeout=[1]),
            bash("bytes_str", command="seq 1 100", bytes="20"),
            bash("bytes_true", command="seq 1 100", bytes=True),
            bash("bytes_float_whole", command="seq 1 100", bytes=30.0),
            bash("bytes_float_frac", command="seq 1 100", bytes=30.5),
            bash("bytes_str_float", command="seq 1 100", bytes="30.0"),
            bash("bytes_str_exp", command="seq 1 100", bytes="1e3"),
            bash("bytes_null", command="seq 1 100", bytes=None),
            bash("command_number", command=5),
            bash("command_null", command=None),
            bash("command_list", command=["echo"]),
            Call("bash", {}, key="command_missing"),
            bash("cwd_number", command="pwd", cwd=5),
            bash("behavior_bad", command="true", timeout_behavior="later"),
            bash("behavior_case", command="true", timeout_behavior="KILL"),
            bash("behavior_null", command="true", timeout_behavior=None),
            bash("host_null", command="true", host=None),
            bash("host_empty", command="true", host=""),
            bash("host_name", command="true", host="example.com"),
            bash("unknown_argument", command="true", bogus=1),
            bash("three_errors", command=5, timeout="x", extra=1),
            run("argv_string", argv="echo"),
            run("argv_numbers", argv=[1, 2]),
            run("argv_tuple_like", argv={"0": "echo"}),
            run("stdin_number", argv=["cat"], stdin=5),
            run("stdin_true", argv=["cat"], stdin=True),
            script("script_number", script=5),
            get("pid_str", pid="12"),
            get("pid_str_spaces", pid=" 12 "),
            get("pid_true", pid=True),
            get("pid_float_whole", pid=12.0),
            get("pid_float_frac", pid=1.5),
            get("pid_str_float", pid="12.0"),
            get("pid_null", pid=None),
            Call("get", {}, key="pid_missing"),
            get("get_bytes_null", pid=1, bytes=None),
            get("get_bytes_str", pid=1, bytes="5"),
            get("get_timeout_str", pid=1, timeout="0.1"),
            get("get_unknown_argument", pid=1, purpose="x"),
        ],
    )


async def test_run_and_script_match(servers):
    await differential(
        servers,
        [
            run("literal", argv=["printf", "%s|", "$(echo no)", "", "*"]),
            run("stdin_text", argv=["od", "-An", "-c"], stdin="a\nb"),
            run("stdin_empty", argv=["wc", "-c"], stdin=""),
            run("cwd_symlink", argv=["sh", "-c", "pwd; pwd -L"], cwd="link"),
            script("cwd_symlink", script="pwd\necho $PWD", cwd="link"),
            run("stdin_none", argv=["wc", "-c"]),
            run("stdin_utf8", argv=["cat"], stdin="héllo ☃\n"),
            run("argv_empty", argv=[]),
            run("argv0_empty", argv=["", "x"]),
            run("argv_nul", argv=["echo", "a\x00b"]),
            run("argv_empty_and_bytes", argv=[], bytes=-1),
            run("argv_count", argv=["true"] * 4097),
            run("argv_bytes", argv=["true", "x" * 262144]),
            run("missing_program", argv=["no-such-program-x"]),
            run("permission_denied", argv=["/etc"]),
            run("not_a_directory", argv=["/etc/passwd/x"]),
            run("cwd_missing", argv=["pwd"], cwd="/no/such"),
            run("bytes_negative", argv=["true"], bytes=-1),
            run("stdin_too_large", argv=["cat"], stdin="x" * (4 * 1024 * 1024 + 1)),
            script("ok", script="read -r x\necho got:$x\necho err >&2\nexit 4\n", stdin="hé\n"),
            script("empty", script=""),
            script("blank", script="   \n\t\n"),
            script("comment_only", script="# nothing\n"),
            script("nul", script="echo a\x00b"),
            script("too_large", script="true\n" * 300000),
            script("syntax_error", script="echo before\nif then\n"),
            script("syntax_error_budget_covers_it", script="if then\n", bytes=5000),
            script("syntax_error_no_budget", script="if then\n", bytes=0),
            script("syntax_error_cwd_missing", script="if then\n", cwd="/no/such"),
            script("stdin_not_spliced", script="cat\n", stdin="$(echo no)\n"),
            script("runtime_error", script="echo one\nnosuch_command_x\necho three\n"),
        ],
    )


async def test_background_get_and_kill_match(servers):
    bg = "$bg.content.0.json.background_pid"
    bg2 = "$bg_seq.content.0.json.background_pid"
    bg3 = "$bg_fail.content.0.json.background_pid"
    await differential(
        servers,
        [
            bash("bg", command="echo early; sleep 3; echo late", timeout=1.5),
            get("get_running", pid=bg),
            get("get_running_str", pid=bg, bytes="3"),
            get("get_wait", pid=bg, timeout=10),
            get("get_again", pid=bg),
            get("get_tiny", pid=bg, bytes=4),
            bash("bg_seq", command="seq 1 2000; sleep 4", timeout=1.5),
            get("get_tail_20", pid=bg2, bytes=20),
            get("get_zero", pid=bg2, bytes=0),
            get("get_30", pid=bg2, bytes=30),
            get("get_default", pid=bg2),
            get("get_big", pid=bg2, bytes=100000),
            bash("bg_fail", command="sleep 0.8; echo bye; exit 4", timeout=0.3),
            get("get_fail", pid=bg3, timeout=10),
            get("get_unknown", pid=1),
            get("get_bool", pid=True),
            get("get_negative_timeout", pid=1, timeout=-1),
            get("get_negative_bytes", pid=1, bytes=-1),
            get("get_negative_both", pid=1, bytes=-1, timeout=-1),
            bash("kill", command="echo x; sleep 5", timeout=1.5, timeout_behavior="kill"),
            # the seed blocks until the escaped daemon lets go of stdout (a listed bug): the
            # answer is the same, only sooner
            bash(
                "kill_escaped_daemon",
                command="setsid sleep 3 & echo x; sleep 30",
                timeout=1.5,
                timeout_behavior="kill",
            ),
            run(
                "run_bg",
                argv=["bash", "-c", "read -r l; echo got $l; sleep 3"],
                stdin="in\n",
                timeout=1.5,
            ),
            script("script_kill", script="echo s\nsleep 5\n", timeout=1.5, timeout_behavior="kill"),
        ],
    )


async def test_request_meta_shell_env_and_caller_context_match(servers):
    cmd = 'echo "[$SECRET] [$N] [$AI_ASSISTANT_CALLER_SESSION_ID]"'
    await differential(
        servers,
        meta_calls=[
            ("env", "bash", {"command": cmd}, {"shell_env": {"SECRET": "s3", "N": 7}}),
            ("env_bool", "bash", {"command": cmd}, {"shell_env": {"SECRET": True}}),
            (
                "env_reserved",
                "bash",
                {"command": cmd},
                {"shell_env": {"AI_ASSISTANT_CALLER_SESSION_ID": "ses-9"}},
            ),
            ("caller", "bash", {"command": cmd}, {"assistant": {"session_id": "ses-42"}}),
            ("caller_spaces", "bash", {"command": cmd}, {"assistant": {"session_id": " ses-7 "}}),
            ("caller_bad", "bash", {"command": cmd}, {"assistant": {"session_id": "x-1"}}),
            ("env_not_object", "bash", {"command": "true"}, {"shell_env": "A=1"}),
            ("env_list", "run", {"argv": ["true"], "purpose": "p"}, {"shell_env": ["A"]}),
            ("env_bad_name", "bash", {"command": "true"}, {"shell_env": {"1X": "v"}}),
            ("env_null_value", "script", {"script": "true"}, {"shell_env": {"X": None}}),
            ("env_nul_value", "bash", {"command": cmd}, {"shell_env": {"SECRET": "a\x00b"}}),
            ("invocation_id", "bash", {"command": "echo i"}, {"invocation_id": "call-1"}),
        ],
    )


def test_the_allow_list_cites_a_seed_bug_or_a_spec_sentence():
    for entry in ALLOWED:
        assert re.search(r"seed-contracts §\d|docs/spec.md §\d", entry.reason), entry


def test_tools_list_carries_the_summary_key_annotation_on_the_wire(servers):
    """The SDK client's models drop unknown annotation keys, so the raw stdio answer is
    compared here: both sides send `annotations: {"summary_key": "purpose"}` on the three
    execution tools and none on `get`."""
    import subprocess

    listings = []
    for server in servers:
        proc = subprocess.Popen(
            [server.command, *server.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=server.cwd,
            env=dict(server.env),
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": _CLIENT}
        for msg in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        ):
            proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
        answer = None
        for line in proc.stdout:
            if line.startswith("{") and json.loads(line).get("id") == 2:
                answer = json.loads(line)["result"]["tools"]
                break
        proc.stdin.close()
        proc.wait(timeout=30)
        listings.append(answer)
    assert listings[0] == listings[1]
    assert [t.get("annotations") for t in listings[1]] == [{"summary_key": "purpose"}] * 3 + [None]


_CLIENT = {"name": "differential", "version": "1"}
