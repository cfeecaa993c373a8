"""The resources front ends publish (MCP ``resources/*``): the jobs overview, each job's log,
each terminal job's screen and recording (``…/screen``, ``…/cast``), and what the active
profiles add (``Profile.resources``). No MCP import."""

from __future__ import annotations

import re
from typing import Any

from conch.core import Engine, screen_text
from conch.errors import ConchError
from conch.tools.registry import ToolRegistry
from conch.tools.views import LOG_URI_TEMPLATE, log_text, log_uri, overview_markdown

__all__ = [
    "JOBS_RESOURCE",
    "JOBS_URI",
    "LOG_URI_TEMPLATE",
    "job_uri",
    "log_text",
    "log_uri",
    "parse_job_uri",
    "parse_log_uri",
]

JOBS_URI = "conch://jobs"
_LOG_URI = re.compile(r"^conch://jobs/([^/]+)/log$")
_TERMINAL_URI = re.compile(r"^conch://jobs/([^/]+)/(screen|cast)$")
_SESSION_URI = re.compile(r"^conch://shells/([^/]+)/cast$")
SCREEN_URI_TEMPLATE = "conch://jobs/{job_id}/screen"
CAST_URI_TEMPLATE = "conch://jobs/{job_id}/cast"
SESSION_CAST_URI_TEMPLATE = "conch://shells/{shell_id}/cast"
CAST_MIME = "application/x-asciicast"
_TERMINAL_MODES = ("pty", "shell")


JOBS_RESOURCE: dict[str, Any] = {
    "uri": JOBS_URI,
    "name": "jobs",
    "title": "Conch jobs and shells",
    "description": "Markdown overview of running and recent jobs and open shells.",
    "mimeType": "text/markdown",
}


def parse_log_uri(uri: str) -> str | None:
    """The job id of a ``conch://jobs/{job_id}/log`` URI, else None."""
    m = _LOG_URI.match(uri)
    return m.group(1) if m else None


def parse_job_uri(uri: str) -> tuple[str, str] | None:
    """(id, kind) of one job's or shell's resource URI, else None: a job's ``log``,
    ``screen`` or ``cast``, a shell's ``session``."""
    m = _LOG_URI.match(uri)
    if m is not None:
        return m.group(1), "log"
    m = _TERMINAL_URI.match(uri)
    if m is not None:
        return m.group(1), m.group(2)
    m = _SESSION_URI.match(uri)
    return (m.group(1), "session") if m is not None else None


def job_uri(object_id: str, kind: str) -> str:
    """The URI of a job's ``log``, ``screen`` or ``cast``, or a shell's ``session``."""
    if kind == "session":
        return SESSION_CAST_URI_TEMPLATE.format(shell_id=object_id)
    return f"conch://jobs/{object_id}/{kind}"


def resource_list(
    rt: Engine, registry: ToolRegistry, *, seed_only: bool = False
) -> list[dict[str, Any]]:
    """The concrete resources: the overview and one log per retained job; ``seed_only`` (a
    seed profile served alone): only what that profile's original publishes."""
    if seed_only:
        return [r.describe() for r in registry.resources]
    out = [dict(JOBS_RESOURCE)]
    out += [r.describe() for r in registry.resources]
    retained = rt.retained()
    for shell_id in dict.fromkeys(j.shell_id for j in retained if j.mode == "shell"):
        if shell_id is not None:
            out.append(
                {
                    "uri": job_uri(shell_id, "session"),
                    "name": f"{shell_id} cast",
                    "title": f"Recording of shell {shell_id}",
                    "description": f"Shell {shell_id}'s session (its retained commands in "
                    "turn) as asciicast v2.",
                    "mimeType": CAST_MIME,
                }
            )
    for job in retained:
        out.append(
            {
                "uri": log_uri(job.job_id),
                "name": f"{job.job_id} log",
                "title": f"Log of {job.job_id}" + (f" ({job.name})" if job.name else ""),
                "description": f"Normalized output of job {job.job_id} ({job.state}).",
                "mimeType": "text/plain",
            }
        )
        if job.mode in _TERMINAL_MODES:
            out.append(
                {
                    "uri": SCREEN_URI_TEMPLATE.format(job_id=job.job_id),
                    "name": f"{job.job_id} screen",
                    "title": f"Screen of {job.job_id}",
                    "description": f"The terminal screen of job {job.job_id} now, with the "
                    "cursor position.",
                    "mimeType": "text/plain",
                }
            )
            out.append(
                {
                    "uri": CAST_URI_TEMPLATE.format(job_id=job.job_id),
                    "name": f"{job.job_id} cast",
                    "title": f"Recording of {job.job_id}",
                    "description": f"Job {job.job_id}'s terminal output as asciicast v2.",
                    "mimeType": CAST_MIME,
                }
            )
    return out


def change_uris(registry: ToolRegistry, job_id: str | None) -> list[str]:
    """The resources a runtime change (of ``job_id``, or of the job/shell set) may update."""
    uris = [JOBS_URI, *(r.uri for r in registry.resources)]
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
        },
        {
            "uriTemplate": SCREEN_URI_TEMPLATE,
            "name": "job screen",
            "title": "Terminal screen",
            "description": "A pty or shell job's terminal screen now: its rows, then the "
            "cursor position (a full-screen program as a person sees it).",
            "mimeType": "text/plain",
        },
        {
            "uriTemplate": CAST_URI_TEMPLATE,
            "name": "job recording",
            "title": "Terminal recording",
            "description": "A pty or shell job's output with its timing, as asciicast v2 "
            "(`asciinema play`); no input is recorded.",
            "mimeType": CAST_MIME,
        },
        {
            "uriTemplate": SESSION_CAST_URI_TEMPLATE,
            "name": "shell recording",
            "title": "Shell session recording",
            "description": "A persistent shell's retained commands in turn, with their "
            "timing, as one asciicast v2; no input is recorded.",
            "mimeType": CAST_MIME,
        },
    ]


def read_resource(
    rt: Engine, registry: ToolRegistry, uri: str, *, seed_only: bool = False
) -> tuple[str, str]:
    """(mime type, text) of a resource; ``not_found`` for an unknown URI or job (for
    ``seed_only``, anything the seed profile does not publish)."""
    extra = registry.resource(uri)
    if extra is not None:
        return extra.mime_type, extra.render(rt, registry.state)
    if seed_only:
        raise ConchError("not_found", f"unknown resource {uri!r}")
    if uri == JOBS_URI:
        return "text/markdown", overview_markdown(rt)
    parsed = parse_job_uri(uri)
    if parsed is None:
        raise ConchError("not_found", f"unknown resource {uri!r}")
    some_id, kind = parsed
    if kind == "log":
        return "text/plain", log_text(rt, some_id)
    if kind == "session":
        return CAST_MIME, "".join(line + "\n" for line in rt.shell_cast(some_id))
    if rt.job(some_id).mode not in _TERMINAL_MODES:
        raise ConchError("not_found", f"job {some_id} has no terminal: no {kind}")
    if kind == "screen":
        return "text/plain", screen_text(rt.screen(some_id))
    return CAST_MIME, "".join(line + "\n" for line in rt.cast(some_id))
