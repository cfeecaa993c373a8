"""bash-mcp's six methods on the runtime: ``bash.exec`` is a one-shot runtime job (``wait_ms``
is the yield, ``timeout_ms`` the deadline), ``bash.job_get`` / ``bash.job_cancel`` /
``bash.jobs`` look at the runtime's jobs, ``bash.search`` is the runtime's ripgrep search with
rg's own ``{"text"}`` / ``{"bytes"}`` data, ``bash.info`` the service's identity and limits."""

from __future__ import annotations

import base64
import os
import platform
import sys
from typing import Any

from conch.core import Engine, ExecRequest, SearchRequest, SignalRequest
from conch.errors import ConchError
from conch.tools.context import ToolContext
from conch.tools.profiles.bash_mcp.results import (
    DEFAULT_MAX_OUTPUT_BYTES,
    NOT_FOUND,
    Caps,
    Fail,
    from_conch,
    job_result,
    job_summary,
)

MAX_TIMEOUT_MS = 300000

# the seed's child environment is process.env minus BASH_ENV, ENV, SHELLOPTS, BASHOPTS (Conch
# drops those for every job, docs/spec.md §2) and JEST_WORKER_ID (seed-contracts §3)
INHERIT_NOT = ("JEST_WORKER_ID",)
_CANCEL_EXTRA_MS = 1000


async def _exec(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    if ("command" in args) == ("argv" in args):
        raise Fail("INVALID_ARGUMENT", "Provide exactly one of command or argv.")
    argv = args.get("argv")
    if argv is not None and not argv[0].strip():
        raise Fail("INVALID_ARGUMENT", "argv[0] must not be empty.")
    if "command" in args and not args["command"].strip():
        raise Fail("INVALID_ARGUMENT", "command must not be empty.")
    try:
        req = ExecRequest(
            digest=False,  # the seed's own result shape has no digest
            command=args.get("command"),
            argv=argv,
            cwd=args.get("cwd"),
            stdin=args.get("stdin"),
            timeout_ms=args.get("timeout_ms", 30000),
            yield_ms=args.get("wait_ms", 800),
            output_format=args.get("output_format", "auto"),
            max_output_bytes=0,
        )
        s = await rt.exec(req, ctx.engine_context(inherit_not=INHERIT_NOT))
    except ConchError as e:
        raise from_conch(e) from None
    caps = ctx.profile_state(Caps)
    caps.prune(rt)
    caps[s["job_id"]] = args.get("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES)
    return await job_result(rt, ctx, s["job_id"])


def _job(rt: Engine, job_id: str) -> Any:
    try:
        return rt.job(job_id)
    except ConchError:
        raise Fail("JOB_NOT_FOUND", NOT_FOUND) from None


async def _job_get(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    job = _job(rt, args["job_id"])
    wait_ms = args.get("wait_ms", 0)
    if wait_ms and not job.terminal:
        await job.wait_until(lambda: job.terminal, wait_ms / 1000)
    return await job_result(rt, ctx, job.job_id)


async def _job_cancel(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    job = _job(rt, args["job_id"])
    if not job.terminal:
        # TERM, then KILL after the runtime's grace; answer once the tree is gone
        wait_ms = min(rt.config.kill_grace_ms + _CANCEL_EXTRA_MS, 120_000)
        await rt.signal(SignalRequest(job.job_id, "terminate", wait_ms=wait_ms))
    return await job_result(rt, ctx, job.job_id)


async def _jobs(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    listing = await rt.list()
    return {"success": True, "jobs": [job_summary(j) for j in listing["jobs"]]}


def _data(text: str, b64: str | None) -> tuple[str, dict[str, str]]:
    """rg's own ``{"text"}`` / ``{"bytes"}`` object and the seed's display text."""
    if b64 is None:
        return text, {"text": text}
    return f"[base64:{len(base64.b64decode(b64))}]", {"bytes": b64}


async def _search(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    path = args.get("path")
    if path is not None and not os.path.exists(os.path.join(rt.config.resolved_default_cwd, path)):
        raise Fail("INVALID_ARGUMENT", f"Path does not exist: {path}")
    try:
        r = await rt.search(
            SearchRequest(
                args["pattern"],
                path=path,
                regex=args.get("regex", False),
                ignore_case=args.get("ignore_case", False),
                hidden=args.get("hidden", False),
                glob=args.get("glob"),
                max_matches=args.get("max_matches", 100),
                timeout_ms=args.get("timeout_ms", 10000),
            )
        )
    except ConchError as e:
        if e.code != "search_failed":
            raise from_conch(e) from None
        return {
            "success": False,
            "status": "completed",
            "kind": "search",
            "exit_code": 2,
            "error": e.message,
            "matches": [],
            "count": 0,
            "truncated": False,
            "timed_out": False,
        }
    matches = []
    for m in r["matches"]:
        path_text, path_data = _data(m["path"], m.get("path_base64"))
        text, text_data = _data(m["text"], m.get("text_base64"))
        subs = []
        for sm in m["submatches"]:
            sm_text, sm_data = _data(sm["text"], sm.get("text_base64"))
            subs.append(
                {"start": sm["start"], "end": sm["end"], "text": sm_text, "match_data": sm_data}
            )
        matches.append(
            {
                "path": path_text,
                "path_data": path_data,
                "line_number": m["line"],
                "text": text,
                "text_data": text_data,
                "submatches": subs,
            }
        )
    out: dict[str, Any] = {
        "success": not r["timed_out"],
        "status": "timed_out" if r["timed_out"] else "completed",
        "kind": "search",
        "exit_code": 0 if matches else 1,
        "matches": matches,
        "count": len(matches),
        "truncated": r["truncated"],
        "timed_out": r["timed_out"],
        "duration_ms": r["elapsed_ms"],
    }
    if r["timed_out"]:
        out["code"] = "COMMAND_TIMEOUT"
        out["error"] = "Search timed out."
    return out


_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


async def _info(rt: Engine, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    info = await rt.info()
    machine = platform.machine().lower()
    return {
        "success": True,
        "version": info["version"],
        "upstream": "conch",
        "upstream_version": info["version"],
        "platform": sys.platform,
        "arch": _ARCH.get(machine, machine),
        "cwd": info["default_cwd"],
        "shell": info["bash"] or "/bin/sh",
        "search": {"executable": info["rg"]["path"], "available": info["rg"]["path"] is not None},
        "limits": {
            "max_concurrent": info["limits"]["max_running"],
            "max_jobs": info["limits"]["max_jobs"],
            "retention_ms": info["limits"]["retention_s"] * 1000,
            "max_timeout_ms": MAX_TIMEOUT_MS,
        },
        "execution_isolation": info["containment"],
    }


# name -> (handler, sends progress while it waits)
HANDLERS = {
    "bash.exec": (_exec, True),
    "bash.job_get": (_job_get, True),
    "bash.job_cancel": (_job_cancel, False),
    "bash.jobs": (_jobs, False),
    "bash.search": (_search, False),
    "bash.info": (_info, False),
}
