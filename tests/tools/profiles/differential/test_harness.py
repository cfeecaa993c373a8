"""The differential harness's own rules: what normalization replaces, what compare lets pass."""

from __future__ import annotations

import pytest
from harness import Allowed, Normalizer, compare, diff, original_python


def test_normalizer_numbers_ids_by_first_appearance_and_keeps_them_equal():
    n = Normalizer({"/tmp/x/work": "<cwd>"})
    a = n({"shell_id": "s_1", "text": "in s_1 at /tmp/x/work/sub", "duration_ms": 12})
    b = n({"active_exec_id": "j_9", "shell_id": "s_1", "exec_id": "j_9"})
    assert a == {
        "shell_id": "<shell#1>",
        "text": "in <shell#1> at <cwd>/sub",
        "duration_ms": "<ms>",
    }
    assert b == {"active_exec_id": "<exec#1>", "shell_id": "<shell#1>", "exec_id": "<exec#1>"}


def test_normalizer_leaves_non_volatile_values_alone():
    n = Normalizer()
    value = {"exit_code": 137, "output": "hello\n", "eof": True, "next_cursor": 6}
    assert n(value) == value


def test_compare_lists_every_difference_not_allowed_by_path():
    orig = [{"call": "x", "structuredContent": {"a": 1, "b": [1, 2]}}]
    ours = [{"call": "x", "structuredContent": {"a": 2, "b": [1], "c": 0}}]
    assert [p for p, _, _ in diff(orig[0], ours[0])] == [
        "structuredContent.a",
        "structuredContent.b[1]",
        "structuredContent.c",
    ]
    with pytest.raises(AssertionError) as e:
        compare(orig, ours, [Allowed("x", r"structuredContent\.a", "docs/spec.md §7 (test)")])
    assert "2 difference(s)" in str(e.value) and "structuredContent.a" not in str(e.value)


def test_an_allowed_entry_with_a_check_allows_only_what_the_check_accepts():
    entry = Allowed(
        "*",
        r"(.*\.)?output",
        "docs/spec.md §4: `\\n` line ends",
        lambda a, b: a.replace("\r\n", "\n") == b,
    )
    compare([{"call": "e", "output": "a\r\n"}], [{"call": "e", "output": "a\n"}], [entry])
    with pytest.raises(AssertionError):
        compare([{"call": "e", "output": "a\r\n"}], [{"call": "e", "output": "b\n"}], [entry])


def test_an_allowed_entry_needs_a_reason():
    with pytest.raises(AssertionError, match="without a reason"):
        compare([{"call": "e"}], [{"call": "e"}], [Allowed("e", ".*", " ")])


def test_original_python_fails_rather_than_skips_for_a_missing_version():
    with pytest.raises(AssertionError, match=r"pyenv install 2\.1"):
        original_python("2.1")
    assert original_python("3.12").endswith("/bin/python")
