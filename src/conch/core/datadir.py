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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


class DataDir:
    """Held by descriptor once prepared: every file Conch makes, reads back or removes is
    reached with ``openat`` from the directories opened at start, never by walking the path
    again. A rename under the data dir (or of any directory above it) then changes nothing the
    server writes, serves or removes; the paths stay only as names to show and for the child
    processes that must open a file themselves (a script, a shell's command file)."""

    def __init__(self, root: Path, max_total_log_bytes: int = 0) -> None:
        self.root = root
        self.logs = root / "logs"
        self.tmp = root / "tmp"
        self._fds: dict[str, int] = {}  # str(subdir) -> directory descriptor
        self._lock = threading.Lock()
        # the bytes the logs of this runtime's jobs hold here, against max_total_log_bytes
        # (0: no cap); make_room evicts finished jobs, oldest first, while `logs_over`
        self.log_cap = max_total_log_bytes
        self.log_bytes = 0
        self.make_room: Callable[[], None] | None = None
        self._wanted = 0  # bytes an append waits to write while make_room runs

    # -- the total of the logs (max_total_log_bytes) ---------------------------------------------

    @property
    def logs_over(self) -> bool:
        """The logs hold (or an append wants) more than the cap allows."""
        return self.log_cap > 0 and self.log_bytes + self._wanted > self.log_cap

    def log_room(self, n: int) -> int:
        """How many of ``n`` new log bytes fit under the cap; finished jobs' logs make way
        first (evicted oldest first, as beyond max_jobs)."""
        if not self.log_cap:
            return n
        if self.log_bytes + n > self.log_cap and self.make_room is not None:
            self._wanted = n
            try:
                self.make_room()
            finally:
                self._wanted = 0
        return max(0, min(n, self.log_cap - self.log_bytes))

    def log_written(self, n: int) -> None:
        self.log_bytes += n

    def log_removed(self, n: int) -> None:
        self.log_bytes -= n

    def logs_full_reason(self) -> str:
        """Why output is cut: what a result says of the bytes it lost."""
        return f"the logs of this server's jobs reached max_total_log_bytes ({self.log_cap} bytes)"

    def admit_log(self) -> None:
        """A new job needs room for its log: ``capacity`` when the running jobs' logs alone
        fill the cap (finished ones have made way already)."""
        if self.log_room(1) == 0:
            raise ConchError(
                "capacity",
                f"the logs of this server's jobs hold {self.log_bytes} bytes in {self.logs}, "
                f"at max_total_log_bytes ({self.log_cap}), all of them running jobs': wait "
                "for one to end or stop one (signal), or raise max_total_log_bytes",
                retryable=True,
            )

    def prepare(self) -> None:
        """Make (or check) the three directories and hold them by descriptor."""
        for d in (self.root, self.logs, self.tmp):
            _ensure_private_dir(d)
        # opened from the root's own descriptor, never through a symlink at any step
        root_fd = os.open(self.root, _DIR_FLAGS)
        try:
            fds = {str(d): _open_private_dir(root_fd, d.name, d) for d in (self.logs, self.tmp)}
        finally:
            os.close(root_fd)
        with self._lock:
            old, self._fds = self._fds, fds
        for fd in old.values():
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            old, self._fds = self._fds, {}
        for fd in old.values():
            os.close(fd)

    def _where(self, path: str) -> tuple[int | None, str]:
        """(directory descriptor, name) for a file Conch made; (None, path) for any other."""
        parent, name = os.path.split(path)
        with self._lock:
            return self._fds.get(parent), name if parent in self._fds else path

    def open_read(self, path: str) -> int:
        """A read-only descriptor of one of Conch's files (by the held directory)."""
        dir_fd, name = self._where(path)
        return os.open(name, _READ_FLAGS, dir_fd=dir_fd)

    def exists(self, path: str) -> bool:
        dir_fd, name = self._where(path)
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return False
        return True

    def check_path(self, path: str, fd: int) -> None:
        """A child opens ``path`` itself (a script, a shell's command file): refuse when the
        path no longer names the file behind ``fd`` (the data dir was moved or replaced)."""
        try:
            st = os.stat(path, follow_symlinks=False)
            same = (st.st_dev, st.st_ino) == (lambda f: (f.st_dev, f.st_ino))(os.fstat(fd))
        except OSError:
            same = False
        if not same:
            raise ConchError(
                "spawn_failed",
                f"Conch's data dir {self.root} was moved or replaced while the server ran: "
                f"{path} no longer names the file Conch wrote, so it is not handed to a job "
                "(restart the server to use the data dir at that path)",
            )

    def unlink(self, path: str) -> None:
        dir_fd, name = self._where(path)
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass

    def new_file(self, subdir: Path, object_id: str, suffix: str) -> tuple[str, int]:
        """Create a fresh 0600 file (O_EXCL, O_NOFOLLOW); returns (path, read-write fd)."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        name = f"{stamp}-{object_id}.{suffix}"
        path = str(subdir / name)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        flags |= getattr(os, "O_NOFOLLOW", 0)
        try:
            if not self._fds:
                self.prepare()
            try:
                fd = os.open(name, flags, 0o600, dir_fd=self._fds[str(subdir)])
            except FileNotFoundError:  # the data dir was removed under us (a tmp cleaner)
                self.prepare()
                fd = os.open(name, flags, 0o600, dir_fd=self._fds[str(subdir)])
        except OSError as e:
            raise ConchError(
                "capacity",
                f"cannot create a file in Conch's data dir {subdir}: {e.strerror or e} "
                "(a full or read-only disk?)",
                retryable=True,
            ) from None
        return path, fd

    def write_all(self, fd: int, data: bytes, offset: int = 0) -> None:
        """Write all of ``data`` at ``offset`` into a file Conch made here (a script, a shell's
        command file): a full disk or quota is ``capacity`` naming the data dir, as when no
        file can be made, never an error of Conch's own."""
        view = memoryview(data)
        try:
            while view:
                n = os.pwrite(fd, view, offset)
                view, offset = view[n:], offset + n
        except OSError as e:
            raise ConchError(
                "capacity",
                f"cannot write a file in Conch's data dir {self.root}: {e.strerror or e} "
                "(a full or read-only disk?)",
                retryable=True,
            ) from None

    def remove_expired(self, ttl_s: int) -> int:
        """Remove Conch's own files older than ttl_s; never other names, never symlinks."""
        cutoff = time.time() - ttl_s
        removed = 0
        for d in (self.logs, self.tmp):
            dir_fd = self._fds.get(str(d))
            if dir_fd is None:
                continue
            try:
                with os.scandir(dir_fd) as it:
                    entries = list(it)
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
                        os.unlink(e.name, dir_fd=dir_fd)
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


def _open_private_dir(parent_fd: int, name: str, shown: Path) -> int:
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        os.close(fd)
        raise OSError(f"{shown} changed while it was opened (owner or mode)")
    return fd


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
        if item is not None and not self._data.exists(item[1]):
            self._discard(item)
            with self._lock:
                stale, self._spares = list(self._spares), deque()
            for old in stale:
                self._discard(old)
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
                        self._discard(item)
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
            self._discard(item)

    def _discard(self, item: tuple[str, str, int]) -> None:
        _, path, fd = item
        os.close(fd)
        self._data.unlink(path)
