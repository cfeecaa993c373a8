"""The runtime's shells as tfbash sees them: the lookups every handler starts with (rejecting in
the original's words), a shell's status, and the shell list and runtime context that
``shell_list`` and the overview resource both show."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conch.core import Engine, ShellSummary, parse_timestamp
from conch.errors import ConchError
from conch.tools.profiles.tfbash.limits import platform_name
from conch.tools.profiles.tfbash.results import Reject

if TYPE_CHECKING:
    from conch.config import Config
    from conch.core import JobView


def shell_summaries(rt: Engine) -> dict[str, ShellSummary]:
    return {s["shell_id"]: s for s in rt.shell_summaries()}


def find_shell(rt: Engine, shell_id: str, *, for_exec: bool = False) -> ShellSummary:
    sh = shell_summaries(rt).get(shell_id)
    if sh is None:
        raise Reject("shell_not_found")
    if sh["state"] in ("closing", "closed"):
        raise Reject("shell_closing")
    if for_exec:
        if sh["state"] == "exited":  # the shell died (e.g. `exit 3`): only close is left
            raise Reject("shell_unavailable", retryable=False)
        if sh["state"] == "starting":  # being rebuilt
            raise Reject("shell_unavailable", retryable=True)
        if sh["state"] == "busy":
            raise Reject("shell_busy")
    return sh


def find_exec(rt: Engine, shell_id: str, exec_id: str) -> JobView:
    try:
        job = rt.job(exec_id)
    except ConchError:
        raise Reject("exec_not_found") from None
    if job.shell_id != shell_id or job.job_id != exec_id:
        raise Reject("exec_not_found")
    return job


def shell_status_of(sh: ShellSummary | None) -> str:
    if sh is None or sh["state"] in ("closing", "closed"):
        return "closing"
    return "error" if sh["state"] == "exited" else "ready"


_LIST_STATUS = {"ready": "ready", "busy": "busy", "exited": "error", "closing": "closing"}


def dialect_of(config: Config) -> str:
    dialect = config.shell or "bash"
    if os.path.isabs(dialect):
        dialect = "zsh" if os.path.basename(dialect).startswith("zsh") else "bash"
    return dialect


def runtime_context(rt: Engine, info: Mapping[str, Any]) -> dict[str, Any]:
    """shell_list's runtime and host context (the overview shows it too)."""
    dialect = dialect_of(rt.config)
    version = next(
        (a.get("version_line") or a["version"] for a in info["shells"] if a["name"] == dialect),
        "",
    )
    return {
        "runtime": {
            "platform": platform_name(),
            "dialect": dialect,
            "shell_version": version,
            "default_cwd": info["default_cwd"],
        },
        "host": {"mode": "standalone", "workspace_root": info["default_cwd"]},
    }


def shell_items(rt: Engine) -> list[dict[str, Any]]:
    items = []
    for sh in shell_summaries(rt).values():
        if sh["state"] == "starting" and not sh.get("job_id"):
            continue  # not registered until its first prompt
        status = "rebuilding" if sh["state"] == "starting" else _LIST_STATUS[sh["state"]]
        cwd = sh.get("cwd")
        items.append(
            {
                "shell_id": sh["shell_id"],
                "status": status,
                "last_known_cwd": os.path.realpath(cwd) if cwd else None,
                "active_exec_id": sh.get("job_id") if status in ("busy", "rebuilding") else None,
                "created_at_ms": round(parse_timestamp(sh["created_at"]).timestamp() * 1000),
            }
        )
    return items
