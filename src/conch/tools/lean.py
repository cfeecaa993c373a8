"""Lean results (docs/spec.md §6): the default profile's results without the fields at their
default.

Hosts such as Claude Code and VS Code give the model ``JSON.stringify(structuredContent)``; a
field at its documented default (null, false, 0, an empty list, a value another field already
gives) tells the model nothing and costs tokens on every call. These pure functions turn a full
result (what the engine builds, and what ``result_detail: full`` returns) into the lean one;
the output schemas (``conch.tools.schemas``) state every default they rely on.

Always present in a job snapshot: ``job_id``, ``state``, ``output``; ``exit_code`` once the job
exited; ``next_cursor`` whenever there is more to read or the job runs, ``eof: false`` when a
finished job has more to read (a running job has not ended: ``state`` says it), and
``total_bytes`` then too unless it is ``next_cursor`` (all there is was read; an unchanged
running job's read is then under 100 bytes);
``truncated`` + ``omitted_bytes`` when something was left out, and ``cursor`` then, where the
window starts (else the caller's cursor or the job's last read put it there); a shell job's
``cwd`` when its command changed the shell's directory, a one-shot job's when not the default.
A snapshot leaves out the job's ``mode`` and ``shell_id`` (the call that started it chose
them; ``list`` says them). Informational fields (``FULL_ONLY``) appear in full results only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Result = Mapping[str, Any]

#: what a wait that ended with the job still running says of it (``note``), where a model could
#: take the early return for a failure (an exec that waited; a read whose wait the host cut)
STILL_RUNNING = "still running — not an error; read to wait on"

#: fields of a job snapshot that only full results carry: ``ok`` is derived from ``state`` and
#: ``exit_code``, the rest is bookkeeping a model does not need to read a result
FULL_ONLY = (
    "ok",
    "started_at",
    "duration_ms",
    "pid",
    "stdout_bytes",
    "stderr_bytes",
    "log_path",
    "started_cwd",
)


def _identity(
    s: Result, out: dict[str, Any], named: bool = True, listed: bool = True
) -> str | None:
    """The lean head shared by snapshots and `list` summaries; returns the shell id.
    ``listed=False`` (a snapshot): the job's mode and shell are left out, as the call that
    started it chose them (``pty``, ``argv``, ``script``, ``shell_id``) and `list` says them."""
    name = s.get("name")
    if name is not None and named:
        out["name"] = name
    shell_id = s.get("shell_id")
    mode = s.get("mode", "command")
    if listed and mode != "command" and not (mode == "shell" and shell_id is not None):
        out["mode"] = mode
    if shell_id is not None and listed:
        out["shell_id"] = shell_id
    out["state"] = s["state"]
    code = s.get("exit_code")
    if code is not None:
        out["exit_code"] = code
    sig = s.get("signal")
    if sig is not None:
        out["signal"] = sig
    limit = s.get("limit")
    if limit is not None:
        out["limit"] = limit
    return shell_id


def _cwd(s: Result, out: dict[str, Any], shell_id: str | None, default_cwd: str | None) -> None:
    """A shell job's cwd is news when the command changed it (a snapshot knows where it
    started; a `list` summary does not, and says it); a one-shot job's when not the default."""
    cwd = s.get("cwd")
    if cwd is None:
        return
    if shell_id is not None:
        if cwd != s.get("started_cwd"):
            out["cwd"] = cwd
    elif cwd != default_cwd:
        out["cwd"] = cwd


def snapshot(s: Result, default_cwd: str | None = None, *, named: bool = True) -> dict[str, Any]:
    """The lean form of a job snapshot (exec, read, write, signal). ``named=False`` (read,
    write, signal): the job's name is left out, as its exec and `list` say it (the id is
    the handle)."""
    out: dict[str, Any] = {"job_id": s["job_id"]}
    shell_id = _identity(s, out, named, listed=False)
    if s.get("awaiting_input"):
        out["awaiting_input"] = True
    if s.get("awaiting_secret"):
        out["awaiting_secret"] = True
    ready = s.get("ready")
    if ready is not None:
        out["ready"] = ready
    out["output"] = s["output"]
    # where the window starts: said when the window left output out (a tail read starts
    # there), not where the log starts, and not where it ends (an empty window); else it is
    # where the caller's cursor, or the job's last read, put it
    if s.get("truncated") and s.get("cursor") and s["cursor"] != s.get("next_cursor"):
        out["cursor"] = s["cursor"]
    if not s.get("eof", True):
        out["next_cursor"] = s["next_cursor"]
        if s["total_bytes"] != s["next_cursor"]:  # else: all there is was read
            out["total_bytes"] = s["total_bytes"]
        if s["state"] != "running":  # a running job's output has not ended: no eof
            out["eof"] = False
    if s.get("truncated"):
        out["truncated"] = True
        out["omitted_bytes"] = s.get("omitted_bytes", 0)
    elif s.get("omitted_bytes"):
        out["omitted_bytes"] = s["omitted_bytes"]
    _cwd(s, out, shell_id, default_cwd)
    for key in ("data", "parse_error"):
        if s.get(key) is not None:
            out[key] = s[key]
    if s.get("lingering_pids"):
        out["lingering_pids"] = s["lingering_pids"]
    if s.get("restarted"):
        out["restarted"] = True
    if s.get("shell_opened"):
        out["shell_opened"] = True
    if s.get("lost_bytes"):
        out["lost_bytes"] = s["lost_bytes"]
    if s.get("attended"):
        out["attended"] = True
    for key in ("human_input", "screen", "note", "changes"):
        if s.get(key) is not None:
            out[key] = s[key]
    if s.get("digest") is not None:
        out["digest"] = digest(s["digest"])
    return out


def digest(d: Result) -> dict[str, Any]:
    """The lean form of a digest: a run of adjacent lines (each starting right after the one
    before it ends: the cursors and the texts' lengths say so) is one entry, the cursor of its
    first line and their texts joined by newlines, as the log holds them. 40 failures of a
    test run's short summary cost 40 texts, not 40 objects. A line that normalizing changed
    (escapes, ``\\r``) or that was cut (``…``) ends a run: its length no longer says where
    the next one starts."""
    lines: list[dict[str, Any]] = []
    end = -1  # where the last entry's last line ends in the log, when it is known
    for e in d.get("lines", []):
        text = e["text"]
        if e["cursor"] == end and lines:
            lines[-1] = {**lines[-1], "text": lines[-1]["text"] + "\n" + text}
        else:
            lines.append(dict(e))
        exact = not text.endswith("…") and "\ufffd" not in text
        end = e["cursor"] + len(text.encode()) + 1 if exact else -1
    return {**d, "lines": lines}


def digest_text(s: Result) -> str:
    """A job snapshot's digest for the text view: one bracketed line (what it counts, what
    it leaves out, the job's exit), then ``@cursor text`` per line not already in the
    output above (``read {cursor}`` shows it in place). Empty without a digest."""
    d = s.get("digest")
    if not d:
        return ""
    shown = set(s.get("output", "").split("\n"))
    lines = [f"@{e['cursor']} {e['text']}" for e in d["lines"] if e["text"] not in shown]
    parts = [f"digest: {len(d['lines'])} lines"]
    if len(lines) < len(d["lines"]):
        parts[0] += f" ({len(d['lines']) - len(lines)} of them in the output above)"
    if "counts_from" in d:
        counts = ", ".join(f"{k} {v}" for k, v in d.get("counts", {}).items()) or "none"
        among = f", the last of {d['summaries']}" if d.get("summaries") else ""
        parts.append(f"counts from the summary at @{d['counts_from']}{among}: {counts}")
    for o in d.get("omitted", []):
        kind = {"failure": "failure", "flagged": "error-marked", "warning": "warning"}
        where = f"@{o['first']}" + (f"…@{o['last']}" if o["last"] != o["first"] else "")
        parts.append(f"{o['lines']} more {kind.get(o['kind'], o['kind'])} lines at {where}")
    if d.get("incomplete"):
        parts.append(f"incomplete: {d['incomplete']}")
    parts.append(_ending(s))
    return "\n".join(["[" + " · ".join(parts) + "]", *lines])


def _ending(s: Result) -> str:
    if s.get("exit_code") is not None and s.get("state") == "exited":
        return f"exit {s['exit_code']}"
    sig = f" ({s['signal']})" if s.get("signal") else ""
    return f"{s.get('state')}{sig}"


def still_running(s: Result) -> bool:
    """The snapshot is of a job that runs on and waits for nothing from the caller (no prompt
    awaiting input, no `ready` that held)."""
    return (
        s.get("state") == "running"
        and not s.get("awaiting_input")
        and not s.get("awaiting_secret")
        and not s.get("ready")
    )


def job_summary(s: Result, default_cwd: str | None = None) -> dict[str, Any]:
    """The lean form of a job in `list`."""
    out: dict[str, Any] = {"job_id": s["job_id"]}
    shell_id = _identity(s, out)
    if s.get("total_bytes"):
        out["total_bytes"] = s["total_bytes"]
    _cwd(s, out, shell_id, default_cwd)
    return out


def shell_summary(s: Result) -> dict[str, Any]:
    """A shell in `list` or the `shell_open` result: unset name and idle job left out, and its
    creation time (informational, like a job's started_at)."""
    return {k: v for k, v in s.items() if v is not None and k != "created_at"}


def listing(r: Result, default_cwd: str | None = None) -> dict[str, Any]:
    return {
        **r,
        "jobs": [job_summary(j, default_cwd) for j in r.get("jobs", [])],
        "shells": [shell_summary(s) for s in r.get("shells", [])],
    }


def shell_close(r: Result) -> dict[str, Any]:
    out = dict(r)
    if out.get("cleanup_complete") is True:
        del out["cleanup_complete"]
    return out


def _match(m: Result) -> dict[str, Any]:
    return {k: v for k, v in m.items() if not ((k == "before" or k == "after") and not v)}


def search(r: Result) -> dict[str, Any]:
    """Lean search result: the mode's own list, `truncated`/`timed_out` only when true; in
    matches mode `files` and `counts` (derivable from the matches) only when truncated."""
    mode = r.get("mode", "matches")
    out: dict[str, Any] = {}
    if mode != "matches":
        out["mode"] = mode
    truncated = bool(r.get("truncated"))
    if mode == "matches":
        out["matches"] = [_match(m) for m in r.get("matches", [])]
        if truncated:
            out["files"] = r.get("files", [])
            out["counts"] = r.get("counts", {})
    elif mode == "files":
        out["files"] = r.get("files", [])
    else:
        out["counts"] = r.get("counts", {})
    if "files_base64" in r and "files" in out:
        out["files_base64"] = r["files_base64"]
    if truncated:
        out["truncated"] = True
    if r.get("timed_out"):
        out["timed_out"] = True
    if r.get("errors"):
        out["errors"] = r["errors"]
    return out


#: a change set's fields at their default (conch.tools.schemas.CHANGES_OUTPUT)
_CHANGES_DEFAULTS: dict[str, Any] = {
    "added": 0,
    "modified": 0,
    "deleted": 0,
    "files": [],
    "diff": "",
    "next_cursor": None,
    "not_covered": [],
    "overlapping_jobs": [],
}


def changes_full(r: Result) -> dict[str, Any]:
    """A change set with every field, those at their default too (``result_detail: full``)."""
    return {"job_id": r["job_id"], **_CHANGES_DEFAULTS, **r}


def changes(r: Result) -> dict[str, Any]:
    """A change set without the fields at their default (``job_id`` always)."""
    return {
        k: v
        for k, v in r.items()
        if k == "job_id" or k not in _CHANGES_DEFAULTS or v != _CHANGES_DEFAULTS[k]
    }
