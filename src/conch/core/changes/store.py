"""The data dir's part for changes, held by descriptor: contents by digest, records by job.

``<data dir>/changes/objects/<sha256>`` holds each kept content once (however many paths and
records name it); ``<data dir>/changes/records/<job id>.json`` one change record. Every file is
made with ``O_EXCL | O_NOFOLLOW`` under a temporary name and renamed into place, so a record
or an object is whole or absent: a full disk fails the write, and the caller says so."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conch.core.datadir import _ensure_private_dir, _open_private_dir

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
_OID = re.compile(r"^[0-9a-f]{64}$")
_RECORD = re.compile(r"^([a-z]_[0-9a-f]{10})\.json$")
JOB_ID = re.compile(r"^[a-z]_[0-9a-f]{10}$")


class StoreFull(OSError):
    """The data dir's disk (or quota) is full, or the store at its cap: nothing partial was
    left behind. ``why`` says which."""

    why = "the data dir is full: its content was not kept"


class StoreAtCap(StoreFull):
    why = "the store is at its cap (twice changes_max_store_bytes): its content was not kept"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Store:
    def __init__(self, data_root: Path, cap: int = 0) -> None:
        self.root = data_root / "changes"
        self.cap = cap  # most bytes the objects may hold (0: no cap)
        self._objects = -1
        self._records = -1
        self._lock = threading.Lock()
        self.bytes = 0  # what the objects hold (counted at open, then kept up to date)
        self._sizes: dict[str, int] = {}

    def open(self) -> None:
        _ensure_private_dir(self.root)
        for sub in ("objects", "records"):
            _ensure_private_dir(self.root / sub)
        top = os.open(self.root, _DIR_FLAGS)
        try:
            # copies of workspace files: a search of a workspace holding the data dir (rg
            # honours .ignore files) must not find them
            with contextlib.suppress(FileExistsError):
                _write_new(top, ".ignore", b"*\n", replace=False)
            self._objects = _open_private_dir(top, "objects", self.root / "objects")
            self._records = _open_private_dir(top, "records", self.root / "records")
        finally:
            os.close(top)
        self._count()

    @property
    def objects_fd(self) -> int:
        return self._objects

    def close(self) -> None:
        for fd in (self._objects, self._records):
            if fd >= 0:
                os.close(fd)
        self._objects = self._records = -1

    def _count(self) -> None:
        sizes: dict[str, int] = {}
        with os.scandir(self._objects) as it:
            for e in it:
                if _OID.match(e.name):
                    with contextlib.suppress(OSError):
                        sizes[e.name] = e.stat(follow_symlinks=False).st_size
                elif e.name.startswith(".tmp-"):
                    with contextlib.suppress(OSError):
                        os.unlink(e.name, dir_fd=self._objects)
        with self._lock:
            self._sizes = sizes
            self.bytes = sum(sizes.values())

    # -- contents ----------------------------------------------------------------------------

    def has(self, oid: str) -> bool:
        with self._lock:
            return oid in self._sizes

    def put(self, data: bytes, oid: str | None = None) -> str:
        """Keep ``data``; its digest. StoreFull when it cannot be kept whole."""
        oid = oid or digest(data)
        if self.has(oid):
            return oid
        if self.cap and self.bytes + len(data) > self.cap:
            raise StoreAtCap(errno.ENOSPC, StoreAtCap.why)
        _write_new(self._objects, oid, data)
        with self._lock:
            if oid not in self._sizes:
                self._sizes[oid] = len(data)
                self.bytes += len(data)
        return oid

    def get(self, oid: str) -> bytes:
        if not _OID.match(oid):
            raise FileNotFoundError(oid)
        fd = os.open(oid, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=self._objects)
        try:
            return _read_fd(fd)
        finally:
            os.close(fd)

    def collect(self, live: set[str]) -> int:
        """Remove every kept content no index or record names; the bytes freed."""
        with self._lock:
            dead = [o for o in self._sizes if o not in live]
        freed = 0
        for oid in dead:
            with contextlib.suppress(OSError):
                os.unlink(oid, dir_fd=self._objects)
            with self._lock:
                freed += self._sizes.pop(oid, 0)
        with self._lock:
            self.bytes -= freed
        return freed

    # -- records -----------------------------------------------------------------------------

    def save(self, job_id: str, record: dict[str, Any]) -> None:
        assert JOB_ID.match(job_id), job_id
        data = json.dumps(record, separators=(",", ":")).encode()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{job_id}.json", dir_fd=self._records)
        _write_new(self._records, f"{job_id}.json", data)

    def load(self, job_id: str) -> dict[str, Any] | None:
        if not JOB_ID.match(job_id):
            return None
        try:
            fd = os.open(
                f"{job_id}.json", os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=self._records
            )
        except OSError:
            return None
        try:
            loaded: dict[str, Any] = json.loads(_read_fd(fd))
            return loaded
        except ValueError:
            return None
        finally:
            os.close(fd)

    def remove(self, job_id: str) -> None:
        if JOB_ID.match(job_id):
            with contextlib.suppress(OSError):
                os.unlink(f"{job_id}.json", dir_fd=self._records)

    def records(self) -> Iterator[tuple[str, float]]:
        """(job id, when written) of every record held."""
        with os.scandir(self._records) as it:
            for e in it:
                m = _RECORD.match(e.name)
                if m:
                    with contextlib.suppress(OSError):
                        yield m.group(1), e.stat(follow_symlinks=False).st_mtime
                elif e.name.startswith(".tmp-"):
                    with contextlib.suppress(OSError):
                        if e.stat(follow_symlinks=False).st_mtime < time.time() - 3600:
                            os.unlink(e.name, dir_fd=self._records)

    def record_bytes(self) -> int:
        total = 0
        with os.scandir(self._records) as it:
            for e in it:
                with contextlib.suppress(OSError):
                    total += e.stat(follow_symlinks=False).st_size
        return total


def _write_new(dir_fd: int, name: str, data: bytes, *, replace: bool = True) -> None:
    tmp = f".tmp-{secrets.token_hex(6)}"
    try:
        fd = os.open(tmp, _NEW, 0o600, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreFull(e.errno, e.strerror) from None
        raise
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as e:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise StoreFull(e.errno, e.strerror) from None
        raise
    os.close(fd)
    if replace:
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return
    try:
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    finally:
        os.unlink(tmp, dir_fd=dir_fd)


def _read_fd(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(chunks)
        chunks.append(b)
