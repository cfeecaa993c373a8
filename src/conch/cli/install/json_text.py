"""JSON and JSONC config files edited in place: one member added, changed or taken out, every
other byte (key order, indentation, comments, trailing commas) left as it was.

``json.loads`` + ``json.dumps`` would rewrite the whole file in its own layout and cannot read
the comments VS Code and Cursor allow in theirs, so this module parses the text with the
position of every value and splices only the member it changes. It accepts JSON plus ``//`` and
``/* */`` comments and trailing commas (JSONC), nothing looser; a duplicate key is an error
(which one the host reads is not ours to guess).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from conch.cli.install.errors import EditError

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"', re.DOTALL)
_SPACE = re.compile(r"[ \t\r\n]*")
_LITERALS = {"true": True, "false": False, "null": None}
DEFAULT_UNIT = "  "


@dataclass
class Node:
    """A value and its span ``[start, end)`` in the text; ``members`` for an object, once
    :func:`_members` has read them (a value is first read whole, by the C decoder where it is
    plain JSON: a large file is read fast, and only the objects an edit goes through member by
    member)."""

    kind: str  # "object", "array" or "scalar"
    start: int
    end: int
    value: Any = None
    members: list[Member] | None = None


@dataclass
class Member:
    key: str
    key_start: int
    value: Node
    comma: int | None  # the comma after the value, if there is one


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, at: int, what: str) -> EditError:
        line = self.text.count("\n", 0, at) + 1
        col = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return EditError(f"line {line} column {col}: {what}")

    def skip(self, i: int) -> int:
        """Past whitespace and comments (and a byte-order mark at the start)."""
        t = self.text
        if i == 0 and t.startswith("\ufeff"):
            i = 1
        while i < len(t):
            i = _SPACE.match(t, i).end()  # type: ignore[union-attr]
            if t.startswith("//", i):
                j = t.find("\n", i)
                i = len(t) if j < 0 else j
            elif t.startswith("/*", i):
                j = t.find("*/", i + 2)
                if j < 0:
                    raise self.fail(i, "a comment that never ends")
                i = j + 2
            else:
                break
        return i

    def document(self) -> Node:
        i = self.skip(0)
        if i >= len(self.text):
            raise self.fail(i, "no JSON value in the file")
        node, i = self.value(i)
        i = self.skip(i)
        if i != len(self.text):
            raise self.fail(i, "text after the JSON value")
        return node

    def value(self, i: int) -> tuple[Node, int]:
        t = self.text
        c = t[i] if i < len(t) else ""
        if c in "{[":
            try:
                value, end = _DECODER.raw_decode(t, i)
                return Node("object" if c == "{" else "array", i, end, value), end
            except ValueError:  # comments or trailing commas inside (or an error): read it here
                pass
            return self.object(i) if c == "{" else self.array(i)
        if c == '"':
            s, end = self.string(i)
            return Node("scalar", i, end, s), end
        m = _NUMBER.match(t, i)
        if m and m.end() > i:
            return Node("scalar", i, m.end(), json.loads(m.group())), m.end()
        for word, val in _LITERALS.items():
            if t.startswith(word, i):
                return Node("scalar", i, i + len(word), val), i + len(word)
        raise self.fail(i, "expected a JSON value" if c else "the file ends inside a value")

    def string(self, i: int) -> tuple[str, int]:
        m = _STRING.match(self.text, i)
        if m is None:
            raise self.fail(i, "a string that never ends, or a control character inside it")
        try:
            return json.loads(m.group()), m.end()
        except ValueError as e:
            raise self.fail(i, f"a bad string ({e.args[0]})") from None

    def object(self, start: int) -> tuple[Node, int]:
        members: list[Member] = []
        node = Node("object", start, start, {}, members)
        seen: set[str] = set()
        i = self.skip(start + 1)
        while True:
            if self.text.startswith("}", i):
                node.end = i + 1
                node.value = {m.key: m.value.value for m in members}
                return node, i + 1
            if not self.text.startswith('"', i):
                raise self.fail(i, "expected a member name in double quotes or '}'")
            key_start = i
            key, i = self.string(i)
            if key in seen:
                raise self.fail(key_start, f"the name {json.dumps(key)} appears twice")
            seen.add(key)
            i = self.skip(i)
            if not self.text.startswith(":", i):
                raise self.fail(i, "expected ':'")
            value, i = self.value(self.skip(i + 1))
            member = Member(key, key_start, value, None)
            members.append(member)
            i = self.skip(i)
            if self.text.startswith(",", i):
                member.comma = i
                i = self.skip(i + 1)
            elif not self.text.startswith("}", i):
                raise self.fail(i, "expected ',' or '}'")

    def array(self, start: int) -> tuple[Node, int]:
        items: list[Any] = []
        i = self.skip(start + 1)
        while True:
            if self.text.startswith("]", i):
                return Node("array", start, i + 1, items), i + 1
            item, i = self.value(i)
            items.append(item.value)
            i = self.skip(i)
            if self.text.startswith(",", i):
                i = self.skip(i + 1)
            elif not self.text.startswith("]", i):
                raise self.fail(i, "expected ',' or ']'")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def parse(text: str) -> Node:
    """The document's root value with its span; :class:`EditError` names the line and column
    of what cannot be read."""
    return _Parser(text).document()


def load(text: str) -> Any:
    return parse(text).value


def _members(text: str, node: Node) -> list[Member]:
    """The members of object ``node``, with their spans (read now if not read yet)."""
    if node.members is None:
        node.members = _Parser(text).object(node.start)[0].members
    assert node.members is not None
    return node.members


def _member(text: str, node: Node, key: str) -> Member | None:
    if node.kind != "object":
        return None
    return next((m for m in _members(text, node) if m.key == key), None)


def _find(text: str, root: Node, path: tuple[str, ...]) -> Node:
    node = root
    for key in path:
        member = _member(text, node, key)
        if member is None:
            raise EditError(f"no object at {'.'.join(path)}")
        node = member.value
    if node.kind != "object":
        raise EditError(f"{'.'.join(path) or 'the document'} is not a JSON object")
    _members(text, node)
    return node


# -- layout ----------------------------------------------------------------------------------


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _line_start(text: str, at: int) -> int:
    return text.rfind("\n", 0, at) + 1


def _indent_of(text: str, at: int) -> str:
    """The whitespace that opens the line holding position ``at``."""
    start = _line_start(text, at)
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def _first_on_line(text: str, at: int) -> bool:
    return text[_line_start(text, at) : at].strip(" \t") == ""


def _unit(text: str, root: Node) -> str:
    """One level of indentation as the file has it (two spaces when it shows none)."""
    for m in _members(text, root) if root.kind == "object" else []:
        if _first_on_line(text, m.key_start):
            return _indent_of(text, m.key_start) or DEFAULT_UNIT
    return DEFAULT_UNIT


def _end_of_line(text: str, at: int) -> int:
    """Where the line after position ``at`` ends (its newline) if only spaces and comments
    follow on it; else ``at``."""
    i = at
    while i < len(text):
        if text[i] in " \t":
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = len(text) if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0 or "\n" in text[i:j]:
                return at
            i = j + 2
        else:
            break
    if i < len(text) and text[i] == "\r" and text.startswith("\r\n", i):
        return i
    return i if i >= len(text) or text[i] == "\n" else at


def render(value: Any, indent: str, unit: str, nl: str) -> str:
    """``value`` as JSON laid out one member a line below a line indented ``indent``."""
    text = json.dumps(value, indent=unit, ensure_ascii=False)
    return text.replace("\n", nl + indent)


def _inline(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _member_text(key: str, value: Any, indent: str, unit: str, nl: str, *, inline: bool) -> str:
    body = _inline(value) if inline else render(value, indent, unit, nl)
    return f"{json.dumps(key, ensure_ascii=False)}: {body}"


# -- edits -----------------------------------------------------------------------------------


def set_member(text: str, path: tuple[str, ...], key: str, value: Any) -> str:
    """``text`` with member ``key`` of the object at ``path`` set to ``value``: its value
    replaced where the member exists (as one line if it was one line), else a member added
    after the last one in the object's own layout (with the objects on ``path`` that are
    missing)."""
    root = parse(text)
    node, depth = root, 0
    for k in path:
        member = _member(text, node, k)
        if member is None:
            break
        node, depth = member.value, depth + 1
    if depth < len(path):  # the missing objects come with the value, nested
        nested = value
        for k in reversed((*path[depth + 1 :], key)):
            nested = {k: nested}
        return set_member(text, path[:depth], path[depth], nested)
    obj = _find(text, root, path)
    members = _members(text, obj)
    unit, nl = _unit(text, root), _newline(text)
    for m in members:
        if m.key == key:
            old = m.value
            one_line = "\n" not in text[old.start : old.end]
            new = (
                _inline(value)
                if one_line
                else render(value, _indent_of(text, m.key_start), unit, nl)
            )
            return text[: old.start] + new + text[old.end :]
    if not members:
        indent = _indent_of(text, obj.start)
        inner = text[obj.start + 1 : obj.end - 1]
        line = _member_text(key, value, indent + unit, unit, nl, inline=False)
        if inner.strip(" \t\r\n") == "":
            block = "{" + nl + indent + unit + line + nl + indent + "}"
            return text[: obj.start] + block + text[obj.end :]
        return text[: obj.start + 1] + nl + indent + unit + line + inner + text[obj.end - 1 :]
    last = members[-1]
    inline = not _first_on_line(text, members[0].key_start)
    indent = _indent_of(text, last.key_start)
    line = _member_text(key, value, indent, unit, nl, inline=inline)
    if inline:
        at = last.value.end
        return text[:at] + ", " + line + text[at:]
    if last.comma is not None:  # a trailing comma: keep the style, the new member gets one too
        eol = _end_of_line(text, last.comma + 1)
        return text[:eol] + nl + indent + line + "," + text[eol:]
    at = last.value.end
    eol = _end_of_line(text, at)
    return text[:at] + "," + text[at:eol] + nl + indent + line + text[eol:]


def delete_member(text: str, path: tuple[str, ...], key: str) -> str:
    """``text`` without member ``key`` of the object at ``path``: the exact inverse of
    :func:`set_member` adding it, and an object left with no member becomes ``{}``."""
    members = _members(text, _find(text, parse(text), path))
    index = next((i for i, m in enumerate(members) if m.key == key), None)
    if index is None:
        return text
    m = members[index]
    if index + 1 < len(members):  # the next member takes its place
        nxt, comma = members[index + 1], m.comma
        assert comma is not None
        eol = _end_of_line(text, comma + 1)
        if _first_on_line(text, m.key_start) and eol < len(text) and text[eol] in "\r\n":
            # its own lines go (a comment on the comma's line with them), and nothing of the
            # lines after, where a comment may be about the next member
            eol = text.index("\n", eol) + 1
            out = text[: _line_start(text, m.key_start)] + text[eol:]
        else:
            out = text[: m.key_start] + text[nxt.key_start :]
    else:
        start = m.key_start
        if _first_on_line(text, start):
            start = _line_start(text, start) - 1  # its line goes, newline included
            if start > 0 and text[start - 1] == "\r":
                start -= 1
        if m.comma is not None:  # it had a trailing comma: that goes with it
            out = text[:start] + text[m.comma + 1 :]
        elif index > 0:
            prev = members[index - 1]
            assert prev.comma is not None
            if "\n" in text[prev.comma : m.key_start]:
                out = text[: prev.comma] + text[prev.comma + 1 : start] + text[m.value.end :]
            else:  # on one line: `, "key": value` goes
                out = text[: prev.comma] + text[m.value.end :]
        else:
            out = text[:start] + text[m.value.end :]
    obj = _find(out, parse(out), path)
    if not _members(out, obj) and out[obj.start + 1 : obj.end - 1].strip(" \t\r\n") == "":
        out = out[: obj.start] + "{}" + out[obj.end :]
    return out


def is_blank(text: str) -> bool:
    """An empty object and nothing else (no comment either)."""
    return text.strip(" \t\r\n\ufeff") in ("", "{}")
