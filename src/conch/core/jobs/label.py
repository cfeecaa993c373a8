"""What a job runs and why, as its caller described it: for the dashboard's viewer only.

The front end that receives a call sets ``current_label`` around it; a job created while it is
set keeps it (``Job.label``). Nothing else reads it: snapshots, summaries, ``list``, ``info``,
resources and logs never show it (SPEC §9).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class JobLabel:
    command: str | None = None
    argv: tuple[str, ...] | None = None
    script: str | None = None
    purpose: str | None = None


current_label: ContextVar[JobLabel | None] = ContextVar("conch_job_label", default=None)
