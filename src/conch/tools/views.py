"""Readable views of a runtime's jobs, shared by the MCP resources, the dashboard and progress
notifications: the tail of a job's log as text, the last line, the jobs newest-first, the
Markdown overview of jobs and shells. No MCP import."""

from __future__ import annotations

from typing import Protocol

from conch.core import (
    Engine,
    JobSummary,
    JobView,
    boundary_at_or_after,
    job_summary,
    normalize,
)

OVERVIEW_TAIL_CHARS = 500
LOG_CAP_BYTES = 1024 * 1024
LOG_URI_TEMPLATE = "conch://jobs/{job_id}/log"


def log_uri(job_id: str) -> str:
    return LOG_URI_TEMPLATE.format(job_id=job_id)


def tail_text(job: JobView, max_bytes: int) -> tuple[str, int]:
    """Normalized text of the last ``max_bytes`` raw bytes of a job's log, and how many
    bytes before them were left out."""
    size = job.log.size()
    start = max(0, size - max_bytes)
    data = job.log.read(start, size)
    skip = boundary_at_or_after(data, 0) if start > 0 else 0
    return normalize(data[skip:]), start + skip


def job_line(j: JobSummary) -> str:
    """One-line status of a job summary, e.g. ``exited 0 · 12 ms``."""
    state = j["state"]
    if state == "exited":
        what = f"exited {j['exit_code']}" if j.get("signal") is None else f"exited by {j['signal']}"
    else:
        what = state + (f" ({j['signal']})" if j.get("signal") else "")
    return f"{what} · {j['duration_ms']} ms"


def fence(text: str) -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}text\n{text}{'' if text.endswith(chr(10)) else chr(10)}{ticks}"


def overview_markdown(rt: Engine) -> str:
    """Markdown overview of jobs (running first, then recent) and shells; the last
    ``OVERVIEW_TAIL_CHARS`` characters of each job's normalized output."""
    jobs = jobs_newest_first(rt)
    shells = rt.shell_summaries()
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
        for job in jobs:
            s = job_summary(job)
            name = f" ({job.name})" if job.name else ""
            where = f" · shell `{job.shell_id}`" if job.shell_id else ""
            lines.append(f"### `{job.job_id}`{name} — {job_line(s)}")
            lines.append(
                f"{job.mode}{where} · started {s['started_at']} · cwd `{job.cwd}` · "
                f"{s['total_bytes']} bytes · log `{log_uri(job.job_id)}`"
            )
            text, _ = tail_text(job, OVERVIEW_TAIL_CHARS * 4)
            text = text[-OVERVIEW_TAIL_CHARS:]
            lines += ["", fence(text) if text else "(no output)", ""]
    elif not shells:
        lines.append("No jobs yet.")
    return "\n".join(lines).rstrip() + "\n"


def log_text(rt: Engine, job_id: str, cap: int = LOG_CAP_BYTES) -> str:
    """A job's normalized log; longer logs show the last ``cap`` bytes after a note."""
    job = rt.job(job_id)
    text, omitted = tail_text(job, cap)
    if omitted:
        return (
            f"[... first {omitted} bytes omitted; read job {job.job_id} with a cursor to "
            f"see them ...]\n" + text
        )
    return text


def last_line(job: JobView, limit: int = 200) -> str:
    """The last non-blank line of a job's normalized output (for progress messages)."""
    text, _ = tail_text(job, 4096)
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:limit]
    return ""


class Holder(Protocol):
    def retained(self) -> list[JobView]: ...


def jobs_newest_first(holder: Holder) -> list[JobView]:
    """Retained jobs, running first, then finished, each newest first (expired ones evicted)."""
    return sorted(holder.retained(), key=lambda j: (j.terminal, -j.started_at.timestamp()))
