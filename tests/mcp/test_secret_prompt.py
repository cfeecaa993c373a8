"""Secrets without the model (`--secret-prompt elicit`): a PTY or shell job's password prompt
is answered by a person on a one-time loopback page, reached through URL-mode elicitation.

The whole path is real: `conch serve` over stdio (and Streamable HTTP), the SDK client's
elicitation callback, and an HTTP GET + POST of the page, like a browser's, in both eras."""

from __future__ import annotations

import contextlib
import html
import http.client
import json
import os
import re
import sys
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from frontend_servers import kill_group, start_http
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client as sdk_stdio_client

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
MODES = ["legacy", "auto"]
SECRET = "hunter2-Sx9_q7"
READ_S = (
    "read -s -p 'Password: ' pw; echo; "
    f"if [ \"$pw\" = '{SECRET}' ]; then echo MATCH-read; else echo NO-MATCH; fi"
)
GETPASS = (
    f"{sys.executable} -c \"import getpass; p = getpass.getpass('Secret: '); "
    f"print('MATCH-getpass' if p == '{SECRET}' else 'NO-MATCH')\""
)


def http_call(url: str, method: str = "GET", body: str | None = None, **headers: str):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        hdrs = dict(headers)
        if body is not None:
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, u.path, body=body, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


class Person:
    """The elicitation callback: opens the page and types the secret, as a person would."""

    def __init__(self, secret: str = SECRET) -> None:
        self.secret = secret
        self.asked: list[types.ElicitRequestParams] = []
        self.pages: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        assert isinstance(params, types.ElicitRequestURLParams), "never form mode for secrets"
        url = params.url
        self.pages.append(url)
        origin = "http://" + urllib.parse.urlsplit(url).netloc
        status, page = await anyio.to_thread.run_sync(http_call, url)
        assert status == 200 and 'type="password"' in page
        fields = {"secret": self.secret}
        if 'id="confirm"' in page:  # no known password program: the person confirms
            fields["confirm"] = "unverified"
        body = urllib.parse.urlencode(fields)
        status, done = await anyio.to_thread.run_sync(
            lambda: http_call(url, "POST", body, Origin=origin)
        )
        assert status == 200 and "Sent to the terminal" in done, done
        return types.ElicitResult(action="accept")


@contextlib.asynccontextmanager
async def stdio_client(
    tmp_path: Path, mode: str, person: Person | None, *extra: str
) -> AsyncIterator[Client]:
    """The server's stderr goes to a file under tmp_path, checked for the secret."""
    args = ["-m", "conch", "serve", "--data-dir", str(tmp_path / "data"), *extra]
    params = StdioServerParameters(command=sys.executable, args=args, env={**os.environ})
    with open(tmp_path / "server.stderr", "a") as err:
        transport = sdk_stdio_client(params, errlog=err)
        async with Client(transport, mode=mode, elicitation_callback=person) as c:
            yield c


def nowhere_but_the_terminal(tmp_path: Path, *results: Any) -> None:
    for r in results:
        assert SECRET not in json.dumps(r, default=str)
    for path in tmp_path.rglob("*"):  # logs, job logs, the server's stderr
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("mode", MODES)
async def test_a_read_s_prompt_gets_the_secret_through_the_page(tmp_path: Path, mode):
    person = Person()
    async with stdio_client(tmp_path, mode, person, "--secret-prompt", "elicit") as c:
        r = await c.call_tool("exec", {"command": READ_S, "pty": True, "yield_ms": 30000})
        snap = r.structured_content
        assert snap["state"] == "exited", snap
        assert "MATCH-read" in snap["output"] and "NO-MATCH" not in snap["output"]
        assert len(person.asked) == 1 and person.asked[0].mode == "url"
        # the person is told plainly who gets the value: bash's `read -s` is no password program
        message = person.asked[0].message
        assert "goes to that program" in message and "Warning" in message, message
        assert "bash" in message and "never to the agent" not in message, message
        log = await c.call_tool("read", {"job_id": snap["job_id"], "cursor": 0, "raw": True})
        # the page is single use
        status, _ = await anyio.to_thread.run_sync(http_call, person.pages[0])
        assert status == 410
    nowhere_but_the_terminal(tmp_path, r.model_dump(), log.model_dump())


@pytest.mark.parametrize("mode", MODES)
async def test_a_getpass_prompt_in_a_persistent_shell_gets_the_secret(tmp_path: Path, mode):
    person = Person()
    async with stdio_client(tmp_path, mode, person, "--secret-prompt", "elicit") as c:
        shell = (await c.call_tool("shell_open", {})).structured_content
        r = await c.call_tool(
            "exec", {"shell_id": shell["shell_id"], "command": GETPASS, "yield_ms": 30000}
        )
        snap = r.structured_content
        assert snap["state"] == "exited" and snap["exit_code"] == 0, snap
        assert "MATCH-getpass" in snap["output"]
        after = await c.call_tool("exec", {"shell_id": shell["shell_id"], "command": "echo ok"})
        assert after.structured_content["output"] == "ok\n"
        await c.call_tool("shell_close", {"shell_id": shell["shell_id"]})
    assert len(person.asked) == 1
    nowhere_but_the_terminal(tmp_path, r.model_dump())


@pytest.mark.parametrize("mode", MODES)
async def test_a_prompt_met_by_a_waiting_read_is_elicited_too(tmp_path: Path, mode):
    person = Person()
    async with stdio_client(tmp_path, mode, person, "--secret-prompt", "elicit") as c:
        first = await c.call_tool(
            "exec", {"command": "sleep 0.5; " + READ_S, "pty": True, "yield_ms": 0}
        )
        job_id = first.structured_content["job_id"]
        r = await c.call_tool("read", {"job_id": job_id, "wait_ms": 30000, "until": "exit"})
        assert "MATCH-read" in r.structured_content["output"]
    assert len(person.asked) == 1
    nowhere_but_the_terminal(tmp_path, r.model_dump())


@pytest.mark.parametrize("mode", MODES)
async def test_without_the_setting_nothing_changes(tmp_path: Path, mode):
    person = Person()
    async with stdio_client(tmp_path, mode, person) as c:
        r = await c.call_tool("exec", {"command": READ_S, "pty": True, "yield_ms": 1500})
        snap = r.structured_content
        assert snap["state"] == "running" and snap["awaiting_secret"] is True
        assert "secret_page" not in snap and "/secret/" not in r.content[0].text
        await c.call_tool("signal", {"job_id": snap["job_id"], "signal": "kill"})
    assert person.asked == []


async def submit(url: str, secret: str = SECRET, confirm: bool = True) -> tuple[int, str]:
    """The person sends ``secret`` (ticking the page's second confirmation: ``confirm``)."""
    origin = "http://" + urllib.parse.urlsplit(url).netloc
    fields = {"secret": secret, **({"confirm": "unverified"} if confirm else {})}
    body = urllib.parse.urlencode(fields)
    return await anyio.to_thread.run_sync(lambda: http_call(url, "POST", body, Origin=origin))


@pytest.mark.parametrize("mode", MODES)
async def test_without_url_elicitation_the_result_names_a_page_for_the_person(tmp_path: Path, mode):
    """A client that cannot elicit by URL (Claude Code; a headless host): the result of a
    call whose job waits for a secret names a one-time page, in both views, which the agent
    passes on; what the person types there reaches the terminal and nothing else."""
    async with stdio_client(tmp_path, mode, None, "--secret-prompt", "elicit") as c:
        r = await c.call_tool(
            "exec", {"command": READ_S + "; " + READ_S, "pty": True, "yield_ms": 1500}
        )
        snap = r.structured_content
        assert snap["state"] == "running" and snap["awaiting_secret"] is True, snap
        page = snap["secret_page"]
        assert page.startswith("http://127.0.0.1:") and "/secret/" in page
        assert page in r.content[0].text
        # a look while the same prompt waits names the same page
        again = await c.call_tool("read", {"job_id": snap["job_id"], "wait_ms": 200})
        assert again.structured_content["secret_page"] == page
        status, _ = await anyio.to_thread.run_sync(http_call, page)
        assert status == 200
        status, done = await submit(page)
        assert status == 200 and "Sent to the terminal" in done, done
        # the second prompt gets a new page: one page, one value (first the answer to the
        # first: until bash has read it, the terminal still waits with echo off)
        first_done = await c.call_tool(
            "read",
            {"job_id": snap["job_id"], "wait_ms": 10000, "until": {"pattern": "MATCH-read"}},
        )
        assert "MATCH-read" in first_done.structured_content["output"]
        second = await c.call_tool(
            "read", {"job_id": snap["job_id"], "wait_ms": 10000, "until": "input"}
        )
        page2 = second.structured_content.get("secret_page")
        assert page2 and page2 != page, second.structured_content
        assert (await submit(page))[0] == 410
        assert (await submit(page2))[0] == 200
        end = await c.call_tool(
            "read", {"job_id": snap["job_id"], "wait_ms": 10000, "until": "exit"}
        )
        out = end.structured_content
        assert out["state"] == "exited" and out["output"].count("MATCH-read") == 1, out
        assert "secret_page" not in out
        log = await c.call_tool("read", {"job_id": snap["job_id"], "cursor": 0, "raw": True})
        assert log.structured_content["output"].count("MATCH-read") == 2
    nowhere_but_the_terminal(
        tmp_path,
        r.model_dump(),
        again.model_dump(),
        first_done.model_dump(),
        second.model_dump(),
        end.model_dump(),
    )


# two processes read the terminal with echo off; the one that gets the line is silent for 2.5 s,
# so meanwhile the terminal still waits for a secret (the other reader) though it was answered
def two_readers(gate: Path) -> str:
    """Two readers of one terminal with echo off; the one that gets the line keeps echo off
    until ``gate`` exists (the test has looked meanwhile), prints, then ends the other. (It
    printed after ending the other: when the child got the line, it ended the job's leader
    first and its print was lost.)"""
    return (
        f'{sys.executable} -c "\n'
        "import os, sys, termios, time\n"
        "fd = sys.stdin.fileno()\n"
        "old = termios.tcgetattr(fd); new = termios.tcgetattr(fd); new[3] &= ~termios.ECHO\n"
        "termios.tcsetattr(fd, termios.TCSANOW, new)\n"
        "print('Password: ', end='', flush=True)\n"
        "child = os.fork()\n"
        "line = sys.stdin.readline()\n"
        f"while not os.path.exists('{gate}'): time.sleep(0.01)\n"
        "termios.tcsetattr(fd, termios.TCSANOW, old)\n"
        f"print('GOT-MATCH' if line.strip() == '{SECRET}' else 'GOT-OTHER', flush=True)\n"
        "os.kill(child or os.getppid(), 9)\n"
        '"'
    )


async def test_no_new_page_while_the_value_just_typed_is_being_read(tmp_path: Path):
    """A page serves one value, and a prompt asked again gets a new one; but right after a page
    typed its value the terminal can still wait with echo off (the program has not printed yet).
    That prompt was answered: no page is offered for it until the job prints."""
    gate = tmp_path / "gate"  # (a fixed 2.5 s for the test's look was too short under load)
    async with stdio_client(tmp_path, "auto", None, "--secret-prompt", "elicit") as c:
        r = await c.call_tool("exec", {"command": two_readers(gate), "pty": True, "yield_ms": 0})
        job_id = r.structured_content["job_id"]
        r = await c.call_tool("read", {"job_id": job_id, "wait_ms": 30000, "until": "input"})
        snap = r.structured_content
        assert snap["state"] == "running" and snap["awaiting_secret"] is True, snap
        status, _ = await submit(snap["secret_page"])
        assert status == 200
        now = await c.call_tool("read", {"job_id": snap["job_id"], "wait_ms": 0})
        gate.touch()
        assert now.structured_content["awaiting_secret"] is True, now.structured_content
        assert "secret_page" not in now.structured_content, now.structured_content
        assert "/secret/" not in now.content[0].text
        end = await c.call_tool(
            "read", {"job_id": snap["job_id"], "wait_ms": 15000, "until": "exit"}
        )
        assert "GOT-MATCH" in end.structured_content["output"], end.structured_content
    nowhere_but_the_terminal(tmp_path, r.model_dump(), now.model_dump(), end.model_dump())


async def test_over_streamable_http_in_both_eras(tmp_path: Path):
    srv = start_http(tmp_path, "--secret-prompt", "elicit")
    try:
        for mode in MODES:
            person = Person()
            async with Client(srv.url + "/mcp", mode=mode, elicitation_callback=person) as c:
                r = await c.call_tool("exec", {"command": READ_S, "pty": True, "yield_ms": 30000})
            assert "MATCH-read" in r.structured_content["output"], (mode, r.structured_content)
            assert len(person.asked) == 1
    finally:
        kill_group(srv.proc)
    nowhere_but_the_terminal(tmp_path)


async def test_the_page_is_guarded_single_use_and_expires():
    from conch.http.secret_page import LoopbackSecretPages

    got: list[str] = []

    async def deliver(value: str) -> bool:
        got.append(value)
        return True

    pages = LoopbackSecretPages(ttl_s=1.0)
    try:
        page = await pages.open("a test prompt", deliver)
        url = urllib.parse.urlsplit(page.url)
        assert url.hostname == "127.0.0.1" and len(url.path.rsplit("/", 1)[1]) >= 40
        assert page.page_id not in page.url  # the elicitation id does not open the page
        status, _ = await anyio.to_thread.run_sync(lambda: http_call(page.url, Host="evil.example"))
        assert status == 421
        status, _ = await anyio.to_thread.run_sync(
            lambda: http_call(page.url, "POST", "secret=x", Origin="http://evil.example")
        )
        assert status == 403 and got == []
        wrong = page.url.rsplit("/", 1)[0] + "/not-the-token"
        assert (await anyio.to_thread.run_sync(http_call, wrong))[0] == 410
        bad = await anyio.to_thread.run_sync(lambda: http_call(page.url, "POST", "secret=a%0Ab"))
        assert bad[0] == 400 and "nothing was sent" in bad[1] and got == []  # no line breaks
        empty = await anyio.to_thread.run_sync(lambda: http_call(page.url, "POST", "other=1"))
        assert empty[0] == 400 and got == []
        # no program named: a value goes only with the second confirmation
        unsure = await anyio.to_thread.run_sync(lambda: http_call(page.url, "POST", "secret=c"))
        assert unsure[0] == 200 and "Nothing was sent" in unsure[1] and got == []
        assert 'id="confirm"' in unsure[1]
        ok = await anyio.to_thread.run_sync(
            lambda: http_call(page.url, "POST", "secret=c&confirm=unverified")
        )
        assert ok[0] == 200 and got == ["c"]
        again = await anyio.to_thread.run_sync(lambda: http_call(page.url, "POST", "secret=d"))
        assert again[0] == 410 and got == ["c"]  # single use
        got.clear()
        late = await pages.open("another", deliver)
        await anyio.sleep(1.2)
        assert (await anyio.to_thread.run_sync(http_call, late.url))[0] == 410
        fresh = await pages.open("a third", deliver)
        ok = await anyio.to_thread.run_sync(
            lambda: http_call(fresh.url, "POST", "secret=s3&confirm=unverified")
        )
        assert ok[0] == 200 and got == ["s3"]
        as_json = await pages.open("a fourth", deliver)

        def post_json() -> tuple[int, str]:
            u = urllib.parse.urlsplit(as_json.url)
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
            try:
                body = json.dumps({"secret": "j4", "confirm": "unverified"})
                conn.request("POST", u.path, body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                return resp.status, resp.read().decode()
            finally:
                conn.close()

        assert (await anyio.to_thread.run_sync(post_json))[0] == 200 and got == ["s3", "j4"]
    finally:
        await pages.aclose()


async def test_a_task_waiting_for_a_secret_is_input_required_with_the_page(tmp_path: Path):
    from tasks_client import TasksExtension

    person = Person()
    ext = TasksExtension(poll_s=0.2, elicit=person)
    args = [
        "-m",
        "conch",
        "serve",
        "--data-dir",
        str(tmp_path / "data"),
        "--secret-prompt",
        "elicit",
    ]
    params = StdioServerParameters(command=sys.executable, args=args, env={**os.environ})
    async with Client(params, extensions=[ext], elicitation_callback=person) as c:
        r = await c.call_tool("exec", {"command": "sleep 1.5; " + READ_S, "pty": True})
    assert [t.task_id for t in ext.created] == [r.structured_content["job_id"]]
    asked = [p for p in ext.polls if p.status == "input_required"]
    assert asked and all(len(p.input_requests or {}) == 1 for p in asked)
    assert len({next(iter(p.input_requests or {})) for p in asked}) == 1  # one key per prompt
    assert "MATCH-read" in r.structured_content["output"] and len(person.asked) == 1
    nowhere_but_the_terminal(tmp_path, r.model_dump(), [p.model_dump() for p in ext.polls])


@pytest.mark.parametrize("mode", ["legacy"])
async def test_a_declined_elicitation_leaves_the_page_to_the_agent(tmp_path: Path, mode):
    """A host that declines URL elicitation without asking anyone (``codex exec``): the
    declined page is closed, and the call's result names a new one for the agent to pass on."""
    asked: list[str] = []

    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        asked.append(params.url)
        return types.ElicitResult(action="decline")

    async with stdio_client(tmp_path, mode, decline, "--secret-prompt", "elicit") as c:  # type: ignore[arg-type]
        r = await c.call_tool("exec", {"command": READ_S, "pty": True, "yield_ms": 2000})
        snap = r.structured_content
        assert len(asked) == 1 and snap["awaiting_secret"] is True, snap
        page = snap["secret_page"]
        assert page != asked[0]
        assert (await submit(asked[0]))[0] == 410  # the declined page takes nothing
        assert (await submit(page))[0] == 200
        end = await c.call_tool(
            "read", {"job_id": snap["job_id"], "wait_ms": 10000, "until": "exit"}
        )
        assert "MATCH-read" in end.structured_content["output"], end.structured_content
    nowhere_but_the_terminal(tmp_path, r.model_dump(), end.model_dump())


# the agent's own prompt dressed as sudo's, which saves the value where the agent reads it (a
# bidi override in its comment: the page shows it escaped)
FAKE_SUDO = (
    "read -r -s -p '[sudo] password for root: ' P; echo; printf %s \"$P\" > .build-cache  # \u202e"
)


def page_text(page: str, element: str) -> str | None:
    """The text of the page's element with this id (markup removed), None without one."""
    m = re.search(rf'<(\w+) id="{element}"[^>]*>(.*?)</\1>', page, re.S)
    return None if m is None else html.unescape(re.sub(r"<[^>]+>", "", m.group(2)))


async def test_the_page_says_who_gets_the_value_and_warns_of_a_fake_prompt(tmp_path: Path):
    """A page must not promise what it cannot hold: the program reading the terminal gets the
    value, and the agent started it. The page shows what the agent ran and why (escaped as the
    dashboard shows them), which program reads the terminal, and warns first thing when that is
    no known password program (a shell's `read -s` posing as sudo)."""
    async with stdio_client(tmp_path, "auto", None, "--secret-prompt", "elicit") as c:
        first = await c.call_tool(
            "exec",
            {"command": FAKE_SUDO, "pty": True, "yield_ms": 0, "purpose": "install the build deps"},
        )
        job_id = first.structured_content["job_id"]
        r = await c.call_tool("read", {"job_id": job_id, "until": "input", "wait_ms": 20000})
        snap = r.structured_content
        assert snap["awaiting_secret"] is True, snap
        assert "never to the agent" not in r.content[0].text
        status, page = await anyio.to_thread.run_sync(http_call, snap["secret_page"])
        assert status == 200 and 'type="password"' in page
        for promise in ("never to the agent", "straight to the terminal"):
            assert promise not in page
        assert page.index('id="warning"') < page.index('type="password"')  # first thing
        warning = page_text(page, "warning")
        assert warning and "not a known password prompt" in warning and "/bash" in warning
        assert (page_text(page, "reader") or "").startswith("/usr/bin/bash")
        what = page_text(page, "what") or ""
        assert "[sudo] password for root:" in what and ".build-cache" in what
        assert "\\u202e" in what and "\u202e" not in page  # a bidi override, escaped
        assert page_text(page, "purpose") == "install the build deps"
        assert "goes to that program" in (page_text(page, "goes") or "")
        await c.call_tool("signal", {"job_id": snap["job_id"], "signal": "kill"})


OPENSSL = "openssl enc -aes-128-cbc -pbkdf2 -in /dev/null -out /dev/null"


@pytest.mark.needs("openssl")
async def test_a_known_password_program_is_named_without_a_warning(tmp_path: Path):
    async with stdio_client(tmp_path, "auto", None, "--secret-prompt", "elicit") as c:
        first = await c.call_tool("exec", {"command": OPENSSL, "pty": True, "yield_ms": 0})
        job_id = first.structured_content["job_id"]
        r = await c.call_tool("read", {"job_id": job_id, "until": "input", "wait_ms": 20000})
        snap = r.structured_content
        assert snap["awaiting_secret"] is True, snap
        status, page = await anyio.to_thread.run_sync(http_call, snap["secret_page"])
        assert status == 200 and 'id="warning"' not in page, page
        assert (page_text(page, "reader") or "").startswith("/usr/bin/openssl ")
        assert "goes to that program" in (page_text(page, "goes") or "")
        await c.call_tool("signal", {"job_id": snap["job_id"], "signal": "kill"})


async def test_a_value_is_not_sent_when_another_program_reads_than_the_page_showed():
    """A real prompt that gives up with a fake one in its place: the value the person typed
    for the first is not sent; the page shows who reads now and takes a value after that."""
    from conch.http.secret_page import LoopbackSecretPages
    from conch.mcp.secrets import SecretAsk

    sudo = SecretAsk(
        "j_1", "[sudo] password for root:", "sudo true", None, ((7, "/usr/bin/sudo"),), ()
    )
    fake = SecretAsk(
        "j_1",
        "[sudo] password for root:",
        "sudo true",
        None,
        ((9, "/usr/bin/bash"),),
        ("/usr/bin/bash",),
    )
    now = [sudo]
    got: list[str] = []

    async def deliver(value: str) -> bool:
        got.append(value)
        return True

    pages = LoopbackSecretPages()
    try:
        page = await pages.open("a test prompt", deliver, lambda: now[0])
        status, shown = await anyio.to_thread.run_sync(http_call, page.url)
        assert status == 200 and 'id="warning"' not in shown

        def post_json(value: str) -> tuple[int, str]:
            u = urllib.parse.urlsplit(page.url)
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
            try:
                body = json.dumps({"secret": value})  # a lone surrogate as its JSON escape
                conn.request("POST", u.path, body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                return resp.status, resp.read().decode()
            finally:
                conn.close()

        status, text = await anyio.to_thread.run_sync(lambda: post_json("a\udcffb"))
        assert status == 400 and "nothing was sent" in text and got == []
        now[0] = fake
        status, again = await anyio.to_thread.run_sync(
            lambda: http_call(page.url, "POST", "secret=s1")
        )
        assert status == 409 and got == [] and "nothing was sent" in again
        assert 'id="warning"' in again and "/usr/bin/bash" in (page_text(again, "reader") or "")
        status, _ = await anyio.to_thread.run_sync(
            lambda: http_call(page.url, "POST", "secret=s2&confirm=unverified")
        )
        assert status == 200 and got == ["s2"]  # seen now: the person's own decision
    finally:
        await pages.aclose()


@pytest.mark.needs("openssl")
def test_a_known_password_program_is_the_systems_own(tmp_path: Path):
    """Known by name, in a system directory, the file and directory root's and writable by
    nobody else: a copy named sudo that a job made elsewhere is not one."""
    from conch.mcp.secrets import password_program

    openssl = os.path.realpath("/usr/bin/openssl")
    assert password_program(openssl)
    assert not password_program(os.path.realpath("/bin/bash"))
    fake = tmp_path / "sudo"
    fake.write_bytes(Path(openssl).read_bytes())
    fake.chmod(0o755)
    assert not password_program(str(fake)) and not password_program(None)


async def test_a_fake_prompt_takes_a_value_only_with_a_second_confirmation():
    """The red-team case: a shell's `read -s` posing as sudo saved what the person typed where
    the agent read it. A page for a program that is no known password program sends nothing
    unless the person also ticks the box that says the value goes to an unverified program
    (the form carries it as ``confirm=unverified``); a known program's page asks no more."""
    from conch.http.secret_page import LoopbackSecretPages
    from conch.mcp.secrets import SecretAsk

    fake = SecretAsk(
        "j_1",
        "[sudo] password for root:",
        "read -r -s -p '[sudo] password for root: ' P; printf %s \"$P\" > .build-cache",
        None,
        ((9, "/usr/bin/bash"),),
        ("/usr/bin/bash",),
    )
    sudo = SecretAsk(
        "j_2", "[sudo] password for root:", "sudo true", None, ((7, "/usr/bin/sudo"),), ()
    )
    got: list[str] = []

    async def deliver(value: str) -> bool:
        got.append(value)
        return True

    pages = LoopbackSecretPages()
    try:
        page = await pages.open("a fake prompt", deliver, lambda: fake)
        status, shown = await anyio.to_thread.run_sync(http_call, page.url)
        assert status == 200 and 'id="warning"' in shown and 'id="confirm"' in shown
        assert "Send to this unverified program" in shown
        for body in ("secret=hunter2", "secret=hunter2&confirm=on", "secret=hunter2&confirm="):
            status, text = await anyio.to_thread.run_sync(
                lambda b=body: http_call(page.url, "POST", b)
            )
            assert status == 200 and "Nothing was sent" in text and got == [], text
            assert 'id="warning"' in text and 'id="confirm"' in text
        status, text = await anyio.to_thread.run_sync(
            lambda: http_call(page.url, "POST", "secret=hunter2&confirm=unverified")
        )
        assert status == 200 and got == ["hunter2"]
        known = await pages.open("sudo", deliver, lambda: sudo)
        status, shown = await anyio.to_thread.run_sync(http_call, known.url)
        assert status == 200 and 'id="confirm"' not in shown and 'id="warning"' not in shown
        status, _ = await anyio.to_thread.run_sync(
            lambda: http_call(known.url, "POST", "secret=pw")
        )
        assert status == 200 and got == ["hunter2", "pw"]
    finally:
        await pages.aclose()
