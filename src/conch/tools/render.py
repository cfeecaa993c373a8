"""The text block a model reads: a one-line header, then the output (docs/spec.md §6)."""

from __future__ import annotations

import json
from typing import Any

from conch.tools.lean import digest_text


def render(
    tool: str,
    result: dict[str, Any],
    *,
    is_error: bool,
    fmt: str = "text",
    full: dict[str, Any] | None = None,
) -> str:
    """The text block: ``result`` as JSON (``fmt="json"``), else a rendering of ``full`` (the
    result with every field, when ``result`` is its lean form) or of ``result``."""
    if fmt == "json":
        return json.dumps(result, ensure_ascii=False)
    if full is not None:
        result = full
    if is_error:
        e = result.get("error")
        if not isinstance(e, dict):  # a seed profile's own error shape: show it as it is
            return json.dumps(result, ensure_ascii=False)
        retry = " (retryable)" if e.get("retryable") else ""
        return f"[error {e.get('code')}{retry}] {e.get('message')}"
    if "job_id" in result and "state" in result:
        return render_snapshot(result)
    if tool == "list":
        return render_list(result)
    if tool == "search":
        return render_search(result)
    return json.dumps(result, ensure_ascii=False, indent=1)


def header(s: dict[str, Any]) -> str:
    parts = [s["job_id"] + (f" ({s['name']})" if s.get("name") else "")]
    state = s["state"]
    if state == "exited":
        parts.append(
            f"exited {s['exit_code']}" if s.get("signal") is None else f"exited by {s['signal']}"
        )
    elif state == "running":
        if s.get("awaiting_secret"):
            parts += ["running", "awaiting secret input"]
        elif s.get("awaiting_input"):
            parts += ["running", "awaiting input"]
        else:  # a plain fact, never worded as a failure
            parts.append(f"still running — not an error; read {s['job_id']} to wait on")
    else:
        parts.append(state + (f" ({s['signal']})" if s.get("signal") else ""))
    parts[0] += " " + parts.pop(1)
    if "duration_ms" in s:  # a lean result leaves it out
        parts.append(f"{s['duration_ms']} ms")
    if s.get("ready") is not None:
        parts.append("ready" if s["ready"] else "not ready")
    if s.get("shell_id"):
        parts.append(f"shell {s['shell_id']} cwd {s.get('cwd')}")
    if s.get("restarted"):
        parts.append("shell restarted")
    if s.get("shell_opened"):
        parts.append("shell opened")
    if s.get("lingering_pids"):
        parts.append(f"lingering pids {' '.join(map(str, s['lingering_pids']))}")
    if s.get("truncated") and s.get("omitted_bytes"):
        parts.append(f"{s['omitted_bytes']} bytes not shown")
    if s.get("state") == "running" or not s.get("eof", True):
        parts.append(f"next cursor {s['next_cursor']}")
    return "[" + " · ".join(parts) + "]"


def render_snapshot(s: dict[str, Any]) -> str:
    text = header(s)
    if s.get("parse_error"):
        text += f"\nparse error: {s['parse_error']}"
    if s.get("output"):
        text += "\n" + s["output"]
    elif s["state"] == "running":
        text += "\n(no new output)"
    digest = digest_text(s)
    if digest:
        text += ("" if text.endswith("\n") else "\n") + digest
    return text


def render_list(r: dict[str, Any]) -> str:
    lines = []
    for j in r.get("jobs", []):
        code = j.get("exit_code", "") if j["state"] == "exited" else ""
        ms = f"{j['duration_ms']} ms" if "duration_ms" in j else ""
        lines.append(
            f"{j['job_id']} {j.get('name') or '-'} {j.get('mode', 'command')} {j['state']} "
            f"{code} {ms}".replace("  ", " ").rstrip()
        )
    for sh in r.get("shells", []):
        lines.append(
            f"{sh.get('shell_id')} {sh.get('name') or '-'} {sh.get('shell')} "
            f"{sh.get('state')} cwd {sh.get('cwd')}"
        )
    return "\n".join(lines) if lines else "(no jobs or shells)"


def render_search(r: dict[str, Any]) -> str:
    lines = []
    mode = r.get("mode", "matches")
    if mode == "matches":
        for m in r.get("matches", []):
            lines.append(f"{m['path']}:{m['line']}:{m['column']}: {m['text']}")
    elif mode == "files":
        lines.extend(r.get("files", []))
    else:
        lines.extend(f"{p}: {n}" for p, n in r.get("counts", {}).items())
    tail = " (truncated)" if r.get("truncated") else ""
    head = f"[search {mode}: {len(lines)} results · {r.get('elapsed_ms', 0)} ms{tail}]"
    return "\n".join([head, *lines])
