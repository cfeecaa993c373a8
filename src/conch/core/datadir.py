"""The data directory: 0700, owned by us, never followed through symlinks; logs are 0600."""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from conch.errors import ConchError

LOG_NAME = re.compile(r"^\d{8}-\d{6}-[js]_[0-9a-f]{10}\.(log|sh)$")


log = logging.getLogger("conch.datadir")


class DataDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.tmp = root / "tmp"

    def prepare(self) -> None:
        for d in (self.root, self.logs, self.tmp):
            _ensure_private_dir(d)

    def new_file(self, subdir: Path, object_id: str, suffix: str) -> tuple[str, int]:
        """Create a fresh 0600 file (O_EXCL, O_NOFOLLOW); returns (path, read-write fd)."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = str(subdir / f"{stamp}-{object_id}.{suffix}")
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        flags |= getattr(os, "O_NOFOLLOW", 0)
        try:
            try:
                fd = os.open(path, flags, 0o600)
            except FileNotFoundError:  # the data dir was removed under us (a tmp cleaner)
                self.prepare()
                fd = os.open(path, flags, 0o600)
        except OSError as e:
            raise ConchError(
                "capacity",
                f"cannot create a file in Conch's data dir {subdir}: {e.strerror or e} "
                "(a full or read-only disk?)",
                retryable=True,
            ) from None
        return path, fd

    def remove_expired(self, ttl_s: int) -> int:
        """Remove Conch's own files older than ttl_s; never other names, never symlinks."""
        cutoff = time.time() - ttl_s
        removed = 0
        for d in (self.logs, self.tmp):
            try:
                entries = list(os.scandir(d))
            except OSError:
                continue
            for e in entries:
                if not LOG_NAME.match(e.name):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                # tmp files (scripts) outlive their job only if a server died: a day is plenty
                limit = min(cutoff, time.time() - 86400) if d == self.tmp else cutoff
                if st.st_mtime < limit:
                    try:
                        os.unlink(e.path)
                        removed += 1
                    except OSError:
                        pass
        return removed


def _ensure_private_dir(path: Path) -> None:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(path.parent, mode=0o700, exist_ok=True)
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{path} is not a directory (symlinks are not followed)")
    if st.st_uid != os.getuid():
        raise OSError(f"{path} is owned by another user")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)


class LogPool:
    """Log files created ahead of need, each with the random job id it will belong to.

    Creating a file costs a journal write (about a millisecond on a virtual disk), which would
    otherwise sit on every exec's critical path; a background thread keeps a few ready.
    """

    def __init__(self, data: DataDir, new_id: Callable[[], str], spares: int = 8) -> None:
        self._data = data
        self._new_id = new_id
        self._spares: deque[tuple[str, str, int]] = deque()
        self._target = spares
        self._lock = threading.Lock()
        self._refilling = False
        self._closed = False

    def _make(self) -> tuple[str, str, int]:
        job_id = self._new_id()
        path, fd = self._data.new_file(self._data.logs, job_id, "log")
        return job_id, path, fd

    def take(self) -> tuple[str, str, int]:
        """(job_id, path, write fd) — from the pool, or made now if it ran dry. A spare whose
        file is gone (the data dir was removed) would take output nobody can read: then every
        spare goes, and the log is made anew (the data dir with it)."""
        with self._lock:
            item = self._spares.popleft() if self._spares else None
        if item is not None and not os.path.exists(item[1]):
            _discard(item)
            with self._lock:
                stale, self._spares = list(self._spares), deque()
            for old in stale:
                _discard(old)
            item = None
        return item or self._make()

    def refill(self) -> None:
        """Top the pool up (the runtime runs it on a loop turn off the exec's critical path)."""
        with self._lock:
            if self._refilling or self._closed:
                return
            self._refilling = True
        try:
            while True:
                with self._lock:
                    if self._closed or len(self._spares) >= self._target:
                        return
                try:
                    item = self._make()
                except ConchError as e:  # no room now: jobs make their logs as they start
                    log.warning("%s", e.message)
                    return
                with self._lock:
                    if self._closed:
                        _discard(item)
                        return
                    self._spares.append(item)
        finally:
            with self._lock:
                self._refilling = False

    def needs_refill(self) -> bool:
        return not self._closed and len(self._spares) < self._target // 2

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spares, self._spares = list(self._spares), deque()
        for item in spares:
            _discard(item)


def _discard(item: tuple[str, str, int]) -> None:
    _, path, fd = item
    os.close(fd)
    try:
        os.unlink(path)
    except OSError:
        pass
