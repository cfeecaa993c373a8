"""core/requests.py: the one semantic check of a request names the field it rejects, and the
tool schemas state the same limits (named once in conch/config.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from conch.config import SEARCH_MAX_CONTEXT, SEARCH_MAX_MATCHES, SEARCH_MAX_TIMEOUT_MS
from conch.core import (
    SEARCH_MODES,
    ExecRequest,
    ReadRequest,
    SearchRequest,
    ShellOpenRequest,
    SignalRequest,
    WriteRequest,
)
from conch.errors import ConchError
from conch.tools import schemas
from conch.tools.schemas import SEARCH_INPUT

SEARCH = {
    "pattern": "x",
    "path": None,
    "regex": False,
    "ignore_case": False,
    "hidden": False,
    "glob": None,
    "context": 0,
    "mode": "matches",
    "max_matches": 100,
    "timeout_ms": 30000,
}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"pattern": ""}, "pattern"),
        ({"path": "a\0b"}, "path"),
        ({"glob": ["ok", ""]}, "glob"),
        ({"glob": "*.py"}, "glob"),
        ({"hidden": 1}, "hidden"),
        ({"context": SEARCH_MAX_CONTEXT + 1}, "context"),
        ({"max_matches": True}, "max_matches"),
        ({"timeout_ms": SEARCH_MAX_TIMEOUT_MS + 1}, "timeout_ms"),
        ({"mode": "lines"}, "mode"),
    ],
)
def test_a_rejected_search_names_its_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ConchError) as info:
        SearchRequest(**{**SEARCH, **change}).checked()
    assert (info.value.code, info.value.field) == ("invalid_argument", field)


def test_a_search_request_keeps_what_it_was_given() -> None:
    req = SearchRequest(**{**SEARCH, "glob": ["*.py", "!x"], "path": "src", "mode": "count"})
    req = req.checked()
    assert (req.glob, req.path, req.mode) == (("*.py", "!x"), "src", "count")


def test_the_search_schema_states_the_checked_limits() -> None:
    props = SEARCH_INPUT["properties"]
    assert props["mode"]["enum"] == list(SEARCH_MODES)
    assert props["max_matches"]["maximum"] == SEARCH_MAX_MATCHES
    assert props["context"]["maximum"] == SEARCH_MAX_CONTEXT
    assert props["timeout_ms"]["maximum"] == SEARCH_MAX_TIMEOUT_MS


@pytest.mark.parametrize(
    ("schema", "request_type"),
    [
        (schemas.EXEC_INPUT, ExecRequest),
        (schemas.READ_INPUT, ReadRequest),
        (schemas.WRITE_INPUT, WriteRequest),
        (schemas.SIGNAL_INPUT, SignalRequest),
        (schemas.SHELL_OPEN_INPUT, ShellOpenRequest),
        (schemas.SEARCH_INPUT, SearchRequest),
    ],
)
def test_each_tool_schema_and_its_request_name_the_same_fields(schema, request_type) -> None:
    """Issue 19: each name is spelled once, in the request object; the tool's input schema
    names the same fields (``purpose`` is the call's, for the dashboard: the call context's
    label; fields a profile or the embedded API may add are marked beyond the schema)."""
    fields = {
        f.name
        for f in dataclasses.fields(request_type)
        if f.name != "_" and not f.metadata.get("beyond_schema")
    }
    # `signal` closes a shell too (`shell_id`: shell_close's request), so needs neither id
    extra = {"shell_id"} if request_type is SignalRequest else set()
    assert set(schema["properties"]) - {"purpose"} == fields | extra
    required = {
        f.name
        for f in dataclasses.fields(request_type)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    assert set(schema.get("required", ())) == (required - {"job_id"} if extra else required)
