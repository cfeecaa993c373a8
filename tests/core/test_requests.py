"""core/requests.py: the one semantic check of a request names the field it rejects, and the
tool schemas state the same limits (named once in conch/config.py)."""

from __future__ import annotations

from typing import Any

import pytest

from conch.config import SEARCH_MAX_CONTEXT, SEARCH_MAX_MATCHES, SEARCH_MAX_TIMEOUT_MS
from conch.core.requests import SEARCH_MODES, search_request
from conch.errors import ConchError
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
        search_request(**{**SEARCH, **change})
    assert (info.value.code, info.value.field) == ("invalid_argument", field)


def test_a_search_request_keeps_what_it_was_given() -> None:
    req = search_request(**{**SEARCH, "glob": ["*.py", "!x"], "path": "src", "mode": "count"})
    assert (req.glob, req.path, req.mode) == (("*.py", "!x"), "src", "count")


def test_the_search_schema_states_the_checked_limits() -> None:
    props = SEARCH_INPUT["properties"]
    assert props["mode"]["enum"] == list(SEARCH_MODES)
    assert props["max_matches"]["maximum"] == SEARCH_MAX_MATCHES
    assert props["context"]["maximum"] == SEARCH_MAX_CONTEXT
    assert props["timeout_ms"]["maximum"] == SEARCH_MAX_TIMEOUT_MS
