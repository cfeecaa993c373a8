"""TOML config files (Codex's ``config.toml``) edited with their comments and layout kept.

tomlkit parses the file (and says where it cannot), reads its values and changes a value in
place with the comments around it kept. Adding or removing a whole table it does with blank
lines of its own choosing, so those two are done on the text here: a new table goes at the end
of the file after one blank line, a removed table takes that blank line with it, so install and
remove leave the file as it was. Every text edit is checked by parsing the result: where the
file's layout is one the text edit does not understand (an inline table, dotted keys, a table
split over the file), tomlkit's own edit is taken instead, and where neither gives the expected
document nothing is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from conch.cli.install.errors import EditError
from conch.cli.install.values import lookup, same, with_value, without_value

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _tomlkit() -> Any:
    try:
        import tomlkit
    except ImportError:
        raise EditError(
            "editing a TOML file needs tomlkit, which comes with the mcp extra: "
            "pip install 'conch[mcp]'"
        ) from None
    return tomlkit


def _parse(text: str) -> Any:
    tomlkit = _tomlkit()
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as e:
        raise EditError(str(e)) from None


def load(text: str) -> dict[str, Any]:
    data: dict[str, Any] = _parse(text).unwrap()
    return data


def _key(k: str) -> str:
    if _BARE.fullmatch(k):
        return k
    return '"' + k.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _value(v: Any) -> str:
    tomlkit = _tomlkit()
    if isinstance(v, dict):
        table = tomlkit.inline_table()
        table.update(v)
        return str(table.as_string())
    return str(tomlkit.item(v).as_string())


def _header(path: tuple[str, ...]) -> re.Pattern[str]:
    """The header line ``[a.b]`` of the table at ``path``, however its keys are quoted."""
    keys = [rf"(?:{re.escape(k)}|\"{re.escape(k)}\"|'{re.escape(k)}')" for k in path]
    return re.compile(r"[ \t]*\[[ \t]*" + r"[ \t]*\.[ \t]*".join(keys) + r"[ \t]*\][ \t]*(?:#.*)?")


def _header_line(lines: list[str], path: tuple[str, ...]) -> int | None:
    pattern = _header(path)
    found = [i for i, line in enumerate(lines) if pattern.fullmatch(line.rstrip("\r\n"))]
    return found[0] if len(found) == 1 else None


def _is_header(line: str) -> bool:
    return line.lstrip(" \t").startswith("[")


def _is_filler(line: str) -> bool:
    stripped = line.strip(" \t\r\n")
    return stripped == "" or stripped.startswith("#")


def _first_checked(candidates: list[Callable[[], str]], expect: Callable[[str], bool]) -> str:
    for make in candidates:
        try:
            text = make()
        except (EditError, KeyError, ValueError, TypeError):
            continue
        try:
            if expect(text):
                return text
        except EditError:
            continue
    raise EditError("cannot make this change here without disturbing the rest of the file")


# -- set -------------------------------------------------------------------------------------


def set_member(text: str, path: tuple[str, ...], key: str, value: Any) -> str:
    """``text`` with ``key`` of the table at ``path`` set to ``value`` (a dict is a table)."""
    data = load(text)
    expected = with_value(data, (*path, key), value)
    nl = "\r\n" if "\r\n" in text else "\n"

    def new_table() -> str:
        body = f"[{'.'.join(_key(k) for k in (*path, key))}]{nl}"
        body += "".join(f"{_key(k)} = {_value(v)}{nl}" for k, v in value.items())
        if not text:
            return body
        return text + ("" if text.endswith("\n") else nl) + nl + body

    def new_key_after_header() -> str:
        lines = text.splitlines(keepends=True)
        h = _header_line(lines, path)
        if h is None:
            raise EditError("no header")
        if not lines[h].endswith("\n"):
            lines[h] += nl
        lines.insert(h + 1, f"{_key(key)} = {_value(value)}{nl}")
        return "".join(lines)

    def by_tomlkit() -> str:
        doc = _parse(text)
        table = doc
        for k in path:
            if k not in table:
                table[k] = _tomlkit().table(is_super_table=True)
            table = table[k]
        table[key] = value
        return str(doc.as_string())

    exists = lookup(data, (*path, key)) is not None
    if exists:
        candidates = [by_tomlkit]
    elif isinstance(value, dict):
        candidates = [new_table, by_tomlkit]
    else:
        candidates = [new_key_after_header, by_tomlkit]
    return _first_checked(candidates, lambda t: same(load(t), expected))


# -- delete ----------------------------------------------------------------------------------


def delete_member(text: str, path: tuple[str, ...], key: str) -> str:
    """``text`` without ``key`` of the table at ``path``: a table with its header, its keys and
    the blank line before it (the inverse of :func:`set_member` adding it)."""
    data = load(text)
    if lookup(data, (*path, key)) is None:
        return text
    expected = without_value(data, (*path, key))

    def table_lines() -> str:
        lines = text.splitlines(keepends=True)
        h = _header_line(lines, (*path, key))
        if h is None:
            raise EditError("no header")
        n = h + 1
        while n < len(lines) and not _is_header(lines[n]):
            n += 1
        while n - 1 > h and _is_filler(lines[n - 1]):
            n -= 1
        start = h
        if h > 0 and lines[h - 1].strip(" \t\r\n") == "":
            start = h - 1
        elif h == 0 and n < len(lines) and lines[n].strip(" \t\r\n") == "":
            n += 1
        return "".join(lines[:start] + lines[n:])

    def by_tomlkit() -> str:
        doc = _parse(text)
        table = doc
        for k in path:
            table = table[k]
        del table[key]
        return str(doc.as_string())

    def expect(t: str) -> bool:
        got = load(t)
        # a table left empty may stay (its own header) or go (it was only implied)
        return same(got, expected) or (
            bool(path) and lookup(expected, path) == {} and same(got, without_value(expected, path))
        )

    return _first_checked([table_lines, by_tomlkit], expect)


def is_blank(text: str) -> bool:
    return text.strip(" \t\r\n\ufeff") == ""
