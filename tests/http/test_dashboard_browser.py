"""The dashboard as a person sees it: a real `conch serve --http` and a real headless Chromium
(chromedriver). What each job runs and why, colours as styled spans, the sign-in form of a
token-protected server, and the stop buttons of --dashboard-control."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import Browser, chromium
from frontend_servers import HttpServer, free_port, kill_group, page_token, sign_in, start_http
from frontend_servers import invoke as call
from local_user import PYTHON, LocalUser

pytestmark = pytest.mark.needs("chromium", "chromedriver")

TOKEN = "tok-dash-9QvX-secret"


def status_of(srv: HttpServer, method: str, path: str, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        body = b'{"method": "info", "params": {}}' if method == "POST" else None
        conn.request(
            method, path, body=body, headers={"Content-Type": "application/json", **headers}
        )
        resp = conn.getresponse()
        resp.read() if not resp.getheader("content-type", "").startswith("text/event") else None
        return resp.status
    finally:
        conn.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    with chromium(tmp_path) as b:
        yield b


def row_of(b: Browser, job_id: str) -> str:
    return b.find(f'tr[data-job="{job_id}"]')


def test_dashboard_shows_what_each_job_runs_its_purpose_and_colours(
    tmp_path: Path, browser: Browser
):
    srv = start_http(tmp_path)
    try:
        coloured = call(
            srv,
            "exec",
            {
                "command": "printf '\\033[1;31mRED-ALERT\\033[0m plain <b>not-bold</b>\\n"
                "\\033[38;5;46mGREEN-256\\033[0m\\n'; sleep 30",
                "purpose": "show the colours to a person",
                "yield_ms": 300,
            },
        )
        argv = call(srv, "exec", {"argv": ["echo", "argv job", "x"], "purpose": "argv purpose"})
        script = call(
            srv,
            "exec",
            {"script": "echo first-line\necho second-line\necho 3\necho 4\necho 5\necho 6"},
        )
        raw = call(srv, "exec", {"command": "echo \x1b[35mRAW-ESC-CMD\x1b[0m"})
        browser.get(f"{srv.url}/#{coloured['job_id']}")
        red = browser.wait(
            lambda: browser.run(
                "for (const s of document.querySelectorAll('#log span'))"
                " if (s.textContent === 'RED-ALERT') {"
                "  const c = getComputedStyle(s); return [s.tagName, c.color, c.fontWeight]; }"
                "return null;"
            ),
            15,
            "the red span",
        )
        assert red == ["SPAN", "rgb(224, 90, 90)", "700"]
        green = browser.run(
            "for (const s of document.querySelectorAll('#log span'))"
            " if (s.textContent === 'GREEN-256') return getComputedStyle(s).color; return null;"
        )
        assert green == "rgb(0, 255, 0)"
        log_text = browser.run("return document.getElementById('log').textContent")
        assert "RED-ALERT plain <b>not-bold</b>\nGREEN-256\n" in log_text
        # printed markup stays text, escapes never reach the DOM
        assert browser.run("return document.querySelectorAll('#log b').length") == 0
        log_html = browser.run("return document.getElementById('log').innerHTML")
        assert "\x1b" not in log_html and "[1;31m" not in log_html and "[0m" not in log_html
        assert "\x1b" not in browser.source()
        # what it runs and why: in the table and above the log
        row = browser.text(row_of(browser, coloured["job_id"]))
        assert "RED-ALERT" in row and "show the colours to a person" in row
        assert "printf" in browser.text(browser.find("#cmd"))
        assert browser.text(browser.find("#why")) == "show the colours to a person"
        # a raw ESC inside a command string is shown as \x1b, never put into the DOM
        raw_row = browser.run(
            "return document.querySelector('tr[data-job=\"' + arguments[0] + '\"]').textContent",
            raw["job_id"],
        )
        assert "echo \\x1b[35mRAW-ESC-CMD\\x1b[0m" in raw_row
        argv_row = browser.text(row_of(browser, argv["job_id"]))
        assert "echo 'argv job' x" in argv_row and "argv purpose" in argv_row
        browser.click(row_of(browser, script["job_id"]))
        browser.wait(lambda: "first-line" in browser.text(browser.find("#cmd")), 10, "script")
        cmd = browser.text(browser.find("#cmd"))
        assert "echo second-line" in cmd and "echo 6" not in cmd and "2 more lines" in cmd
        out = Path(os.environ.get("CONCH_DASHBOARD_SCREENSHOT", tmp_path / "dashboard.png"))
        browser.click(row_of(browser, coloured["job_id"]))
        browser.wait(lambda: "RED-ALERT" in browser.text(browser.find("#log")), 10, "log")
        assert browser.screenshot(out).stat().st_size > 10_000
        # list, info and resources never show what a job runs or its purpose
        listed = json.dumps(call(srv, "list", {}))
        assert "show the colours" not in listed and "printf" not in listed
        assert "argv purpose" not in json.dumps(call(srv, "info", {}))
        call(srv, "signal", {"job_id": coloured["job_id"], "signal": "kill"})
    finally:
        kill_group(srv.proc)
    assert "show the colours" not in srv.stderr() and "RED-ALERT" not in srv.stderr()


def test_token_dashboard_signs_in_with_a_form_and_the_api_still_needs_the_bearer(
    tmp_path: Path, browser: Browser
):
    srv = start_http(tmp_path, "--auth-token", TOKEN, token=TOKEN)
    try:
        job = call(srv, "exec", {"command": "echo signed-in-view", "purpose": "p-1"}, token=TOKEN)
        assert status_of(srv, "GET", "/login", {}) == 200  # the form has its own address too
        browser.get(srv.url + "/")
        form = browser.find("form#signin")
        assert browser.find_all("#jobs") == []  # nothing of the dashboard before signing in
        assert "p-1" not in browser.source()
        browser.type(browser.find("#token"), "not-the-token")
        browser.click(browser.find("#go"))
        assert "not right" in browser.text(browser.find("#msg"))
        browser.type(browser.find("#token"), TOKEN)
        browser.click(browser.find("#go"))
        row = browser.text(row_of(browser, job["job_id"]))
        assert "echo signed-in-view" in row and "p-1" in row
        assert form  # the form was there; now the dashboard is
        assert browser.run("return document.cookie") == ""  # HttpOnly: scripts cannot read it
        # the signed-in browser cannot use the API routes: they want the bearer header
        statuses = browser.run(
            "const done = arguments[arguments.length - 1];"
            "return Promise.all(["
            " fetch('/invoke', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            "   body: JSON.stringify({method: 'info', params: {}})}).then(r => r.status),"
            " fetch('/health').then(r => r.status), fetch('/manifest').then(r => r.status),"
            " fetch('/api/jobs').then(r => r.status)]);"
        )
        assert statuses == [401, 401, 401, 200]
        cookie = _session_cookie(srv)
        for method, path in (("POST", "/invoke"), ("GET", "/health"), ("GET", "/manifest")):
            assert status_of(srv, method, path, {}) == 401, path
            assert status_of(srv, method, path, {"Cookie": cookie}) == 401, path
        assert status_of(srv, "POST", "/mcp", {"Cookie": cookie}) == 401
        assert status_of(srv, "GET", "/sse", {"Cookie": cookie}) == 401
        assert status_of(srv, "GET", "/api/jobs", {"Cookie": cookie}) == 200
        assert (
            status_of(srv, "GET", "/api/jobs", {"Cookie": f"conch_dashboard_{srv.port}=forged"})
            == 401
        )
        assert status_of(srv, "GET", "/health", {"Authorization": f"Bearer {TOKEN}"}) == 200
        # signing out drops the cookie: the form is back
        browser.click(browser.find("#signout button"))
        browser.find("form#signin")
    finally:
        kill_group(srv.proc)
    assert TOKEN not in srv.stderr()


def _session_cookie(srv: HttpServer) -> str:
    status, headers, _ = sign_in(srv.port, TOKEN)
    assert status == 303
    cookie = headers.get("set-cookie", "")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and TOKEN not in cookie
    assert cookie.startswith(f"conch_dashboard_{srv.port}="), cookie  # named for its port
    return cookie.split(";")[0]  # name=value, as a Cookie header carries it


def test_stop_button_stops_a_running_job(tmp_path: Path, browser: Browser):
    srv = start_http(tmp_path, "--dashboard-control")
    try:
        job = call(srv, "exec", {"command": "sleep 60", "purpose": "stop me", "yield_ms": 0})
        done = call(srv, "exec", {"command": "true"})
        browser.get(srv.url + "/")
        button = browser.find(f'button[data-stop="{job["job_id"]}"]')
        assert browser.find_all(f'button[data-stop="{done["job_id"]}"]') == []
        browser.click(button)
        final = call(srv, "read", {"job_id": job["job_id"], "wait_ms": 5000, "until": "exit"})
        assert final["state"] == "cancelled"
        browser.wait(lambda: "cancelled" in browser.text(row_of(browser, job["job_id"])), 10)
        assert browser.find_all(f'button[data-stop="{job["job_id"]}"]') == []
    finally:
        kill_group(srv.proc)


def test_without_dashboard_control_there_is_no_stop_button_and_no_signal_route(
    tmp_path: Path, browser: Browser
):
    srv = start_http(tmp_path)
    try:
        job = call(srv, "exec", {"command": "sleep 60", "yield_ms": 0})
        browser.get(srv.url + "/")
        row_of(browser, job["job_id"])
        assert browser.find_all("button.stop") == []
        path = f"/api/jobs/{job['job_id']}/signal"
        assert status_of(srv, "POST", path, {}) == 403
        assert call(srv, "read", {"job_id": job["job_id"]})["state"] == "running"
        call(srv, "signal", {"job_id": job["job_id"], "signal": "kill"})
    finally:
        kill_group(srv.proc)


def test_signal_route_refuses_cross_origin_and_originless_cookie_posts(tmp_path: Path):
    srv = start_http(tmp_path, "--auth-token", TOKEN, "--dashboard-control", token=TOKEN)
    try:
        job = call(srv, "exec", {"command": "sleep 60", "yield_ms": 0}, token=TOKEN)
        path = f"/api/jobs/{job['job_id']}/signal"
        cookie = {"Cookie": _session_cookie(srv)}
        page = {**cookie, "X-Conch-Page-Token": str(page_token(srv.port, cookie))}
        assert status_of(srv, "POST", path, {}) == 401
        assert status_of(srv, "POST", path, {**page, "Origin": "http://evil.example"}) == 403
        assert status_of(srv, "POST", path, page) == 403  # no Origin: not from our page
        same = {**cookie, "Origin": f"http://127.0.0.1:{srv.port}"}
        assert status_of(srv, "POST", path, same) == 403  # no page token: not from our page
        time.sleep(0.2)
        state = call(srv, "read", {"job_id": job["job_id"]}, token=TOKEN)["state"]
        assert state == "running"
        assert status_of(srv, "POST", path, {**page, **same}) == 200
        final = call(srv, "read", {"job_id": job["job_id"], "wait_ms": 5000}, token=TOKEN)
        assert final["state"] == "cancelled"
    finally:
        kill_group(srv.proc)


# another server on another port of 127.0.0.1, which the browser sends the dashboard's
# cookie to (cookies are per host, not per port): it replays the cookie against Conch as the
# red team's did, with a forged Origin, and prints what came of it (one JSON line a visit)
REPLAYER = r"""
import http.server, json, sys, urllib.error, urllib.request
port, conch, shell, proof = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def status(path, body=None):
    headers = {"Cookie": cookie, "Origin": conch, "Sec-Fetch-Site": "same-origin",
               "Content-Type": "application/json"}
    req = urllib.request.Request(conch + path, data=body, headers=headers,
                                 method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        global cookie
        cookie = self.headers.get("Cookie", "")
        named = "conch_dashboard_" + conch.rsplit(":", 1)[1] + "="
        got = {"cookie": named in cookie, "jobs": status("/api/jobs"),
               "exec": status(f"/api/shells/{shell}/exec",
                              json.dumps({"command": f"id > {proof}"}).encode())}
        print(json.dumps(got), flush=True)
        self.send_response(200); self.send_header("Content-Type", "text/html"); self.end_headers()
        self.wfile.write(b"<h1>an app preview</h1>")
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_a_cookie_another_port_receives_cannot_be_replayed(
    tmp_path: Path, browser: Browser, other_user: LocalUser
):
    """A person signed in to the dashboard opens a page on another port of 127.0.0.1: that
    server gets the dashboard's cookie. Replayed by another local user's server it opens
    nothing (the session is bound to the user who signed in); replayed by a server of Conch's
    own user, it runs no control action (each needs the token of a page of this dashboard)."""
    srv = start_http(tmp_path, "--auth-token", TOKEN, "--dashboard-control", token=TOKEN)
    proof = Path(f"/tmp/conch-replay-proof-{os.getpid()}")
    replayers = []
    try:
        shell = call(srv, "shell_open", {}, token=TOKEN)["shell_id"]
        job = call(srv, "exec", {"command": "sleep 60", "yield_ms": 0}, token=TOKEN)
        browser.get(srv.url + "/")
        browser.type(browser.find("#token"), TOKEN)
        browser.click(browser.find("#go"))
        row_of(browser, job["job_id"])
        for user in (other_user, None):
            port = free_port()
            argv = [PYTHON, "-c", REPLAYER, str(port), srv.url, shell, str(proof)]
            proc = subprocess.Popen(
                user.argv(*argv) if user else argv,
                stdout=subprocess.PIPE,
                text=True,
                cwd="/",
                start_new_session=True,
            )
            replayers.append(proc)
            wait_listening(port)
            browser.get(f"http://127.0.0.1:{port}/")  # "open the app preview"
            assert proc.stdout is not None
            got = json.loads(proc.stdout.readline())
            assert got["cookie"] is True, got  # the browser did send it there
            if user is not None:
                assert got == {"cookie": True, "jobs": 401, "exec": 401}, got
            else:
                assert got["exec"] == 403, got  # no page token
            assert not proof.exists()
        # the person's own page still stops a job: its script sends the page's token
        browser.get(srv.url + "/")
        browser.click(browser.find(f'button[data-stop="{job["job_id"]}"]'))
        final = call(srv, "read", {"job_id": job["job_id"], "wait_ms": 5000}, token=TOKEN)
        assert final["state"] == "cancelled"
    finally:
        for proc in replayers:
            os.killpg(proc.pid, 9)
            proc.communicate()
        proof.unlink(missing_ok=True)
        kill_group(srv.proc)


def test_signing_in_to_a_dashboard_on_another_port_keeps_the_first_signed_in(
    tmp_path: Path, browser: Browser
):
    """Two dashboards on two ports of 127.0.0.1 (the browser keeps one cookie jar for the
    host, whatever the port): signing in to the second does not sign the person out of the
    first, and signing out of one leaves the other signed in."""
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    other = TOKEN + "-two"
    one = start_http(tmp_path / "one", "--auth-token", TOKEN, token=TOKEN)
    two = start_http(tmp_path / "two", "--auth-token", other, token=other)
    try:
        for srv in (one, two):
            browser.get(srv.url + "/")
            browser.type(browser.find("#token"), srv.token)
            browser.click(browser.find("#go"))
            browser.find("#jobs")
        browser.get(one.url + "/")
        browser.find("#jobs")  # still signed in to the first
        assert browser.find_all("form#signin") == []
        browser.click(browser.find("#signout button"))
        browser.find("form#signin")
        browser.get(two.url + "/")
        browser.find("#jobs")  # signing out of the first left the second alone
        assert browser.find_all("form#signin") == []
    finally:
        kill_group(one.proc)
        kill_group(two.proc)


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, "the other server did not start"
            time.sleep(0.05)
