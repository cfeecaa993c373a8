"""The resources front ends publish (MCP ``resources/*``): the jobs overview, each job's log,
and what the active profiles add (``Profile.resources``). No MCP import."""

from __future__ import annotations

import re
from typing import Any

from conch.core import Engine
from conch.errors import ConchError
from conch.tools.registry import ToolRegistry
from conch.tools.views import LOG_URI_TEMPLATE, log_text, log_uri, overview_markdown

__all__ = ["JOBS_RESOURCE", "JOBS_URI", "LOG_URI_TEMPLATE", "log_text", "log_uri", "parse_log_uri"]

JOBS_URI = "conch://jobs"
_LOG_URI = re.compile(r"^conch://jobs/([^/]+)/log$")


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


def resource_list(
    rt: Engine, registry: ToolRegistry, *, seed_only: bool = False
) -> list[dict[str, Any]]:
    """The concrete resources: the overview and one log per retained job; ``seed_only`` (a
    seed profile served alone): only what that profile's original publishes."""
    if seed_only:
        return [r.describe() for r in registry.resources]
    out = [dict(JOBS_RESOURCE)]
    out += [r.describe() for r in registry.resources]
    for job in rt.retained():
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
        }
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
    job_id = parse_log_uri(uri)
    if job_id is None:
        raise ConchError("not_found", f"unknown resource {uri!r}")
    return "text/plain", log_text(rt, job_id)
