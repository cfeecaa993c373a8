"""The workspace reached by descriptor: every path is walked from the workspace's own
directory descriptor one component at a time, with ``O_NOFOLLOW | O_DIRECTORY``, so a symlink
anywhere on the way (one an attacker swaps in mid-undo) stops the walk instead of leading
outside; files are read with ``O_NOFOLLOW`` and written under a fresh name in the held
parent, then renamed over the path (a rename replaces a symlink, never writes through it)."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import secrets
import stat
import time
from collections.abc import Iterator

from conch.core.changes.entry import Entry, from_stat
from conch.core.changes.store import Store, StoreFull, digest

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW


class Unsafe(OSError):
    """A path the walk refuses: a symlink or a non-directory where a directory was."""


def parts(rel: str) -> list[str]:
    names = rel.split("/")
    if not rel or any(n in ("", ".", "..") or "\0" in n for n in names):
        raise ValueError(f"not a workspace path: {rel!r}")
    return names


class Dirs:
    """Directories already walked to, by path, for one undo's run of operations (a
    directory held stays the one walked to, wherever it is moved: the undo's writes are
    confined to the workspace by Landlock as well, core/changes/confine.py). One removed is
    dropped, with what was under it."""

    def __init__(self) -> None:
        self.fds: dict[str, int] = {}

    def drop(self, rel: str) -> None:
        for key in [k for k in self.fds if k == rel or k.startswith(rel + "/")]:
            os.close(self.fds.pop(key))

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


@contextlib.contextmanager
def parent(root_fd: int, rel: str, dirs: Dirs | None = None) -> Iterator[tuple[int, str]]:
    """(descriptor of the directory holding ``rel``, its last name): walked without
    following any symlink. FileNotFoundError when a directory on the way is gone; Unsafe
    when one is not a directory (a symlink included)."""
    names = parts(rel)
    if dirs is not None:
        top = "/".join(names[:-1])
        held = dirs.fds.get(top) if top else root_fd
        if held is None:
            with parent(root_fd, rel) as (d, _name):
                held = dirs.fds[top] = os.dup(d)
        yield held, names[-1]
        return
    fd = os.dup(root_fd)
    try:
        for name in names[:-1]:
            try:
                nxt = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Unsafe(e.errno, f"{rel}: {name} is not a directory") from None
                raise
            os.close(fd)
            fd = nxt
        yield fd, names[-1]
    finally:
        os.close(fd)


def lstat(root_fd: int, rel: str) -> os.stat_result | None:
    try:
        with parent(root_fd, rel) as (d, name):
            return os.stat(name, dir_fd=d, follow_symlinks=False)
    except (FileNotFoundError, Unsafe, NotADirectoryError):
        return None


def capture(
    root_fd: int, rel: str, store: Store | None, max_bytes: int, dirs: Dirs | None = None
) -> Entry | None:
    """What ``rel`` holds now (None: nothing), its content kept in ``store`` (None: only
    digested). A path whose parent is gone or is not a directory holds nothing."""
    try:
        with parent(root_fd, rel, dirs) as (d, name):
            return _capture_at(d, name, store, max_bytes)
    except (FileNotFoundError, Unsafe, NotADirectoryError):
        return None


def _capture_at(d: int, name: str, store: Store | None, max_bytes: int) -> Entry | None:
    for _ in range(3):  # a file replaced between the lstat and the open: look again
        try:
            st = os.stat(name, dir_fd=d, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(name, dir_fd=d)
            except OSError:
                continue
            return from_stat(st, target=target)
        if not stat.S_ISREG(st.st_mode):
            return from_stat(st)
        if st.st_size > max_bytes:
            return from_stat(st, missing="over changes_max_file_bytes")
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=d)
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno == errno.ELOOP:
                continue
            return from_stat(st, missing=f"unreadable: {e.strerror}")
        try:
            fst = os.fstat(fd)
            if (fst.st_ino, fst.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(fst.st_mode):
                continue
            if fst.st_size > max_bytes:
                return from_stat(fst, missing="over changes_max_file_bytes")
            data = _read(fd, max_bytes + 1)
        finally:
            os.close(fd)
        if len(data) > max_bytes:
            return from_stat(fst, missing="over changes_max_file_bytes")
        oid = digest(data)
        stored, missing = False, None
        if store is not None:
            try:
                store.put(data, oid)
                stored = True
            except StoreFull as e:
                missing = e.why
        ent = from_stat(fst, oid=oid, stored=stored, missing=missing)
        # the size as read (a file growing meanwhile is read again next time it changes)
        return dataclasses.replace(ent, size=len(data))
    return None


def _read(fd: int, limit: int) -> bytes:
    chunks, n = [], 0
    while n < limit:
        b = os.read(fd, min(1 << 20, limit - n))
        if not b:
            break
        chunks.append(b)
        n += len(b)
    return b"".join(chunks)


# -- writes (undo) -----------------------------------------------------------------------------


def remove(root_fd: int, rel: str, was: Entry, dirs: Dirs | None = None) -> None:
    """Remove what ``rel`` holds (a directory only when empty: its entries are paths of
    their own, removed first, and one nobody recorded makes it fail)."""
    with parent(root_fd, rel, dirs) as (d, name):
        if was.type == "dir":
            if dirs is not None:
                dirs.drop(rel)
            os.rmdir(name, dir_fd=d)
        else:
            os.unlink(name, dir_fd=d)


def put(
    root_fd: int,
    rel: str,
    want: Entry,
    store: Store,
    dirs: Dirs | None = None,
    *,
    keep: bool = False,
) -> int:
    """Make ``rel`` hold ``want`` (a file, a symlink or a directory), its modification time
    too (a directory's is set by ``finish_dir``, once its entries are back): made under a
    fresh name beside it and renamed over it; a directory is made where nothing is.
    ``keep``: a file's descriptor is returned, open (the caller closes it), else -1."""
    with parent(root_fd, rel, dirs) as (d, name):
        if want.type == "dir":
            try:
                os.mkdir(name, 0o700, dir_fd=d)
            except FileExistsError:
                st = os.stat(name, dir_fd=d, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    raise
            fd = os.open(name, DIR_FLAGS, dir_fd=d)
            try:
                os.fchmod(fd, want.mode)
            finally:
                os.close(fd)
            return -1
        tmp = f".conch-undo-{secrets.token_hex(6)}"
        if want.type == "symlink":
            assert want.target is not None
            os.symlink(want.target, tmp, dir_fd=d)
            try:
                if want.mtime:
                    os.utime(tmp, ns=_times(want), dir_fd=d, follow_symlinks=False)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=d)
                raise
            fd = -1
        else:
            assert want.oid is not None
            data = store.get(want.oid)
            fd = os.open(tmp, NEW_FLAGS, 0o600, dir_fd=d)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, want.mode)
                if want.mtime:
                    os.utime(fd, ns=_times(want))
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=d)
                raise
            if not keep:
                os.close(fd)
                fd = -1
        try:
            _rename(d, tmp, name)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        return fd


def link(root_fd: int, rel: str, first: str, written: int, dirs: Dirs | None = None) -> bool:
    """Make ``rel`` another name of the file this undo just wrote at ``first`` (``written``:
    its descriptor, held open so that its inode cannot be freed and its number reused):
    linked under a fresh name beside ``rel``, and renamed over it only when the new name is
    that very file (``first`` may have been swapped meanwhile: a link never follows a
    symlink, and any other file is refused). False, with nothing changed, when it could not
    be (the caller writes a copy instead)."""
    with (
        parent(root_fd, first, dirs) as (src_d, src_name),
        parent(root_fd, rel, dirs) as (d, name),
    ):
        tmp = f".conch-undo-{secrets.token_hex(6)}"
        try:
            os.link(src_name, tmp, src_dir_fd=src_d, dst_dir_fd=d, follow_symlinks=False)
        except OSError as e:
            if e.errno in (errno.EXDEV, errno.EPERM, errno.EACCES, errno.EMLINK, errno.ENOENT):
                return False  # another filesystem, Landlock without REFER, or gone
            raise
        try:
            st, want = os.stat(tmp, dir_fd=d, follow_symlinks=False), os.fstat(written)
            if (st.st_dev, st.st_ino) != (want.st_dev, want.st_ino):
                os.unlink(tmp, dir_fd=d)
                return False
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=d)
            raise
        _rename(d, tmp, name)
        return True


def _rename(d: int, tmp: str, name: str) -> None:
    try:
        os.rename(tmp, name, src_dir_fd=d, dst_dir_fd=d)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=d)
        raise


def _times(want: Entry) -> tuple[int, int]:
    """(access, modification) times to set: the one recorded, and now (not recorded)."""
    return time.time_ns(), want.mtime


def finish_dir(
    root_fd: int, rel: str, mode: int, mtime: int | None, dirs: Dirs | None = None
) -> None:
    """A directory's own mode, and its modification time when given (last: every entry
    made or removed in it moves it)."""
    with parent(root_fd, rel, dirs) as (d, name):
        fd = os.open(name, DIR_FLAGS, dir_fd=d)
        try:
            os.fchmod(fd, mode)
            if mtime:
                os.utime(fd, ns=(time.time_ns(), mtime))
        finally:
            os.close(fd)


__all__ = [
    "StoreFull",
    "Unsafe",
    "capture",
    "finish_dir",
    "link",
    "lstat",
    "parent",
    "put",
    "remove",
]
