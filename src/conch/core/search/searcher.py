"""Structured file search over ripgrep (docs/spec.md §6 ``search``).

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
import os
import re
import subprocess
import time
from collections.abc import Callable
from typing import Literal, Union

from conch.core.env import build_env
from conch.core.process.hygiene import child_signal_reset
from conch.core.requests import SearchRequest
from conch.core.results import RgSummary, SearchResult
from conch.core.search.parse import JsonParser, NullParser, Results
from conch.core.search.proc import RgProtocol, reap
from conch.core.search.rg import RgInfo, find_rg
from conch.errors import ConchError

__all__ = ["Searcher"]

_ERROR_MESSAGE_MAX = 2048
_MAX_ERRORS = 50

_RG_NOT_FOUND_MESSAGE = (
    "ripgrep (rg) was not found on PATH and the ripgrep wheel is not installed; "
    "install conch[mcp] or ripgrep"
)
# A per-file I/O problem rg reports and then carries on: "rg: ./x: Permission denied (os error 13)"
_OS_ERROR_LINE = re.compile(r"^rg: .*\(os error \d+\)\s*$")

RgSetting = Union[RgInfo, None, Literal["auto"]]


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


def _rg_args(req: SearchRequest) -> list[str]:
    """rg's arguments after its path: every caller value after ``--``, the value of ``-e``,
    or glued into one ``--glob=VALUE``."""
    if req.mode == "matches":
        argv = ["--json", "--no-config"]
    elif req.mode == "files":
        argv = ["--no-config", "--files-with-matches", "--null"]
    else:
        argv = ["--no-config", "--count", "--with-filename", "--null"]
    argv.append("--color=never")
    if not req.regex:
        argv.append("--fixed-strings")
    if req.ignore_case:
        argv.append("--ignore-case")
    if req.hidden:
        argv.append("--hidden")
    argv += [f"--glob={g}" for g in req.glob or ()]
    if req.mode == "matches":
        # Per file, one more than the global cap: enough to know the result is truncated.
        argv.append(f"--max-count={req.max_matches + 1}")
        if req.context > 0:
            argv.append(f"--context={req.context}")
    return [*argv, "-e", req.pattern, "--", "." if req.path is None else req.path]


class Searcher:
    """Runs searches with ripgrep. ``rg="auto"`` finds rg lazily on first use."""

    def __init__(
        self,
        default_cwd: str,
        rg: RgSetting = "auto",
        *,
        env: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        """``env()`` gives rg's environment: the runtime passes its child environment (no
        Conch secrets, tagged); alone, the filtered server environment."""
        self.default_cwd = default_cwd
        self._rg_setting: RgSetting = rg
        self._env = env or (lambda: build_env(agent_env=False, pty=False))

    # -- ripgrep -------------------------------------------------------------------------

    def _resolved_rg(self) -> RgInfo | None:
        if self._rg_setting == "auto":
            return find_rg()
        return self._rg_setting if isinstance(self._rg_setting, RgInfo) else None

    def info(self) -> RgSummary:
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

    async def search(self, request: SearchRequest) -> SearchResult:
        """Search ``path`` (default: the default cwd) for ``pattern``; see docs/spec.md §6
        ``search``."""
        req = request.checked()
        path = req.path
        rg = await self._rg()
        argv = [rg.path, *_rg_args(req)]

        base = self.default_cwd
        target = base if path is None else os.path.join(base, path)
        if not os.path.exists(target):
            raise ConchError("search_failed", f"path not found: {path if path else base}")
        if not os.access(target, os.R_OK):
            raise ConchError("search_failed", f"permission denied: {path if path else base}")
        cwd = base if os.path.isdir(base) else "/"

        env = self._env()
        env.pop("RIPGREP_CONFIG_PATH", None)
        mode, max_matches = req.mode, req.max_matches
        results = Results(mode, max_matches, strip_dot=req.path is None)
        parser: JsonParser | NullParser
        if mode == "matches":
            parser = JsonParser(results, req.context)
        else:
            parser = NullParser(results, with_counts=(mode == "count"))

        started = time.monotonic()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        try:
            transport, proto = await loop.subprocess_exec(
                lambda: RgProtocol(parser, done),
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

        timer = loop.call_later(req.timeout_ms / 1000.0, proto.on_timeout)
        try:
            await asyncio.shield(done)
        finally:
            timer.cancel()
            if not done.done():
                await reap(proto)
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

        out: SearchResult = {
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
