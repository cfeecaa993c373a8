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

A finished job's changes to the workspace show under its command (``GET …/changes``: the
``changes`` tool's result, paths and diff with invisible characters escaped). With
``dashboard_control`` a person can undo them: the page first shows what will be restored and
removed and asks to confirm, then ``POST …/undo {"confirm": true}`` (the checks of every
control action) takes them back, or answers ``conflict`` naming the paths changed since.

The page is package data (``dashboard.html`` beside this module); every route answers a
ConchError as its envelope at one status (``STATUS``; 403 for a refused control request).

The data and the take-over come from the host's ``watch`` (conch/tools/watch.py): on a fleet
server each is asked of the job's node, so the page works the same there.
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Awaitable, Callable
from importlib.resources import files
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
from conch.tools.schemas import CHANGES_INPUT, WRITE_INPUT
from conch.tools.validate import check_text, validate
from conch.tools.watch import visible

if TYPE_CHECKING:
    from conch.tools.host import Host

STOP_SIGNALS = ("interrupt", "terminate", "kill")
MAX_TYPED_CHARS = 64 * 1024  # one paste
MAX_TYPED_KEYS = 64
_NO_STORE = {"Cache-Control": "no-store"}
#: the page (with ``{{NONCE}}`` and ``{{PAGE_TOKEN}}`` to fill in), package data beside this file
PAGE = files("conch.http").joinpath("dashboard.html").read_text(encoding="utf-8")

#: the HTTP status of each error a route answers with; any other code is 409 (the job's or
#: shell's state does not allow it now: not_running, shell_busy, busy, conflict, …)
STATUS = {"invalid_argument": 400, "not_found": 404}


class Forbidden(ConchError):
    """A request refused before anything runs (403): control off, or not from this page."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_argument", message)


def _status(e: ConchError) -> int:
    return 403 if isinstance(e, Forbidden) else STATUS.get(e.code, 409)


Route = Callable[[Request], Awaitable[Response]]


def _answers_errors(route: Route) -> Route:
    """The route with every ConchError it raises answered as its envelope, at its status."""

    @functools.wraps(route)
    async def answer(request: Request) -> Response:
        try:
            return await route(request)
        except ConchError as e:
            return JSONResponse(e.envelope(), status_code=_status(e), headers=_NO_STORE)

    return answer


def _control(request: Request) -> bool:
    return bool(request.app.state.config.dashboard_control)


@_answers_errors
async def api_jobs(request: Request) -> Response:
    rt: Host = request.app.state.runtime
    body = await rt.watch.jobs()
    body["control"] = _control(request)
    body["signed_in"] = request.scope.get(AUTH_SCOPE_KEY) == "cookie"
    return JSONResponse(body, headers=_NO_STORE)


@_answers_errors
async def api_log(request: Request) -> Response:
    rt: Host = request.app.state.runtime
    raw = request.query_params.get("cursor")
    cursor = int(raw) if raw is not None and raw.isdigit() else None
    body = await rt.watch.log(
        request.path_params["job_id"], cursor, request.query_params.get("style")
    )
    return JSONResponse(body, headers=_NO_STORE)


@_answers_errors
async def api_screen(request: Request) -> Response:
    rt: Host = request.app.state.runtime
    body = await rt.watch.screen(request.path_params["job_id"])
    return JSONResponse(body, headers=_NO_STORE)


@_answers_errors
async def api_replay(request: Request) -> Response:
    rt: Host = request.app.state.runtime
    try:
        t = float(request.query_params.get("t", "0"))
    except ValueError:
        raise ConchError("invalid_argument", "t must be a number of seconds") from None
    body = await rt.watch.replay(request.path_params["job_id"], max(0.0, t))
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


@_answers_errors
async def api_cast(request: Request) -> Response:
    """``GET /api/jobs/{job_id}/cast``: a terminal job's recording, or for a shell's id its
    session's (every retained command in turn)."""
    rt: Host = request.app.state.runtime
    job_id = request.path_params["job_id"]
    mime, text = await _recording(rt, job_id)
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


def _check_control(request: Request) -> None:
    """Refuse a state-changing dashboard request (``Forbidden``) unless control is on and it
    comes from this server's page (CSRF: see :func:`api_signal`)."""
    if not _control(request):
        raise Forbidden("dashboard control is off (--dashboard-control)")
    if request.scope.get(AUTH_SCOPE_KEY) == "bearer":
        return  # a client that sends the token itself, not a browser's cookie
    if request.scope.get(AUTH_SCOPE_KEY) == "cookie" and "origin" not in request.headers:
        raise Forbidden("a signed-in request must carry Origin")
    site = request.headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        raise Forbidden("a control action must come from this page")
    given = request.headers.get(signin.PAGE_TOKEN_HEADER)
    if not _sessions(request).page_token_valid(given, page_binding(request)):
        raise Forbidden(
            "a control action needs the dashboard page's own token "
            f"({signin.PAGE_TOKEN_HEADER}): reload the page",
        )


async def _controlled_body(request: Request) -> dict[str, Any]:
    """A state-changing request's JSON object body, once :func:`_check_control` let it by."""
    _check_control(request)
    return await _json_object(request)


async def _json_object(request: Request) -> dict[str, Any]:
    """The request's body as a JSON object (an empty body is ``{}``); any other body is
    ``invalid_argument``."""
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ConchError("invalid_argument", "the body must be a JSON object")
    try:
        check_text(body)  # (a lone surrogate, a valid JSON escape, is no text to type or run)
    except ConchError as e:
        raise ConchError("invalid_argument", e.message) from None
    return body


@_answers_errors
async def api_input(request: Request) -> Response:
    """``POST /api/jobs/{job_id}/input {"text": "…"} | {"keys": ["enter"]}`` (dashboard_control
    only): a person's keys into a terminal job, as ``write`` types them. The answer says how
    many bytes were typed, never what (nothing here logs the body)."""
    body = await _controlled_body(request)
    text, keys = body.get("text"), body.get("keys") or []
    if text is not None and (not isinstance(text, str) or len(text) > MAX_TYPED_CHARS):
        raise ConchError("invalid_argument", f"text must be a string of ≤ {MAX_TYPED_CHARS}")
    if (
        not isinstance(keys, list)
        or len(keys) > MAX_TYPED_KEYS
        or not all(isinstance(k, str) and k in KEY_NAMES for k in keys)
    ):
        raise ConchError("invalid_argument", "keys must be a list of `write` key names")
    rt: Host = request.app.state.runtime
    n = await rt.watch.type_human(request.path_params["job_id"], text, keys)
    return JSONResponse({"bytes": n, "attended": True}, headers=_NO_STORE)


@_answers_errors
async def api_shell_exec(request: Request) -> Response:
    """``POST /api/shells/{shell_id}/exec {"command": "…"}`` (dashboard_control only): a person
    runs a command in an idle shell, as its next command (``shell_busy``, 409, while one
    runs). Its job is attended from the start; the answer gives its id and the page then
    shows its screen, which takes typing. The agent hears that a person used its shell, and
    how many bytes, never the command (it shows on this page only, as every job's does)."""
    body = await _controlled_body(request)
    command = body.get("command")
    if (
        not isinstance(command, str)
        or not command.strip()
        or len(command) > MAX_TYPED_CHARS
        or "\x00" in command
        or set(body) - {"command"}
    ):
        raise ConchError(
            "invalid_argument",
            f'the body must be {{"command": a non-empty string of ≤ {MAX_TYPED_CHARS} '
            "characters without NUL}",
        )
    rt: Host = request.app.state.runtime
    job_id = await rt.watch.run_human(request.path_params["shell_id"], command)
    return JSONResponse({"job_id": job_id, "attended": True}, headers=_NO_STORE)


@_answers_errors
async def api_handback(request: Request) -> Response:
    _check_control(request)
    rt: Host = request.app.state.runtime
    await rt.watch.hand_back(request.path_params["job_id"])
    return JSONResponse({"attended": False}, headers=_NO_STORE)


@_answers_errors
async def api_resize(request: Request) -> Response:
    """``POST /api/jobs/{job_id}/resize {"rows": R, "cols": C}`` (dashboard_control only): a
    person sets a running terminal's size, checked and set as ``write {resize}`` does it (the
    program gets SIGWINCH, the recording a resize, the screen the new size). A size is not
    input: the job is not attended, and the agent's results do not report it."""
    body = await _controlled_body(request)
    rt: Host = request.app.state.runtime
    validate(WRITE_INPUT["properties"]["resize"], body, "resize")  # write's very errors
    size = await rt.watch.resize(request.path_params["job_id"], body)
    return JSONResponse(size, headers=_NO_STORE)


@_answers_errors
async def api_signal(request: Request) -> Response:
    """``POST /api/jobs/{job_id}/signal {"signal": "terminate"}`` (dashboard_control only).

    CSRF: every control action of a browser carries the token of the page it came from (a
    header its script adds; another origin can neither read the page nor set the header), the
    guard refuses a foreign ``Origin``, a cookie-authenticated request without ``Origin`` is
    refused, and so is one a browser marks as not ``Sec-Fetch-Site: same-origin``. A
    page-token is bound to the sign-in session (or, without a token, to the peer's user) of
    this server run."""
    body = await _controlled_body(request)
    sig = body.get("signal", "terminate")
    if sig not in STOP_SIGNALS:
        raise ConchError("invalid_argument", f"signal must be one of {', '.join(STOP_SIGNALS)}")
    rt: Host = request.app.state.runtime
    result = await rt.signal(request.path_params["job_id"], sig, wait_ms=3000)
    return JSONResponse(
        {k: result.get(k) for k in ("job_id", "state", "exit_code", "signal")}, headers=_NO_STORE
    )


def _shown(value: Any) -> Any:
    """A change set as a person reads it: every path and diff line with control and
    invisible format characters escaped (a file name never reads as another)."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, list):
        return [_shown(v) for v in value]
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items()}
    return value


@_answers_errors
async def api_changes(request: Request) -> Response:
    """``GET /api/jobs/{job_id}/changes[?cursor=]``: what a finished job changed in the
    workspace (the ``changes`` tool's result, a page of it from ``cursor``)."""
    cursor = request.query_params.get("cursor")
    if cursor is not None:
        validate(CHANGES_INPUT["properties"]["cursor"], cursor, "cursor")
    rt: Host = request.app.state.runtime
    body = await rt.changes(request.path_params["job_id"], cursor=cursor)
    return JSONResponse(_shown(body), headers=_NO_STORE)


@_answers_errors
async def api_undo(request: Request) -> Response:
    """``POST /api/jobs/{job_id}/undo {"confirm": true[, "force": [paths]]}``
    (dashboard_control only): a person takes a job's changes back, after the page asked them
    to confirm what will be restored and removed. Refused as the ``changes`` tool refuses
    (``conflict``, 409, naming the paths changed since). The answer is the undo's own change
    set, whose ``job_id`` undoes it in turn."""
    body = await _controlled_body(request)
    if body.get("confirm") is not True or set(body) - {"confirm", "force"}:
        raise ConchError(
            "invalid_argument", 'the body must be {"confirm": true} (and "force": [paths])'
        )
    force = body.get("force", [])
    validate(CHANGES_INPUT["properties"]["force"], force, "force")
    rt: Host = request.app.state.runtime
    result = await rt.changes(request.path_params["job_id"], undo=True, force=force)
    return JSONResponse(_shown(result), headers=_NO_STORE)


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
