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
    if tool == "changes":
        return render_changes(result)
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
    if s.get("changes"):
        parts.append("changed " + counts(s["changes"]))
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
    text = "\n".join(lines) if lines else "(no jobs or shells)"
    if r.get("info") is not None:
        text += "\ninfo: " + json.dumps(r["info"], ensure_ascii=False, indent=1)
    return text


def counts(c: dict[str, Any]) -> str:
    """``1 added, 2 modified`` (the non-zero counts of a change set), or ``nothing``."""
    said = [f"{c[k]} {k}" for k in ("added", "modified", "deleted") if c.get(k)]
    return ", ".join(said) or "nothing"


#: the letter of each kind of change in the text view (as ``git status --short`` has them)
CHANGE_LETTERS = {"added": "A", "modified": "M", "deleted": "D", "type_changed": "T"}


def render_changes(r: dict[str, Any]) -> str:
    """A change set for a model to read: a header, ``M path`` per file, what is not covered,
    then the diff."""
    head = [f"changes of {r['job_id']}: {counts(r)}"]
    if r.get("undo_of"):
        head.append(f"the undo of {r['undo_of']}")
    if r.get("undone_by"):
        head.append(f"undone by {r['undone_by']}")
    if r.get("overlapping_jobs"):
        head.append("overlapping jobs " + " ".join(_named(j) for j in r["overlapping_jobs"]))
    if r.get("next_cursor"):
        head.append(f"more: cursor {r['next_cursor']}")
    lines = ["[" + " · ".join(head) + "]"]
    for f in r.get("files", []):
        letter = CHANGE_LETTERS.get(f.get("change", ""), "?")
        kind = f" ({f['type']})" if f.get("type") not in (None, "file") else ""
        lines.append(f"{letter} {f['path']}{kind}")
    for n in r.get("not_covered", []):
        lines.append("not covered: " + (_not_covered(n)))
    if r.get("diff"):
        lines.append(r["diff"].rstrip("\n"))
    return "\n".join(lines)


def _named(j: Any) -> str:
    return str(j.get("job_id", j)) if isinstance(j, dict) else str(j)


def _not_covered(n: Any) -> str:
    if not isinstance(n, dict):
        return str(n)
    what = n.get("path") or n.get("what") or ""
    why = n.get("reason") or n.get("why") or ""
    return f"{what} ({why})" if what and why else str(what or why or json.dumps(n))


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
