"""`changes` and undo through the HTTP invoke API (`POST /invoke`) and `conch invoke`, against
a real `conch serve --http` whose jobs change real files."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from frontend_servers import HttpServer, kill_group, start_http

from conch.http import IS_ERROR_HEADER


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[HttpServer, Path]]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "config.ini").write_text("debug = false\n")
    srv = start_http(tmp_path, "--default-cwd", str(ws))
    try:
        yield srv, ws
    finally:
        kill_group(srv.proc)


def invoke(srv: HttpServer, method: str, params: Any) -> tuple[int, bool, Any]:
    """(HTTP status, the is-error header, the JSON answer) of one ``POST /invoke``."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    try:
        body = json.dumps({"method": method, "params": params})
        conn.request("POST", "/invoke", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        flag = resp.getheader(IS_ERROR_HEADER) == "true"
        return resp.status, flag, json.loads(resp.read())
    finally:
        conn.close()


def conch_invoke(srv: HttpServer, method: str, params: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONCH_")}
    return subprocess.run(
        [sys.executable, "-m", "conch", "invoke", method, json.dumps(params), "--url", srv.url],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_the_invoke_api_lists_undoes_and_refuses_a_conflict(served) -> None:
    srv, ws = served
    _, _, ran = invoke(srv, "exec", {"command": "sed -i s/false/true/ config.ini; touch log"})
    assert ran["changes"] == {"added": 1, "modified": 1}, ran
    status, is_error, got = invoke(srv, "changes", {"job_id": ran["job_id"]})
    assert (status, is_error) == (200, False)
    assert {f["path"]: f["change"] for f in got["files"]} == {
        "config.ini": "modified",
        "log": "added",
    }
    assert "-debug = false\n+debug = true\n" in got["diff"], got["diff"]

    (ws / "log").write_text("written since\n")
    status, is_error, refused = invoke(srv, "changes", {"job_id": ran["job_id"], "undo": True})
    assert (status, is_error, refused["error"]["code"]) == (200, True, "conflict"), refused
    assert "log" in refused["error"]["message"] and (ws / "log").exists()

    _, is_error, undone = invoke(
        srv, "changes", {"job_id": ran["job_id"], "undo": True, "force": ["log"]}
    )
    assert is_error is False and undone["undo_of"] == ran["job_id"], undone
    assert (ws / "config.ini").read_text() == "debug = false\n" and not (ws / "log").exists()

    _, is_error, bad = invoke(srv, "changes", {"job_id": ran["job_id"], "force": "log"})
    assert is_error is True and bad["error"]["code"] == "invalid_argument", bad


def test_conch_invoke_changes_undo_and_exit_1_on_a_conflict(served) -> None:
    srv, ws = served
    ran = json.loads(conch_invoke(srv, "exec", {"command": "echo x >> config.ini"}).stdout)
    r = conch_invoke(srv, "changes", {"job_id": ran["job_id"]})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files"][0]["path"] == "config.ini"
    (ws / "config.ini").write_text("a person's\n")
    r = conch_invoke(srv, "changes", {"job_id": ran["job_id"], "undo": True})
    assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "conflict", r
    assert (ws / "config.ini").read_text() == "a person's\n"
    r = conch_invoke(
        srv, "changes", {"job_id": ran["job_id"], "undo": True, "force": ["config.ini"]}
    )
    assert r.returncode == 0, r.stdout
    assert (ws / "config.ini").read_text() == "debug = false\n"
    r = conch_invoke(srv, "changes", {"job_id": ran["job_id"], "max_bytes": 0})
    assert r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "invalid_argument"
    # info, folded into list, still answers by its own name
    r = conch_invoke(srv, "info", {})
    assert r.returncode == 0 and json.loads(r.stdout)["changes"]["state"] == "on", r.stdout
