"""The tracker: the workspace's index, kept current by inotify, and the jobs it attributes
changes to.

At start a thread walks the workspace once (watching each directory before listing it, so
nothing made meanwhile is missed), keeps every file's content in the store and holds an
index of what each path holds. From then on only the paths inotify names are looked at: a
path named while jobs run is *touched* for each of them (what the index held is its
"before"), and when a job ends the paths it touched are read again (its "after"), kept and
put in the index. Paths named while no job runs (a person's edits) are read into the index
as the events come, and a job's start first takes in what is queued, so that a person's edit
just before is not the job's. A lost event (the queue overflowed) makes the thread compare
the whole tree with the index by stat, as the start did.

What a job changed is then its touched paths whose after differs from their before: the cost
is what it changed, not what the workspace holds."""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import logging
import os
import select
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from conch.core.changes import inotify
from conch.core.changes.entry import Entry, change_kind, from_stat
from conch.core.changes.safefs import DIR_FLAGS, capture, lstat
from conch.core.changes.store import Store, StoreFull
from conch.core.containment import gitdir

log = logging.getLogger("conch.changes")

#: the longest a job's start waits for the tracker's lock before it joins late
BEGIN_WAIT_S = 0.05

OUTSIDE = "tracking covers the workspace only: a job's writes outside it are not seen"


@dataclass(eq=False)
class Active:
    """A job being tracked: what each path it touched held before it."""

    job_id: str
    started: float
    before: dict[str, Entry | None] = field(default_factory=dict)
    overlapping: set[Active] = field(default_factory=set)
    untracked: str | None = None  # why its changes are not known (set before it started)
    cancelled: bool = False  # its process never started
    # paths changed just before it started while the tracker was busy: their "before" is
    # not known (said in its record, never undone)
    unknown: set[str] = field(default_factory=set)
    # paths changed while other jobs ran too, and those jobs: inotify does not say which
    # process wrote, so either may have (a conflict for undo)
    shared: dict[str, set[Active]] = field(default_factory=dict)
    keep: bool = True  # False: run with changes: false (no record; others' overlap still)


class Tracker:
    def __init__(
        self,
        workspace: str,
        store: Store,
        *,
        max_files: int,
        max_file_bytes: int,
        max_store_bytes: int,
        exclude: list[str],
        skip: tuple[str, ...] = (),
    ) -> None:
        self.workspace = os.path.realpath(workspace)
        self.store = store
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.max_store_bytes = max_store_bytes
        self.exclude = list(exclude)
        # absolute paths under the workspace never tracked (the data dir when it is inside)
        self.skip = tuple(os.path.realpath(s) for s in skip)
        self.state = "building"
        self.reason = "the index of the workspace is being built"
        self.index: dict[str, Entry] = {}
        self._links: dict[int, set[str]] = {}  # inode -> paths, for files with nlink > 1
        self._privileged: set[str] = set()  # setuid or setgid files (paths in the index)
        self._lock = threading.RLock()
        self._ready = threading.Event()
        self._stop = False
        self._fd = -1
        self._root = -1
        self._root_id: tuple[int, int] = (0, 0)
        self._wds: dict[int, str] = {}  # watch -> directory ("" is the workspace)
        self._wd_of: dict[str, int] = {}
        self._stale: set[str] = set()
        self._active: set[Active] = set()
        # jobs that began while the lock was held (an undo, a large job's end): admitted by
        # whoever holds it next, before it reads any event
        self._joining: list[tuple[list[tuple[int, int, int, str]], Active]] = []
        self._jlock = threading.Lock()
        self._early: set[str] | None = None
        self._forgets: list[str] = []
        self._wake = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)  # close() wakes the thread
        self._thread: threading.Thread | None = None
        self.records_oids: dict[str, set[str]] = {}
        self._held: dict[str, dict[str, Any]] = {}  # records kept in memory only
        self._collect = False

    # -- life --------------------------------------------------------------------------------

    def start(self, wait_s: float) -> None:
        """Start building the index in a thread; wait up to ``wait_s`` for it."""
        self._thread = threading.Thread(target=self._run, name="conch-changes", daemon=True)
        self._thread.start()
        self._ready.wait(wait_s)

    def wait_ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    def close(self) -> None:
        self._stop = True
        if self._wake[1] >= 0:
            os.write(self._wake[1], b"x")  # the thread's select returns now
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            for fd in (self._fd, self._root, *self._wake):
                if fd >= 0:
                    os.close(fd)
            self._fd = self._root = -1
            self._wake = (-1, -1)
        self.store.close()

    @property
    def on(self) -> bool:
        return self.state == "on"

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "workspace": self.workspace}
        if self.reason:
            out["reason"] = self.reason
        if self.state == "on":
            out["files"] = len(self.index)
            out["store_bytes"] = self.store.bytes
        return out

    def root_fd(self) -> int:
        """The workspace's descriptor (held since the start)."""
        return self._root

    def _off(self, reason: str) -> None:
        with self._lock:
            self.state, self.reason = "off", reason
            self.index.clear()
            self._links.clear()
            self._privileged.clear()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._wds.clear()
            self._wd_of.clear()
        log.info("changes: off: %s", reason)

    def _run(self) -> None:
        try:
            self._build()
        except Exception as e:  # never take the server down: tracking is said to be off
            log.exception("changes: the index could not be built")
            self._off(f"the index could not be built: {e}")
        finally:
            self._ready.set()
        while not self._stop and self.state == "on":
            try:
                ready, _, _ = select.select([self._fd, self._wake[0]], [], [], 0.25)
            except (OSError, ValueError):
                return
            if self._stop:
                return
            ready = [r for r in ready if r == self._fd]
            with self._lock:
                if self._fd < 0:
                    return
                self._admit()
                if ready:
                    self._drain()
                if not self._recording():
                    self._refresh_stale()
                if self._collect and not self._recording():
                    self._collect_garbage()

    def _build(self) -> None:
        self._root = os.open(self.workspace, DIR_FLAGS)
        st = os.fstat(self._root)
        self._root_id = (st.st_dev, st.st_ino)
        # count first (stat only): a workspace over the limits is not copied at all
        size = 0
        for count, (_rel, est) in enumerate(self._walk(""), 1):
            if stat.S_ISREG(est.st_mode) and est.st_size <= self.max_file_bytes:
                size += est.st_size
            if count > self.max_files:
                self._off(
                    f"the workspace holds more than changes_max_files ({self.max_files}) entries"
                )
                return
            if self._stop:
                return
        if self.max_store_bytes and size > self.max_store_bytes:
            self._off(
                f"the workspace's files hold {size} bytes, more than changes_max_store_bytes "
                f"({self.max_store_bytes})"
            )
            return
        # watched before listed: what changes meanwhile is queued, and taken in below
        self._fd = inotify.init()
        self._add_tree("", touch=False)
        with self._lock:
            self.state, self.reason = "on", ""
            self._drain()
            self._refresh_stale()
        self._ready.set()

    # -- walking and watching ----------------------------------------------------------------

    def _excluded(self, rel: str) -> bool:
        if not self.exclude:
            return False
        base = rel.rsplit("/", 1)[-1]
        for pat in self.exclude:
            if "/" in pat.strip("/"):
                if fnmatch.fnmatchcase(rel, pat.strip("/")) or fnmatch.fnmatchcase(
                    rel, pat.strip("/") + "/*"
                ):
                    return True
            elif fnmatch.fnmatchcase(base, pat.strip("/")) or any(
                fnmatch.fnmatchcase(p, pat.strip("/")) for p in rel.split("/")
            ):
                return True
        return False

    def _abs(self, rel: str) -> str:
        return os.path.join(self.workspace, rel) if rel else self.workspace

    def _walk(self, top: str) -> Any:
        """(rel, lstat) of every entry under ``top`` (directories before their entries)."""
        stack = [top]
        while stack:
            d = stack.pop()
            try:
                with os.scandir(self._abs(d)) as it:
                    entries = list(it)
            except OSError:
                continue
            for e in entries:
                rel = f"{d}/{e.name}" if d else e.name
                if self._skipped(rel):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                yield rel, st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(rel)

    def _skipped(self, rel: str) -> bool:
        if self.skip and self._abs(rel) in self.skip:
            return True
        return self._excluded(rel)

    def _watch(self, rel: str) -> None:
        if self._fd < 0 or rel in self._wd_of:
            return
        try:
            wd = inotify.add_watch(self._fd, self._abs(rel))
        except OSError as e:
            if e.errno == 28:  # ENOSPC: out of watches
                raise RuntimeError("out of inotify watches (fs.inotify.max_user_watches)") from None
            return  # gone meanwhile: its parent's event says so
        old = self._wds.get(wd)
        if old is not None:
            self._wd_of.pop(old, None)
        self._wds[wd] = rel
        self._wd_of[rel] = wd

    def _add_tree(self, top: str, *, touch: bool) -> None:
        """Watch ``top`` and every directory under it, then list them: what is under it now
        is read into the index (``touch``: and touched for the running jobs)."""
        self._watch(top)
        if touch:
            self._touch(top)
        for rel, st in self._walk(top):
            if self._stop:
                return
            if stat.S_ISDIR(st.st_mode):
                self._watch(rel)
            if touch:
                self._touch(rel)
            else:
                self._set(rel, self._read(rel, st))

    def _drop_tree(self, top: str) -> None:
        """``top`` is gone (or moved away): stop watching under it; touch what the index held
        under it."""
        prefix = top + "/"
        for rel in [r for r in self._wd_of if r == top or r.startswith(prefix)]:
            wd = self._wd_of.pop(rel)
            self._wds.pop(wd, None)
            with contextlib.suppress(OSError):
                inotify.rm_watch(self._fd, wd)
        for rel in [r for r in self.index if r.startswith(prefix)]:
            self._touch(rel)

    def _read(self, rel: str, st: os.stat_result | None = None) -> Entry | None:
        old = self.index.get(rel)
        if st is not None and old is not None and old.unchanged_since(st):
            return old
        return capture(self._root, rel, self.store, self.max_file_bytes)

    def _set(self, rel: str, ent: Entry | None) -> None:
        ent = _no_placeholder(rel, ent)
        old = self.index.get(rel)
        if old is not None and old.nlink > 1:
            paths = self._links.get(old.ino)
            if paths is not None:
                paths.discard(rel)
                if not paths:
                    del self._links[old.ino]
        if ent is None:
            self.index.pop(rel, None)
            self._privileged.discard(rel)
            return
        self.index[rel] = ent
        if ent.nlink > 1 and ent.type == "file":
            self._links.setdefault(ent.ino, set()).add(rel)
        if ent.type == "file" and ent.mode & (stat.S_ISUID | stat.S_ISGID):
            self._privileged.add(rel)
        else:
            self._privileged.discard(rel)

    def privileged(self) -> list[str] | None:
        """The workspace's setuid and setgid files as the index holds them (sorted), or
        ``None`` while the index is not there (building, or tracking is off): then nobody
        knows. No lock (a spawn must not wait for the index thread): copying the set is
        one step under the GIL."""
        if self.state != "on":
            return None
        return sorted(list(self._privileged))

    # -- events --------------------------------------------------------------------------------

    def _drain(self) -> None:
        """Take in every queued event (one empty read when nothing changed)."""
        self._admit()
        if self._fd < 0:
            return
        self._events(inotify.read_all(self._fd))

    def _events(self, events: list[tuple[int, int, int, str]]) -> None:
        for wd, mask, _cookie, name in events:
            if mask & inotify.IN_Q_OVERFLOW:
                self._rescan()
                continue
            base = self._wds.get(wd)
            if mask & inotify.IN_IGNORED:
                if base is not None and self._wd_of.get(base) == wd:
                    del self._wd_of[base]
                self._wds.pop(wd, None)
                continue
            if base is None or not name:
                continue
            rel = f"{base}/{name}" if base else name
            if self._skipped(rel):
                continue
            if mask & inotify.IN_ISDIR:
                if mask & (inotify.IN_DELETE | inotify.IN_MOVED_FROM):
                    self._drop_tree(rel)
                if mask & (inotify.IN_CREATE | inotify.IN_MOVED_TO):
                    self._add_tree(rel, touch=True)
            self._touch(rel)

    def _rescan(self) -> None:
        """Events were lost: compare the whole tree with the index by stat."""
        seen: set[str] = set()
        for rel, st in self._walk(""):
            seen.add(rel)
            if stat.S_ISDIR(st.st_mode):
                self._watch(rel)
            old = self.index.get(rel)
            if old is None or not old.unchanged_since(st):
                self._touch(rel)
        for rel in [r for r in self.index if r not in seen]:
            self._touch(rel)

    def _recording(self) -> bool:
        """Whether a job that keeps a record runs (else changes are read into the index as
        they come: nobody's, or a ``changes: false`` job's)."""
        return any(a.keep for a in self._active)

    def _touch(self, rel: str) -> None:
        if self._early is not None:
            self._early.add(rel)
        if not self._recording():
            self._stale.add(rel)
            return
        was = self.index.get(rel)
        for a in self._active:
            if a.keep and rel not in a.before:
                a.before[rel] = was
        if len(self._active) > 1:
            self._share(rel)
        if was is not None and was.nlink > 1:  # its other names hold the same content
            for other in self._links.get(was.ino, ()):
                if other != rel:
                    for a in self._active:
                        if a.keep:
                            a.before.setdefault(other, self.index.get(other))
                    if len(self._active) > 1:
                        self._share(other)

    def _share(self, rel: str) -> None:
        """``rel`` changed while several jobs ran: each of them may have written it."""
        for a in self._active:
            if not a.keep:
                continue
            others = a.shared.get(rel)
            if others is None:
                others = a.shared[rel] = set()
            others.update(o for o in self._active if o is not a)

    def _refresh_stale(self) -> None:
        while self._stale:
            rel = self._stale.pop()
            self._set(rel, self._read(rel, lstat(self._root, rel)))

    # -- jobs ----------------------------------------------------------------------------------

    def begin(self, job_id: str, *, keep: bool = True) -> Active:
        """A job starts now (call it before its process starts). Waits for the lock at most
        ``BEGIN_WAIT_S`` (the caller is the event loop; the thread taking in a person's
        edits holds it that briefly): while an undo or a large job's end holds it, the job
        joins when it is free (``_admit``). ``keep`` False (``changes: false``): no record
        is kept for it, but it is tracked while it runs all the same, so that the jobs it
        overlaps know that what changed meanwhile may be its."""
        a = Active(job_id, time.time(), keep=keep)
        if self.state != "on":  # (read without the lock: the build holds no lock)
            a.untracked = f"change tracking was {self.state}: {self.reason}"
            return a
        if not self._lock.acquire(timeout=BEGIN_WAIT_S):
            # what is queued now happened before the job: read it here (the kernel hands
            # each event to one reader), to be taken in as nobody's before the job joins
            try:
                early = inotify.read_all(self._fd) if self._fd >= 0 else []
            except OSError:
                early = []
            with self._jlock:
                self._joining.append((early, a))
            return a
        try:
            self._drain()
            self._refresh_stale()
            self._join(a)
        finally:
            self._lock.release()
        return a

    def _join(self, a: Active) -> None:
        if a.cancelled:
            return
        for other in self._active:
            other.overlapping.add(a)
            a.overlapping.add(other)
        self._active.add(a)

    def _admit(self) -> None:
        with self._jlock:
            joining, self._joining = self._joining, []
            forgets, self._forgets = self._forgets, []
        for job_id in forgets:
            self._forget(job_id)
        for early, a in joining:
            self._early = set()
            try:
                self._events(early)
                a.unknown = self._early
            finally:
                self._early = None
            if not self._recording():
                self._refresh_stale()
            self._join(a)
        for a in [a for a in self._active if a.cancelled]:
            self._active.discard(a)

    def rename(self, a: Active, job_id: str) -> None:
        """The job's id, once it has one (its record and others' overlaps name it)."""
        a.job_id = job_id

    def cancel(self, a: Active) -> None:
        """The job's process never started: it leaves the tracked jobs."""
        a.cancelled = True

    def end(self, a: Active) -> dict[str, Any]:
        """The job ended: read what it touched again; its record (saved in the store)."""
        with self._lock:
            self._drain()  # (admits it first, if it joined late)
            if a.untracked is None and a in self._active and a.keep:
                self._active.discard(a)
                record = self._record(a)
                # (others may hold it: keep it small)
                a.before, a.overlapping, a.shared = {}, set(), {}
            else:  # (nothing kept: `changes` finds no record for it)
                self._active.discard(a)
                a.overlapping = set()
                if not self._recording():
                    self._refresh_stale()
                return _record_shell(a.job_id, a.started)
            self._keep(a.job_id, record)
            return record

    def end_quick(self, a: Active) -> dict[str, Any] | None:
        """``end`` on the caller's thread when the job touched nothing and nothing is queued
        (the common case: no thread hop, no file written); None when ``end`` must run."""
        if a.untracked is not None or not self._lock.acquire(blocking=False):
            return None
        try:
            if a not in self._active or a.before or self._fd < 0 or self._joining:
                return None
            if select.select([self._fd], [], [], 0)[0]:
                return None
            self._active.discard(a)
            record = _record_shell(a.job_id, a.started)
            if not a.keep:  # (changes: false: nothing kept)
                a.overlapping = set()
                return record
            record["overlapping_jobs"] = sorted(o.job_id for o in a.overlapping)
            self._keep(a.job_id, record)
            return record
        finally:
            self._lock.release()

    def _record(self, a: Active) -> dict[str, Any]:
        record = _record_shell(a.job_id, a.started)
        before = a.before
        after: dict[str, Entry | None] = {}
        todo = list(before)
        while todo:
            rel = todo.pop()
            if rel in after:
                continue
            ent = _no_placeholder(rel, capture(self._root, rel, self.store, self.max_file_bytes))
            after[rel] = ent
            self._set(rel, ent)
            if ent is not None and ent.nlink > 1 and ent.type == "file":
                for other in self._names(ent):  # written through another name
                    if other not in before:
                        before[other] = self.index.get(other)
                        todo.append(other)
        # a name linked while the index looked elsewhere (the kernel reports a new link to
        # the directory, not the file's other names' count): one file, whatever it said
        linked = {e.ino for e in before.values() if e and e.type == "file" and e.nlink > 1}
        for rel, e in before.items():
            if e is not None and e.type == "file" and e.nlink == 1 and e.ino in linked:
                before[rel] = dataclasses.replace(e, nlink=2)
        files = []
        for rel in sorted(a.unknown):
            record["not_covered"].append(
                {
                    "path": rel,
                    "reason": "changed as the job started, while the tracker was busy: what "
                    "it held before the job is not known",
                }
            )
        for rel in sorted(before):
            if rel in a.unknown:
                continue
            b, c = before[rel], after.get(rel)
            if b is None and c is None:
                continue
            if b is not None and b.same(c):
                continue
            files.append([rel, b.to_json() if b else None, c.to_json() if c else None])
            for ent in (b, c):
                if ent is None:
                    continue
                if ent.type not in ("file", "dir", "symlink"):
                    why = f"a {ent.type}: undo " + (
                        "removes it, and cannot make one again"
                        if ent is c
                        else "cannot make it again"
                    )
                    record["not_covered"].append({"path": rel, "reason": why})
                    break
                if ent.type == "file" and not ent.stored:
                    record["not_covered"].append({"path": rel, "reason": ent.missing or "?"})
                    break
        record["files"] = files
        record["overlapping_jobs"] = sorted(o.job_id for o in a.overlapping)
        shared = {
            rel: sorted(o.job_id for o in a.shared[rel]) for rel, _b, _c in files if rel in a.shared
        }
        if shared:
            record["shared"] = shared
        return record

    def _names(self, ent: Entry) -> set[str]:
        """Every indexed name of a file with hard links (a new link: found by one scan)."""
        names = self._links.get(ent.ino, set())
        if len(names) < ent.nlink:
            names = names | {
                r for r, e in self.index.items() if e.ino == ent.ino and e.type == "file"
            }
        return names

    def _keep(self, job_id: str, record: dict[str, Any]) -> None:
        """Save a record; one that holds nothing is kept in memory only (no file per job
        that changed nothing), and so is one the full data dir refused (said in it)."""
        record.setdefault("ended", time.time())
        if not record["files"] and not record["not_covered"]:
            self._held[job_id] = record
            return
        try:
            self.store.save(job_id, record)
            self._held.pop(job_id, None)
        except StoreFull:
            if not record.get("unsaved"):
                record["not_covered"].append(
                    {
                        "path": "",
                        "reason": "the data dir is full: this record is held in memory only "
                        "(lost at a restart)",
                    }
                )
            record["unsaved"] = True
            self._held[job_id] = record
        self.records_oids[job_id] = _oids(record)

    def save_undo(self, job_id: str, record: dict[str, Any]) -> None:
        with self._lock:
            self._keep(job_id, record)

    def forget(self, job_id: str) -> None:
        """The job left retention: its record goes (its contents once nothing names them).
        Never waits for the lock (the engine evicts on the event loop): done by whoever
        holds it next, or now when it is free."""
        with self._jlock:
            self._forgets.append(job_id)
        if self._lock.acquire(blocking=False):
            try:
                self._admit()
            finally:
                self._lock.release()

    def _forget(self, job_id: str) -> None:
        self.store.remove(job_id)
        self._held.pop(job_id, None)
        if self.records_oids.pop(job_id, None):
            self._collect = True

    def load_records(self, retention_s: float) -> None:
        """At start: what earlier runs recorded, under retention."""
        cutoff = time.time() - retention_s
        for job_id, when in list(self.store.records()):
            if when < cutoff:
                self.store.remove(job_id)
                continue
            rec = self.store.load(job_id)
            if rec is not None:
                self.records_oids[job_id] = _oids(rec)

    def _collect_garbage(self) -> None:
        self._collect = False
        live = {e.oid for e in self.index.values() if e.oid is not None and e.stored}
        for oids in self.records_oids.values():
            live |= oids
        self.store.collect(live)

    def record(self, job_id: str) -> dict[str, Any] | None:
        held = self._held.get(job_id)
        return held if held is not None else self.store.load(job_id)

    def expire(self, retention_s: float) -> None:
        """Undo records outlive no job: they go after the retention (an hour by default)."""
        cutoff = time.time() - retention_s
        with self._lock:
            for job_id in [j for j in self.records_oids if j.startswith("u_")]:
                rec = self.record(job_id)
                if rec is None or rec.get("ended", 0) < cutoff:
                    self._forget(job_id)

    def refresh(self, wrote: list[tuple[str, Entry | None]]) -> None:
        """After an undo wrote these paths (each to hold the entry given): the index takes
        them from what was written and a stat, without reading the contents again."""
        with self._lock:
            for rel, ent in wrote:
                st = lstat(self._root, rel)
                if ent is None or st is None:
                    self._set(rel, None if st is None else self._read(rel))
                    continue
                fresh = from_stat(
                    st, oid=ent.oid, target=ent.target, stored=ent.stored, missing=ent.missing
                )
                self._set(rel, fresh if ent.same(fresh) else self._read(rel))
            self._drain()
            if not self._recording():
                self._refresh_stale()

    def settle_now(self) -> None:
        """Take in what is queued now (tests, and callers that hold no lock)."""
        with self._lock:
            self.settle()

    def settle(self) -> None:
        """Take in what is queued (the caller holds the lock)."""
        self._drain()
        if not self._recording():
            self._refresh_stale()

    @property
    def lock(self) -> threading.RLock:
        return self._lock


def _no_placeholder(rel: str, ent: Entry | None) -> Entry | None:
    """The empty ``.git`` and ``HEAD`` bwrap's fence makes at the workspace's top
    (containment/gitdir.py) are the fence's, not a job's: they count as nothing."""
    if rel in gitdir.NAMES and ent is not None and ent.type == "dir" and ent.mode == gitdir.MARK:
        return None
    return ent


def _record_shell(job_id: str, started: float) -> dict[str, Any]:
    return {
        "v": 1,
        "job_id": job_id,
        "started": started,
        "files": [],
        "not_covered": [],
        "overlapping_jobs": [],
    }


def _oids(record: dict[str, Any]) -> set[str]:
    out = set()
    for _rel, b, a in record.get("files", ()):
        for ent in (b, a):
            if ent and ent.get("stored") and ent.get("oid"):
                out.add(ent["oid"])
    return out


def counts(record: dict[str, Any]) -> dict[str, int]:
    n = {"added": 0, "modified": 0, "deleted": 0}
    for _rel, b, a in record.get("files", ()):
        k = change_kind(Entry.from_json(b), Entry.from_json(a))
        n["modified" if k == "type_changed" else k] += 1
    return n


__all__ = ["OUTSIDE", "Active", "Tracker", "counts", "from_stat"]
