"""The real hosts for ``bench/agent_tasks.py``: Codex CLI and Claude Code, each driven by a
*reactive* fake model on loopback.

The fakes here differ from the scripted ones of ``tests/hosts/`` in one way: the next step is
not read from a list but computed when the host's request arrives, by a :class:`Driver` that
hands the policy the tool-result texts *in that request* (what the host showed the model) and
nothing else. Installation, the offline sandbox (``claude_offline.Offline``: a network namespace
with only ``lo`` where allowed, and a recording proxy) and the process-tree teardown are reused
from ``tests/hosts/`` (imported through a ``sys.path`` entry, unchanged).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for _p in ("tests/hosts", "tests/hosts/claude", "tests/hosts/codex", "tests/support"):
    if str(REPO / _p) not in sys.path:
        sys.path.insert(0, str(REPO / _p))

import claude_host  # noqa: E402  (tests/hosts/claude: install, FIXED_ENV, _kill_tree)
from claude_offline import Offline  # noqa: E402

from conch.tools.profiles._common import call_sheet_arguments  # noqa: E402

CODEX_VERSION = "0.171.0"
CODEX_CACHE = REPO / ".cache" / "hosts" / "codex"
CODEX_GLOB = "node_modules/@openai/codex-linux-*/vendor/*/bin/codex"
CODEX_MODEL = "gpt-5.5"  # a catalog slug: real metadata, MCP tools deferred behind tool_search
RUN_MARK = claude_host.RUN_MARK  # every process of a run carries it: the teardown finds them


# --- what a policy yields ------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """A tool call as the model makes it: ``name`` is the tool (``exec``, ``Bash``),
    ``server`` the MCP server it belongs to (None: the host's own tool)."""

    name: str
    args: dict[str, Any]
    server: str | None = None
    #: what the model says to its person with the call (a text block before it)
    say: str | None = None


@dataclass(frozen=True)
class Done:
    """The model's final answer (checked against the task's truth)."""

    answer: str


Policy = Generator[Call, str, str]  # yields calls, is sent the shown text, returns the answer


@dataclass
class Turn:
    call: Call | str  # a Call, or "tool_search"
    shown: str = ""  # the text the host showed the model for it
    shown_bytes: int = 0
    at: float = 0.0


def listed(listing: str, call: Call) -> bool:
    """Whether ``listing`` (what the model was shown) names ``call``'s tool with each of the
    arguments it passes, as ``tool{a,b|c,until:x|y}``."""
    names = call_sheet_arguments(listing).get(call.name)
    return names is not None and set(call.args) <= names


class Driver:
    """Runs one policy against the requests of one host run. ``step(results)`` is called with
    the list of shown texts of the calls answered so far (by the host, in the request) and
    returns the next Call or Done; a retried request (fewer answered than asked) gets the same
    step again."""

    def __init__(self, policy: Policy, deferred: bool = False) -> None:
        self.policy = policy
        # Codex defers an MCP server's tools: the model sees only the first 250 characters of
        # the server's instructions (``listing``) until a ``tool_search`` loads the schemas.
        # A call is made at once when the listing names the tool and every argument it
        # passes (``tool{a,b|c}``, Conch's call sheet); else a tool_search comes first.
        self.deferred = deferred
        self.listing: str | None = None
        self._held: Call | None = None
        self.turns: list[Turn] = []
        self.answer: str | None = None
        self.error: str | None = None
        self.done_at: float | None = None
        self.started = time.monotonic()
        self._actions: list[Call | Done | str] = []
        self._lock = threading.Lock()
        self._first = True

    def step(self, shown: list[tuple[str, int]]) -> Call | Done | str:
        """``shown``: (text, bytes) of each answered call, in order. Returns a Call, Done, or
        "tool_search"."""
        with self._lock:
            n = len(shown)
            if n < len(self._actions):  # a retry of a request already answered
                return self._actions[n]
            if self._actions and isinstance(self._actions[-1], Done):
                return self._actions[-1]
            for i, (text, size) in enumerate(shown):
                if i < len(self.turns) and not self.turns[i].shown and (text or size):
                    self.turns[i].shown, self.turns[i].shown_bytes = text, size
                    self.turns[i].at = time.monotonic() - self.started
            action: Call | Done | str
            if self._held is not None:  # the call a tool_search went before
                action, self._held = self._held, None
            else:
                try:
                    if self._first:
                        self._first = False
                        action = next(self.policy)
                    else:
                        action = self.policy.send(shown[-1][0] if shown else "")
                except StopIteration as stop:
                    action = Done(str(stop.value))
                except Exception as e:  # a policy bug: end the run, say why
                    self.error = f"policy error: {e!r}"
                    action = Done(self.error)
            if (
                isinstance(action, Call)
                and action.server is not None
                and self.deferred
                and not listed(self.listing or "", action)
            ):
                self.deferred = False  # one tool_search loads every tool of the server
                self._held, action = action, "tool_search"
            if isinstance(action, Done):
                self.answer = action.answer
                self.done_at = time.monotonic()
            else:
                self.turns.append(Turn(action))
            self._actions.append(action)
            return action

    @property
    def finished(self) -> bool:
        return self.done_at is not None


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _text_of(content: Any) -> tuple[str, int]:
    """The text of a tool result's content (a string, or a list of text items) and its size in
    UTF-8 bytes: the sum of its content strings."""
    if isinstance(content, str):
        return content, len(content.encode())
    if isinstance(content, list):
        texts = [c.get("text", "") for c in content if isinstance(c, dict)]
        texts = [t for t in texts if isinstance(t, str)]
        return "\n".join(texts), sum(len(t.encode()) for t in texts)
    return "", 0


class _Server:
    """A stdlib HTTP server on 127.0.0.1 in a thread, logging every request body."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def answer(self, path: str, body: Any) -> tuple[int, str, bytes]:
        raise NotImplementedError

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, status: int, ctype: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def do_HEAD(self) -> None:
                self._reply(200, "text/plain", b"")

            def do_GET(self) -> None:
                self._reply(404, "application/json", b'{"type":"error"}')

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
                with srv.lock:
                    srv.requests.append({"path": self.path, "body": body})
                self._reply(*srv.answer(self.path.split("?")[0], body))

        return Handler


def deferred_listing(body: dict[str, Any]) -> str:
    """The lines of Codex's ``Deferred tool namespaces`` message (each namespace and the
    opening of its description: all the model knows of a deferred MCP server)."""
    lines = []
    for item in body.get("input", []):
        if not isinstance(item, dict) or item.get("type") != "message":
            continue
        for part in item.get("content") or []:
            text = part.get("text", "") if isinstance(part, dict) else ""
            if "Deferred tool namespaces" in text:
                lines += [line for line in text.splitlines() if line.startswith("- mcp__")]
    return "\n".join(lines)


class ReactiveResponses(_Server):
    """The OpenAI Responses API as Codex uses it, the next step computed per request."""

    def __init__(self, driver: Driver) -> None:
        super().__init__(driver)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._n = 0

    def answer(self, path: str, body: Any) -> tuple[int, str, bytes]:
        if path != "/v1/responses" or not isinstance(body, dict):
            return 404, "application/json", b'{"error":{"message":"not here"}}'
        outputs: dict[str, tuple[str, int]] = {}
        if self.driver.listing is None:
            self.driver.listing = deferred_listing(body)
        for item in body.get("input", []):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call_output":
                outputs[item.get("call_id", "")] = _text_of(item.get("output"))
            elif item.get("type") == "tool_search_output":
                outputs[item.get("call_id", "")] = ("", 0)
        shown = []
        for i in range(len(self.driver.turns)):
            cid = f"call_{i:03d}"
            if cid not in outputs:
                break
            shown.append(outputs[cid])
        action = self.driver.step(shown)
        index = len(shown)
        with self.lock:
            self._n += 1
            n = self._n
        item: dict[str, Any]
        if isinstance(action, Call):
            item = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{index:03d}",
                "name": action.name,
                "arguments": json.dumps(action.args),
                "status": "completed",
            }
            if action.server is not None:
                item["namespace"] = f"mcp__{action.server}"
        elif action == "tool_search":
            item = {
                "type": "tool_search_call",
                "id": f"ts_{n}",
                "call_id": f"call_{index:03d}",
                "execution": "client",
                "status": "completed",
                "arguments": {"query": "shell exec command read write", "limit": 20},
            }
        else:
            assert isinstance(action, Done)
            item = _message_item(f"msg_{n}", action.answer)
        rid = f"resp_{n}"
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {"id": rid, "status": "in_progress"}}
        ]
        items = [item]
        if isinstance(action, Call) and action.say:
            items.insert(0, _message_item(f"say_{n}", action.say))
        for k, it in enumerate(items):
            if it["type"] == "message":
                added = dict(it, status="in_progress", content=[])
                events.append(
                    {"type": "response.output_item.added", "output_index": k, "item": added}
                )
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": it["id"],
                        "output_index": k,
                        "content_index": 0,
                        "delta": it["content"][0]["text"],
                    }
                )
            events.append({"type": "response.output_item.done", "output_index": k, "item": it})
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        events.append(
            {
                "type": "response.completed",
                "response": {"id": rid, "status": "completed", "usage": usage},
            }
        )
        return 200, "text/event-stream", b"".join(_sse(e) for e in events)


def _message_item(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_chars(v) for v in value.values())
    if isinstance(value, list):
        return sum(_chars(v) for v in value)
    return 0


NOTIFICATION = "<task-notification>"
_TEXT = {"type": "text", "text": ""}


class ReactiveMessages(_Server):
    """The Anthropic Messages API as Claude Code uses it, the next step computed per request.
    Claude Code's own task notifications (a system message when a background command ends)
    are shown to the model too: the policy gets them appended to the next tool result's text,
    and their bytes are counted with it."""

    def __init__(self, driver: Driver) -> None:
        super().__init__(driver)
        self.url = f"http://127.0.0.1:{self.port}"

    def answer(self, path: str, body: Any) -> tuple[int, str, bytes]:
        if path == "/v1/messages/count_tokens" and isinstance(body, dict):
            tokens = 1 + _chars(body.get("messages")) // 4
            return 200, "application/json", json.dumps({"input_tokens": tokens}).encode()
        if path != "/v1/messages" or not isinstance(body, dict):
            return 404, "application/json", b'{"type":"error"}'
        results: dict[str, tuple[str, int]] = {}
        notes: list[tuple[int, str]] = []  # (after how many tool results, text)
        seen = 0
        for message in body.get("messages", []):
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            for block in blocks:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_result":
                    results[block.get("tool_use_id", "")] = _text_of(block.get("content"))
                    seen += 1
                elif (
                    isinstance(block.get("text"), str)
                    and NOTIFICATION in block["text"]
                    and message.get("role") != "assistant"
                ):
                    notes.append((seen, block["text"]))
        shown: list[tuple[str, int]] = []
        for i in range(len(self.driver.turns)):
            tid = f"toolu_fake_{i:04d}"
            if tid not in results:
                break
            shown.append(results[tid])
        # a notification belongs to the result it follows (shown at the same point)
        for after, text in notes:
            k = min(max(after, 1), len(shown)) - 1
            if k >= 0:
                t, b = shown[k]
                if text not in t:
                    shown[k] = (t + "\n" + text, b + len(text.encode()))
        action = self.driver.step(shown)
        index = len(shown)
        if isinstance(action, Call):
            name = action.name if action.server is None else f"mcp__{action.server}__{action.name}"
            block = {"type": "tool_use", "id": f"toolu_fake_{index:04d}", "name": name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(action.args)}
            stop = "tool_use"
        else:
            text = action.answer if isinstance(action, Done) else "done"
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": text}
            stop = "end_turn"
        start = {
            "id": f"msg_fake_{index:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1 + _chars(body.get("messages")) // 4, "output_tokens": 1},
        }
        said: list[dict[str, Any]] = []
        if isinstance(action, Call) and action.say:
            said = [
                {"type": "content_block_start", "index": 0, "content_block": _TEXT},
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": action.say},
                },
                {"type": "content_block_stop", "index": 0},
            ]
        k = len(said) // 3
        events = [
            {"type": "message_start", "message": start},
            *said,
            {"type": "content_block_start", "index": k, "content_block": block},
            {"type": "content_block_delta", "index": k, "delta": delta},
            {"type": "content_block_stop", "index": k},
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
            {"type": "message_stop"},
        ]
        return 200, "text/event-stream", b"".join(_sse(e) for e in events)


# --- MCP servers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class McpServer:
    """An MCP server a host starts: its name (the tools' namespace), command line and
    environment. Its stdio is teed to files in the run's directory."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


WRAPPER = """#!/usr/bin/env bash
# {argv}, with its stdio copied to files
export {mark}={run}
{exports}
tee -- {to} | {argv} 2>>{stderr} | tee -- {frm}
"""


def _wrapper(run_dir: Path, server: McpServer) -> Path:
    path = run_dir / "mcp-server.sh"
    exports = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in server.env.items())
    path.write_text(
        WRAPPER.format(
            argv=shlex.join(server.argv),
            mark=RUN_MARK,
            run=shlex.quote(str(run_dir)),
            exports=exports,
            to=shlex.quote(str(run_dir / "to-server.jsonl")),
            frm=shlex.quote(str(run_dir / "from-server.jsonl")),
            stderr=shlex.quote(str(run_dir / "server.stderr")),
        )
    )
    path.chmod(0o755)
    return path


# --- installing the hosts ------------------------------------------------------------------------


def codex_binary() -> Path:
    """The pinned Codex CLI, installed by npm into .cache/hosts/codex (as tests/hosts does)."""
    found = sorted(CODEX_CACHE.glob(CODEX_GLOB))
    manifest = CODEX_CACHE / "node_modules" / "@openai" / "codex" / "package.json"
    ok = False
    with contextlib.suppress(OSError, ValueError):
        ok = json.loads(manifest.read_text()).get("version") == CODEX_VERSION
    if found and ok:
        return found[0]
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on PATH: cannot install the Codex CLI")
    CODEX_CACHE.mkdir(parents=True, exist_ok=True)
    cmd = [npm, "install", "--prefix", str(CODEX_CACHE), "--no-audit", "--no-fund"]
    subprocess.run([*cmd, "--loglevel=error", f"@openai/codex@{CODEX_VERSION}"], check=True)
    return sorted(CODEX_CACHE.glob(CODEX_GLOB))[0]


def claude_binary() -> Path:
    return claude_host.install()


# --- one run -------------------------------------------------------------------------------------


@dataclass
class HostRun:
    host: str
    driver: Driver
    returncode: int | None
    seconds: float  # the policy's start to its answer (or the end of the run)
    run_dir: Path
    attempts: list[str]
    requests: list[dict[str, Any]]


def codex_config(
    base_url: str, server: McpServer | None, wrapper: Path | None, tt: float | None
) -> str:
    """The run's Codex config; ``tt`` None leaves ``tool_timeout_sec`` out (Codex's default)."""
    lines = [
        f'model = "{CODEX_MODEL}"',
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
        "stream_idle_timeout_ms = 900000",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
        "apps = false",
        "remote_plugin = false",
        "",
    ]
    if server is not None and wrapper is not None:
        lines += [
            f"[mcp_servers.{server.name}]",
            f"command = {json.dumps(str(wrapper))}",
            "args = []",
            "required = true",
            "startup_timeout_sec = 120",
            *([f"tool_timeout_sec = {tt}"] if tt is not None else []),
            "",
        ]
    return "\n".join(lines)


def run_host(
    host: str,
    policy: Policy,
    run_dir: Path,
    workdir: Path,
    server: McpServer | None,
    host_timeout_s: float | None,
    deadline_s: float,
    env: dict[str, str] | None = None,
    person: Callable[[Path, Callable[..., Any]], None] | None = None,
    at_done: Callable[[], Any] | None = None,
) -> HostRun:
    """Run ``host`` ("codex" or "claude") in ``workdir`` with the policy playing the model, with
    ``server`` as its one MCP server (None: the host's own tools only), ``host_timeout_s`` as
    the host's MCP tool timeout (None: the host's own default, no setting at all). Returns
    once the policy has answered and the host has ended (or ``deadline_s`` has passed);
    everything the run started is killed. ``person`` runs in
    a thread beside the host (given the run dir and a way to call into the host's network
    namespace); ``at_done`` is called inside that namespace when the policy answers, before
    anything is killed (to check the live state)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    driver = Driver(policy, deferred=(host == "codex" and server is not None))
    wrapper = _wrapper(run_dir, server) if server is not None else None
    offline = Offline()
    fake: ReactiveResponses | ReactiveMessages | None = None
    proc: subprocess.Popen[bytes] | None = None
    mark = {RUN_MARK: str(run_dir)}
    try:
        if host == "codex":
            codex = codex_binary()
            fake = offline.call(lambda: ReactiveResponses(driver))
            home = run_dir / "codex-home"
            home.mkdir(exist_ok=True)
            (home / "config.toml").write_text(
                codex_config(fake.base_url, server, wrapper, host_timeout_s)
            )
            full_env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": os.environ.get("HOME", str(run_dir)),
                "LANG": "C.UTF-8",
                "CODEX_HOME": str(home),
                "FAKE_API_KEY": "fake-key",
                **offline.proxy_env,
                **mark,
            }
            argv = [str(codex), "exec", "--skip-git-repo-check", "--sandbox", "danger-full-access"]
            argv += ["--json", "do it"]
        elif host == "claude":
            claude = claude_binary()
            fake = offline.call(lambda: ReactiveMessages(driver))
            config, tmp = run_dir / "config", run_dir / "tmp"
            config.mkdir(exist_ok=True)
            tmp.mkdir(exist_ok=True)
            passed = claude_host.PASSED_ENV
            full_env = {k: os.environ[k] for k in passed if k in os.environ}
            full_env |= claude_host.FIXED_ENV | offline.proxy_env | mark
            full_env |= {
                "ANTHROPIC_BASE_URL": fake.url,
                "CLAUDE_CONFIG_DIR": str(config),
                "CLAUDE_CODE_TMPDIR": str(tmp),
                "TERM": "dumb",
                "BASH_MAX_TIMEOUT_MS": "600000",
            }
            if host_timeout_s is not None:
                full_env["MCP_TOOL_TIMEOUT"] = str(int(host_timeout_s * 1000))
            argv = [str(claude), "-p", "do it", "--dangerously-skip-permissions"]
            argv += ["--output-format", "stream-json", "--verbose"]
            if server is not None and wrapper is not None:
                mcp = run_dir / "mcp.json"
                mcp.write_text(json.dumps({"mcpServers": {server.name: {"command": str(wrapper)}}}))
                argv += ["--mcp-config", str(mcp), "--strict-mcp-config"]
            else:
                argv += ["--strict-mcp-config"]
        else:
            raise ValueError(host)
        full_env |= env or {}
        if person is not None:
            threading.Thread(target=person, args=(run_dir, offline.call), daemon=True).start()
        with open(run_dir / "host.stdout", "wb") as out, open(run_dir / "host.stderr", "wb") as err:
            started = time.monotonic()
            driver.started = started
            popen = subprocess.Popen
            proc = offline.call(
                lambda: popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    cwd=workdir,
                    env=full_env,
                    start_new_session=True,
                )
            )
            end = started + deadline_s
            checked = False
            while time.monotonic() < end and (proc.poll() is None or not checked):
                if driver.finished and not checked:
                    checked = True
                    if at_done is not None:
                        with contextlib.suppress(Exception):
                            offline.call(at_done)
                if driver.finished and time.monotonic() > (driver.done_at or 0) + 5:
                    break  # answered: the host gets 5 s to end by itself
                if proc.poll() is not None and not driver.finished:
                    break
                time.sleep(0.1)
            returncode = proc.poll()
        seconds = (driver.done_at or time.monotonic()) - started
    finally:
        if proc is not None:
            claude_host._kill_tree(proc, run_dir)
        if fake is not None:
            fake.close()
        offline.close()
    requests = fake.requests if fake is not None else []
    with open(run_dir / "model-requests.jsonl", "w") as log:
        for r in requests:
            log.write(json.dumps(r) + "\n")
    return HostRun(host, driver, returncode, seconds, run_dir, offline.attempts(), requests)
