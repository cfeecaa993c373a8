"""tfbash's one resource, ``window://io.github.a2c-smcp.tfbash/shell-overview``: the shells and
the tail of each one's latest execution, as Markdown laid out the way the original lays it out
(its escaping of control characters and backticks included)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from conch.core import Engine, boundary_at_or_after, timestamp
from conch.errors import ConchError
from conch.tools.profiles._common import ProfileState, Resource, nbytes
from conch.tools.profiles.tfbash.executions import State, execution_window
from conch.tools.profiles.tfbash.shells import runtime_context, shell_items, shell_summaries

OVERVIEW_URI = "window://io.github.a2c-smcp.tfbash/shell-overview"
OVERVIEW_TAIL_CHARS = 500


def _visible(value: str) -> str:
    out = []
    for ch in value:
        cp = ord(ch)
        if ch == "\r":
            out.append("\\r")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif cp < 32 or cp == 127:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(ch)
    return "".join(out)


def _longest_run(value: str, ch: str) -> int:
    longest = current = 0
    for c in value:
        current = current + 1 if c == ch else 0
        longest = max(longest, current)
    return longest


def _code_span(text: str) -> str:
    delim = "`" * (_longest_run(text, "`") + 1)
    return f"{delim}{text}{delim}" if len(delim) == 1 else f"{delim} {text} {delim}"


def _inline(value: object | None) -> str:
    return "—" if value is None else _code_span(_visible(str(value)))


def _table_inline(value: object | None) -> str:
    return "—" if value is None else _code_span(_visible(str(value)).replace("|", r"\|"))


def _code_block(value: str) -> str:
    fence = "`" * max(3, _longest_run(value, "`") + 1)
    return f"{fence}text\n{value}{'' if value.endswith(chr(10)) else chr(10)}{fence}"


def _created(ms: int) -> str:
    return timestamp(datetime.fromtimestamp(ms / 1000, tz=timezone.utc))


def tfbash_overview_markdown(rt: Engine, state: ProfileState | None = None) -> str:
    """Markdown for ``window://io.github.a2c-smcp.tfbash/shell-overview``, laid out as the
    original lays it out: the context, a table of shells with their latest execution, and the
    last 500 characters of each one's output. Without the runtime's profile ``state``, every
    execution is shown as if started with the default capacity and never signalled."""
    info_shells = rt.shells_available()
    ctx = runtime_context(
        rt, {"shells": info_shells, "default_cwd": rt.config.resolved_default_cwd}
    )
    items = shell_items(rt)
    lines = [
        "# Shell Overview",
        "",
        f"- Platform: {_inline(ctx['runtime']['platform'])}",
        f"- Dialect: {_inline(ctx['runtime']['dialect'])}",
        f"- Workspace: {_inline(ctx['host']['workspace_root'])}",
        f"- Shells: {len(items)}",
        "",
    ]
    if not items:
        lines.append("No active Shells.")
        return "\n".join(lines)
    lines += [
        "| Shell ID | Status | CWD | Created | Execution ID | Execution status | Exit code | "
        "Duration |",
        "|---|---|---|---|---|---|---:|---:|",
    ]
    st = state.get(State) if state is not None else State()
    shells = shell_summaries(rt)
    latest: dict[str, dict[str, Any] | None] = {}
    for item in items:
        sid = item["shell_id"]
        exec_id = item["active_exec_id"] or shells[sid]["last_job_id"]
        snap = None
        if exec_id is not None:
            try:
                job = rt.job(exec_id)
            except ConchError:
                job = None
            if job is not None:
                snap = execution_window(rt, st, sid, job, job.log.size(), 0)
                tail = job.log.read(
                    max(0, job.log.size() - OVERVIEW_TAIL_CHARS * 4), job.log.size()
                )
                skip = boundary_at_or_after(tail, 0) if job.log.size() > len(tail) else 0
                text = tail[skip:].decode("utf-8", "replace")[-OVERVIEW_TAIL_CHARS:]
                snap = {**snap, "tail": text, "tail_truncated": job.log.size() > nbytes(text)}
        latest[sid] = snap
        dur = snap.get("duration_ms") if snap else None
        lines.append(
            "| "
            + " | ".join(
                (
                    _table_inline(sid),
                    item["status"],
                    _table_inline(item["last_known_cwd"]),
                    _created(item["created_at_ms"]),
                    _table_inline(snap["exec_id"] if snap else None),
                    snap["status"] if snap else "—",
                    str(snap["exit_code"]) if snap and snap["exit_code"] is not None else "—",
                    f"{dur} ms" if dur is not None else "—",
                )
            )
            + " |"
        )
    for item in items:
        snap = latest[item["shell_id"]]
        lines += ["", f"## {_inline(item['shell_id'])} — recent output", ""]
        if snap is None:
            lines.append("No retained execution.")
            continue
        if snap["tail_truncated"]:
            lines += ["_Earlier output was truncated._", ""]
        lines.append(_code_block(snap["tail"]) if snap["tail"] else "No output captured.")
    return "\n".join(lines)


RESOURCE = Resource(
    OVERVIEW_URI,
    "Shell Overview",
    None,
    "Current Shell states and recent execution output.",
    tfbash_overview_markdown,
    extra={
        "annotations": {"audience": ["assistant"], "priority": 0.8},
        "_meta": {"fullscreen": False},
    },
)
