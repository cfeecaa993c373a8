"""A tool: name, description, schemas, annotations and the handler that runs it on the engine,
and its :class:`WireShape` (how its profile's calls and descriptor differ from Conch's way).

How a seed profile shapes errors, decides ``isError`` and words its text block is the
profile's (``Profile`` in conch/tools/profiles/_common.py); a tool carries only what differs
from tool to tool."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conch.core import Engine
from conch.errors import ConchError
from conch.tools import schemas as S
from conch.tools.context import ToolContext

if TYPE_CHECKING:
    from conch.config import Config

Handler = Callable[["Engine", dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]
ErrorResult = Callable[[ConchError, Mapping[str, Any]], tuple[dict[str, Any], bool]]
# lean(full result, default cwd) -> the lean result (conch.tools.lean)
Lean = Callable[[dict[str, Any], str], dict[str, Any]]


@dataclass(frozen=True)
class WireShape:
    """How a tool's calls and descriptor differ from Conch's way, for a profile that shapes
    them itself (a seed drop-in, or the default profile's lean results); the empty shape is
    Conch's way throughout. How a seed profile shapes errors, decides ``isError`` and words its
    text block for all its tools is the profile's (``Profile``); these are per tool."""

    # argument names that never reach the handler (echoed into _meta instead)
    summary_arg: str | None = None
    # Per-tool overrides of the profile's behaviour, for a seed that really differs per tool
    # (ai-device-bash: each tool's error result names its own mode, and each tool words its
    # own _meta.summary): error_result(error, args) -> (result, is_error) for every
    # ConchError, validation included (else the profile's); summary(args) -> _meta.summary
    error_result: ErrorResult | None = None
    summary: Callable[[Mapping[str, Any]], str] | None = None
    # the default profile's results drop fields at their default unless result_detail is full
    lean: Lean | None = None
    # a seed profile that publishes the original's exact descriptor (no title/annotations,
    # its own schemas; some values depend on the configuration) and checks arguments the
    # original's way (its validation messages): describer(config) -> descriptor,
    # validator(args) raises ConchError("invalid_argument"), or returns the arguments as the
    # original's SDK coerced them (ai-device-bash: pydantic lax mode)
    describer: Callable[[Config | None], dict[str, Any]] | None = None
    validator: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
    # a seed's tool describes its own error shapes in output_schema (else the published
    # schema is the result or Conch's error envelope)
    own_error_shapes: bool = False
    # the text block of a result (result, is_error) -> text (else the profile's, else
    # Conch's rendering); False: MCP results carry no structuredContent (the original sends
    # its result as text only). ai-device-bash sets both on each tool.
    render_text: Callable[[dict[str, Any], bool], str] | None = None
    structured: bool = True


@dataclass(frozen=True)
class Tool:
    """What every tool has; how its profile shapes it on the wire is its ``wire``."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    handler: Handler
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    # the tool may wait on a job: front ends send progress notifications while it does
    progress: bool = False
    wire: WireShape = field(default_factory=WireShape)

    @property
    def annotations(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": True,
        }

    @property
    def published_output_schema(self) -> dict[str, Any]:
        """The result shape, or the error envelope: clients such as the TypeScript SDK validate
        ``structuredContent`` against it even when ``isError`` is true."""
        if self.wire.own_error_shapes or self.wire.error_result is not None:
            return self.output_schema
        return {"type": "object", "anyOf": [self.output_schema, S.ERROR_OUTPUT]}

    def describe(self, config: Config | None = None) -> dict[str, Any]:
        """The tool as MCP `tools/list` shows it (every front end publishes this)."""
        if self.wire.describer is not None:
            return self.wire.describer(config)
        out = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.published_output_schema,
            "annotations": self.annotations,
        }
        if self.meta:
            out["_meta"] = self.meta
        return out
