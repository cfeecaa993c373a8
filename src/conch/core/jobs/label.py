"""What a job runs and why, as its caller described it: for the dashboard's viewer only.

The front end that receives a call puts it in the call's context (``CallContext.label``,
core/requests.py); the job the call starts keeps it (``Job.label``). Nothing else reads it:
snapshots, summaries, ``list``, ``info``, resources and logs never show it (docs/spec.md §9).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobLabel:
    command: str | None = None
    argv: tuple[str, ...] | None = None
    script: str | None = None
    purpose: str | None = None
