"""Background tasks: Claude Code's task ids (``b`` and 8 base-36 characters) mapped to Conch
jobs, per runtime; and the working directory Bash keeps between calls."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def new_task_id() -> str:
    return "b" + "".join(secrets.choice(_ALPHABET) for _ in range(8))


@dataclass
class Task:
    task_id: str
    job_id: str
    command: str
    description: str | None


class Tasks:
    """The runtime's background tasks and Bash's working directory (None: the default cwd)."""

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}
        self.cwd: str | None = None

    def add(self, job_id: str, command: str, description: str | None) -> Task:
        while True:
            task_id = new_task_id()
            if task_id not in self._tasks:
                task = self._tasks[task_id] = Task(task_id, job_id, command, description)
                return task

    def get(self, task_id: str) -> Task | None:
        return self._tasks.get(task_id)

    def forget(self, task_id: str) -> None:
        self._tasks.pop(task_id, None)
