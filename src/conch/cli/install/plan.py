"""What ``conch install`` does to one config file's text, worked out without touching the file.

Install adds Conch's entry, or sets the keys of an entry already there to what install writes
(the user's other keys stay; a timeout they made longer is kept); a second install changes
nothing. Remove takes the entry out only if it is still what install wrote — every key install
writes has its value and every other key is empty, as a host may add such keys itself — and
then the containers it leaves empty; otherwise it refuses unless forced. Each result is read
back and compared with the intended document before it is returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import conch.cli.install.json_text as json_text
import conch.cli.install.toml_text as toml_text
import conch.cli.install.yaml_text as yaml_text
from conch.cli.install.errors import EditError, Refused
from conch.cli.install.hosts import NAME, Host
from conch.cli.install.values import empty, lookup, same, with_value, without_value

FORMATS: dict[str, ModuleType] = {"json": json_text, "toml": toml_text, "yaml": yaml_text}
# the text an absent (or blank) file is edited as
EMPTY = {"json": "{}\n", "toml": "", "yaml": ""}


@dataclass(frozen=True)
class Outcome:
    before: str | None  # the file's text (None: there is no file)
    after: str | None  # None: no file afterwards
    action: str  # added, updated, replaced, unchanged, removed, absent
    keys: tuple[str, ...]  # the entry's keys that changed (updated)
    where: str  # the entry's place in the file, e.g. mcp_servers.conch
    host_timeout_ms: int | None

    @property
    def changed(self) -> bool:
        return self.after != self.before


def _load(host: Host, text: str | None) -> tuple[str, dict[str, Any]]:
    fmt = FORMATS[host.fmt]
    base = text if text is not None and text.strip(" \t\r\n\ufeff") else EMPTY[host.fmt]
    data = fmt.load(base)
    if not isinstance(data, dict):
        raise EditError("the file's top level is not an object")
    return base, data


def _holder(data: dict[str, Any], container: tuple[str, ...]) -> dict[str, Any] | None:
    holder = lookup(data, container)
    if holder is not None and not isinstance(holder, dict):
        raise EditError(f"{'.'.join(container)} is not an object")
    return holder


def _check(fmt: ModuleType, text: str, expected: dict[str, Any]) -> str:
    if not same(fmt.load(text), expected):
        raise EditError("the edit did not come out as intended")
    return text


def install(
    host: Host, text: str | None, launcher: list[str], serve: list[str], *, force: bool = False
) -> Outcome:
    fmt = FORMATS[host.fmt]
    base, data = _load(host, text)
    container, build = host.shape(data)
    path = (*container, NAME)
    where = ".".join(path)
    existing = (_holder(data, container) or {}).get(NAME)
    readable = existing is None or isinstance(existing, dict)
    if not readable and not force:
        raise Refused(f"{where} is not an entry install can read; --force replaces it")
    built = build(launcher, serve, existing if readable else None)

    def outcome(after: str, action: str, keys: tuple[str, ...] = ()) -> Outcome:
        return Outcome(text, after, action, keys, where, built.host_timeout_ms)

    if existing is None or not readable:
        after = fmt.set_member(base, container, NAME, built.entry)
        _check(fmt, after, with_value(data, path, built.entry))
        return outcome(after, "added" if existing is None else "replaced")
    changes = {k: v for k, v in built.entry.items() if not same(existing.get(k), v)}
    if not changes:
        return outcome(text if text is not None else base, "unchanged")
    merged = {**existing, **built.entry}
    try:
        after = base
        for k, v in changes.items():
            after = fmt.set_member(after, path, k, v)
    except Refused as e:
        if not force:
            raise Refused(f"{where}: {e}; --force rewrites the entry") from None
        after = fmt.set_member(base, container, NAME, merged)
    _check(fmt, after, with_value(data, path, merged))
    return outcome(after, "updated", tuple(changes))


def differences(entry: Any, fresh: dict[str, Any]) -> list[str]:
    """The keys in which ``entry`` is not what install writes: a value of its own, or a key
    install does not write holding something."""
    if not isinstance(entry, dict):
        return ["(the whole entry)"]
    out = [k for k, v in fresh.items() if not same(entry.get(k), v)]
    return out + [k for k, v in entry.items() if k not in fresh and not empty(v)]


def remove(
    host: Host, text: str | None, launcher: list[str], serve: list[str], *, force: bool = False
) -> Outcome:
    fmt = FORMATS[host.fmt]
    if text is None:
        return Outcome(None, None, "absent", (), ".".join((*host.container, NAME)), None)
    base, data = _load(host, text)
    container, build = host.shape(data)
    path = (*container, NAME)
    where = ".".join(path)
    holder = _holder(data, container)
    if holder is None or NAME not in holder:
        return Outcome(text, text, "absent", (), where, None)
    fresh = build(launcher, serve, None)
    changed = differences(holder[NAME], fresh.entry)
    if changed and not force:
        raise Refused(
            f"{where} is not what `conch install {host.name}` writes from here (it differs in "
            f"{', '.join(changed)}): changed by hand, or installed from another Conch or with "
            "other settings; left as it is (give the same settings, or --force to remove it)"
        )
    after = fmt.delete_member(base, container, NAME)
    expected = without_value(data, path)
    # the containers the entry leaves empty go as well
    for depth in range(len(container), 0, -1):
        if lookup(expected, container[:depth]) not in ({}, None):
            break
        parent, key = container[: depth - 1], container[depth - 1]
        now = lookup(fmt.load(after), parent)
        if isinstance(now, dict) and key in now:  # (a TOML table only implied is gone already)
            after = fmt.delete_member(after, parent, key)
        expected = without_value(expected, container[:depth])
    _check(fmt, after, expected)
    return Outcome(text, None if fmt.is_blank(after) else after, "removed", (), where, None)
