"""The readable views of the runtime that front ends publish: the jobs overview (Markdown) and
each job's normalized log. MCP serves them as resources, the dashboard as JSON; no MCP import.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from conch.core.jobs.snapshot import summary
from conch.core.output.normalize import normalize
from conch.core.output.utf8 import boundary_at_or_after
from conch.errors import ConchError

if TYPE_CHECKING:
    from conch.core.jobs.job import Job
    from conch.core.runtime import Runtime

JOBS_URI = "conch://jobs"
LOG_URI_TEMPLATE = "conch://jobs/{job_id}/log"
OVERVIEW_TAIL_CHARS = 500
LOG_CAP_BYTES = 1024 * 1024
_LOG_URI = re.compile(r"^conch://jobs/([^/]+)/log$")


def log_uri(job_id: str) -> str:
    return LOG_URI_TEMPLATE.format(job_id=job_id)


def parse_log_uri(uri: str) -> str | None:
    """The job id of a ``conch://jobs/{job_id}/log`` URI, else None."""
    m = _LOG_URI.match(uri)
    return m.group(1) if m else None


def tail_text(job: Job, max_bytes: int) -> tuple[str, int]:
    """Normalized text of the last ``max_bytes`` raw bytes of a job's log, and how many
    bytes before them were left out."""
    size = job.log.size()
    start = max(0, size - max_bytes)
    data = job.log.read(start, size)
    skip = boundary_at_or_after(data, 0) if start > 0 else 0
    return normalize(data[skip:]), start + skip


def job_line(j: dict[str, Any]) -> str:
    """One-line status of a job summary, e.g. ``exited 0 · 12 ms``."""
    state = j["state"]
    if state == "exited":
        what = f"exited {j['exit_code']}" if j.get("signal") is None else f"exited by {j['signal']}"
    else:
        what = state + (f" ({j['signal']})" if j.get("signal") else "")
    return f"{what} · {j['duration_ms']} ms"


def _fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}text\n{text}{'' if text.endswith(chr(10)) else chr(10)}{ticks}"


def overview_markdown(rt: Runtime) -> str:
    """Markdown overview of jobs (running first, then recent) and shells; the last
    ``OVERVIEW_TAIL_CHARS`` characters of each job's normalized output."""
    rt.jobs.evict()
    jobs = list(rt.jobs)
    shells = rt.shells.summaries() if rt.shells is not None else []
    running = sum(1 for j in jobs if not j.terminal)
    lines = [
        "# Conch jobs",
        "",
        f"{running} running, {len(jobs) - running} finished, {len(shells)} shell(s) open.",
        "",
    ]
    if shells:
        lines += ["## Shells", ""]
        for sh in shells:
            name = f" ({sh['name']})" if sh.get("name") else ""
            lines.append(
                f"- `{sh.get('shell_id')}`{name} {sh.get('shell')} · {sh.get('state')} · "
                f"cwd `{sh.get('cwd')}`"
            )
        lines.append("")
    if jobs:
        lines += ["## Jobs", ""]
        ordered = sorted(jobs, key=lambda j: (j.terminal, -j.started_at.timestamp()))
        for job in ordered:
            s = summary(job)
            name = f" ({job.name})" if job.name else ""
            where = f" · shell `{job.shell_id}`" if job.shell_id else ""
            lines.append(f"### `{job.job_id}`{name} — {job_line(s)}")
            lines.append(
                f"{job.mode}{where} · started {s['started_at']} · cwd `{job.cwd}` · "
                f"{s['total_bytes']} bytes · log `{log_uri(job.job_id)}`"
            )
            text, _ = tail_text(job, OVERVIEW_TAIL_CHARS * 4)
            text = text[-OVERVIEW_TAIL_CHARS:]
            lines += ["", _fence(text) if text else "(no output)", ""]
    elif not shells:
        lines.append("No jobs yet.")
    return "\n".join(lines).rstrip() + "\n"


def log_text(rt: Runtime, job_id: str, cap: int = LOG_CAP_BYTES) -> str:
    """A job's normalized log; longer logs show the last ``cap`` bytes after a note."""
    job = rt.job(job_id)
    text, omitted = tail_text(job, cap)
    if omitted:
        return (
            f"[... first {omitted} bytes omitted; read job {job.job_id} with a cursor to "
            f"see them ...]\n" + text
        )
    return text


def resource_list(rt: Runtime, *, seed_only: bool = False) -> list[dict[str, Any]]:
    """The concrete resources: the overview and one log per retained job; ``seed_only`` (a
    seed profile served alone): only what that profile's original publishes."""
    if seed_only:
        return [desc for desc, _ in _profile_resources(rt).values()]
    out = [
        {
            "uri": JOBS_URI,
            "name": "jobs",
            "title": "Conch jobs and shells",
            "description": "Markdown overview of running and recent jobs and open shells.",
            "mimeType": "text/markdown",
        }
    ]
    out += [desc for desc, _ in _profile_resources(rt).values()]
    for job in rt.jobs:
        out.append(
            {
                "uri": log_uri(job.job_id),
                "name": f"{job.job_id} log",
                "title": f"Log of {job.job_id}" + (f" ({job.name})" if job.name else ""),
                "description": f"Normalized output of job {job.job_id} ({job.state}).",
                "mimeType": "text/plain",
            }
        )
    return out


def _profile_resources(rt: Runtime) -> dict[str, Any]:
    """Resources that compatibility profiles add: uri -> (descriptor, render function)."""
    out: dict[str, Any] = {}
    if "tfbash" in rt.config.profiles:
        from conch.tools.compat.tfbash import (
            OVERVIEW_RESOURCE,
            OVERVIEW_URI,
            tfbash_overview_markdown,
        )

        out[OVERVIEW_URI] = (dict(OVERVIEW_RESOURCE), tfbash_overview_markdown)
    return out


def change_uris(rt: Runtime, job_id: str | None) -> list[str]:
    """The resources a runtime change (of ``job_id``, or of the job/shell set) may update."""
    uris = [JOBS_URI, *_profile_resources(rt)]
    if job_id is not None:
        uris.append(log_uri(job_id))
    return uris


def resource_templates() -> list[dict[str, Any]]:
    return [
        {
            "uriTemplate": LOG_URI_TEMPLATE,
            "name": "job log",
            "title": "Job log",
            "description": "Normalized output of a job (the last 1 MiB).",
            "mimeType": "text/plain",
        }
    ]


def read_resource(rt: Runtime, uri: str, *, seed_only: bool = False) -> tuple[str, str]:
    """(mime type, text) of a resource; ``not_found`` for an unknown URI or job (for
    ``seed_only``, anything the seed profile does not publish)."""
    if seed_only:
        extra = _profile_resources(rt).get(uri)
        if extra is None:
            raise ConchError("not_found", f"unknown resource {uri!r}")
        return "text/markdown", extra[1](rt)
    if uri == JOBS_URI:
        return "text/markdown", overview_markdown(rt)
    extra = _profile_resources(rt).get(uri)
    if extra is not None:
        return "text/markdown", extra[1](rt)
    job_id = parse_log_uri(uri)
    if job_id is None:
        raise ConchError("not_found", f"unknown resource {uri!r}")
    return "text/plain", log_text(rt, job_id)
