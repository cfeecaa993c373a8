"""Undo: check that every path still holds what the job left, then put back what it held
before, by descriptor (core/changes/safefs.py). The undo is itself a change record."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, TypeVar

from conch.core.changes import confine, safefs
from conch.core.changes.entry import Entry, shown
from conch.core.changes.tracker import Tracker
from conch.errors import ConchError

T = TypeVar("T")

_NAMED = 20  # paths a refusal names before "and N more"
#: files with several names one undo holds open to link the others to (past it: copies)
LINKED_MAX = 256


def _names(paths: list[str]) -> str:
    named = ", ".join(shown(p) for p in paths[:_NAMED])
    return named + (f" and {len(paths) - _NAMED} more" if len(paths) > _NAMED else "")


def restorable(b: Entry | None, a: Entry | None) -> bool:
    """Whether undo can put ``b`` back where the job left ``a``: ``b`` must be a file, a
    directory or a symlink (or nothing), a file's content kept; a file the job left must
    have a known content (to see that nobody changed it since). A FIFO, socket or device
    the job left is removed (unlinked, never opened), never made again."""
    if b is not None and not b.restorable:
        return False
    return a is None or a.type != "file" or a.oid is not None


def items(record: dict[str, Any]) -> list[tuple[str, Entry | None, Entry | None]]:
    return [(rel, Entry.from_json(b), Entry.from_json(a)) for rel, b, a in record["files"]]


def undo(
    tracker: Tracker,
    record: dict[str, Any],
    force: Iterable[str],
    undo_id: str,
    load: Callable[[str], dict[str, Any] | None],
) -> dict[str, Any]:
    """Take ``record``'s changes back; the undo's own record (saved). ``conflict`` naming
    the paths changed since (unless in ``force``), nothing written then."""
    job_id = record["job_id"]
    forced = set(force)
    if record.get("undone_by"):
        raise ConchError(
            "conflict",
            f"job {job_id}'s changes were already taken back by {record['undone_by']} "
            f"(undo {record['undone_by']} to put them back again)",
        )
    wrong = [rel for rel, _b, _a in items(record) if not _workspace_path(rel)]
    if wrong:  # (a record is written by this server: one that is not was tampered with)
        raise ConchError(
            "conflict",
            f"undo of {job_id} refused, nothing was written: its record names paths that "
            f"are not in the workspace: {_names(wrong)}",
        )
    todo = [(rel, b, a) for rel, b, a in items(record) if restorable(b, a)]
    skipped = [rel for rel, b, a in items(record) if not restorable(b, a)]
    with tracker.lock:
        tracker.settle()
        root = tracker.root_fd()
        current: dict[str, Entry | None] = {}
        changed = []
        looked = safefs.Dirs()
        for rel, _b, a in todo:
            try:
                cur = safefs.capture(root, rel, tracker.store, tracker.max_file_bytes, looked)
            except (FileNotFoundError, safefs.Unsafe, NotADirectoryError):
                cur = None
            current[rel] = cur
            if rel in forced or shown(rel) in forced:
                continue
            if not (cur is None if a is None else a.same(cur)):
                changed.append(rel)
        looked.close()
        paths = {rel for rel, _b, _a in todo if rel not in forced and shown(rel) not in forced}
        shared = _shared(record, paths, load)
        # changed while other jobs ran too: inotify does not say which process wrote, so
        # any of them may have (whether or not their records are still kept)
        during = {rel: jobs for rel, jobs in record.get("shared", {}).items() if rel in paths}
        shared -= set(during)
        if changed or shared or during:
            parts = []
            if changed:
                parts.append(f"changed since job {job_id} ended: {_names(changed)}")
            if during:
                others = sorted({j for jobs in during.values() for j in jobs})
                parts.append(
                    f"changed while {', '.join(others)} ran too (either may have written "
                    f"them): {_names(sorted(during))}"
                )
            if shared:
                parts.append(
                    f"also changed by a job that overlapped it in time: {_names(sorted(shared))}"
                )
            raise ConchError(
                "conflict",
                f"undo of {job_id} refused, nothing was written: paths {'; '.join(parts)}. "
                "Name them in force to undo anyway (their present content is kept: the "
                "undo can be undone)",
            )
        done: list[list[Any]] = []
        undo_rec: dict[str, Any] = {
            "v": 1,
            "job_id": undo_id,
            "undo_of": job_id,
            "started": record.get("ended", 0),
            "files": done,
            "not_covered": [
                {"path": rel, "reason": "not restorable (not covered when recorded)"}
                for rel in skipped
            ],
            "overlapping_jobs": [],
        }
        try:
            confined = confine.run(
                root,
                [tracker.store.objects_fd],
                lambda: _apply(root, todo, current, tracker, done),
            )
            if not confined:
                undo_rec["not_covered"].append(
                    {"path": "", "reason": "written unconfined: this kernel has no Landlock"}
                )
        except (OSError, ValueError) as e:
            rel = getattr(e, "conch_path", "?")
            tracker.save_undo(undo_id, undo_rec)
            tracker.refresh([(r, Entry.from_json(b)) for r, _a, b in done])
            raise ConchError(
                "conflict",
                f"undo of {job_id} stopped at {rel}: {_why(e)}; {len(done)} paths were "
                f"restored before it (undo {undo_id} puts them back as they were)",
            ) from None
        done.sort(key=lambda f: f[0])
        tracker.save_undo(undo_id, undo_rec)
        record["undone_by"] = undo_id
        tracker.save_undo(job_id, record)
        tracker.refresh([(rel, b) for rel, b, _a in todo])
    return undo_rec


def _workspace_path(rel: object) -> bool:
    try:
        return isinstance(rel, str) and bool(safefs.parts(rel))
    except ValueError:
        return False


def _why(e: Exception) -> str:
    if isinstance(e, safefs.Unsafe):
        return "a directory on its path was replaced by a symlink or a file (not followed)"
    if isinstance(e, OSError) and e.errno == errno.ENOTEMPTY:
        return "the directory holds entries the job did not make"
    return str(e)


def _shared(record: dict[str, Any], paths: set[str], load: Any) -> set[str]:
    out: set[str] = set()
    for other in record.get("overlapping_jobs", ()):
        rec = load(other)
        if rec is None or rec.get("undone_by"):
            continue
        out |= paths & {rel for rel, _b, _a in rec["files"]}
    return out


def _apply(
    root: int,
    todo: list[tuple[str, Entry | None, Entry | None]],
    current: dict[str, Entry | None],
    tracker: Tracker,
    done: list[list[Any]],
) -> None:
    dirs = safefs.Dirs()
    try:
        _run(root, todo, current, tracker, done, dirs)
    finally:
        dirs.close()


def _run(
    root: int,
    todo: list[tuple[str, Entry | None, Entry | None]],
    current: dict[str, Entry | None],
    tracker: Tracker,
    done: list[list[Any]],
    dirs: safefs.Dirs,
) -> None:
    gone: set[str] = set()
    # 1. what is in the way goes, deepest first: what the job added, and a file where a
    # directory was (or the reverse)
    for rel, b, _a in sorted(todo, key=lambda t: -rel_depth(t[0])):
        cur = current[rel]
        if cur is None:
            continue
        if b is None or (cur.type == "dir") != (b.type == "dir"):
            _step(rel, partial(safefs.remove, root, rel, cur, dirs))
            gone.add(rel)
            if b is None:
                done.append([rel, cur.to_json(), None])
    # 2. what was there comes back, shallowest first (directories writable meanwhile);
    # names that were one file come back as one: the second is linked to the first this
    # undo wrote (never to a name it did not write)
    made: dict[tuple[int, str, int], tuple[str, int]] = {}
    try:
        _put_back(root, todo, current, tracker, done, dirs, gone, made)
    finally:
        for _rel, fd in made.values():
            os.close(fd)
    # 3. directories' own modes last, deepest first, and the times of those it made again
    for rel, b, _a in sorted(todo, key=lambda t: -rel_depth(t[0])):
        if b is not None and b.type == "dir":
            remade = rel in gone or current[rel] is None
            mtime = b.mtime if remade else None
            _step(rel, partial(safefs.finish_dir, root, rel, b.mode, mtime, dirs))


def _put_back(
    root: int,
    todo: list[tuple[str, Entry | None, Entry | None]],
    current: dict[str, Entry | None],
    tracker: Tracker,
    done: list[list[Any]],
    dirs: safefs.Dirs,
    gone: set[str],
    made: dict[tuple[int, str, int], tuple[str, int]],
) -> None:
    for rel, b, _a in sorted(todo, key=lambda t: rel_depth(t[0])):
        if b is None:
            continue
        cur = None if rel in gone else current[rel]
        if b.same(cur):
            continue
        want = b
        if b.type == "dir":
            want = Entry("dir", 0o700, 0)
        key = (b.ino, b.oid or "", b.mode) if b.nlink > 1 and b.type == "file" else None
        first = made.get(key) if key else None
        if first is None or not _step(rel, partial(safefs.link, root, rel, *first, dirs)):
            keep = key is not None and first is None and len(made) < LINKED_MAX
            fd = _step(rel, partial(safefs.put, root, rel, want, tracker.store, dirs, keep=keep))
            if keep and key is not None:
                made[key] = (rel, fd)
        was = current[rel]
        done.append([rel, was.to_json() if was else None, b.to_json()])


def rel_depth(rel: str) -> int:
    return rel.count("/")


def _step(rel: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (OSError, ValueError) as e:
        setattr(e, "conch_path", rel)  # noqa: B010
        raise
