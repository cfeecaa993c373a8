"""Drives ``codex exec`` (the real Codex CLI, pinned) against the scripted fake model, with
Conch as its MCP server, and reads back what Codex showed the model.

The settings are those of /work/shared/reference/hosts.md: a fake ``responses`` provider on
loopback, no approvals, analytics, plugins, apps or web search, and ``[mcp_servers.conch]``
with ``required = true`` (without it the first requests go out before Conch is up).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake_responses import Call, FakeResponses, Say, Step, ToolSearch

VERSION = "0.171.0"
PACKAGE = "@openai/codex"
# the native binary of the platform package (@openai/codex-linux-x64 on x86-64)
BINARY_GLOB = "node_modules/@openai/codex-linux-*/vendor/*/bin/codex"

# A slug of Codex's bundled model catalog: real metadata (token-based truncation at 10000
# tokens), as a user gets. Conch's tools are then deferred behind Codex's client-side
# `tool_search`, so every script starts with LOAD_CONCH. (A slug outside the catalog, e.g.
# "gpt-5-codex", gets fallback metadata instead: the mcp__conch namespace inline in `tools`
# from the first request, and a much tighter cut of large outputs; see README.md.)
MODEL = "gpt-5.5"
# Codex's default limit is 8 and Conch has 9 tools: ask for more, so all of them load
LOAD_CONCH = ToolSearch("conch exec read write signal list shell search info", limit=20)

PROMPT = "do it"


def config_toml(
    base_url: str,
    conch: Path | None,
    *,
    model: str,
    tool_timeout_sec: float | None,
    conch_env: dict[str, str] | None = None,
) -> str:
    """Codex's config.toml for a run; without ``conch``, no ``[mcp_servers.conch]`` table (a
    test adds it, with ``conch install codex`` say)."""
    conch_table = [
        "[mcp_servers.conch]",
        f"command = {json.dumps(str(conch))}",
        "args = []",
        "required = true",
        "startup_timeout_sec = 60",
    ]
    if tool_timeout_sec is not None:
        conch_table.append(f"tool_timeout_sec = {tool_timeout_sec}")
    if conch_env:
        pairs = ", ".join(f"{k} = {json.dumps(v)}" for k, v in conch_env.items())
        conch_table.append(f"env = {{ {pairs} }}")
    if conch is None:
        conch_table = []
    return "\n".join(
        [
            f'model = "{model}"',
            'model_provider = "fake"',
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            'web_search = "disabled"',
            "",
            "[model_providers.fake]",
            'name = "fake"',
            f"base_url = {json.dumps(base_url)}",
            'env_key = "FAKE_API_KEY"',
            'wire_api = "responses"',
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[features]",
            "plugins = false",
            "apps = false",
            "remote_plugin = false",
            "",
            *conch_table,
            "",
        ]
    )


@dataclass
class CodexRun:
    fake: FakeResponses
    returncode: int
    events: list[dict[str, Any]]  # `codex exec --json` events
    stderr: str
    seconds: float

    def output(self, step: int) -> Any:
        """What Codex handed the model for script step ``step``: the ``output`` of its
        ``function_call_output`` (a string, or a list of content items)."""
        item = self.fake.output(step)
        assert item is not None, f"Codex never answered step {step}: {self.describe()}"
        assert item["type"] == "function_call_output", item
        return item["output"]

    def json(self, step: int) -> Any:
        return self.fake.output_json(step)

    def describe(self) -> str:
        return (
            f"rc={self.returncode} after {self.seconds:.1f}s, {len(self.fake.requests)} model"
            f" requests, script errors {self.fake.errors}\nstderr tail: {self.stderr[-2000:]}"
        )


# --- what the golden files hold ------------------------------------------------------------

_RANDOM = [
    (re.compile(r"Wall time: [0-9]+\.[0-9]+ seconds"), "Wall time: <s> seconds"),
    (re.compile(r"\bj_[0-9a-f]{10}\b"), "j_<id>"),
    (re.compile(r"\bs_[0-9a-f]{6,}\b"), "s_<id>"),
]


def normalize(value: Any, tmp: Path) -> Any:
    """``value`` with its random parts replaced: wall times, job and shell ids, tmp paths."""
    if isinstance(value, str):
        value = value.replace(str(tmp), "<tmp>")
        for pattern, replacement in _RANDOM:
            value = pattern.sub(replacement, value)
        return value
    if isinstance(value, list):
        return [normalize(v, tmp) for v in value]
    if isinstance(value, dict):
        return {k: normalize(v, tmp) for k, v in value.items()}
    return value


def step_record(step: Step, output: Any, fake: FakeResponses, i: int) -> dict[str, Any]:
    """One step of a golden file: the call as the model sent it and what Codex answered."""
    if isinstance(step, Call):
        sent = _sent_call(fake, i)
        return {"call": sent, "output": output}
    if isinstance(step, ToolSearch):
        return {"tool_search": {"query": step.query, "limit": step.limit}, "output": output}
    assert isinstance(step, Say)
    return {"say": step.text}


def _sent_call(fake: FakeResponses, i: int) -> dict[str, Any]:
    call_id = fake.call_ids[i]
    for item in fake.input_items():
        if item.get("type") == "function_call" and item.get("call_id") == call_id:
            args: Any = item.get("arguments")
            try:
                args = json.loads(args)
            except (TypeError, ValueError):
                pass
            return {"namespace": item.get("namespace"), "name": item["name"], "arguments": args}
    step = fake.script[i]
    assert isinstance(step, Call)
    return {"namespace": step.namespace, "name": step.name, "arguments": "(never echoed back)"}


# Codex's cut of an output over its budget, and Conch's marker for what it left out inline
CODEX_CUT = re.compile(r"…[0-9]+ tokens truncated…")
CONCH_OMITTED = re.compile(r"\[\.\.\. [0-9]+ bytes omitted: read cursor [0-9]+-[0-9]+ \.\.\.\]")


def long_text(text: str) -> Any:
    """A long output as its size, its digest, both ends and the cut markers in it (a golden
    file stays readable; the digest keeps the comparison exact), and whether what follows
    ``Output:\n`` still parses as JSON."""
    if len(text) <= 4000:
        return text
    body = text.split("Output:\n", 1)[-1]
    try:
        json.loads(body)
        parses = True
    except ValueError:
        parses = False
    return {
        "chars": len(text),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "json_after_output_parses": parses,
        "codex_cut": [
            text[max(m.start() - 40, 0) : m.end() + 40] for m in CODEX_CUT.finditer(text)
        ],
        "conch_omitted_marker": CONCH_OMITTED.findall(text),
        "head": text[:300],
        "tail": text[-300:],
    }


# --- running it -------------------------------------------------------------------------------


def run_codex(
    codex: Path,
    script: list[Step],
    *,
    tmp: Path,
    loopback: Any,
    conch: Any,
    spawn: Callable[..., subprocess.Popen[bytes]],
    tool_timeout_sec: float | None = None,
    conch_env: dict[str, str] | None = None,
    model: str = MODEL,
    timeout: float = 90,
    prepare: Callable[[Path], None] | None = None,
) -> CodexRun:
    """Run ``codex exec`` once through ``script``; ``loopback``, ``conch`` and ``spawn`` are
    the fixtures of tests/hosts/conftest.py (the namespace, the logged Conch, the tree kill).
    With ``conch=None`` the config has no Conch server and ``prepare(codex_home)`` puts one
    there before Codex starts."""
    fake = loopback.start(lambda: FakeResponses(script))
    home, work = tmp / "codex-home", tmp / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        config_toml(
            fake.base_url,
            None if conch is None else conch.command,
            model=model,
            tool_timeout_sec=tool_timeout_sec,
            conch_env=conch_env,
        )
    )
    if prepare is not None:
        prepare(home)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(tmp)),
        "LANG": "C.UTF-8",
        "CODEX_HOME": str(home),
        "FAKE_API_KEY": "fake-key",
        **loopback.env,
    }
    argv = [str(codex), "exec", "--skip-git-repo-check", "--sandbox", "danger-full-access"]
    argv += ["--json", PROMPT]
    started = time.monotonic()
    with fake, open(tmp / "codex.stdout", "wb") as out, open(tmp / "codex.stderr", "wb") as err:
        proc = spawn(
            loopback.argv(argv),
            stdin=subprocess.DEVNULL,  # `codex exec` reads stdin when it is not a terminal
            stdout=out,
            stderr=err,
            cwd=work,
            env=env,
            pass_fds=loopback.pass_fds,
        )
        try:
            returncode = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            returncode = -1
    seconds = time.monotonic() - started
    events = []
    for line in (tmp / "codex.stdout").read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    run = CodexRun(
        fake, returncode, events, (tmp / "codex.stderr").read_text("utf-8", "replace"), seconds
    )
    assert returncode == 0, f"codex exec failed or hung: {run.describe()}"
    assert not fake.errors, run.describe()
    assert loopback.attempts == [], f"Codex tried to leave loopback: {loopback.attempts}"
    assert all(p == "POST /v1/responses" for p in fake.paths), fake.paths
    return run


# --- golden files ---------------------------------------------------------------------------

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE_GOLDEN = os.environ.get("CONCH_UPDATE_GOLDEN") == "1"


class GoldenMismatch(Exception):
    """Not an AssertionError, so an ``xfail(raises=AssertionError)`` test still fails on it."""


def matches_golden(name: str, data: Any) -> None:
    """``data`` equals golden/<name>.json; ``CONCH_UPDATE_GOLDEN=1`` rewrites the file instead."""
    path = GOLDEN / f"{name}.json"
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if UPDATE_GOLDEN:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        raise GoldenMismatch(f"no golden file {path}: CONCH_UPDATE_GOLDEN=1 writes it")
    if data != json.loads(path.read_text()):
        raise GoldenMismatch(
            f"what Codex showed the model differs from golden/{path.name}"
            f" (CONCH_UPDATE_GOLDEN=1 rewrites it once the change is intended); now:\n{text}"
        )
