"""A scripted fake model speaking the OpenAI Responses API, as the Codex CLI uses it.

Stdlib only. It listens on 127.0.0.1 (a random port) in a thread, answers each
``POST /v1/responses`` (``stream: true``) with the next step of a script as server-sent events,
and logs every request body. A step is a tool call (:class:`Call`, a ``function_call`` item in
the ``mcp__conch`` namespace), a client-side tool search (:class:`ToolSearch`) or a final text
message (:class:`Say`). Once the script has run out, every further request gets ``"done"``.

The host answers a call in its next request, as an input item with the same ``call_id``
(``function_call_output``, or ``tool_search_output`` for a search): :meth:`FakeResponses.output`
finds it for a step.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

NAMESPACE = "mcp__conch"
# what Codex puts before the JSON of an MCP tool's structuredContent
OUTPUT_PREFIX = re.compile(r"\AWall time: [0-9.]+ seconds\nOutput:\n")

Arguments = Union[dict[str, Any], str, Callable[["FakeResponses"], Union[dict[str, Any], str]]]


@dataclass(frozen=True)
class Call:
    """The model calls a tool: ``name`` in ``namespace`` with ``arguments``. A dict is sent as
    its JSON, a string as is (so malformed arguments can be scripted too), and a callable is
    called with the server when the step is served, to use what earlier calls returned."""

    name: str
    arguments: Arguments = field(default_factory=dict)
    namespace: str | None = NAMESPACE

    def arguments_json(self, fake: FakeResponses) -> str:
        args = self.arguments(fake) if callable(self.arguments) else self.arguments
        return args if isinstance(args, str) else json.dumps(args)


@dataclass(frozen=True)
class ToolSearch:
    """The model asks the host to load deferred tools (Codex runs ``tool_search`` itself)."""

    query: str
    limit: int = 8


@dataclass(frozen=True)
class Say:
    """The model answers with text and no tool call, which ends the turn."""

    text: str


Step = Call | ToolSearch | Say


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


class FakeResponses:
    """The fake model server. ``with FakeResponses(script) as fake:`` runs it; ``fake.base_url``
    is what the host's provider points at."""

    def __init__(self, script: list[Step]) -> None:
        self.script = list(script)
        self.call_ids = [f"call_{i:03d}" for i in range(len(self.script))]
        self.requests: list[dict[str, Any]] = []  # every body, in arrival order
        self.paths: list[str] = []  # method and path of every request, answered or not
        self.errors: list[str] = []  # steps whose arguments could not be made
        self.lock = threading.Lock()
        self._next = 0
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeResponses:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- what the host sent -------------------------------------------------------------

    def input_items(self) -> list[dict[str, Any]]:
        """Every input item of every request, the repeats of the growing history included."""
        return [item for body in self.requests for item in body.get("input", [])]

    def output(self, step: int) -> dict[str, Any] | None:
        """The item the host sent back for the call of script step ``step`` (matched by
        ``call_id``), or None if it never answered it."""
        call_id = self.call_ids[step]
        for item in self.input_items():
            if item.get("call_id") == call_id and item.get("type", "").endswith("_output"):
                return item
        return None

    def output_json(self, step: int) -> Any:
        """The JSON Conch returned for step ``step``, parsed from the text Codex showed the
        model (``Wall time: … seconds\nOutput:\n`` and then the JSON)."""
        item = self.output(step)
        if item is None or not isinstance(item.get("output"), str):
            raise LookupError(f"step {step} has no text output: {item!r}")
        text = item["output"]
        m = OUTPUT_PREFIX.match(text)
        if m is None:
            raise LookupError(f"step {step}: no Wall time/Output prefix in {text[:200]!r}")
        return json.loads(text[m.end() :])

    def last_output_json(self) -> Any:
        """The JSON of the latest answered tool call (for the arguments of the next step)."""
        answered = [i for i, s in enumerate(self.script) if isinstance(s, Call) and self.output(i)]
        if not answered:
            raise LookupError("no tool call answered yet")
        return self.output_json(answered[-1])

    # --- what the model says ------------------------------------------------------------

    def take_step(self) -> tuple[int, Step]:
        with self.lock:
            i = self._next
            self._next += 1
        if i < len(self.script):
            return i, self.script[i]
        return i, Say("done")

    def _item(self, i: int, step: Step) -> dict[str, Any]:
        n = next(self._ids)
        if isinstance(step, Call):
            try:
                arguments = step.arguments_json(self)
            except Exception as e:  # the test reads fake.errors; the turn ends here
                self.errors.append(f"step {i} ({step.name}): {e!r}")
                return self._item(i, Say(f"script error at step {i}: {e!r}"))
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": self.call_ids[i],
                "name": step.name,
                "arguments": arguments,
                "status": "completed",
            }
            if step.namespace is not None:
                item["namespace"] = step.namespace
            return item
        if isinstance(step, ToolSearch):
            return {
                "type": "tool_search_call",
                "id": f"ts_{n}",
                "call_id": self.call_ids[i],
                "execution": "client",
                "status": "completed",
                "arguments": {"query": step.query, "limit": step.limit},
            }
        return {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }

    def events(self, i: int, step: Step) -> list[dict[str, Any]]:
        resp_id = f"resp_{i + 1}"
        item = self._item(i, step)
        events: list[dict[str, Any]] = [
            {
                "type": "response.created",
                "response": {"id": resp_id, "object": "response", "status": "in_progress"},
            }
        ]
        if item["type"] == "message":
            added = dict(item, status="in_progress", content=[])
            events.append({"type": "response.output_item.added", "output_index": 0, "item": added})
            events.append(
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": item["content"][0]["text"],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
        events.append(
            {
                "type": "response.completed",
                "response": {
                    "id": resp_id,
                    "object": "response",
                    "status": "completed",
                    "usage": {
                        "input_tokens": 10,
                        "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": 5,
                        "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": 15,
                    },
                },
            }
        )
        return events

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test reads fake.requests; stderr stays quiet

            def _reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                fake.paths.append(f"GET {self.path}")
                self._reply(404, b'{"error":{"message":"not here"}}')

            def do_POST(self) -> None:
                fake.paths.append(f"POST {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.split("?")[0] != "/v1/responses":
                    self._reply(404, b'{"error":{"message":"not here"}}')
                    return
                body = json.loads(raw)
                with fake.lock:
                    fake.requests.append(body)
                i, step = fake.take_step()
                stream = b"".join(_sse(e) for e in fake.events(i, step))
                self._reply(200, stream, "text/event-stream")

        return Handler
