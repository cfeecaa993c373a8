"""The dashboard: one HTML page that polls JSON routes, so a person can watch what an agent is
doing — jobs and shells, what each job runs and why, each job's log as it grows, in colour.

What a job runs (``Job.label``: its command, argv or the script's first lines, and its
``purpose``) is shown here and nowhere else: the data routes sit behind the same guard as the
API (bearer header, or the sign-in cookie when a token is set). With ``dashboard_control`` the
page has stop buttons: ``POST /api/jobs/{job_id}/signal`` runs the ``signal`` tool's call.

PTY jobs and shell commands are shown as their terminal screen (``GET …/screen``, emulated on
the server only while the page looks: conch.core's screens), with the log below it as the
scrollback; their recording downloads as asciicast v2 (``GET …/cast``) and replays in the page
(``GET …/replay?t=``: the screen ``t`` seconds in). With ``dashboard_control`` a person can
type into a running terminal (``POST …/input {"text"} | {"keys"}``, ``write``'s key names):
the job is then *attended* until ``POST …/handback`` or ``attended_idle_ms`` without a key.
An idle shell takes a person's command (``POST /api/shells/{shell_id}/exec {"command"}``): it
runs as the shell's next command, attended from the start, and its screen takes typing.
What is typed goes to the terminal only: no response, log or page repeats it (the screen shows
what the terminal echoes, and a password prompt echoes nothing). Jobs waiting for input or a
secret are highlighted, and the page title counts them. The Fit button sizes a running
terminal to the page (``POST …/resize {"rows", "cols"}``: ``write``'s ``resize``; a size is not
input, so it does not attend the job); once fitted, the terminal follows the window's size.

The data and the take-over come from the host's ``watch`` (conch/tools/watch.py): on a fleet
server each is asked of the job's node, so the page works the same there.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from conch.core import (
    KEY_NAMES,
)
from conch.errors import ConchError
from conch.http import signin
from conch.http.security import AUTH_SCOPE_KEY
from conch.tools.resources import job_uri
from conch.tools.schemas import WRITE_INPUT
from conch.tools.validate import check_text, validate

if TYPE_CHECKING:
    from conch.tools.host import Host

STOP_SIGNALS = ("interrupt", "terminate", "kill")
MAX_TYPED_CHARS = 64 * 1024  # one paste
MAX_TYPED_KEYS = 64
_NO_STORE = {"Cache-Control": "no-store"}


def _control(request: Request) -> bool:
    return bool(request.app.state.config.dashboard_control)


async def api_jobs(request: Request) -> Response:
    rt: Host = request.app.state.runtime
    body = await rt.watch.jobs()
    body["control"] = _control(request)
    body["signed_in"] = request.scope.get(AUTH_SCOPE_KEY) == "cookie"
    return JSONResponse(body, headers=_NO_STORE)


async def api_log(request: Request) -> Response:
    rt: Host = request.app.state.runtime
    raw = request.query_params.get("cursor")
    cursor = int(raw) if raw is not None and raw.isdigit() else None
    try:
        body = await rt.watch.log(
            request.path_params["job_id"], cursor, request.query_params.get("style")
        )
    except ConchError as e:
        return JSONResponse(e.envelope(), status_code=404 if e.code == "not_found" else 409)
    return JSONResponse(body, headers=_NO_STORE)


def _refuse(status: int, code: str, message: str) -> Response:
    return JSONResponse(ConchError(code, message).envelope(), status_code=status)


def _status(e: ConchError) -> int:
    return {"not_found": 404, "invalid_argument": 400}.get(e.code, 409)


async def api_screen(request: Request) -> Response:
    rt: Host = request.app.state.runtime
    try:
        body = await rt.watch.screen(request.path_params["job_id"])
    except ConchError as e:
        return JSONResponse(e.envelope(), status_code=_status(e))
    return JSONResponse(body, headers=_NO_STORE)


async def api_replay(request: Request) -> Response:
    rt: Host = request.app.state.runtime
    try:
        t = float(request.query_params.get("t", "0"))
    except ValueError:
        return _refuse(400, "invalid_argument", "t must be a number of seconds")
    try:
        body = await rt.watch.replay(request.path_params["job_id"], max(0.0, t))
    except ConchError as e:
        return JSONResponse(e.envelope(), status_code=_status(e))
    return JSONResponse(body, headers=_NO_STORE)


async def _recording(rt: Host, some_id: str) -> tuple[str, str]:
    """The cast resource of a job, or else of a shell's session (a fleet reads either on its
    node); a job's own error when neither is found."""
    try:
        return await rt.read_resource(job_uri(some_id, "cast"))
    except ConchError as e:
        if e.code != "not_found":
            raise
        try:
            return await rt.read_resource(job_uri(some_id, "session"))
        except ConchError:
            raise e from None


async def api_cast(request: Request) -> Response:
    """``GET /api/jobs/{job_id}/cast``: a terminal job's recording, or for a shell's id its
    session's (every retained command in turn)."""
    rt: Host = request.app.state.runtime
    job_id = request.path_params["job_id"]
    try:
        mime, text = await _recording(rt, job_id)
    except ConchError as e:
        return JSONResponse(e.envelope(), status_code=_status(e))
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in job_id)
    return Response(
        text,
        media_type=mime,
        headers={**_NO_STORE, "Content-Disposition": f'attachment; filename="{safe}.cast"'},
    )


def page_binding(request: Request) -> str:
    """What a page's token is bound to: the sign-in session it was served to, else (a server
    without a token) the peer it was served to."""
    if request.scope.get(AUTH_SCOPE_KEY) == "cookie":
        return "session:" + str(request.scope.get(signin.SESSION_SCOPE_KEY))
    return "peer:" + signin.request_peer(request).key


def _sessions(request: Request) -> signin.Sessions:
    sessions: signin.Sessions = request.app.state.sessions
    return sessions


def _control_refusal(request: Request) -> Response | None:
    """Why a state-changing dashboard request is refused (CSRF: see :func:`api_signal`)."""
    if not _control(request):
        return _refuse(403, "invalid_argument", "dashboard control is off (--dashboard-control)")
    if request.scope.get(AUTH_SCOPE_KEY) == "bearer":
        return None  # a client that sends the token itself, not a browser's cookie
    if request.scope.get(AUTH_SCOPE_KEY) == "cookie" and "origin" not in request.headers:
        return _refuse(403, "invalid_argument", "a signed-in request must carry Origin")
    site = request.headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return _refuse(403, "invalid_argument", "a control action must come from this page")
    given = request.headers.get(signin.PAGE_TOKEN_HEADER)
    if not _sessions(request).page_token_valid(given, page_binding(request)):
        return _refuse(
            403,
            "invalid_argument",
            "a control action needs the dashboard page's own token "
            f"({signin.PAGE_TOKEN_HEADER}): reload the page",
        )
    return None


async def _controlled_body(request: Request) -> dict[str, Any] | Response:
    """A state-changing request's JSON object body, or the answer that refuses it."""
    refused = _control_refusal(request)
    return refused if refused is not None else await _json_object(request)


async def _json_object(request: Request) -> dict[str, Any] | Response:
    """The request's body as a JSON object (an empty body is ``{}``), or the structured 400
    that answers any other body."""
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return _refuse(400, "invalid_argument", "the body must be a JSON object")
    try:
        check_text(body)  # (a lone surrogate, a valid JSON escape, is no text to type or run)
    except ConchError as e:
        return _refuse(400, "invalid_argument", e.message)
    return body


async def api_input(request: Request) -> Response:
    """``POST /api/jobs/{job_id}/input {"text": "…"} | {"keys": ["enter"]}`` (dashboard_control
    only): a person's keys into a terminal job, as ``write`` types them. The answer says how
    many bytes were typed, never what (nothing here logs the body)."""
    body = await _controlled_body(request)
    if isinstance(body, Response):
        return body
    text, keys = body.get("text"), body.get("keys") or []
    if text is not None and (not isinstance(text, str) or len(text) > MAX_TYPED_CHARS):
        return _refuse(400, "invalid_argument", f"text must be a string of ≤ {MAX_TYPED_CHARS}")
    if (
        not isinstance(keys, list)
        or len(keys) > MAX_TYPED_KEYS
        or not all(isinstance(k, str) and k in KEY_NAMES for k in keys)
    ):
        return _refuse(400, "invalid_argument", "keys must be a list of `write` key names")
    rt: Host = request.app.state.runtime
    try:
        n = await rt.watch.type_human(request.path_params["job_id"], text, keys)
    except ConchError as e:
        return JSONResponse(e.envelope(), status_code=_status(e))
    return JSONResponse({"bytes": n, "attended": True}, headers=_NO_STORE)


async def api_shell_exec(request: Request) -> Response:
    """``POST /api/shells/{shell_id}/exec {"command": "…"}`` (dashboard_control only): a person
    runs a command in an idle shell, as its next command (``shell_busy``, 409, while one
    runs). Its job is attended from the start; the answer gives its id and the page then
    shows its screen, which takes typing. The agent hears that a person used its shell, and
    how many bytes, never the command (it shows on this page only, as every job's does)."""
    body = await _controlled_body(request)
    if isinstance(body, Response):
        return body
    command = body.get("command")
    if (
        not isinstance(command, str)
        or not command.strip()
        or len(command) > MAX_TYPED_CHARS
        or "\x00" in command
        or set(body) - {"command"}
    ):
        return _refuse(
            400,
            "invalid_argument",
            f'the body must be {{"command": a non-empty string of ≤ {MAX_TYPED_CHARS} '
            "characters without NUL}",
        )
    rt: Host = request.app.state.runtime
    try:
        job_id = await rt.watch.run_human(request.path_params["shell_id"], command)
    except ConchError as e:
        return JSONResponse(e.envelope(), status_code=_status(e))
    return JSONResponse({"job_id": job_id, "attended": True}, headers=_NO_STORE)


async def api_handback(request: Request) -> Response:
    refused = _control_refusal(request)
    if refused is not None:
        return refused
    rt: Host = request.app.state.runtime
    try:
        await rt.watch.hand_back(request.path_params["job_id"])
    except ConchError as e:
        return JSONResponse(e.envelope(), status_code=_status(e))
    return JSONResponse({"attended": False}, headers=_NO_STORE)


async def api_resize(request: Request) -> Response:
    """``POST /api/jobs/{job_id}/resize {"rows": R, "cols": C}`` (dashboard_control only): a
    person sets a running terminal's size, checked and set as ``write {resize}`` does it (the
    program gets SIGWINCH, the recording a resize, the screen the new size). A size is not
    input: the job is not attended, and the agent's results do not report it."""
    body = await _controlled_body(request)
    if isinstance(body, Response):
        return body
    rt: Host = request.app.state.runtime
    try:
        validate(WRITE_INPUT["properties"]["resize"], body, "resize")  # write's very errors
        size = await rt.watch.resize(request.path_params["job_id"], body)
    except ConchError as e:
        return JSONResponse(e.envelope(), status_code=_status(e))
    return JSONResponse(size, headers=_NO_STORE)


async def api_signal(request: Request) -> Response:
    """``POST /api/jobs/{job_id}/signal {"signal": "terminate"}`` (dashboard_control only).

    CSRF: every control action of a browser carries the token of the page it came from (a
    header its script adds; another origin can neither read the page nor set the header), the
    guard refuses a foreign ``Origin``, a cookie-authenticated request without ``Origin`` is
    refused, and so is one a browser marks as not ``Sec-Fetch-Site: same-origin``. A
    page-token is bound to the sign-in session (or, without a token, to the peer's user) of
    this server run."""
    body = await _controlled_body(request)
    if isinstance(body, Response):
        return body
    sig = body.get("signal", "terminate")
    if sig not in STOP_SIGNALS:
        return _refuse(400, "invalid_argument", f"signal must be one of {', '.join(STOP_SIGNALS)}")
    rt: Host = request.app.state.runtime
    try:
        result = await rt.signal(request.path_params["job_id"], sig, wait_ms=3000)
    except ConchError as e:
        return JSONResponse(e.envelope(), status_code=404 if e.code == "not_found" else 409)
    return JSONResponse(
        {k: result.get(k) for k in ("job_id", "state", "exit_code", "signal")}, headers=_NO_STORE
    )


async def page(request: Request) -> Response:
    nonce = secrets.token_urlsafe(16)
    token = _sessions(request).page_token(page_binding(request))
    html = PAGE.replace("{{NONCE}}", nonce).replace("{{PAGE_TOKEN}}", json.dumps(token))
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": f"default-src 'none'; script-src 'nonce-{nonce}'; "
            f"style-src 'nonce-{nonce}'; connect-src 'self'; form-action 'self'; "
            "frame-ancestors 'none'; base-uri 'none'",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",  # no-referrer would make forms send Origin: null
            "Cache-Control": "no-store",
        },
    )


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Conch</title>
<style nonce="{{NONCE}}">
body{font:13px/1.4 system-ui,sans-serif;margin:0;display:flex;height:100vh;color:#222}
#side{width:46%;overflow:auto;border-right:1px solid #ddd;padding:8px 10px;box-sizing:border-box}
#main{flex:1;display:flex;flex-direction:column;padding:8px;min-width:0}
h1{font-size:16px;margin:4px 0 8px;display:flex;gap:8px;align-items:baseline}
h1 form{margin-left:auto}h2{font-size:13px;margin:12px 0 4px;color:#555}
table{border-collapse:collapse;width:100%;table-layout:fixed}
td,th{padding:4px 6px;text-align:left;border-bottom:1px solid #eee;overflow:hidden;
text-overflow:ellipsis;white-space:nowrap;vertical-align:top}
th{font-weight:600;color:#666;font-size:12px}#jobtable th:nth-child(1){width:16%}
#jobtable th:nth-child(2){width:31%}#jobtable th:nth-child(3){width:20%}
#jobtable th:nth-child(4){width:13%}#jobtable th:nth-child(5){width:7%}
#jobtable th:nth-child(6){width:9%}
tr.job{cursor:pointer}tr.job:hover{background:#f6f8fb}tr.sel{background:#e8f0ff}
.what{font-family:ui-monospace,monospace;font-size:12px}.purpose{color:#555}
.running{color:#06c;font-weight:600}.bad{color:#b00}.ok{color:#080}
.stop{font:inherit;font-size:11px;padding:1px 8px;border:1px solid #c33;color:#c33;
background:#fff;border-radius:3px;cursor:pointer}.stop:hover{background:#c33;color:#fff}
#head{margin-bottom:4px;color:#555}#err{color:#b00;font-size:12px}
#cmd{margin:0 0 4px;padding:6px 8px;background:#f4f5f7;border-radius:4px;max-height:8em;
overflow:auto;font:12px/1.35 ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}
#cmd:empty,#why:empty{display:none}#why{margin:0 0 6px;color:#444;font-style:italic}
#log{flex:1;overflow:auto;background:#111;color:#ddd;margin:0;padding:8px;
font:12px/1.35 ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}
#log .b{font-weight:700}#log .d{opacity:.65}#log .i{font-style:italic}
#log .u{text-decoration:underline}#log .s{text-decoration:line-through}
#log .u.s{text-decoration:underline line-through}#log .h{visibility:hidden}
#log .note{color:#888}
tr.wait{background:#fff3c4}tr.wait:hover{background:#ffeaa0}tr.wait td:nth-child(4){color:#a15c00}
#bar{display:flex;gap:6px;align-items:center;margin:0 0 4px;font-size:12px;color:#555}
#bar[hidden]{display:none}#bar .btn{font:inherit;font-size:11px;padding:1px 8px;
border:1px solid #888;border-radius:3px;background:#fff;color:#222;text-decoration:none;
cursor:pointer}#bar .btn[hidden]{display:none}#bar .att{color:#a15c00;font-weight:600}
#screen{background:#111;color:#ddd;margin:0 0 6px;padding:6px;overflow:auto;max-height:64vh;
font:12px/1.25 ui-monospace,monospace;white-space:pre;outline:none;flex:none}
#screen[hidden]{display:none}#screen:focus{box-shadow:0 0 0 2px #5c8fe6}
#screen .b{font-weight:700}#screen .i{font-style:italic}#screen .u{text-decoration:underline}
#screen .s{text-decoration:line-through}#screen .cur{background:#ddd;color:#111}
#screen.replay{box-shadow:0 0 0 2px #c36fd6}
</style></head><body>
<div id="side"><h1>Conch <small id="err"></small>
<form id="signout" method="post" action="/logout" hidden><button type="submit">Sign out</button>
</form></h1>
<h2>Jobs</h2><table id="jobtable"><thead><tr><th>job</th><th>runs</th><th>purpose</th>
<th>state</th><th>time</th><th></th></tr>
</thead><tbody id="jobs"></tbody></table>
<h2>Shells</h2><table><tbody id="shells"></tbody></table></div>
<div id="main"><div id="head">Select a job to follow its log.</div><pre id="cmd"></pre>
<p id="why"></p>
<div id="bar" hidden><span id="scrinfo"></span>
<a id="castlink" class="btn" download>Download recording</a>
<button id="replay" class="btn" type="button">Replay</button>
<button id="fit" class="btn" type="button" hidden
title="size the terminal to this screen">Fit</button>
<button id="handback" class="btn" type="button" hidden>Hand back</button>
<span id="hint"></span></div>
<pre id="screen" tabindex="0" hidden></pre><pre id="log"></pre></div>
<script nonce="{{NONCE}}">
"use strict";
let selected = null, cursor = null, style = "", follow = null, jobsById = {};
const rows = new Map(), shellRows = new Map();
const MAX_LINES = 20000;
const $ = (id) => document.getElementById(id);
// every control action carries this page's own token (the server checks it)
const PAGE_TOKEN = {{PAGE_TOKEN}};
function post(url, body) {
  return fetch(url, {method: "POST", cache: "no-store",
    headers: {"Content-Type": "application/json", "X-Conch-Page-Token": PAGE_TOKEN},
    body: body === undefined ? undefined : JSON.stringify(body)});
}
function cell(tr, text, cls, title) {
  const td = document.createElement("td"); td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls; if (title) td.title = title; tr.appendChild(td); return td;
}
function setCell(tr, k, text, cls, title) {
  const td = tr.children[k], t = text == null ? "" : String(text);
  if (td.textContent !== t) td.textContent = t;
  if ((cls || "") !== td.className) td.className = cls || "";
  if ((title || "") !== td.title) td.title = title || "";
}
function stateText(j) {
  if (j.state === "exited") return j.signal ? "exited by " + j.signal : "exited " + j.exit_code;
  let s = j.state + (j.signal ? " (" + j.signal + ")" : "");
  if (j.awaiting_secret) s += " · awaiting secret";
  else if (j.awaiting_input) s += " · awaiting input";
  if (j.attended) s += " · attended";
  return s;
}
function waiting(j) { return j.state === "running" && (j.awaiting_input || j.awaiting_secret); }
async function stop(id, ev) {
  ev.stopPropagation();
  const btn = ev.target; btn.disabled = true; btn.textContent = "stopping…";
  try {
    const r = await post("api/jobs/" + encodeURIComponent(id) + "/signal",
      {signal: "terminate"});
    if (!r.ok) throw new Error("HTTP " + r.status);
  } catch (e) { btn.textContent = "failed"; }
  refresh();
}
async function refresh() {
  try {
    const r = await fetch("api/jobs", {cache: "no-store"});
    if (r.status === 401) { location.reload(); return; }
    if (!r.ok) throw new Error("HTTP " + r.status);
    const data = await r.json(); $("err").textContent = "";
    $("signout").hidden = !data.signed_in;
    const tb = $("jobs"); jobsById = {};
    // rows are updated in place, so a click is never lost to a refresh
    const keep = new Set();
    data.jobs.forEach((j, i) => {
      jobsById[j.job_id] = j; if (j.name) jobsById[j.name] = j; keep.add(j.job_id);
      let tr = rows.get(j.job_id);
      if (!tr) {
        tr = document.createElement("tr"); tr.dataset.job = j.job_id;
        for (let k = 0; k < 6; k++) tr.appendChild(document.createElement("td"));
        tr.onclick = () => select(j.job_id); rows.set(j.job_id, tr);
      }
      tr.className = "job" + (j.job_id === selected || j.name === selected ? " sel" : "")
        + (waiting(j) ? " wait" : "");
      const what = j.what == null ? "(" + j.mode + ")" : j.what.split("\\n").join(" ⏎ ");
      const where = j.mode + " · " + (j.cwd || "");
      setCell(tr, 0, j.name ? j.name + " · " + j.job_id : j.job_id, "", where);
      setCell(tr, 1, what, "what", j.what);
      setCell(tr, 2, j.purpose, "purpose", j.purpose);
      setCell(tr, 3, stateText(j), j.state === "running" ? "running" : (j.ok ? "ok" : "bad"));
      setCell(tr, 4, (j.duration_ms / 1000).toFixed(1) + " s");
      const td = tr.children[5], want = data.control && j.state === "running";
      if (want && !td.firstChild) {
        const b = document.createElement("button"); b.className = "stop"; b.textContent = "Stop";
        b.title = "signal terminate"; b.dataset.stop = j.job_id;
        b.onclick = (ev) => stop(j.job_id, ev); td.appendChild(b);
      } else if (!want && td.firstChild) td.replaceChildren();
      if (tb.children[i] !== tr) tb.insertBefore(tr, tb.children[i] || null);
    });
    for (const [id, tr] of rows) if (!keep.has(id)) { tr.remove(); rows.delete(id); }
    // a person in another tab sees that a job waits for them
    const n = data.jobs.filter(waiting).length;
    document.title = (n ? "(" + n + " waiting) " : "") + "Conch";
    control = data.control;
    drawShells(data.shells);
    showWhat();
  } catch (e) { $("err").textContent = "(disconnected)"; }
}
// shells: kept rows (a command being typed survives the polls); with control an idle shell
// takes a person's command, which then shows as a terminal that takes typing
function drawShells(shells) {
  const sb = $("shells"), keep = new Set();
  shells.forEach((s, i) => {
    keep.add(s.shell_id);
    let tr = shellRows.get(s.shell_id);
    if (!tr) {
      tr = document.createElement("tr"); tr.dataset.shell = s.shell_id;
      for (let k = 0; k < 6; k++) cell(tr, "");
      shellRows.set(s.shell_id, tr);
    }
    setCell(tr, 0, s.shell_id); setCell(tr, 1, s.name); setCell(tr, 2, s.shell);
    setCell(tr, 3, s.state, s.state === "busy" ? "running" : ""); setCell(tr, 4, s.cwd, "", s.cwd);
    const td = tr.children[5], want = control && s.state === "ready";
    if (want && !td.firstChild) {
      const f = document.createElement("form"), inp = document.createElement("input");
      inp.name = "command"; inp.placeholder = "run a command here"; inp.autocomplete = "off";
      inp.className = "what"; inp.size = 18; f.appendChild(inp);
      f.onsubmit = (ev) => { ev.preventDefault(); runInShell(s.shell_id, inp); };
      td.appendChild(f);
    } else if (!want && td.firstChild && !td.contains(document.activeElement)) td.replaceChildren();
    if (sb.children[i] !== tr) sb.insertBefore(tr, sb.children[i] || null);
  });
  for (const [id, tr] of shellRows) if (!keep.has(id)) { tr.remove(); shellRows.delete(id); }
}
async function runInShell(id, inp) {
  const command = inp.value;
  if (!command.trim()) return;
  inp.disabled = true;
  try {
    const r = await post("api/shells/" + encodeURIComponent(id) + "/exec", {command});
    const d = await r.json();
    if (!r.ok) { $("err").textContent = (d.error && d.error.message) || "refused"; return; }
    inp.value = ""; $("err").textContent = "";
    select(d.job_id); await refresh(); $("screen").focus();
  } catch (e) { $("err").textContent = "(disconnected)"; }
  finally { inp.disabled = false; }
}
function showWhat() {
  const j = selected ? jobsById[selected] : null;
  $("cmd").textContent = j && j.what != null ? j.what : "";
  $("why").textContent = j && j.purpose ? j.purpose : "";
  const term = !!(j && j.terminal_mode);
  $("bar").hidden = !term; $("screen").hidden = !term;
  if (term && screenFor !== j.job_id) startScreen(j.job_id);
  if (term) {
    $("castlink").href = "api/jobs/" + encodeURIComponent(j.job_id) + "/cast";
    const live = control && j.state === "running";
    $("handback").hidden = !(live && j.attended);
    $("fit").hidden = !live;
    $("hint").textContent = live ? "click the screen and type to take over" : "";
  }
}
// -- the terminal screen (PTY jobs and shell commands) --------------------------------------
let screenFor = null, screenTimer = null, replaying = false, control = false, lastVersion = -1;
function drawScreen(d) {
  const pre = $("screen"), frag = document.createDocumentFragment();
  const cur = d.cursor || {};
  d.lines.forEach((segs, y) => {
    let col = 0, placed = !(cur.visible && cur.row === y);
    for (const s of segs) {
      const len = [...s.text].length;
      if (!placed && cur.col >= col && cur.col < col + len) {
        const chars = [...s.text], k = cur.col - col;
        if (k) frag.appendChild(segment({...s, text: chars.slice(0, k).join("")}));
        const c = segment({...s, text: chars[k]});
        if (c.nodeType === 3) { const sp = document.createElement("span"); sp.append(c);
          frag.appendChild(sp); sp.className = "cur"; } else { c.classList.add("cur");
          frag.appendChild(c); }
        if (k + 1 < len) frag.appendChild(segment({...s, text: chars.slice(k + 1).join("")}));
        placed = true;
      } else frag.appendChild(segment(s));
      col += len;
    }
    if (!placed) {
      frag.append(" ".repeat(Math.max(0, cur.col - col)));
      const sp = document.createElement("span"); sp.className = "cur"; sp.textContent = " ";
      frag.appendChild(sp);
    }
    frag.append("\\n");  // after the last row too: an empty last row still takes its line
  });
  pre.replaceChildren(frag);
  pre.dataset.rows = d.rows; pre.dataset.cols = d.cols;
  pre.dataset.alternate = d.alternate ? "1" : "";
  $("scrinfo").textContent = d.cols + "×" + d.rows + (d.alternate ? " · full-screen" : "");
}
function startScreen(id) {
  screenFor = id; lastVersion = -1; replaying = false; $("screen").classList.remove("replay");
  if (screenTimer) clearTimeout(screenTimer); pullScreen();
}
async function pullScreen() {
  const id = screenFor; if (!id) return;
  let delay = 250;
  try {
    if (!replaying) {
      const r = await fetch("api/jobs/" + encodeURIComponent(id) + "/screen", {cache: "no-store"});
      if (id !== screenFor) return;
      if (r.ok) {
        const d = await r.json();
        if (d.version !== lastVersion) { drawScreen(d); lastVersion = d.version; }
        if (d.state !== "running") delay = 2000;
      } else delay = 2000;
    }
  } catch (e) { delay = 2000; }
  if (id === screenFor) screenTimer = setTimeout(pullScreen, delay);
}
async function replay() {
  const id = screenFor; if (!id || replaying) return;
  replaying = true; $("screen").classList.add("replay");
  const url = (t) => "api/jobs/" + encodeURIComponent(id) + "/replay?t=" + t;
  try {
    let d = await (await fetch(url(0), {cache: "no-store"})).json();
    const total = d.duration, step = Math.max(0.1, total / 100);
    for (let t = 0; id === screenFor && replaying; t += step) {
      d = await (await fetch(url(Math.min(t, total)), {cache: "no-store"})).json();
      drawScreen(d);
      $("scrinfo").textContent = "replay " + Math.min(t, total).toFixed(1) + " / "
        + total.toFixed(1) + " s";
      if (t >= total) break;
      await new Promise((ok) => setTimeout(ok, 60));
    }
  } catch (e) { /* back to the live screen */ }
  replaying = false; lastVersion = -1; $("screen").classList.remove("replay");
}
// -- taking over: what a person types goes to the terminal, the same path as `write` -------
const KEYS = {Enter: "enter", Tab: "tab", Backspace: "backspace", Escape: "esc",
  ArrowUp: "up", ArrowDown: "down", ArrowLeft: "left", ArrowRight: "right", Home: "home",
  End: "end", PageUp: "pageup", PageDown: "pagedown", Delete: "delete", Insert: "insert"};
for (let i = 1; i <= 12; i++) KEYS["F" + i] = "f" + i;
let sending = Promise.resolve(), pending = [];
function send(item) {
  // text typed in a row goes as one request; a key ends it (order is kept)
  const last = pending[pending.length - 1];
  if (item.text != null && last && last.text != null) last.text += item.text;
  else pending.push(item);
  sending = sending.then(flush);
}
async function flush() {
  const id = screenFor;
  while (pending.length) {
    const body = pending.shift();
    try {
      const r = await post("api/jobs/" + encodeURIComponent(id) + "/input", body);
      $("hint").textContent = r.ok ? "you have the terminal: Hand back when done"
        : "typing refused (HTTP " + r.status + ")";
      if (r.ok) $("handback").hidden = false;
    } catch (e) { $("hint").textContent = "typing failed"; }
  }
}
function typing() {
  const j = screenFor ? jobsById[screenFor] : null;
  return control && j && j.state === "running" && !replaying;
}
$("screen").addEventListener("keydown", (ev) => {
  if (!typing() || ev.isComposing) return;
  let item = null;
  if (ev.ctrlKey && !ev.altKey && !ev.metaKey && ev.key.length === 1) {
    const k = ev.key.toLowerCase();
    if ("abcdefghijklmnopqrstuvwxyz@[]\\\\^_".includes(k)) item = {keys: ["ctrl-" + k]};
  } else if (KEYS[ev.key]) item = {keys: [KEYS[ev.key]]};
  else if (ev.key.length === 1 && !ev.metaKey && !ev.ctrlKey) item = {text: ev.key};
  if (item) { ev.preventDefault(); send(item); }
});
$("screen").addEventListener("paste", (ev) => {
  if (!typing()) return;
  const text = (ev.clipboardData || window.clipboardData).getData("text");
  ev.preventDefault(); if (text) send({text: text});
});
// -- Fit: the terminal's size from the room the screen has and the size of a character cell --
function fitSize() {
  const pre = $("screen"), cs = getComputedStyle(pre);
  const probe = document.createElement("span");
  probe.style.display = "inline-block"; probe.style.position = "absolute";
  probe.style.visibility = "hidden";
  probe.textContent = Array(10).fill("M".repeat(100)).join("\\n");
  pre.appendChild(probe);
  const box = probe.getBoundingClientRect(); probe.remove();
  const cellW = box.width / 100, cellH = box.height / 10;
  const padX = parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight);
  const padY = parseFloat(cs.paddingTop) + parseFloat(cs.paddingBottom);
  // its width without a scrollbar (a screen that fits has none), the height it may grow to
  const width = pre.offsetWidth - parseFloat(cs.borderLeftWidth)
    - parseFloat(cs.borderRightWidth);
  const height = parseFloat(cs.maxHeight) || pre.clientHeight;
  const clamp = (n) => Math.max(2, Math.min(1000, Math.floor(n)));
  return {rows: clamp((height - padY) / cellH), cols: clamp((width - padX) / cellW)};
}
let fitted = null, refit = null;  // the job a person fitted: it follows the window's size
async function fitNow() {
  const id = screenFor; if (!id) return;
  fitted = id;
  const size = fitSize();
  try {
    const r = await post("api/jobs/" + encodeURIComponent(id) + "/resize", size);
    $("hint").textContent = r.ok ? "resized to " + size.cols + "×" + size.rows
      : "resize refused (HTTP " + r.status + ")";
  } catch (e) { $("hint").textContent = "resize failed"; }
  $("fit").dataset.rows = size.rows; $("fit").dataset.cols = size.cols;
}
$("fit").onclick = fitNow;
window.addEventListener("resize", () => {
  clearTimeout(refit);
  refit = setTimeout(() => {
    if (fitted && fitted === screenFor && !$("fit").hidden) fitNow();
  }, 250);
});
$("replay").onclick = replay;
$("handback").onclick = async () => {
  const id = screenFor; if (!id) return;
  await post("api/jobs/" + encodeURIComponent(id) + "/handback");
  $("handback").hidden = true; $("hint").textContent = "handed back to the agent"; refresh();
};
function select(id) {
  if (id !== selected) { screenFor = null; $("screen").replaceChildren(); }
  selected = id; cursor = null; style = ""; $("log").replaceChildren(); $("head").textContent = id;
  history.replaceState(null, "", "#" + encodeURIComponent(id)); showWhat();
  if (follow) clearTimeout(follow); pull(); refresh();
}
function newLine() {
  const ln = document.createElement("span"); ln.className = "ln"; $("log").appendChild(ln);
  return ln;
}
function segment(s) {
  if (!s.cls && !s.fg && !s.bg) return document.createTextNode(s.text);
  const sp = document.createElement("span"); sp.textContent = s.text;
  if (s.cls) sp.className = s.cls; if (s.fg) sp.style.color = s.fg;
  if (s.bg) sp.style.backgroundColor = s.bg; return sp;
}
function appendChunk(d) {
  const log = $("log");
  let ln = log.lastElementChild;
  if (!ln || ln.dataset.done) ln = newLine();
  if (d.reset_first) ln.replaceChildren();
  d.lines.forEach((segs, i) => {
    if (i > 0) { ln.append("\\n"); ln.dataset.done = "1"; ln = newLine(); }
    for (const s of segs) ln.appendChild(segment(s));
  });
  while (log.childElementCount > MAX_LINES) log.firstElementChild.remove();
}
async function pull() {
  const id = selected; if (!id) return;
  let delay = 500;
  try {
    const q = cursor == null ? "" : "?cursor=" + cursor + "&style=" + encodeURIComponent(style);
    const r = await fetch("api/jobs/" + encodeURIComponent(id) + "/log" + q, {cache: "no-store"});
    if (id !== selected) return;
    if (r.status === 404) { $("head").textContent = id + " (no longer retained)"; return; }
    const d = await r.json();
    const log = $("log"), atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    if (cursor == null && d.skipped) {
      const n = newLine(); n.className = "ln note"; n.dataset.done = "1";
      n.textContent = "[… " + d.skipped + " earlier bytes not shown …]\\n";
    }
    appendChunk(d); cursor = d.next_cursor; style = d.style;
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
