"""The read-only dashboard: one HTML page that polls two JSON endpoints, so a person can watch
what an agent is doing (jobs, shells, each job's log as it grows)."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from conch.core.jobs.snapshot import summary
from conch.core.output import window as win
from conch.core.output.utf8 import boundary_at_or_after
from conch.errors import ConchError
from conch.tools.views import jobs_newest_first

if TYPE_CHECKING:
    from conch.runtime import Runtime

FIRST_VIEW_BYTES = 64 * 1024
CHUNK_BYTES = 256 * 1024


def jobs_state(rt: Runtime) -> dict[str, Any]:
    shells = rt.shells.summaries() if rt.shells is not None else []
    return {"jobs": [summary(j) for j in jobs_newest_first(rt)], "shells": shells}


def log_chunk(rt: Runtime, job_id: str, cursor: int | None) -> dict[str, Any]:
    """Normalized log text from ``cursor`` (or the last 64 KiB) and where to continue."""
    job = rt.job(job_id)
    total = job.log.size()
    start = cursor
    if start is None or start > total or start < 0:
        start = max(0, total - FIRST_VIEW_BYTES)
        if start:
            start += boundary_at_or_after(job.log.read(start, min(total, start + 4)), 0)
    w = win.forward(job.log, start, total, CHUNK_BYTES, stream=None, raw=False, final=job.terminal)
    return {
        "job_id": job.job_id,
        "state": job.state,
        "text": w.text,
        "cursor": start,
        "next_cursor": w.next_cursor,
        "total_bytes": total,
        "skipped": start if cursor is None else 0,
        "more": w.next_cursor < total,
    }


async def api_jobs(request: Request) -> Response:
    rt: Runtime = request.app.state.runtime
    return JSONResponse(jobs_state(rt), headers={"Cache-Control": "no-store"})


async def api_log(request: Request) -> Response:
    rt: Runtime = request.app.state.runtime
    raw = request.query_params.get("cursor")
    cursor = int(raw) if raw is not None and raw.isdigit() else None
    try:
        body = log_chunk(rt, request.path_params["job_id"], cursor)
    except ConchError as e:
        return JSONResponse(e.envelope(), status_code=404)
    return JSONResponse(body, headers={"Cache-Control": "no-store"})


async def page(request: Request) -> Response:
    nonce = secrets.token_urlsafe(16)
    html = PAGE.replace("{{NONCE}}", nonce)
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": f"default-src 'none'; script-src 'nonce-{nonce}'; "
            f"style-src 'nonce-{nonce}'; connect-src 'self'; "
            "frame-ancestors 'none'; base-uri 'none'",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
        },
    )


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Conch</title>
<style nonce="{{NONCE}}">
body{font:14px/1.4 system-ui,sans-serif;margin:0;display:flex;height:100vh;color:#222}
#side{width:42%;overflow:auto;border-right:1px solid #ddd;padding:8px}
#main{flex:1;display:flex;flex-direction:column;padding:8px;min-width:0}
h1{font-size:16px;margin:4px 0 8px}h2{font-size:14px;margin:12px 0 4px}
table{border-collapse:collapse;width:100%}td,th{padding:3px 6px;text-align:left;
border-bottom:1px solid #eee;white-space:nowrap}tr.job{cursor:pointer}tr.sel{background:#eef4ff}
.running{color:#06c;font-weight:600}.bad{color:#b00}.ok{color:#080}
#log{flex:1;overflow:auto;background:#111;color:#ddd;margin:0;padding:8px;
font:12px/1.35 ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}
#head{margin-bottom:6px;color:#555}#err{color:#b00}
</style></head><body>
<div id="side"><h1>Conch <small id="err"></small></h1>
<h2>Jobs</h2><table><thead><tr><th>job</th><th>name</th><th>mode</th><th>state</th>
<th>time</th><th>cwd</th></tr></thead><tbody id="jobs"></tbody></table>
<h2>Shells</h2><table><tbody id="shells"></tbody></table></div>
<div id="main"><div id="head">Select a job to follow its log.</div><pre id="log"></pre></div>
<script nonce="{{NONCE}}">
"use strict";
let selected = null, cursor = null, follow = null;
const $ = (id) => document.getElementById(id);
function cell(tr, text, cls) {
  const td = document.createElement("td"); td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls; tr.appendChild(td);
}
function stateText(j) {
  if (j.state === "exited") return j.signal ? "exited by " + j.signal : "exited " + j.exit_code;
  return j.state + (j.signal ? " (" + j.signal + ")" : "");
}
async function refresh() {
  try {
    const r = await fetch("api/jobs", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    const data = await r.json(); $("err").textContent = "";
    const tb = $("jobs"); tb.replaceChildren();
    for (const j of data.jobs) {
      const tr = document.createElement("tr");
      tr.className = "job" + (j.job_id === selected ? " sel" : "");
      cell(tr, j.job_id); cell(tr, j.name); cell(tr, j.mode);
      cell(tr, stateText(j), j.state === "running" ? "running" : (j.ok ? "ok" : "bad"));
      cell(tr, (j.duration_ms / 1000).toFixed(1) + " s"); cell(tr, j.cwd);
      tr.onclick = () => select(j.job_id); tb.appendChild(tr);
    }
    const sb = $("shells"); sb.replaceChildren();
    for (const s of data.shells) {
      const tr = document.createElement("tr");
      cell(tr, s.shell_id); cell(tr, s.name); cell(tr, s.shell); cell(tr, s.state); cell(tr, s.cwd);
      sb.appendChild(tr);
    }
  } catch (e) { $("err").textContent = "(disconnected)"; }
}
function select(id) {
  selected = id; cursor = null; $("log").textContent = ""; $("head").textContent = id;
  history.replaceState(null, "", "#" + encodeURIComponent(id));
  if (follow) clearTimeout(follow); pull(); refresh();
}
async function pull() {
  const id = selected; if (!id) return;
  let delay = 500;
  try {
    const q = cursor == null ? "" : "?cursor=" + cursor;
    const r = await fetch("api/jobs/" + encodeURIComponent(id) + "/log" + q, {cache: "no-store"});
    if (id !== selected) return;
    if (r.status === 404) { $("head").textContent = id + " (no longer retained)"; return; }
    const d = await r.json();
    const log = $("log"), atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    if (cursor == null && d.skipped)
      log.textContent = "[... " + d.skipped + " earlier bytes not shown ...]\\n";
    log.append(d.text); cursor = d.next_cursor;
    $("head").textContent = id + " · " + d.state + " · " + d.total_bytes + " bytes";
    if (atEnd) log.scrollTop = log.scrollHeight;
    if (d.more) delay = 0;
  } catch (e) { delay = 2000; }
  if (id === selected) follow = setTimeout(pull, delay);
}
refresh(); setInterval(refresh, 1000);
// a link to a job: /#j_… or /#name
if (location.hash.length > 1) select(decodeURIComponent(location.hash.slice(1)));
</script></body></html>
"""
