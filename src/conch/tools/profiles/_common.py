"""What every profile shares: the :class:`Profile` record, the per-runtime state a profile keeps
(owned by the runtime, not by module globals), the profile error base, the handler guard that
turns it into the profile's own result, and the schema helpers."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from conch.core import Engine
from conch.tools.context import ToolContext
from conch.tools.state import ProfileState
from conch.tools.tool import ErrorResult, Tool

T = TypeVar("T")
Handler = Callable[[Engine, dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Resource:
    """A readable view a profile publishes (MCP resources): its descriptor and how to render it
    (``render(engine, state)`` -> Markdown)."""

    uri: str
    name: str
    title: str | None
    description: str
    render: Callable[[Engine, ProfileState], str]
    mime_type: str = "text/markdown"
    # more descriptor fields, as the original publishes them (``annotations``, ``_meta``)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "name": self.name}
        if self.title is not None:
            out["title"] = self.title
        out.update(description=self.description, mimeType=self.mime_type, **self.extra)
        return out


@dataclass(frozen=True)
class Profile:
    """A named tool set: its tools (built once, cached by the module), its resources, and how
    a seed profile's results look where they are not Conch's (None: Conch's way)."""

    name: str
    tools: Callable[[], tuple[Tool, ...]]
    resources: tuple[Resource, ...] = ()
    # error_result(error, args) -> (result, is_error) for every ConchError, validation
    # included (a tool's own error_result wins); else Conch's error envelope
    error_result: ErrorResult | None = None
    # result_is_error(result) -> isError of a normal result; else never
    result_is_error: Callable[[dict[str, Any]], bool] | None = None
    # render_text(result, is_error) -> the text block; else Conch's rendering
    render_text: Callable[[dict[str, Any], bool], str] | None = None
    # tools callable by name but not listed (kept for clients of an earlier catalogue)
    unlisted: Callable[[], tuple[Tool, ...]] = lambda: ()
    # the calls in one line, ``tool{argument,...}``, that open the server's instructions: a
    # host that defers an MCP server's tools (Codex) shows the model only the first 250
    # characters of them, and with this line a model can call a tool without first loading
    # its schema (a turn); see docs/mcp.md "Deferred tools"
    call_sheet: str = ""


_SHEET_CALL = re.compile(r"(?<!\w)(\w+)\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")


def call_sheet_arguments(text: str) -> dict[str, set[str]]:
    """The calls a call sheet (or any text holding one) names: ``tool{a,b|c,until:x|y}`` ->
    ``{"tool": {"a", "b", "c", "until"}}`` (alternatives split at ``|``, values after ``:``
    left out)."""
    calls: dict[str, set[str]] = {}
    for name, args in _SHEET_CALL.findall(text):
        names = calls.setdefault(name, set())
        for arg in filter(None, args.split(",")):
            names.update(arg.split(":")[0].split("|"))
    return calls


class ProfileError(Exception):
    """A failure in a profile's own words (its code and message); the profile's guard turns it
    into the result the seed returned. Profiles subclass it to carry their extra fields."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(message or code)
        self.code = code
        self.message = message


def guard(
    fn: Handler, shape: Callable[[Any, Mapping[str, Any]], dict[str, Any]], kind: type[Exception]
) -> Handler:
    """The handler ``fn`` with its profile errors (``kind``) shaped by ``shape(error, args)``."""

    async def run(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        try:
            return await fn(rt, args, ctx)
        except kind as e:
            return shape(e, args)

    return run


def obj(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A strict object schema (``additionalProperties: false``) as the seeds publish it."""
    return {
        "type": "object",
        "properties": props,
        "required": list(required),
        "additionalProperties": False,
    }


def nbytes(text: str) -> int:
    """UTF-8 length of text as the seeds count it (lone surrogates included)."""
    return len(text.encode("utf-8", "surrogatepass"))
