"""Structured file search over ripgrep (SPEC §6 ``search``).

ripgrep runs as ``rg --json --no-config ... -e PATTERN -- PATH`` (``--files-with-matches``/
``--count`` with ``--null`` for the ``files``/``count`` modes), never through a shell, with
``RIPGREP_CONFIG_PATH`` removed from its environment, so no caller value can become an rg option
(``--pre`` runs programs). Every value that could look like an option is either after ``--``,
the value of ``-e``, or glued into a single ``--glob=VALUE`` argument. PCRE2 is never enabled:
rg's default engine is linear-time.

Output is streamed: rg is killed as soon as one result more than ``max_matches`` was read, when
``timeout_ms`` passes, when 64 MiB were read, or when the awaiting task is cancelled; it is
always reaped before :meth:`Searcher.search` returns or raises.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import os
import re
import subprocess
import time
from typing import Any, Literal, Union

from conch.core.process.hygiene import child_signal_reset
from conch.core.search.rg import RgInfo, find_rg
from conch.errors import ConchError

__all__ = ["MODES", "Searcher"]

MODES = ("matches", "files", "count")

MAX_MATCHES_LIMIT = 1000
MAX_CONTEXT = 100
MAX_TIMEOUT_MS = 300_000
MAX_GLOBS = 64
MAX_PATTERN_CHARS = 65536

_MAX_READ_BYTES = 64 * 1024 * 1024
_STDERR_KEEP = 64 * 1024
_COALESCE_S = 0.001  # how long rg's output may wait in the pipe before we read it
_ERROR_MESSAGE_MAX = 2048
_MAX_ERRORS = 50

_DECODER = json.JSONDecoder()

_RG_NOT_FOUND_MESSAGE = (
    "ripgrep (rg) was not found on PATH and the ripgrep wheel is not installed; "
    "install conch[mcp] or ripgrep"
)
# A per-file I/O problem rg reports and then carries on: "rg: ./x: Permission denied (os error 13)"
_OS_ERROR_LINE = re.compile(r"^rg: .*\(os error \d+\)\s*$")

RgSetting = Union[RgInfo, None, Literal["auto"]]


def _invalid(message: str) -> ConchError:
    return ConchError("invalid_argument", message)


def _check_int(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"{name} must be an integer")
    if not lo <= value <= hi:
        raise _invalid(f"{name} must be between {lo} and {hi}")
    return value


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _invalid(f"{name} must be a boolean")
    return value


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


class _Results:
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


class _JsonParser:
    """``rg --json`` events → match records with before/after context."""

    def __init__(self, results: _Results, context: int) -> None:
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


class _NullParser:
    """``--files-with-matches --null`` (``path\\0``…) or ``--count --null`` (``path\\0N\\n``…)."""

    def __init__(self, results: _Results, with_counts: bool) -> None:
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


def _split_messages(stderr: bytes) -> list[str]:
    """rg's stderr as messages: a line starting with ``rg:`` begins one; others continue it."""
    text = stderr.decode("utf-8", "replace")
    messages: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("rg: ") or not messages:
            messages.append(line)
        else:
            messages[-1] += "\n" + line
    return messages


def _trim(message: str, limit: int = _ERROR_MESSAGE_MAX) -> str:
    message = message.strip()
    raw = message.encode("utf-8")
    if len(raw) <= limit:
        return message
    return raw[: limit - 3].decode("utf-8", "ignore") + "..."


class _RgProtocol(asyncio.SubprocessProtocol):
    """Feeds rg's stdout straight into a parser from the event loop's read callbacks.

    No StreamReader and no reader task: one callback per pipe read, which matters when rg
    writes a small block per matching file. Kills rg once the parser has enough (or the byte
    cap is hit); ``done`` resolves when rg has exited and both pipes are closed.
    """

    def __init__(self, parser: _JsonParser | _NullParser, done: asyncio.Future[None]) -> None:
        self.parser = parser
        self.done = done
        self.transport: asyncio.SubprocessTransport | None = None
        self.stderr = bytearray()
        self.total = 0
        self.stopped = False  # we killed rg because we had what we need
        self.timed_out = False
        self.paused = False  # stdout reading paused for a moment to batch small writes
        self.failure: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if isinstance(data, str):  # pragma: no cover - pipes are binary
            data = data.encode()
        if fd == 1:
            if self.stopped or self.timed_out:
                return
            self.total += len(data)
            try:
                stop = self.parser.feed(data)
            except Exception as exc:  # a parser bug must not leave rg running
                self.failure = exc
                stop = True
            if stop or self.total >= _MAX_READ_BYTES:
                self.stopped = True
                self.kill()
            elif _COALESCE_S > 0 and self.transport is not None:
                # rg writes one small block per matching file; waking up for each costs more
                # than parsing it. Let output pile up in the pipe for a moment instead.
                pipe = self.transport.get_pipe_transport(1)
                if isinstance(pipe, asyncio.ReadTransport) and not self.paused:
                    # our own flag: ReadTransport.is_reading() is not implemented on 3.10
                    self.paused = True
                    pipe.pause_reading()
                    asyncio.get_running_loop().call_later(_COALESCE_S, self._resume, pipe)
        elif fd == 2:
            room = _STDERR_KEEP - len(self.stderr)
            if room > 0:
                self.stderr += data[:room]

    def _resume(self, pipe: asyncio.ReadTransport) -> None:
        self.paused = False
        if not pipe.is_closing():
            pipe.resume_reading()

    def on_timeout(self) -> None:
        if self.returncode() is None and not self.stopped:
            self.timed_out = True
            self.kill()

    def returncode(self) -> int | None:
        return self.transport.get_returncode() if self.transport is not None else None

    def kill(self) -> None:
        t = self.transport
        if t is not None and not t.is_closing() and t.get_returncode() is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                t.kill()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _reap(proto: _RgProtocol) -> None:
    """Kill rg and wait until it is reaped, even if the caller is cancelled (again) meanwhile."""
    proto.kill()
    cancelled = False
    while not proto.done.done():
        try:
            await asyncio.shield(proto.done)
        except asyncio.CancelledError:
            cancelled = True
            proto.kill()
    if cancelled:
        raise asyncio.CancelledError


class Searcher:
    """Runs searches with ripgrep. ``rg="auto"`` finds rg lazily on first use."""

    def __init__(self, default_cwd: str, rg: RgSetting = "auto") -> None:
        self.default_cwd = default_cwd
        self._rg_setting: RgSetting = rg

    # -- ripgrep -------------------------------------------------------------------------

    def _resolved_rg(self) -> RgInfo | None:
        if self._rg_setting == "auto":
            return find_rg()
        return self._rg_setting if isinstance(self._rg_setting, RgInfo) else None

    def info(self) -> dict[str, Any]:
        """``{"path", "version"}`` of the rg in use, both ``None`` when there is none."""
        rg = self._resolved_rg()
        if rg is None:
            return {"path": None, "version": None}
        return {"path": rg.path, "version": rg.version}

    async def _rg(self) -> RgInfo:
        if self._rg_setting == "auto":
            rg = await asyncio.to_thread(find_rg)
        else:
            rg = self._resolved_rg()
        if rg is None:
            raise ConchError("rg_not_found", _RG_NOT_FOUND_MESSAGE)
        return rg

    # -- search --------------------------------------------------------------------------

    async def search(
        self,
        *,
        pattern: str,
        path: str | None = None,
        regex: bool = False,
        ignore_case: bool = False,
        hidden: bool = False,
        glob: list[str] | None = None,
        context: int = 0,
        mode: str = "matches",
        max_matches: int = 100,
        timeout_ms: int = 30000,
    ) -> dict[str, Any]:
        """Search ``path`` (default: the default cwd) for ``pattern``; see SPEC §6 ``search``."""
        if not isinstance(pattern, str):
            raise _invalid("pattern must be a string")
        if pattern == "":
            raise _invalid("pattern must not be empty")
        if len(pattern) > MAX_PATTERN_CHARS:
            raise _invalid(f"pattern must be at most {MAX_PATTERN_CHARS} characters")
        if "\0" in pattern:
            raise _invalid("pattern must not contain NUL")
        if path is not None:
            if not isinstance(path, str):
                raise _invalid("path must be a string")
            if path == "":
                raise _invalid("path must not be empty")
            if "\0" in path:
                raise _invalid("path must not contain NUL")
        regex = _check_bool("regex", regex)
        ignore_case = _check_bool("ignore_case", ignore_case)
        hidden = _check_bool("hidden", hidden)
        globs: list[str] = []
        if glob is not None:
            if not isinstance(glob, list):
                raise _invalid("glob must be a list of strings")
            if len(glob) > MAX_GLOBS:
                raise _invalid(f"glob must have at most {MAX_GLOBS} entries")
            for g in glob:
                if not isinstance(g, str):
                    raise _invalid("glob entries must be strings")
                if g == "":
                    raise _invalid("glob entries must not be empty")
                if "\0" in g:
                    raise _invalid("glob entries must not contain NUL")
                globs.append(g)
        context = _check_int("context", context, 0, MAX_CONTEXT)
        if mode not in MODES:
            raise _invalid("mode must be one of: matches, files, count")
        max_matches = _check_int("max_matches", max_matches, 1, MAX_MATCHES_LIMIT)
        timeout_ms = _check_int("timeout_ms", timeout_ms, 1, MAX_TIMEOUT_MS)

        rg = await self._rg()

        base = self.default_cwd
        if path is None:
            target = base
            path_arg = "."
        else:
            target = os.path.join(base, path)
            path_arg = path
        if not os.path.exists(target):
            raise ConchError("search_failed", f"path not found: {path if path else base}")
        if not os.access(target, os.R_OK):
            raise ConchError("search_failed", f"permission denied: {path if path else base}")
        cwd = base if os.path.isdir(base) else "/"

        argv = [rg.path]
        if mode == "matches":
            argv += ["--json", "--no-config"]
        elif mode == "files":
            argv += ["--no-config", "--files-with-matches", "--null"]
        else:
            argv += ["--no-config", "--count", "--with-filename", "--null"]
        argv.append("--color=never")
        if not regex:
            argv.append("--fixed-strings")
        if ignore_case:
            argv.append("--ignore-case")
        if hidden:
            argv.append("--hidden")
        argv += [f"--glob={g}" for g in globs]
        if mode == "matches":
            # Per file, one more than the global cap: enough to know the result is truncated.
            argv.append(f"--max-count={max_matches + 1}")
            if context > 0:
                argv.append(f"--context={context}")
        argv += ["-e", pattern, "--", path_arg]

        env = {k: v for k, v in os.environ.items() if k != "RIPGREP_CONFIG_PATH"}
        results = _Results(mode, max_matches, strip_dot=path is None)
        parser: _JsonParser | _NullParser
        if mode == "matches":
            parser = _JsonParser(results, context)
        else:
            parser = _NullParser(results, with_counts=(mode == "count"))

        started = time.monotonic()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        try:
            transport, proto = await loop.subprocess_exec(
                lambda: _RgProtocol(parser, done),
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                preexec_fn=child_signal_reset(),
            )
        except FileNotFoundError:
            raise ConchError("rg_not_found", _RG_NOT_FOUND_MESSAGE) from None
        except OSError as exc:
            raise ConchError(
                "search_failed", f"could not start rg: {exc.strerror or exc}"
            ) from None

        timer = loop.call_later(timeout_ms / 1000.0, proto.on_timeout)
        try:
            await asyncio.shield(done)
        finally:
            timer.cancel()
            if not done.done():
                await _reap(proto)
            transport.close()
        elapsed_ms = int((time.monotonic() - started) * 1000)
        if proto.failure is not None:
            raise proto.failure
        returncode = transport.get_returncode()
        stderr = bytes(proto.stderr)
        stopped, timed_out = proto.stopped, proto.timed_out

        messages = _split_messages(stderr)
        if not (stopped or timed_out):
            if returncode == 2 and results.size == 0:
                # rg searched and only some files were unreadable: a result, with errors.
                # Anything else (bad regex or glob, ...) is a failure.
                per_file_only = bool(messages) and all(_OS_ERROR_LINE.match(m) for m in messages)
                if not per_file_only:
                    text = "\n".join(messages) or "rg failed (exit status 2)"
                    raise ConchError("search_failed", _trim(text))
            elif returncode not in (0, 1, 2):
                detail = "\n".join(messages)
                text = f"rg failed (exit status {returncode})" + (f": {detail}" if detail else "")
                raise ConchError("search_failed", _trim(text))

        out: dict[str, Any] = {
            "mode": mode,
            "matches": results.matches,
            "files": results.files,
            "counts": results.counts if mode != "files" else {},
            "truncated": bool(results.overflow or stopped or timed_out),
            "timed_out": timed_out,
            "elapsed_ms": elapsed_ms,
        }
        if results.any_b64:
            out["files_base64"] = results.files_b64
        if messages:
            out["errors"] = [_trim(m) for m in messages[:_MAX_ERRORS]]
        return out
