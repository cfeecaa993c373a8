"""Knowing when a process exits, without blocking the event loop, and what its status means."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable


class ExitWatch:
    """Calls on_exit(wait status) once pid exits; reaps it (pidfd on Linux, a thread elsewhere)."""

    def __init__(
        self, pid: int, on_exit: Callable[[int], None], awaited: set[int] | None = None
    ) -> None:
        self.pid = pid
        self._loop = asyncio.get_running_loop()
        self._on_exit = on_exit
        self._awaited = awaited
        self.status: asyncio.Future[int] = self._loop.create_future()
        self._pidfd: int | None = None
        if awaited is not None:
            awaited.add(pid)
        if hasattr(os, "pidfd_open"):
            with contextlib.suppress(OSError):
                self._pidfd = os.pidfd_open(pid)
        if self._pidfd is not None:
            self._loop.add_reader(self._pidfd, self.poll)
        else:
            threading.Thread(
                target=self._wait_thread, name=f"conch-wait-{pid}", daemon=True
            ).start()

    def _wait_thread(self) -> None:
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            status = 0
        self._loop.call_soon_threadsafe(self._exited, status)

    def poll(self) -> None:
        """Reap the process if it has exited (never blocks)."""
        if self.status.done():
            return
        try:
            got, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            got, status = self.pid, 0
        if got == 0:
            return
        self._exited(status)

    def _exited(self, status: int) -> None:
        if self.status.done():
            return
        self.close()
        if self._awaited is not None:
            self._awaited.discard(self.pid)
        self.status.set_result(status)
        self._on_exit(status)

    def close(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None


def decode_status(status: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal number) of a wait status."""
    if status is None:
        return None, None
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return None, None
