"""ripgrep's output, parsed as it streams (pure: bytes in, results out, no I/O): the
``--json`` event stream of the ``matches`` mode and the NUL-separated lists of ``files`` and
``count``. Non-UTF-8 paths and lines come back with base64 fields."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

_DECODER = json.JSONDecoder()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _strip_eol_str(s: str) -> str:
    if s.endswith("\n"):
        s = s[:-1]
        if s.endswith("\r"):
            s = s[:-1]
    return s


def _strip_eol_bytes(b: bytes) -> bytes:
    if b.endswith(b"\n"):
        b = b[:-1]
        if b.endswith(b"\r"):
            b = b[:-1]
    return b


def _decode_b64(value: object) -> bytes:
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value)
    except (binascii.Error, ValueError):
        return b""


class Results:
    """What a search found so far, shared by the three output parsers."""

    def __init__(self, mode: str, limit: int, strip_dot: bool) -> None:
        self.mode = mode
        self.limit = limit
        self.strip_dot = strip_dot
        self.matches: list[dict[str, Any]] = []
        self.files: list[str] = []
        self.files_b64: list[str | None] = []
        self.any_b64 = False
        self.counts: dict[str, int] = {}
        self.overflow = False  # one result more than `limit` was seen

    def path_from_str(self, s: str) -> tuple[str, str | None]:
        if self.strip_dot and s.startswith("./"):
            s = s[2:]
        return s, None

    def path_from_bytes(self, raw: bytes) -> tuple[str, str | None]:
        if self.strip_dot and raw.startswith(b"./"):
            raw = raw[2:]
        try:
            return raw.decode("utf-8"), None
        except UnicodeDecodeError:
            return raw.decode("utf-8", "replace"), _b64(raw)

    def add_file(self, path: str, b64: str | None) -> None:
        self.files.append(path)
        self.files_b64.append(b64)
        if b64 is not None:
            self.any_b64 = True

    @property
    def size(self) -> int:
        return len(self.matches) if self.mode == "matches" else len(self.files)


class JsonParser:
    """``rg --json`` events → match records with before/after context."""

    def __init__(self, results: Results, context: int) -> None:
        self.r = results
        self.context = context
        self.buf = bytearray()
        self._reset_file()

    def _reset_file(self) -> None:
        self.pending: list[tuple[int, str]] = []
        self.last: dict[str, Any] | None = None
        self.last_line = 0

    def feed(self, chunk: bytes) -> bool:
        """Consume output; True once more than ``limit`` matches were seen (stop reading)."""
        self.buf += chunk
        start = 0
        buf = self.buf
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = bytes(buf[start:nl])
            start = nl + 1
            if self._line(line):
                del buf[:start]
                return True
        del buf[:start]
        return False

    def _path(self, obj: object) -> tuple[str, str | None]:
        if isinstance(obj, dict):
            text = obj.get("text")
            if isinstance(text, str):
                return self.r.path_from_str(text)
            return self.r.path_from_bytes(_decode_b64(obj.get("bytes")))
        return "", None

    @staticmethod
    def _text(obj: object) -> tuple[str, str | None]:
        """(line text without EOL, base64 of the raw bytes or None when it was UTF-8)."""
        if isinstance(obj, dict):
            text = obj.get("text")
            if isinstance(text, str):
                return _strip_eol_str(text), None
            raw = _strip_eol_bytes(_decode_b64(obj.get("bytes")))
            return raw.decode("utf-8", "replace"), _b64(raw)
        return "", None

    def _line(self, line: bytes) -> bool:
        # Fast path on rg's fixed key order ({"type":...,"data":...}): only match (and, when
        # asked for, context) events need decoding; begin/end just delimit a file's output.
        if line.startswith(b'{"type":"'):
            if line.startswith(b'{"type":"match"'):
                pass
            elif line.startswith(b'{"type":"context"'):
                if self.context <= 0:
                    return False
            elif line.startswith((b'{"type":"begin"', b'{"type":"end"')):
                self._reset_file()
                return False
            else:
                return False
        elif not line.strip():
            return False
        try:
            event = _DECODER.decode(line.decode("utf-8", "replace"))
        except ValueError:
            return False
        if not isinstance(event, dict):
            return False
        kind = event.get("type")
        data = event.get("data")
        if not isinstance(data, dict):
            return False
        if kind == "match":
            return self._match(data)
        if kind == "context":
            if self.context > 0:
                self._context(data)
        elif kind == "begin" or kind == "end":
            self._reset_file()
        return False

    def _context(self, data: dict[str, Any]) -> None:
        ln = data.get("line_number")
        if not isinstance(ln, int):
            return
        text, _ = self._text(data.get("lines"))
        if self.last is not None and ln - self.last_line <= self.context:
            self.last["after"].append(text)
        self.pending.append((ln, text))

    def _match(self, data: dict[str, Any]) -> bool:
        r = self.r
        if len(r.matches) >= r.limit:
            r.overflow = True
            return True
        path, path_b64 = self._path(data.get("path"))
        ln = data.get("line_number")
        line_no = ln if isinstance(ln, int) else 0
        text, text_b64 = self._text(data.get("lines"))
        subs: list[dict[str, Any]] = []
        raw_subs = data.get("submatches")
        if isinstance(raw_subs, list):
            for sm in raw_subs:
                if not isinstance(sm, dict):
                    continue
                st, en = sm.get("start"), sm.get("end")
                m = sm.get("match")
                entry: dict[str, Any] = {
                    "start": st if isinstance(st, int) else 0,
                    "end": en if isinstance(en, int) else 0,
                }
                if isinstance(m, dict) and isinstance(m.get("text"), str):
                    entry["text"] = m["text"]
                else:
                    raw = _decode_b64(m.get("bytes") if isinstance(m, dict) else None)
                    entry["text"] = raw.decode("utf-8", "replace")
                    entry["text_base64"] = _b64(raw)
                subs.append(entry)
        before: list[str] = []
        if self.context > 0 and self.pending:
            lo = line_no - self.context
            before = [t for n, t in self.pending if n >= lo]
        self.pending = []
        rec: dict[str, Any] = {"path": path}
        if path_b64 is not None:
            rec["path_base64"] = path_b64
        rec["line"] = line_no
        rec["column"] = (subs[0]["start"] + 1) if subs else 1
        rec["text"] = text
        if text_b64 is not None:
            rec["text_base64"] = text_b64
        rec["submatches"] = subs
        rec["before"] = before
        rec["after"] = []
        r.matches.append(rec)
        if path not in r.counts:
            r.counts[path] = 0
            r.add_file(path, path_b64)
        r.counts[path] += 1
        self.last = rec
        self.last_line = line_no
        return False


class NullParser:
    """``--files-with-matches --null`` (``path\\0``…) or ``--count --null`` (``path\\0N\\n``…)."""

    def __init__(self, results: Results, with_counts: bool) -> None:
        self.r = results
        self.with_counts = with_counts
        self.buf = bytearray()

    def feed(self, chunk: bytes) -> bool:
        self.buf += chunk
        buf = self.buf
        start = 0
        stop = False
        while True:
            nul = buf.find(b"\0", start)
            if nul < 0:
                break
            count = 0
            end = nul + 1
            if self.with_counts:
                nl = buf.find(b"\n", end)
                if nl < 0:
                    break
                try:
                    count = int(bytes(buf[end:nl]))
                except ValueError:
                    count = 0
                end = nl + 1
            raw = bytes(buf[start:nul])
            start = end
            r = self.r
            if len(r.files) >= r.limit:
                r.overflow = True
                stop = True
                break
            path, b64 = r.path_from_bytes(raw)
            r.add_file(path, b64)
            if self.with_counts:
                r.counts[path] = r.counts.get(path, 0) + count
        del buf[:start]
        return stop
