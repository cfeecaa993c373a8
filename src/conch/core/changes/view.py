"""A change record as the ``changes`` result shows it (pure but for reading kept contents):
the list of paths by pages, a bounded unified diff of text files."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from conch.core.changes.entry import Entry, change_kind, shown
from conch.core.changes.tracker import OUTSIDE, counts
from conch.errors import ConchError

PAGE = 1000  # paths a result lists at most
DIFF_FILE_BYTES = 256 * 1024  # larger files are listed, not diffed
SHARED_NAMED = 20  # paths the note on attribution names before "and N more"


def result(
    record: dict[str, Any],
    *,
    cursor: str | None,
    max_bytes: int,
    content: Callable[[str], bytes | None],
    workspace: str,
    exclude: list[str] | None = None,
) -> dict[str, Any]:
    files = record.get("files", [])
    start = _cursor(cursor, len(files))
    page = files[start : start + PAGE]
    out: dict[str, Any] = {"job_id": record["job_id"]}
    out.update({k: v for k, v in counts(record).items() if v})
    listed = []
    diffs: list[str] = []
    used = 0
    cut = False
    for rel, b_json, a_json in page:
        b, a = Entry.from_json(b_json), Entry.from_json(a_json)
        ent = a if a is not None else b
        assert ent is not None
        item: dict[str, Any] = {
            "path": shown(rel),
            "change": change_kind(b, a),
            "type": ent.type,
            "mode": f"{ent.mode:04o}",
        }
        if ent.type in ("file", "symlink"):
            item["size"] = ent.size
        listed.append(item)
        if cut:
            continue
        text = _diff(rel, b, a, content)
        if text:
            if used + len(text.encode()) > max_bytes:
                cut = True
                diffs.append(
                    f"[... diffs cut at max_bytes ({max_bytes}) from {shown(rel)} on ...]\n"
                )
                continue
            used += len(text.encode())
            diffs.append(text)
    if listed:
        out["files"] = listed
    if diffs:
        out["diff"] = "".join(diffs)
    if start + PAGE < len(files):
        out["next_cursor"] = str(start + PAGE)
    nc = [{**n, "path": shown(n.get("path", ""))} for n in record.get("not_covered", [])]
    nc.append({"path": "", "reason": f"{OUTSIDE} ({workspace})"})
    if exclude:
        nc.append(
            {"path": "", "reason": f"paths matching changes_exclude are not tracked: {exclude}"}
        )
    shared = record.get("shared")
    if shared:
        jobs = sorted({j for others in shared.values() for j in others})
        nc.append({"path": "", "reason": _attributed(sorted(shared), jobs)})
    out["not_covered"] = nc
    if record.get("overlapping_jobs"):
        out["overlapping_jobs"] = record["overlapping_jobs"]
    for key in ("undo_of", "undone_by"):
        if record.get(key):
            out[key] = record[key]
    return out


def _attributed(paths: list[str], jobs: list[str]) -> str:
    """Which paths the record holds by time only (inotify does not say who wrote)."""
    named = ", ".join(shown(p) for p in paths[:SHARED_NAMED])
    more = f" and {len(paths) - SHARED_NAMED} more" if len(paths) > SHARED_NAMED else ""
    return (
        f"attributed by time, not by process: {len(paths)} of these paths changed while "
        f"{', '.join(jobs)} ran too, and either job may have written them (undo refuses "
        f"them as a conflict unless named in force): {named}{more}"
    )


def _cursor(cursor: str | None, n: int) -> int:
    if cursor is None or cursor == "":
        return 0
    try:
        at = int(cursor)
    except (TypeError, ValueError):
        at = -1
    if at < 0 or at > n:
        raise ConchError("invalid_argument", f"cursor {cursor!r} is not one this record gave")
    return at


def _text(ent: Entry | None, content: Callable[[str], bytes | None]) -> list[str] | None:
    if ent is None:
        return []
    if ent.type == "symlink":
        return [f"-> {shown(ent.target or '')}\n"]
    if ent.type != "file" or not ent.stored or ent.oid is None or ent.size > DIFF_FILE_BYTES:
        return None
    data = content(ent.oid)
    if data is None or b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def _diff(
    rel: str, b: Entry | None, a: Entry | None, content: Callable[[str], bytes | None]
) -> str:
    if (b is not None and b.type == "dir") or (a is not None and a.type == "dir"):
        return ""
    old, new = _text(b, content), _text(a, content)
    if old is None or new is None:
        return ""
    lines = difflib.unified_diff(
        old,
        new,
        fromfile="/dev/null" if b is None else f"a/{shown(rel)}",
        tofile="/dev/null" if a is None else f"b/{shown(rel)}",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
