"""A job's changes on the dashboard, and a person's undo: a real `conch serve --http` whose jobs
change real files, a real headless Chromium (chromedriver) clicking the page, and the undo
route under the same checks as every control action (page token, Origin, Sec-Fetch-Site)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import Browser, chromium
from frontend_servers import (
    HttpServer,
    dashboard_post,
    http_get,
    http_post,
    kill_group,
    page_token,
    start_http,
)
from frontend_servers import invoke as call

needs_browser = pytest.mark.needs("chromium", "chromedriver")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text("print('v1')\n")
    return ws


@pytest.fixture
def control(tmp_path: Path, ws: Path) -> Iterator[HttpServer]:
    srv = start_http(tmp_path, "--default-cwd", str(ws), "--dashboard-control")
    try:
        yield srv
    finally:
        kill_group(srv.proc)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    with chromium(tmp_path) as b:
        yield b


def hidden(b: Browser, element_id: str) -> bool:
    return bool(b.run(f"return document.getElementById('{element_id}').hidden;"))


def text_of(b: Browser, element_id: str) -> str:
    return str(b.run(f"return document.getElementById('{element_id}').textContent;"))


JOB = "sed -i s/v1/v2/ app.py; echo 'x = 1' > \"$(printf 'new\\u202egnp.py')\""


@needs_browser
def test_a_person_sees_the_changes_confirms_and_undoes(
    control: HttpServer, ws: Path, browser: Browser
) -> None:
    job = call(control, "exec", {"command": JOB})
    assert job["changes"] == {"added": 1, "modified": 1}, job
    browser.get(f"{control.url}/#{job['job_id']}")
    browser.wait(lambda: "Changes: 1 added, 1 modified" in text_of(browser, "csum"), 15)
    listing = text_of(browser, "clist")
    assert "M app.py" in listing and "+print('v2')" in listing, listing
    # a file name never reads as another: the bidi override is shown escaped
    assert "A new\\u202egnp.py" in listing and "\u202e" not in listing, listing

    # the first click only asks: nothing is undone until the person confirms
    assert not hidden(browser, "undo")
    browser.click(browser.find("#undo"))
    assert not hidden(browser, "confirm") and hidden(browser, "undo")
    assert "Undo 1 added, 1 modified of " + job["job_id"] in text_of(browser, "cask")
    assert (ws / "app.py").read_text() == "print('v2')\n"
    browser.click(browser.find("#undono"))
    assert hidden(browser, "confirm") and not hidden(browser, "undo")
    assert (ws / "app.py").read_text() == "print('v2')\n"

    browser.click(browser.find("#undo"))
    browser.click(browser.find("#undoyes"))
    browser.wait(lambda: text_of(browser, "cmsg").startswith("Undone."), 15)
    assert (ws / "app.py").read_text() == "print('v1')\n"
    assert sorted(p.name for p in ws.iterdir()) == ["app.py"]
    assert hidden(browser, "undo")  # (the undo's own change set is shown, not undone again)


@needs_browser
def test_a_conflict_is_shown_and_nothing_is_written(
    control: HttpServer, ws: Path, browser: Browser
) -> None:
    job = call(control, "exec", {"command": "sed -i s/v1/v2/ app.py"})
    browser.get(f"{control.url}/#{job['job_id']}")
    browser.wait(lambda: "1 modified" in text_of(browser, "csum"), 15)
    (ws / "app.py").write_text("print('a person')\n")
    browser.click(browser.find("#undo"))
    browser.click(browser.find("#undoyes"))
    browser.wait(lambda: text_of(browser, "cmsg").startswith("Not undone: "), 15)
    assert "app.py" in text_of(browser, "cmsg")
    assert (ws / "app.py").read_text() == "print('a person')\n"
    assert not hidden(browser, "undo") and hidden(browser, "confirm")


@needs_browser
def test_without_control_the_changes_show_with_no_undo(
    tmp_path: Path, ws: Path, browser: Browser
) -> None:
    srv = start_http(tmp_path, "--default-cwd", str(ws))
    try:
        job = call(srv, "exec", {"command": "sed -i s/v1/v2/ app.py"})
        browser.get(f"{srv.url}/#{job['job_id']}")
        browser.wait(lambda: "1 modified" in text_of(browser, "csum"), 15)
        assert hidden(browser, "undo")
        status, body = dashboard_post(srv, f"/api/jobs/{job['job_id']}/undo", {"confirm": True})
        assert status == 403 and "dashboard control is off" in body["error"]["message"]
        assert (ws / "app.py").read_text() == "print('v2')\n"
    finally:
        kill_group(srv.proc)


def test_the_undo_route_takes_only_a_confirmed_request_from_the_page(
    control: HttpServer, ws: Path
) -> None:
    job = call(control, "exec", {"command": "sed -i s/v1/v2/ app.py"})
    path = f"/api/jobs/{job['job_id']}/undo"
    here = f"http://127.0.0.1:{control.port}"
    token = str(page_token(control.port))
    page = {"X-Conch-Page-Token": token, "Origin": here}
    # not from the page: no page token, another origin, a cross-site fetch
    assert http_post(control, path, {"confirm": True}, {"Origin": here})[0] == 403
    assert http_post(control, path, {"confirm": True}, {**page, "Origin": "http://evil"})[0] == 403
    cross = {**page, "Sec-Fetch-Site": "cross-site"}
    assert http_post(control, path, {"confirm": True}, cross)[0] == 403
    # from the page, but not confirmed, or with a bad force list
    for bad in ({}, {"confirm": False}, {"confirm": "yes"}, {"confirm": True, "x": 1}):
        status, body = http_post(control, path, bad, page)
        assert status == 400 and body["error"]["code"] == "invalid_argument", (bad, body)
    status, body = http_post(control, path, {"confirm": True, "force": "app.py"}, page)
    assert status == 400 and body["error"]["code"] == "invalid_argument", body
    assert (ws / "app.py").read_text() == "print('v2')\n"
    # unknown job: 404; a bad cursor: 400 (one status map for every route)
    status, body = http_post(control, "/api/jobs/j_0000000000/undo", {"confirm": True}, page)
    assert status == 404 and body["error"]["code"] == "not_found", body
    status, raw = http_get(control, f"/api/jobs/{job['job_id']}/changes?cursor=x")
    assert status == 400 and json.loads(raw)["error"]["code"] == "invalid_argument"

    (ws / "app.py").write_text("print('a person')\n")
    status, body = http_post(control, path, {"confirm": True}, page)
    assert status == 409 and body["error"]["code"] == "conflict" and "app.py" in str(body)
    status, body = http_post(control, path, {"confirm": True, "force": ["app.py"]}, page)
    assert status == 200 and body["undo_of"] == job["job_id"], body
    assert (ws / "app.py").read_text() == "print('v1')\n"
    status, raw = http_get(control, f"/api/jobs/{job['job_id']}/changes")
    assert status == 200 and json.loads(raw)["undone_by"] == body["job_id"]


def test_the_page_is_the_package_file_with_its_nonce_and_token(control: HttpServer) -> None:
    """The page is package data (read with importlib.resources, shipped in the wheel), served
    with this response's nonce and this viewer's page token filled in."""
    from importlib.resources import files

    template = files("conch.http").joinpath("dashboard.html").read_text(encoding="utf-8")
    assert template.count("{{NONCE}}") == 2 and template.count("{{PAGE_TOKEN}}") == 1
    status, raw = http_get(control, "/")
    page = raw.decode()
    nonce = page.split('<style nonce="', 1)[1].split('"', 1)[0]
    token = page.split("const PAGE_TOKEN = ", 1)[1].split(";", 1)[0]
    assert status == 200 and len(nonce) >= 16 and len(json.loads(token)) >= 32
    assert page == template.replace("{{NONCE}}", nonce).replace("{{PAGE_TOKEN}}", token)
