"""Goose's ``config.yaml``: one entry of its top-level ``extensions:`` mapping added, changed
or taken out as lines of text; every other line stays as it was.

Conch's lock has no YAML library that keeps comments (PyYAML, when present at all, rewrites the
whole file), so this edits lines: it finds the ``extensions:`` block by its indentation, adds
an entry after the last one at the same indentation, and removes exactly the lines of an entry.
What it reads as data is that one entry, in the subset of YAML that Goose itself writes (block
mappings and sequences, plain and quoted scalars, ``[]``/``{}`` flow collections); the other
entries are kept as their text, and an entry outside that subset counts as one it cannot read.
Where PyYAML is installed, each edit is also checked against it as a whole document.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from conch.cli.install.errors import EditError, Refused
from conch.cli.install.values import same

TOP = "extensions"
UNIT = 2
_TOP_LINE = re.compile(r"extensions[ \t]*:(?P<rest>[^#]*?)[ \t]*(?P<comment>#.*)?")
_KEY_LINE = re.compile(
    r"(?P<key>\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^\s#'\"{}\[\],&*!|>%@`-][^:#]*?|-[^\s:#][^:#]*?)"
    r"[ \t]*:(?:[ \t]+(?P<rest>.*))?"
)
_PLAIN_SAFE = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
_KEYWORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}
_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


@dataclass(frozen=True)
class Unparsed:
    """An entry kept as its text: not Conch's, or not in the YAML subset read here."""

    text: str


class _Unsupported(Exception):
    pass


# -- the file's shape ------------------------------------------------------------------------


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    """A line that holds data (not blank, not only a comment)."""
    s = line.strip()
    return bool(s) and not s.startswith("#")


@dataclass
class _Block:
    key: int  # the `extensions:` line
    inline_empty: bool  # `extensions: {}` (or null)
    end: int  # after its last content line
    child: int  # the entries' indentation
    entries: dict[str, tuple[int, int]]  # name -> lines [first, end) of the entry


def _check(lines: list[str]) -> None:
    for i, line in enumerate(lines):
        s = line.rstrip("\r\n")
        if s in ("---", "...") and any(_content(x) for x in lines[:i]):
            raise EditError(f"line {i + 1}: more than one YAML document in the file")
        if s.startswith("\t"):
            raise EditError(f"line {i + 1}: a tab in the indentation")


def _block(lines: list[str]) -> _Block | None:
    _check(lines)
    found = [i for i, line in enumerate(lines) if _TOP_LINE.fullmatch(line.rstrip("\r\n"))]
    if not found:
        if any(re.match(r"[\"']?extensions[\"']?[ \t]*:", line) for line in lines):
            raise EditError("the extensions key is written in a form this edit does not read")
        return None
    if len(found) > 1:
        raise EditError("the extensions key appears twice")
    k = found[0]
    m = _TOP_LINE.fullmatch(lines[k].rstrip("\r\n"))
    assert m is not None
    rest = m.group("rest").strip()
    if rest not in ("", "{}", "null", "~"):
        raise EditError(f"line {k + 1}: extensions written inline; this edit needs a block")
    end = k + 1
    i = k + 1
    while i < len(lines):
        if _content(lines[i]):
            if _indent(lines[i]) == 0:
                break
            end = i + 1
        i += 1
    if rest and end > k + 1:
        raise EditError(f"line {k + 1}: extensions is empty inline and has lines below it")
    body = [j for j in range(k + 1, end) if _content(lines[j])]
    for j in body:
        if "\t" in lines[j][: len(lines[j]) - len(lines[j].lstrip(" \t"))]:
            raise EditError(f"line {j + 1}: a tab in the indentation")
    child = _indent(lines[body[0]]) if body else UNIT
    entries: dict[str, tuple[int, int]] = {}
    starts = [j for j in body if _indent(lines[j]) == child]
    for n, j in enumerate(starts):
        text = lines[j].rstrip("\r\n")[child:]
        if text.startswith("-"):
            raise EditError(f"line {j + 1}: extensions as a list (Goose's old format)")
        km = _KEY_LINE.fullmatch(text)
        if km is None:
            raise EditError(f"line {j + 1}: an extension name this edit does not read")
        name = _scalar(km.group("key")) if km.group("key")[0] in "\"'" else km.group("key")
        last = (starts[n + 1] if n + 1 < len(starts) else end) - 1
        while not _content(lines[last]):
            last -= 1
        entries[str(name)] = (j, last + 1)
    if any(_indent(lines[j]) < child for j in body):
        raise EditError(f"line {body[0] + 1}: the extensions block's indentation is uneven")
    return _Block(k, bool(rest), end, child, entries)


# -- the YAML subset Goose writes ------------------------------------------------------------


def _unquoted(s: str, *, closed: bool) -> Iterator[tuple[int, str, bool]]:
    """Each character of ``s`` with its index and whether it stands outside quotes (the
    opening and closing quote themselves count as inside); with ``closed``, a quote left open
    at the end raises."""
    quote, escaped = "", False
    for i, c in enumerate(s):
        if quote:
            if escaped:
                escaped = False
            elif c == "\\" and quote == '"':
                escaped = True
            elif c == quote:
                quote = ""
            yield i, c, False
        elif c in "\"'":
            quote = c
            yield i, c, False
        else:
            yield i, c, True
    if quote and closed:
        raise _Unsupported(s)


def _strip_comment(s: str) -> str:
    for i, c, outside in _unquoted(s, closed=False):
        if outside and c == "#" and (i == 0 or s[i - 1] in " \t"):
            return s[:i].rstrip()
    return s.rstrip()


def _scalar(s: str) -> Any:
    s = s.strip()
    if s.startswith('"'):
        try:
            value, end = json.JSONDecoder().raw_decode(s)
        except ValueError:
            raise _Unsupported(s) from None
        if s[end:].strip():
            raise _Unsupported(s)
        return value
    if s.startswith("'"):
        if len(s) < 2 or not s.endswith("'") or "'" in s[1:-1].replace("''", ""):
            raise _Unsupported(s)
        return s[1:-1].replace("''", "'")
    if s.startswith("[") or s.startswith("{"):
        return _flow(s)
    if s and s[0] in "&*!|>%@`":
        raise _Unsupported(s)
    low = s.lower()
    if low in ("", "~", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    if _INT.fullmatch(s):
        return int(s)
    if _FLOAT.fullmatch(s):
        return float(s)
    if ": " in s or s.endswith(":") or " #" in s:
        raise _Unsupported(s)
    return s


def _split(s: str) -> list[str]:
    parts, cur = [], ""
    for _, c, outside in _unquoted(s, closed=True):
        if outside and c in "[{":
            raise _Unsupported(s)  # nested flow collections: not what Goose writes
        if outside and c == ",":
            parts.append(cur)
            cur = ""
            continue
        cur += c
    parts.append(cur)
    parts = [p.strip() for p in parts]
    if parts and parts[-1] == "":
        parts.pop()
    if any(p == "" for p in parts):
        raise _Unsupported(s)
    return parts


def _flow(s: str) -> Any:
    if s[0] == "[" and s.endswith("]"):
        return [_scalar(p) for p in _split(s[1:-1])]
    if s[0] == "{" and s.endswith("}"):
        out: dict[str, Any] = {}
        for p in _split(s[1:-1]):
            m = _KEY_LINE.fullmatch(p)
            if m is None or m.group("rest") is None:
                raise _Unsupported(s)
            out[str(_scalar(m.group("key")))] = _scalar(m.group("rest"))
        return out
    raise _Unsupported(s)


def _node(rows: list[tuple[int, str]], i: int, indent: int) -> tuple[Any, int]:
    if rows[i][1].startswith("- ") or rows[i][1] == "-":
        return _sequence(rows, i, indent)
    return _mapping(rows, i, indent)


def _mapping(rows: list[tuple[int, str]], i: int, indent: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    while i < len(rows) and rows[i][0] == indent:
        m = _KEY_LINE.fullmatch(rows[i][1])
        if m is None or rows[i][1].startswith("- "):
            raise _Unsupported(rows[i][1])
        key = str(_scalar(m.group("key")))
        if key in out:
            raise _Unsupported(key)
        rest = m.group("rest")
        i += 1
        if rest:
            out[key] = _scalar(rest)
        elif i < len(rows) and (
            rows[i][0] > indent or (rows[i][0] == indent and rows[i][1].startswith("-"))
        ):
            out[key], i = _node(rows, i, rows[i][0])
        else:
            out[key] = None
    if i < len(rows) and rows[i][0] > indent:
        raise _Unsupported(rows[i][1])
    return out, i


def _sequence(rows: list[tuple[int, str]], i: int, indent: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    while i < len(rows) and rows[i][0] == indent and rows[i][1].startswith("-"):
        rest = rows[i][1][1:].strip()
        if rest and _KEY_LINE.fullmatch(rest) and not rest.startswith(("'", '"', "[", "{")):
            raise _Unsupported(rest)  # a mapping inside a sequence item: not Goose's shape
        i += 1
        if rest:
            out.append(_scalar(rest))
        elif i < len(rows) and rows[i][0] > indent:
            item, i = _node(rows, i, rows[i][0])
            out.append(item)
        else:
            out.append(None)
    return out, i


def _entry_value(lines: list[str], first: int, end: int) -> Any:
    """The entry at lines [first, end) as data, or :class:`Unparsed` outside the subset."""
    text = "".join(lines[first:end])
    rows = [
        (_indent(x), _strip_comment(x.strip(" \r\n")))
        for x in lines[first + 1 : end]
        if _content(x)
    ]
    head = _KEY_LINE.fullmatch(lines[first].strip(" \r\n"))
    try:
        if head is None or (head.group("rest") and _strip_comment(head.group("rest"))):
            raise _Unsupported(lines[first])
        if not rows:
            return None
        value, i = _node(rows, 0, rows[0][0])
        if i != len(rows):
            raise _Unsupported(rows[i][1])
        return value
    except _Unsupported:
        return Unparsed(text)


def load(text: str) -> dict[str, Any]:
    """``{"extensions": {name: entry}}`` (``{}`` without the key): every entry's data where
    this module reads it, else its text (:class:`Unparsed`)."""
    lines = text.splitlines(keepends=True)
    block = _block(lines)
    if block is None:
        return {}
    if not block.entries:
        return {TOP: {} if lines[block.key].split(":", 1)[1].strip().startswith("{") else None}
    return {TOP: {n: _entry_value(lines, a, b) for n, (a, b) in block.entries.items()}}


# -- writing ---------------------------------------------------------------------------------


def _flow_value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        plain = _PLAIN_SAFE.fullmatch(v) and v.lower() not in _KEYWORDS
        return v if plain else json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_flow_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return (
            "{" + ", ".join(f"{_flow_value(str(k))}: {_flow_value(x)}" for k, x in v.items()) + "}"
        )
    raise EditError(f"cannot write {type(v).__name__} to YAML")


def render(name: str, entry: dict[str, Any], indent: int, nl: str) -> list[str]:
    """The entry's lines at ``indent``, its fields one step deeper (the file's own step: the
    entries' indentation)."""
    head = " " * indent + f"{_flow_value(name)}:{nl}"
    inner = " " * (2 * indent)
    return [head, *(f"{inner}{_flow_value(k)}: {_flow_value(v)}{nl}" for k, v in entry.items())]


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def set_member(text: str, path: tuple[str, ...], key: str, value: Any) -> str:
    """Add or replace entry ``key`` of ``extensions`` (``path == ("extensions",)``), or set
    one field of an entry (``path == ("extensions", name)``: the entry is rewritten as
    data, so one with comments in it is :class:`Refused`)."""
    nl = _newline(text)
    lines = text.splitlines(keepends=True)
    block = _block(lines)
    if len(path) == 2 and path[0] == TOP:
        name = path[1]
        if block is None or name not in block.entries:
            raise EditError(f"no entry {name} under extensions")
        a, b = block.entries[name]
        if any(x.strip().startswith("#") for x in lines[a:b]) or "#" in lines[a]:
            raise Refused(f"the {name} entry has comments that rewriting it would lose")
        entry = _entry_value(lines, a, b)
        if not isinstance(entry, dict):
            raise Refused(f"the {name} entry is written in a form this edit does not read")
        entry[key] = value
        new = lines[:a] + render(name, entry, block.child, nl) + lines[b:]
        return _checked(text, "".join(new), (*path, key), value)
    if path != (TOP,):
        raise EditError(f"Goose's config has no {'.'.join(path)} to edit")
    if not isinstance(value, dict):
        raise EditError("an extension is a mapping")
    if block is None:
        base = text if not text or text.endswith("\n") else text + nl
        new_text = base + f"{TOP}:{nl}" + "".join(render(key, value, UNIT, nl))
        return _checked(text, new_text, (TOP, key), value)
    if block.inline_empty:
        comment = _TOP_LINE.fullmatch(lines[block.key].rstrip("\r\n"))
        assert comment is not None
        tail = f" {comment.group('comment')}" if comment.group("comment") else ""
        lines[block.key] = f"{TOP}:{tail}{nl}"
    new_lines = render(key, value, block.child, nl)
    if key in block.entries:
        a, b = block.entries[key]
        lines[a:b] = new_lines
    else:
        at = block.end
        if at > 0 and not lines[at - 1].endswith("\n"):
            lines[at - 1] += nl
        lines[at:at] = new_lines
    return _checked(text, "".join(lines), (TOP, key), value)


def delete_member(text: str, path: tuple[str, ...], key: str) -> str:
    """Without entry ``key`` of ``extensions`` (its lines, nothing around them), or without
    the ``extensions:`` line itself once it holds nothing (``path == ()``)."""
    lines = text.splitlines(keepends=True)
    block = _block(lines)
    if block is None:
        return text
    if path == () and key == TOP:
        if block.entries:
            raise EditError("extensions still holds entries")
        del lines[block.key]
        return "".join(lines)
    if path != (TOP,) or key not in block.entries:
        return text
    a, b = block.entries[key]
    del lines[a:b]
    return _checked_delete(text, "".join(lines), key)


def _checked(old: str, new: str, path: tuple[str, ...], value: Any) -> str:
    """``new`` if it reads back with ``value`` at ``path`` and (PyYAML present) as ``old``
    with that one change as a whole document."""
    data = load(new)
    node: Any = data
    for k in path:
        if not isinstance(node, dict) or k not in node:
            raise EditError("the edit did not land where it should")
        node = node[k]
    if not same(node, value):
        raise EditError("the edit does not read back as written")
    _whole(old, new, path, value)
    return new


def _checked_delete(old: str, new: str, name: str) -> str:
    before, after = load(old).get(TOP) or {}, load(new).get(TOP) or {}
    if name in after or any(not same(after.get(k), v) for k, v in before.items() if k != name):
        raise EditError("removing the entry would change others")
    _whole(old, new, (TOP, name), None, delete=True)
    return new


def _whole(old: str, new: str, path: tuple[str, ...], value: Any, *, delete: bool = False) -> None:
    try:
        yaml = importlib.import_module("yaml")  # PyYAML, where installed (no stubs needed)
    except ImportError:
        return
    try:
        before, after = yaml.safe_load(old) or {}, yaml.safe_load(new) or {}
    except yaml.YAMLError as e:
        raise EditError(f"not valid YAML: {e}") from None
    if not isinstance(before, dict):
        raise EditError("the file's top level is not a mapping")
    node = before
    for k in path[:-1]:
        if not isinstance(node.get(k), dict):
            node[k] = {}
        node = node[k]
    if delete:
        node.pop(path[-1], None)
        if not node and isinstance(after, dict) and after.get(path[0]) is None:
            before[path[0]] = None  # `extensions:` left with nothing under it reads as null
    else:
        node[path[-1]] = value
    if not same(before, after):
        raise EditError("the edit would change more of the file than the entry")


def is_blank(text: str) -> bool:
    return all(not _content(line) or line.strip() == "---" for line in text.splitlines())
