"""A job's full output log: raw bytes on disk, streams kept apart and in arrival order.

The file holds the combined stream exactly as it arrived. Which bytes came from which stream is
kept as a list of switch points (one entry each time the stream changes), so memory stays flat
however much a job prints, and either stream can still be read on its own.
"""

from __future__ import annotations

import errno
import os
import time
from array import array
from bisect import bisect_right
from typing import Protocol

STDOUT, STDERR = 0, 1
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


class Files(Protocol):
    """Where a finished log is opened again and removed (the data dir, held by descriptor)."""

    def open_read(self, path: str) -> int: ...

    def unlink(self, path: str) -> None: ...

    # the total of the logs (max_total_log_bytes): how much of a write fits, what was kept,
    # what was removed, and how a cut is worded
    def log_room(self, n: int) -> int: ...

    def log_written(self, n: int) -> None: ...

    def log_removed(self, n: int) -> None: ...

    def logs_full_reason(self) -> str: ...


class JobLog:
    def __init__(self, path: str, fd: int, cap: int, files: Files | None = None) -> None:
        """``fd``: the file, opened read-write (reads use pread, so they never move it);
        ``files``: how to reach the file again once ``fd`` is closed (by path when None)."""
        self.path = path
        self._files = files
        self.cap = cap
        self.total = 0
        self.stream_bytes = [0, 0]
        self._fd: int | None = fd  # written sequentially by us alone; read with pread
        self._writable = True
        self._gone = False  # closed for good (runtime closed, or the log was evicted)
        self._last_stream = -1
        # per stream: segment start in stream coordinates, and in combined coordinates
        self._seg_s: tuple[array[int], array[int]] = (array("q"), array("q"))
        self._seg_c: tuple[array[int], array[int]] = (array("q"), array("q"))
        # output that arrived but could not be written (a full disk, the file gone): counted,
        # never silently dropped, and the job's pipe is still drained (docs/spec.md §5 style marker)
        self.lost_bytes = 0
        self.lost_reason = ""
        self.unreadable = ""  # why the finished log's file cannot be opened (it was removed)
        self.last_output = time.monotonic()  # when output last arrived (made: the log's birth)
        self._removed = 0  # of `total`, how much the data dir's total no longer counts

    @property
    def full(self) -> bool:
        return self.total >= self.cap

    @property
    def closed(self) -> bool:
        """No more output can arrive."""
        return not self._writable

    def _note(self, n: int, stream: int) -> None:
        if stream != self._last_stream:
            self._seg_s[stream].append(self.stream_bytes[stream])
            self._seg_c[stream].append(self.total)
            self._last_stream = stream
        self.total += n
        self.stream_bytes[stream] += n
        self.last_output = time.monotonic()
        if self._files is not None:
            self._files.log_written(n)

    def append(self, data: bytes, stream: int = STDOUT) -> int:
        """Append bytes (up to the cap); returns how many were kept."""
        if not self._writable or self._fd is None:
            return 0
        data = data[: max(0, self.cap - self.total)]
        if data and self._files is not None:
            # the logs' total cap: finished jobs make way first (which may evict this very
            # log, a finished job's with a lingering writer); what does not fit is lost, said
            room = self._files.log_room(len(data))
            if room < len(data):
                self.lost_bytes += len(data) - room
                self.lost_reason = self._files.logs_full_reason()
                data = data[:room]
            if self._fd is None:
                return 0
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._fd, view)
            except OSError as e:  # ENOSPC, EDQUOT, EIO: these bytes are lost, the next may not
                self.lost_bytes += len(view)
                self.lost_reason = f"{e.strerror or e} ({errno.errorcode.get(e.errno or 0, '?')})"
                break
            self._note(n, stream)
            view = view[n:]
        return len(data)

    def append_from_fd(self, fd: int, stream: int, chunk: int = 1 << 20) -> int:
        """Move whatever can be read from fd right now into the log.

        Returns bytes moved, 0 at EOF; raises BlockingIOError when nothing is ready.
        """
        if not self._writable or self._fd is None:
            return 0
        room = self.cap - self.total
        if room <= 0:
            return 0
        data = os.read(fd, min(chunk, room))
        if data:
            self.append(data, stream)
        return len(data)

    def size(self, stream: int | None = None) -> int:
        return self.total if stream is None else self.stream_bytes[stream]

    def read(self, start: int, end: int, stream: int | None = None) -> bytes:
        """Bytes [start, end) of the combined log, or of one stream.

        A finished log holds no descriptor (docs/spec.md §2: the server's descriptors stay flat
        however many jobs are retained): each read opens the file, preads and closes it again.
        """
        if end <= start or self._gone:
            return b""
        if self._fd is not None:
            return self._read(self._fd, start, end, stream)
        try:
            if self._files is not None:
                fd = self._files.open_read(self.path)
            else:
                fd = os.open(self.path, _READ_FLAGS)
        except OSError as e:
            self.unreadable = e.strerror or str(e)
            return b""
        try:
            return self._read(fd, start, end, stream)
        finally:
            os.close(fd)

    def reader(self) -> int:
        """A descriptor of its own to read the log with (another thread may use it while
        this one closes its own); the caller closes it. Raises OSError."""
        if self._gone:
            raise OSError("the log was closed")
        if self._fd is not None:
            return os.dup(self._fd)
        try:
            if self._files is not None:
                return self._files.open_read(self.path)
            return os.open(self.path, _READ_FLAGS)
        except OSError as e:
            self.unreadable = e.strerror or str(e)
            raise

    def _read(self, fd: int, start: int, end: int, stream: int | None) -> bytes:
        if stream is None:
            return os.pread(fd, end - start, start)
        parts = []
        seg_s, seg_c = self._seg_s[stream], self._seg_c[stream]
        i = max(0, bisect_right(seg_s, start) - 1)
        pos = start
        while pos < end and i < len(seg_s):
            seg_end = seg_s[i + 1] if i + 1 < len(seg_s) else self.stream_bytes[stream]
            take_end = min(end, seg_end)
            if take_end > pos:
                c = seg_c[i] + (pos - seg_s[i])
                parts.append(os.pread(fd, take_end - pos, c))
                pos = take_end
            i += 1
        return b"".join(parts)

    def close_writer(self) -> None:
        """No more output will come: release the descriptor (reads reopen the file)."""
        self._writable = False
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        self._writable = False
        self._gone = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def unlink(self) -> None:
        self.close()
        if self._files is not None:
            self._files.unlink(self.path)
            self._files.log_removed(self.total - self._removed)
            self._removed = self.total
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
