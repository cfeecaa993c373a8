"""What one workspace path holds at one moment (pure): the unit of a change record."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any

#: file types a change record can restore; the rest (fifo, socket, device) are not covered
RESTORABLE = frozenset({"file", "dir", "symlink"})


def shown(rel: str) -> str:
    """A path as results show it: as it is when it is printable UTF-8; else each byte that
    is not UTF-8 as ``\\xNN`` and each character that is not printable (a newline, an
    escape, a bidirectional override) escaped, so that a result is valid JSON and a path is
    one line that says what it holds. ``force`` takes a path in either form."""
    if rel.isprintable():
        try:
            rel.encode()
            return rel
        except UnicodeEncodeError:
            pass
    out = []
    for ch in rel:
        if 0xDC80 <= ord(ch) <= 0xDCFF:  # a byte that is not UTF-8 (os.fsdecode's escape)
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


@dataclass(frozen=True, slots=True)
class Entry:
    """A path's type, permission bits, size and content (a file's by digest, a symlink's
    target). ``stored``: the content is kept (over ``changes_max_file_bytes`` or on a full
    disk it is not: ``missing`` says why). ``mtime`` (ns) is put back by an undo but is no
    part of what a path holds (a job that only touches a file changed nothing). ``ino`` and
    ``nlink`` say which names were one file (kept in a record when there were several);
    ``ctime`` only spots a change cheaply."""

    type: str
    mode: int
    size: int
    oid: str | None = None
    target: str | None = None
    stored: bool = False
    missing: str | None = None
    ino: int = 0
    nlink: int = 1
    ctime: int = 0  # ns: any change to the file moves it
    # ctime - mtime, ns: mostly 0, an int Python shares, where mtime_ns itself would be a
    # new object a path (the index of 100,000 files is 4 MB smaller)
    lag: int = 0

    def same(self, other: Entry | None) -> bool:
        """Whether ``other`` holds the same thing (type, mode, content; a directory's
        entries are paths of their own)."""
        if other is None or other.type != self.type or other.mode != self.mode:
            return False
        if self.type == "dir":
            return True
        if self.type == "symlink":
            return self.target == other.target
        if self.type == "file":
            return self.size == other.size and self.oid == other.oid and self.oid is not None
        return True

    def unchanged_since(self, st: os.stat_result) -> bool:
        """The stat signature still matches (no need to read the content again)."""
        return (
            kind(st.st_mode) == self.type
            and stat.S_IMODE(st.st_mode) == self.mode
            and _size(st) == self.size
            and st.st_ino == self.ino
            and st.st_nlink == self.nlink  # (a link made within the clock's tick)
            and st.st_ctime_ns == self.ctime
            and st.st_mtime_ns == self.mtime
        )

    @property
    def mtime(self) -> int:
        return self.ctime - self.lag

    @property
    def restorable(self) -> bool:
        return self.type in RESTORABLE and (self.type != "file" or self.stored)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "mode": self.mode, "size": self.size}
        if self.oid is not None:
            out["oid"] = self.oid
        if self.target is not None:
            out["target"] = self.target
        if self.stored:
            out["stored"] = True
        if self.missing:
            out["missing"] = self.missing
        if self.mtime:
            out["mtime"] = self.mtime
        if self.nlink > 1 and self.type == "file":
            out["link"] = self.ino  # one file under several names: restored as one
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Entry | None:
        if d is None:
            return None
        return cls(
            type=d["type"],
            mode=d["mode"],
            size=d["size"],
            oid=d.get("oid"),
            target=d.get("target"),
            stored=bool(d.get("stored")),
            missing=d.get("missing"),
            lag=-d.get("mtime", 0),  # (ctime is not kept: 0)
            ino=d.get("link", 0),
            nlink=2 if d.get("link") else 1,
        )


_MODES: dict[int, int] = {}  # one int object a mode, however many paths have it


def _size(st: os.stat_result) -> int:
    return st.st_size if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode) else 0


def from_stat(st: os.stat_result, **content: Any) -> Entry:
    return Entry(
        type=kind(st.st_mode),
        mode=_MODES.setdefault(stat.S_IMODE(st.st_mode), stat.S_IMODE(st.st_mode)),
        size=_size(st),
        ino=st.st_ino,
        nlink=st.st_nlink,
        ctime=st.st_ctime_ns,
        lag=st.st_ctime_ns - st.st_mtime_ns,
        **content,
    )


def change_kind(before: Entry | None, after: Entry | None) -> str:
    if before is None:
        return "added"
    if after is None:
        return "deleted"
    if before.type != after.type:
        return "type_changed"
    return "modified"
