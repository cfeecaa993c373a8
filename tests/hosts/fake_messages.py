"""A scripted fake model speaking the Anthropic Messages API, as Claude Code uses it.

Stdlib only. It listens on 127.0.0.1 (a random port) in a thread and answers:

- ``HEAD /`` (Claude Code's reachability probe) with an empty 200;
- ``POST /v1/messages`` (``stream: true``) with the next step of a script as server-sent events:
  ``message_start``, ``content_block_start``/``_delta``/``_stop`` (``text_delta`` or
  ``input_json_delta``), ``message_delta`` with the ``stop_reason``, ``message_stop``;
- ``POST /v1/messages/count_tokens`` with a chars/4 estimate of the content, which is what the
  host needs to size a large tool result the way the real API would.

A step is a tool call (:class:`ToolUse`) or a final text (:class:`Say`). Which step a request
gets is the number of assistant turns already in its ``messages``, so a retried request gets the
same step again. Once the script has run out, every further request gets ``"done"``.

The host answers the tool call of step *i* in a later request, as a ``tool_result`` block with the
step's ``tool_use_id``: :meth:`FakeMessages.tool_result` finds it. Every request is logged.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Block = dict[str, Any]


@dataclass(frozen=True)
class ToolUse:
    """The model calls ``name`` (e.g. ``mcp__conch__exec``) with ``input``: a dict, or a function
    of the tool_result blocks of the steps before it (to pass on a job id, say)."""

    name: str
    input: dict[str, Any] | Callable[[list[Block | None]], dict[str, Any]] = field(
        default_factory=dict
    )


@dataclass(frozen=True)
class Say:
    """The model answers with text and no tool call, which ends the turn."""

    text: str


Step = ToolUse | Say


def tool_use_id(step: int) -> str:
    return f"toolu_fake_{step:04d}"


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _chars(value: Any) -> int:
    """The characters of all strings in ``value``: what a chars/4 token estimate counts."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_chars(v) for v in value.values())
    if isinstance(value, list):
        return sum(_chars(v) for v in value)
    return 0


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: Any


class FakeMessages:
    """The fake model. ``url`` is what ``ANTHROPIC_BASE_URL`` should be; :meth:`close` stops it."""

    def __init__(self, script: list[Step], final_text: str = "done") -> None:
        self.script = list(script)
        self.final_text = final_text
        self.requests: list[Request] = []
        self.inputs: dict[int, dict[str, Any]] = {}  # the input each tool call was sent with
        # steps whose input could not be made (the run then ends with a text naming the error)
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # ---- what the host sent -------------------------------------------------------------

    def turns(self) -> list[Any]:
        """The bodies of the model turns (``POST /v1/messages``), in order."""
        with self.lock:
            return [r.body for r in self.requests if r.path.split("?")[0] == "/v1/messages"]

    def tool_result(self, step: int) -> Block | None:
        """The ``tool_result`` block the host sent back for the tool call of ``step``, as it
        first sent it."""
        wanted = tool_use_id(step)
        for body in self.turns():
            for message in body.get("messages", []):
                content = message.get("content")
                if message.get("role") != "user" or not isinstance(content, list):
                    continue
                for block in content:
                    if block.get("type") == "tool_result" and block.get("tool_use_id") == wanted:
                        return block
        return None

    def tool_results(self) -> list[Block | None]:
        return [self.tool_result(i) for i in range(len(self.script))]

    # ---- answering ----------------------------------------------------------------------

    def _step_for(self, body: dict[str, Any]) -> int:
        return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")

    def _answer(self, body: dict[str, Any]) -> bytes:
        index = self._step_for(body)
        step: Step = self.script[index] if index < len(self.script) else Say(self.final_text)
        if isinstance(step, ToolUse) and callable(step.input):
            try:
                step = ToolUse(step.name, step.input(self.tool_results()[:index]))
            except Exception as e:  # a script bug or an unexpected result: end the run
                with self.lock:
                    self.errors.append(f"step {index}: {e!r}")
                step = Say(f"fake model: no input for step {index}: {e!r}")
        model = body.get("model", "fake")
        events: list[dict[str, Any]] = [
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_fake_{index:04d}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 1 + _chars(body.get("messages")) // 4,
                        "output_tokens": 1,
                    },
                },
            }
        ]
        if isinstance(step, ToolUse):
            assert isinstance(step.input, dict)
            with self.lock:
                self.inputs[index] = step.input
            block = {"type": "tool_use", "id": tool_use_id(index), "name": step.name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(step.input)}
            stop_reason = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": step.text}
            stop_reason = "end_turn"
        events += [
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
            {"type": "message_stop"},
        ]
        return b"".join(_sse(e) for e in events)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _reply(self, status: int, content_type: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _log(self, body: Any) -> None:
                with fake.lock:
                    fake.requests.append(Request(self.command, self.path, body))

            def do_HEAD(self) -> None:
                self._log(None)
                self._reply(200, "text/plain", b"")

            def do_GET(self) -> None:
                self._log(None)
                self._reply(404, "application/json", b'{"type":"error"}')

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode(errors="replace")
                self._log(body)
                path = self.path.split("?")[0]
                if path == "/v1/messages" and isinstance(body, dict):
                    self._reply(200, "text/event-stream", fake._answer(body))
                elif path == "/v1/messages/count_tokens" and isinstance(body, dict):
                    tokens = 1 + _chars(body.get("messages")) // 4
                    self._reply(
                        200, "application/json", json.dumps({"input_tokens": tokens}).encode()
                    )
                else:
                    error = {"type": "error", "error": {"type": "not_found_error", "message": path}}
                    self._reply(404, "application/json", json.dumps(error).encode())

        return Handler
