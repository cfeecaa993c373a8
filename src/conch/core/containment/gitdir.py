"""The workspace's ``.git`` under bwrap at ``workspace-write``: never written, never
created by a job, whether or not the workspace is a repository's top.

Git takes the nearest ``.git`` above the directory it runs in: a ``.git`` a job makes at the top
of its workspace (a ``config`` with ``core.fsmonitor``, a hook) would run its commands outside
the sandbox at a person's next ``git status`` there, also when the workspace is a subdirectory
of a repository. bwrap binds ``<workspace>/.git`` read-only over itself when there is one; a
bind needs something to bind, so where there is none Conch makes an empty directory there
first (a placeholder) for as long as a sandboxed job of this runtime uses the workspace. Git's
discovery skips a ``.git`` directory that is no repository (no ``HEAD``, ``objects``,
``refs``) and goes on to the parent.

A placeholder is an empty directory with the mode ``MARK`` (the sticky bit says it is one)
owned by the server's user. While a runtime's jobs use it, it holds a shared ``flock`` on it;
a second after the last one is done (so calls back to back do not each make and remove it)
it removes the placeholder if it can take the lock exclusively (no other Conch server's jobs
use it) and it is still an empty placeholder (``rmdir``: a ``git init`` run there meanwhile
keeps it). Any runtime treats a placeholder it finds as its own to remove, so one left by a
server that died goes after the next one's last job. A job that starts checks that the
placeholder is still the one it holds (a person may have removed it) and makes it again if
not; one removed from outside while a job runs is gone for that job (the kernel detaches a
mount whose directory is removed in another namespace), so leave it alone.

The workspace's top can also be made a repository without any ``.git``: git takes a
directory holding ``HEAD``, ``objects`` and ``refs`` (or a ``commondir`` file in place of the
last two) as a bare repository, and its ``config`` (``core.worktree``, ``core.pager``,
``core.fsmonitor``) then runs at a person's next ``git status``, ``git log`` or ``git branch``
there. ``HEAD`` is the one name that takes no substitute, so it gets the same treatment: bound
read-only when there is one, else an empty placeholder directory (which git reads as no
``HEAD``: a directory is no ref) while a sandboxed job uses the workspace (``Placeholders``).

(Landlock needs none of this: its ruleset never grants the workspace directory itself, so no
entry named ``.git`` or ``HEAD`` can be made there: conch/core/containment/landlock/rules.py.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading

#: a placeholder's mode: rwxr-xr-x and the sticky bit, which no ``.git`` of a person's has
MARK = 0o1755


def is_placeholder(st: os.stat_result) -> bool:
    """Whether ``st`` (of a ``.git``, not followed) is a placeholder Conch made."""
    return (
        stat.S_ISDIR(st.st_mode)
        and stat.S_IMODE(st.st_mode) == MARK
        and st.st_uid == os.geteuid()
        and st.st_nlink == 2  # (no subdirectory)
    )


#: the names at the workspace's top that get a placeholder where there is none
NAMES = (".git", "HEAD")


class Placeholders:
    """The placeholders of ``NAMES`` in one workspace, held and released together."""

    def __init__(self, workspace: str) -> None:
        self.each = tuple(Placeholder(workspace, name) for name in NAMES)

    def hold(self) -> None:
        held: list[Placeholder] = []
        try:
            for p in self.each:
                p.hold()
                held.append(p)
        except BaseException:
            for p in held:
                p.release()
            raise

    def release(self) -> None:
        for p in self.each:
            p.release()

    def close(self) -> None:
        for p in self.each:
            p.close()


class Placeholder:
    """``<workspace>/<name>`` (``.git``, ``HEAD``) while a sandboxed bwrap job of one runtime
    uses the workspace."""

    #: how long a placeholder no job uses stays, for the next job (removing a directory
    #: costs the filesystem a few milliseconds: calls back to back would each pay it)
    LINGER_S = 1.0

    def __init__(self, workspace: str, name: str = ".git") -> None:
        self.path = os.path.join(workspace, name)
        self._lock = threading.Lock()
        self._users = 0
        self._fd = -1  # the placeholder's (shared lock held) while it is there for us
        self._timer: threading.Timer | None = None

    def hold(self) -> None:
        """One more job uses the workspace: the name is there when this returns (made if
        there was none), unless none can be made (then no job of the same user, which has
        fewer rights, can make one either). A symbolic link of the name is ``ValueError``:
        a bind follows it, so the link itself could be replaced."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._fd >= 0 and not self._in_place():  # (removed from outside meanwhile)
                os.close(self._fd)
                self._fd = -1
            if self._fd < 0:
                self._fd = self._take()
            self._users += 1

    def release(self) -> None:
        """One job fewer: ``LINGER_S`` after the last one's end the placeholder goes (see
        the module), unless a job holds it again meanwhile."""
        with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users == 0 and self._fd >= 0:
                self._timer = threading.Timer(self.LINGER_S, self._expire)
                self._timer.daemon = True
                self._timer.start()

    def close(self) -> None:
        """The runtime ends: the placeholder goes now, whatever holds are left (a spawn
        that failed)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._users = 0
            self._drop()

    def _expire(self) -> None:
        with self._lock:
            if self._users == 0:
                self._timer = None
                self._drop()

    def _in_place(self) -> bool:
        try:
            now, st = os.lstat(self.path), os.fstat(self._fd)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)

    def _take(self) -> int:
        """Make the placeholder if there is no ``.git``; when the ``.git`` is one (made now or
        earlier, by this server or another), its descriptor with a shared lock; else -1."""
        for _ in range(3):
            made = False
            try:
                os.mkdir(self.path, MARK)
                made = True
            except FileExistsError:
                pass
            except OSError:
                return -1  # (a workspace the server cannot write: nor can its jobs)
            try:
                st = os.lstat(self.path)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                raise ValueError(
                    f"the workspace's {os.path.basename(self.path)} ({self.path}) is a "
                    "symbolic link, which the bwrap sandbox cannot keep read-only (a job "
                    "could replace the link)"
                )
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                return -1  # (a file: a gitfile, a person's HEAD: bound as it is)
            try:
                if made:  # (the umask may have taken bits of the mode)
                    os.fchmod(fd, MARK)
                if not is_placeholder(os.fstat(fd)):
                    os.close(fd)
                    return -1  # a repository's (or a person's) .git: bound as it is
                # (waits only while another server's last job removes it)
                fcntl.flock(fd, fcntl.LOCK_SH)
                now = os.lstat(self.path)
                st = os.fstat(fd)
            except OSError:
                os.close(fd)
                continue
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                return fd
            os.close(fd)  # removed meanwhile by another server: make it again
        return -1

    def _drop(self) -> None:
        if self._fd < 0:
            return
        try:
            # another server's jobs still use it (their shared lock): theirs to remove
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if self._in_place() and is_placeholder(os.lstat(self.path)):
                with contextlib.suppress(OSError):  # (ENOTEMPTY: a git init made it a repo)
                    os.rmdir(self.path)
        except OSError:
            pass
        finally:
            os.close(self._fd)
            self._fd = -1
