"""A string that is no Unicode text (a lone UTF-16 surrogate, a valid JSON escape such as
``\\udcff``) in any field of any tool is `invalid_argument` naming it: never `internal` and
never a bare HTTP 500, whichever field it sits in and wherever that field becomes bytes (stdin,
a script, a path, an environment, a pattern). The fields are found from the tools' own schemas,
so a field added later is covered too."""

from __future__ import annotations

import http.client
import json
import logging
import os
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
from frontend_servers import kill_group, page_token, start_http

import conch
from conch.tools.context import ToolContext
from conch.tools.registry import PROFILES, ToolRegistry

pytestmark = pytest.mark.anyio

#: U+DCFF: what Python's surrogateescape makes of the byte 0xFF (the range once let through
#: as carried bytes), and U+D800, a high surrogate
BAD = ("\udcff", "\ud800")


def _filler(schema: dict[str, Any]) -> Any:
    """A small valid value of a schema (for the required fields around the one tested)."""
    if "anyOf" in schema:
        return _filler(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return [_filler(schema["items"])]
    if kind == "object":
        return {k: _filler(schema["properties"][k]) for k in schema.get("required", ())}
    return "x"


def slots(schema: dict[str, Any], bad: str) -> Iterator[tuple[str, Any]]:
    """(where, value) for each place in ``schema`` that takes a string (keys of open objects
    too), the value holding ``bad`` there and valid around it."""
    for sub in schema.get("anyOf", ()):
        yield from slots(sub, bad)
    kind = schema.get("type")
    if kind == "string" or ("enum" in schema and kind is None):
        yield "", f"a{bad}b"
    elif kind == "array":
        for where, v in slots(schema["items"], bad):
            yield f"[0]{where}", [v]
    elif kind == "object":
        base = _filler(schema)
        for name, sub in schema.get("properties", {}).items():
            for where, v in slots(sub, bad):
                yield f".{name}{where}", {**base, name: v}
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            yield "{key}", {**base, f"A{bad}": _filler(extra)}
            for where, v in slots(extra, bad):
                yield f".A{where}", {**base, "A": v}


#: the request's ``_meta.shell_env`` (secrets ride there), a name and a value
SHELL_ENV = {"shell_env": {"A": f"x{BAD[0]}", f"B{BAD[0]}": "1"}}

Case = tuple[str, str, dict[str, Any], dict[str, Any] | None]


def cases(registry: ToolRegistry, job_id: str, shell_id: str) -> Iterator[Case]:
    """(label, tool, arguments, request _meta) for every string slot of every tool of
    ``registry``, and for its ``_meta.shell_env``."""
    for tool in registry.tools + registry.unlisted:
        schema = tool.input_schema
        props = schema.get("properties", {})
        base = {k: _filler(props[k]) for k in schema.get("required", ())}
        # what a real call names: a running job (stdin kept open), an open shell, a pattern
        if "job_id" in props and tool.name != "exec":
            base["job_id"] = job_id
        for key, value in (("shell_id", shell_id), ("pattern", "x")):
            if key in base:
                base[key] = value
        if tool.name == "exec" and "command" in props:
            base = {"command": "true"}
        for bad in BAD:
            for where, args in slots({**schema, "required": []}, bad):
                name = where.lstrip(".").split(".")[0].split("[")[0].split("{")[0]
                given = dict(base)
                if name in ("argv", "script"):
                    given.pop("command", None)  # one of command, argv, script
                if name in ("job_ids", "shell_id"):
                    given.pop("job_id", None)  # one of job_id, job_ids, shell_id
                given.update(args)
                yield f"{tool.name}{where} {bad!a}", tool.name, given, None
        yield f"{tool.name} _meta.shell_env {BAD[0]!a}", tool.name, base, SHELL_ENV


@pytest.fixture
async def waiting(tmp_path):
    """A runtime with a job that waits on its open stdin and an open shell (closed by it)."""
    cfg = conch.Config(data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path))
    async with conch.Runtime(cfg) as rt:
        job = await rt.call_tool("exec", {"command": "cat", "stdin_open": True, "yield_ms": 0})
        shell = await rt.call_tool("shell_open", {})
        yield rt, job["job_id"], shell["shell_id"]


async def test_a_lone_surrogate_in_any_field_is_invalid_argument(waiting, caplog):
    rt, job_id, shell_id = waiting
    wrong = []
    for label, tool, args, meta in cases(rt.registry, job_id, shell_id):
        r = await rt.call_tool(tool, args, context=ToolContext(meta=meta))
        error = r.get("error") or {}
        if error.get("code") != "invalid_argument" or "surrogate" not in error.get("message"):
            wrong.append((label, r))
    assert not wrong, "\n".join(f"{label}: {str(r)[:300]}" for label, r in wrong)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # the job and the shell the calls named are untouched
    await rt.call_tool("write", {"job_id": job_id, "text": "still here\n", "yield_ms": 0})
    r = await rt.call_tool(
        "read",  # (from the start: the write's own result may have shown it already)
        {"job_id": job_id, "cursor": 0, "until": {"pattern": "still here"}, "wait_ms": 20000},
    )
    assert "still here" in r["output"], r


@pytest.mark.parametrize("profile", sorted(PROFILES))
async def test_every_profile_refuses_it_in_its_own_words(profile, tmp_path, caplog):
    """Profiles word their errors as the tools they copy do; none gets as far as `internal`
    (the check is made before a profile's own validator)."""
    cfg = conch.Config(
        data_dir=str(tmp_path / "data"), default_cwd=str(tmp_path), profiles=[profile]
    )
    async with conch.Runtime(cfg) as rt:
        seen = 0
        for label, tool, args, meta in cases(rt.registry, "j_0000000000", "s_0000000000"):
            outcome = await rt.call_tool_full(tool, args, ToolContext(meta=meta))
            assert outcome.is_error, (label, outcome.result)
            assert "internal" not in json.dumps(outcome.result), (label, outcome.result)
            seen += 1
        assert seen > 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_over_http_invoke_it_is_invalid_argument_never_a_500(http_server, tmp_path):
    def post(body: bytes) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", http_server.port, timeout=30)
        try:
            conn.request("POST", "/invoke", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def invoke(method: str, params: dict[str, Any]) -> tuple[int, Any]:
        # json.dumps writes a lone surrogate as its JSON escape, as a client's encoder would
        status, raw = post(json.dumps({"method": method, "params": params}).encode())
        return status, json.loads(raw)

    _, job = invoke("exec", {"command": "cat", "stdin_open": True, "yield_ms": 0})
    _, shell = invoke("shell_open", {})
    try:
        wrong = []
        registry = ToolRegistry(("conch",))
        for label, tool, args, meta in cases(registry, job["job_id"], shell["shell_id"]):
            status, out = invoke(tool, args if meta is None else {**args, "_meta": meta})
            error = out.get("error") or {}
            if status != 200 or error.get("code") != "invalid_argument":
                wrong.append((label, status, out))
        assert not wrong, "\n".join(f"{label}: HTTP {s} {str(o)[:300]}" for label, s, o in wrong)
        invoke("write", {"job_id": job["job_id"], "text": "still here\n", "yield_ms": 0})
        until = {"pattern": "still here"}
        params = {"job_id": job["job_id"], "cursor": 0, "until": until, "wait_ms": 20000}
        _, r = invoke("read", params)
        assert "still here" in r["output"], r
        # the other way: a path Conch reports that is not UTF-8 (a shell's cwd) is said with
        # U+FFFD, as output bytes are, never an answer that cannot be encoded
        os.mkdir(os.path.join(os.fsencode(tmp_path), b"caf\xe9"))
        where = shlex.quote(str(tmp_path)) + "/$'caf\\xe9'"
        status, r = invoke("exec", {"shell_id": shell["shell_id"], "command": f"cd {where}"})
        assert status == 200 and r["cwd"] == f"{tmp_path}/caf\ufffd", (status, r)
    finally:
        invoke("signal", {"job_id": job["job_id"], "signal": "kill"})
        invoke("signal", {"shell_id": shell["shell_id"]})


def test_the_dashboards_typing_and_commands_refuse_it_too(tmp_path):
    """A person's keys and shell command from the dashboard (``--dashboard-control``) are text
    as well: a lone surrogate there is a 400 `invalid_argument`, not a bare 500."""
    srv = start_http(tmp_path, "--dashboard-control")
    try:
        port = srv.port
        token = page_token(port) or ""  # (a control action carries its page's token)

        def post(path: str, body: dict[str, Any]) -> tuple[int, Any]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                headers = {
                    "Content-Type": "application/json",
                    "Origin": srv.url,
                    "X-Conch-Page-Token": token,
                }
                conn.request("POST", path, json.dumps(body), headers)
                resp = conn.getresponse()
                return resp.status, json.loads(resp.read())
            finally:
                conn.close()

        _, job = post(
            "/invoke", {"method": "exec", "params": {"command": "cat", "pty": True, "yield_ms": 0}}
        )
        _, shell = post("/invoke", {"method": "shell_open", "params": {}})
        for bad in BAD:
            for path, body in (
                (f"/api/jobs/{job['job_id']}/input", {"text": f"a{bad}b"}),
                (f"/api/shells/{shell['shell_id']}/exec", {"command": f"echo {bad}"}),
            ):
                status, out = post(path, body)
                assert status == 400 and out["error"]["code"] == "invalid_argument", (path, out)
    finally:
        kill_group(srv.proc)
