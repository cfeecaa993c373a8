"""PTY jobs as a person sees them in the dashboard (docs/spec.md §8): a real `conch serve --http`,
real programs on real terminals, a real headless Chromium. Full-screen programs and a REPL render as
screens; a person types into a job and hands it back; what they type at a password prompt shows
nowhere. Screenshots go to artifacts/screenshots/ (gitignored) for a person to look at."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import Browser, chromium
from frontend_servers import (
    HttpServer,
    control_http,
    http_get,
    kill_group,
    rest_until,
    start_http,
)
from frontend_servers import invoke as call

pytestmark = pytest.mark.needs("chromium", "chromedriver")

SHOTS = Path(
    os.environ.get("CONCH_SCREENSHOTS", Path(__file__).parents[2] / "artifacts" / "screenshots")
)
SECRET = "hunter2-Zq9-never-shown"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    with chromium(tmp_path) as b:
        b.set_size(1800, 1100)
        yield b


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpServer]:
    with control_http(tmp_path) as srv:
        yield srv


def screen_text(b: Browser) -> str:
    return str(b.run("return document.getElementById('screen').textContent"))


def open_job(b: Browser, srv: HttpServer, job_id: str) -> None:
    b.get(f"{srv.url}/#{job_id}")
    b.find(f'tr[data-job="{job_id}"]')
    b.wait(lambda: b.run("return !document.getElementById('screen').hidden"), 10, "screen shown")


def shot(b: Browser, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return b.screenshot(SHOTS / name)


def pty(srv: HttpServer, argv: list[str], **kw: Any) -> str:
    job = call(srv, "exec", {"argv": argv, "pty": True, "yield_ms": 500, **kw})
    assert "job_id" in job, job
    return str(job["job_id"])


def test_top_renders_as_a_full_screen_terminal(server: HttpServer, browser: Browser):
    job = pty(server, ["top", "-d", "0.5"], purpose="watch the machine")
    open_job(browser, server, job)
    browser.wait(
        lambda: "load average" in screen_text(browser) and "PID" in screen_text(browser),
        15,
        "top's header and process table on the screen",
    )
    assert browser.run("return document.getElementById('screen').dataset.cols") == "200"
    # top repaints in place: the screen keeps one header, the log holds every redraw
    time.sleep(1.5)
    assert screen_text(browser).count("load average") == 1
    # top's inverse column header: styled cells, not escape sequences
    assert "\x1b" not in screen_text(browser)
    inverse = browser.run(
        "return [...document.querySelectorAll('#screen span')]"
        ".filter(s => s.style.backgroundColor && s.textContent.includes('PID')).length"
    )
    assert inverse >= 1
    shot(browser, "top.png")
    snap = call(server, "read", {"job_id": job, "screen": True})
    assert snap["screen"]["cols"] == 200 and snap["output"].count("load average") == 1
    call(server, "signal", {"job_id": job, "signal": "kill"})


def test_a_pager_uses_the_alternate_screen_and_the_primary_screen_returns(
    server: HttpServer, browser: Browser
):
    script = "echo before-the-pager; less /etc/services; echo after-the-pager; sleep 60"
    job = pty(server, ["bash", "-c", script])
    open_job(browser, server, job)
    alternate = "return document.getElementById('screen').dataset.alternate"
    browser.wait(lambda: browser.run(alternate) == "1", 10, "less on the alternate screen")
    browser.wait(
        lambda: "/etc/services" in screen_text(browser) or "tcpmux" in screen_text(browser),
        10,
        "the file",
    )
    assert "before-the-pager" not in screen_text(browser)
    shot(browser, "less.png")
    call(server, "write", {"job_id": job, "text": "q"})
    browser.wait(lambda: "after-the-pager" in screen_text(browser), 10, "back from the pager")
    assert browser.run(alternate) == ""
    lines = screen_text(browser).split("\n")
    assert lines[0] == "before-the-pager" and lines[1] == "after-the-pager"
    call(server, "signal", {"job_id": job, "signal": "kill"})


def test_python_repl_renders_as_a_screen(server: HttpServer, browser: Browser):
    job = pty(server, ["python3", "-q"])
    call(
        server,
        "write",
        {"job_id": job, "text": "print('\\x1b[1;31mred\\x1b[0m', 6*7)", "keys": ["enter"]},
    )
    open_job(browser, server, job)
    browser.wait(lambda: "red 42" in screen_text(browser), 10, "the REPL's answer")
    lines = screen_text(browser).split("\n")
    assert lines[0].startswith(">>> print(") and lines[1] == "red 42" and lines[2].startswith(">>>")
    bold_red = browser.run(
        "return [...document.querySelectorAll('#screen span.b')]"
        ".some(s => s.textContent === 'red' && s.style.color !== '')"
    )
    assert bold_red
    assert browser.find_all("#screen .cur")  # the cursor cell, after the prompt
    shot(browser, "python-repl.png")
    call(server, "signal", {"job_id": job, "signal": "kill"})


def test_typing_in_the_page_reaches_the_job_and_the_agent_learns_only_that_someone_typed(
    server: HttpServer, browser: Browser
):
    job = pty(server, ["python3", "-q"])
    call(server, "read", {"job_id": job, "wait_ms": 2000, "until": "input"})
    open_job(browser, server, job)
    browser.wait(lambda: ">>>" in screen_text(browser), 10, "the prompt")
    scr = browser.find("#screen")
    browser.click(scr)
    browser.type(scr, "print(6*7)\ue007")  # \ue007: WebDriver's Enter
    browser.wait(lambda: "\n42\n" in screen_text(browser), 10, "42 on the page's screen")
    got = call(server, "read", {"job_id": job, "wait_ms": 2000, "until": {"pattern": "42"}})
    assert "42" in got["output"]
    assert got["attended"] is True
    assert set(got["human_input"]) == {"at", "bytes"}
    assert got["human_input"]["bytes"] == len("print(6*7)") + 1  # + Enter (\r)
    # the next result no longer repeats it: it was reported once
    assert "human_input" not in call(server, "read", {"job_id": job})
    # the agent's own write waits for the person: busy, retryable
    busy = call(server, "write", {"job_id": job, "text": "1"})
    assert busy["error"]["code"] == "busy" and busy["error"]["retryable"] is True
    browser.click(browser.find("#handback"))
    browser.wait(lambda: "attended" not in call(server, "read", {"job_id": job}), 10, "handed back")
    ok = call(server, "write", {"job_id": job, "text": "2+2", "keys": ["enter"]})
    assert "4" in ok["output"]
    shot(browser, "python-repl-typed.png")
    call(server, "signal", {"job_id": job, "signal": "kill"})


def test_a_password_typed_from_the_page_shows_in_no_result_log_recording_or_page(
    tmp_path: Path, server: HttpServer, browser: Browser
):
    script = 'read -r -s -p "Password: " pw; echo; echo "got ${#pw} chars"; sleep 60'
    job = pty(server, ["bash", "-c", script])
    waiting = call(server, "read", {"job_id": job, "wait_ms": 5000, "until": "input"})
    assert waiting["awaiting_secret"] is True
    open_job(browser, server, job)
    # the waiting job stands out, and the title counts it for a person in another tab
    browser.find(f'tr[data-job="{job}"].wait')
    browser.wait(
        lambda: browser.run("return document.title").startswith("(1 waiting)"), 10, "title"
    )
    scr = browser.find("#screen")
    browser.click(scr)
    browser.type(scr, SECRET + "\ue007")
    done = call(server, "read", {"job_id": job, "wait_ms": 5000, "until": {"pattern": "chars"}})
    assert f"got {len(SECRET)} chars" in done["output"]
    assert done["human_input"]["bytes"] == len(SECRET) + 1
    browser.wait(lambda: "chars" in screen_text(browser), 10, "the screen after the prompt")
    # nowhere: results (stream, raw, screen), the log on disk, the recording, the page
    seen = [
        json.dumps(done),
        json.dumps(call(server, "read", {"job_id": job, "cursor": 0, "raw": True})),
        json.dumps(call(server, "read", {"job_id": job, "screen": True})),
        json.dumps(call(server, "list", {})),
        http_get(server, f"/api/jobs/{job}/cast")[1].decode(),
        http_get(server, f"/api/jobs/{job}/screen")[1].decode(),
        http_get(server, f"/api/jobs/{job}/log")[1].decode(),
        http_get(server, "/api/jobs")[1].decode(),
        browser.source(),
        str(browser.run("return document.body.innerText")),
        server.stderr(),
    ]
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            seen.append(path.read_bytes().decode("utf-8", "replace"))
    assert all(SECRET not in text for text in seen)
    assert any("Password: " in text for text in seen)  # what was looked at is the real thing
    shot(browser, "password-prompt.png")
    call(server, "signal", {"job_id": job, "signal": "kill"})


# after each line read: the terminal's size, then a row of '#' as wide as the terminal
SIZE_AND_ROW = (
    "stty size; while read -r x; do stty size; set -- $(stty size); "
    "printf '%*s\\n' \"$2\" '' | tr ' ' '#'; done"
)
FITTED = """
const pre = document.getElementById('screen'), cs = getComputedStyle(pre);
const row = [...pre.childNodes].filter(n => n.nodeType === 3 && /^#+$/.test(n.data)).pop();
const r = document.createRange(); r.selectNodeContents(row);
return {hashes: row.data.length, width: r.getBoundingClientRect().width,
  room: pre.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight),
  height: pre.clientHeight - parseFloat(cs.paddingTop) - parseFloat(cs.paddingBottom),
  max: parseFloat(cs.maxHeight) - parseFloat(cs.paddingTop) - parseFloat(cs.paddingBottom),
  overflows: pre.scrollWidth > pre.clientWidth || pre.scrollHeight > pre.clientHeight};
"""


def fit(b: Browser, window: tuple[int, int] | None = None) -> tuple[int, int]:
    """Click Fit, or with ``window`` resize the window (a fitted terminal follows it); the
    size the page computed, once the job's screen has it."""
    b.run("document.getElementById('fit').dataset.cols = ''")
    if window is None:
        b.click(b.find("#fit"))
    else:
        b.set_size(*window)
    cols = b.wait(lambda: b.run("return document.getElementById('fit').dataset.cols"), 10, "Fit")
    rows = b.run("return document.getElementById('fit').dataset.rows")
    shown = "const d = document.getElementById('screen').dataset; return d.rows + 'x' + d.cols"
    b.wait(lambda: b.run(shown) == f"{rows}x{cols}", 10, "the screen at the fitted size")
    return int(rows), int(cols)


def test_fit_sizes_the_terminal_to_the_page_and_the_program_sees_it(
    server: HttpServer, browser: Browser
):
    job = pty(server, ["bash", "-c", SIZE_AND_ROW])
    open_job(browser, server, job)
    browser.wait(lambda: browser.run("return !document.getElementById('fit').hidden"), 10, "Fit")
    # (Fit shows as soon as the job is selected; the screen's size once its first look is drawn)
    cols = "return document.getElementById('screen').dataset.cols"
    browser.wait(lambda: browser.run(cols) is not None, 10, "the first screen")
    assert browser.run(cols) == "200"
    for width, height in ((1800, 1100), (1100, 760)):
        if width == 1800:
            browser.set_size(width, height)
            rows, cols = fit(browser)
        else:  # once fitted, the terminal follows the window without another click
            rows, cols = fit(browser, (width, height))
        assert 2 <= rows < 50 and 2 <= cols < 200, (rows, cols)
        got = call(server, "write", {"job_id": job, "keys": ["enter"]})
        answer = f"{rows} {cols}\n" + "#" * cols + "\n"
        rest = rest_until(server, job, got, answer)
        assert answer in got["output"] + rest["output"], (rows, cols, got, rest)
        assert "attended" not in got  # a size is not input: the agent's write is not busy
        row = "#" * cols
        browser.wait(lambda row=row: row in screen_text(browser), 10, "the full-width row")
        m = browser.run(FITTED)
        # the program's full-width row fits the screen's width, and one more column would not
        assert m["hashes"] == cols and not m["overflows"], m
        cell_w, cell_h = m["width"] / cols, m["height"] / rows
        assert m["width"] <= m["room"] + 0.5 and m["room"] - m["width"] < cell_w, m
        # the rows fill the height the screen may take, and one more row would not fit
        assert m["height"] <= m["max"] + 0.5 and m["max"] - m["height"] < cell_h, m
        shot(browser, f"fit-{width}x{height}.png")
    call(server, "signal", {"job_id": job, "signal": "kill"})


def test_without_control_the_page_shows_the_screen_and_takes_no_typing_or_size(
    tmp_path: Path, browser: Browser
):
    """Without ``--dashboard-control`` a running terminal job is shown, but the page offers
    no Fit and no hand back, says nothing about taking over, and what a person types there
    or a window resize reaches neither the job nor the agent's results."""
    srv = start_http(tmp_path)
    try:
        job = pty(srv, ["bash", "-c", "stty size; read -r x; echo got $x; stty size"])
        call(srv, "read", {"job_id": job, "wait_ms": 5000, "until": "input"})
        open_job(browser, srv, job)
        browser.wait(lambda: "50 200" in screen_text(browser), 10, "the screen")
        hidden = "return document.getElementById(arguments[0]).hidden"
        assert browser.run(hidden, "fit") is True and browser.run(hidden, "handback") is True
        assert browser.run("return document.getElementById('hint').textContent") == ""
        scr = browser.find("#screen")
        browser.click(scr)
        browser.type(scr, "typed-in-the-page\ue007")
        browser.set_size(1100, 760)
        time.sleep(1.0)  # (what the page would have posted has had time to arrive)
        r = call(srv, "read", {"job_id": job})
        assert r["state"] == "running" and r.get("awaiting_input") is True, r
        assert "attended" not in r and "human_input" not in r, r
        assert "typed-in-the-page" not in screen_text(browser)
        assert browser.run("return document.getElementById('screen').dataset.cols") == "200"
        done = call(srv, "write", {"job_id": job, "text": "by-the-agent\n", "yield_ms": 2000})
        assert "got by-the-agent\n50 200\n" in done["output"], done
    finally:
        kill_group(srv.proc)


def test_a_person_runs_a_command_in_an_idle_shell_from_the_page_and_types_into_it(
    server: HttpServer, browser: Browser
):
    sh = call(server, "shell_open", {})["shell_id"]
    call(server, "exec", {"shell_id": sh, "command": "cd /tmp"})
    browser.get(server.url + "/")
    box = browser.find(f'tr[data-shell="{sh}"] input[name="command"]')
    browser.click(box)
    browser.type(box, "python3 -q\ue007")  # a person's command; the page then shows its screen
    browser.wait(lambda: ">>>" in screen_text(browser), 15, "the REPL's prompt on the page")
    job = str(browser.run("return selected"))
    assert job.startswith("j_")
    browser.type(browser.find("#screen"), "print(6*7)\ue007")
    browser.wait(lambda: "\n42\n" in screen_text(browser), 10, "42 on the page's screen")
    shot(browser, "shell-command-typed.png")
    got = call(server, "read", {"job_id": job, "wait_ms": 2000, "until": {"pattern": "42"}})
    assert "42" in got["output"] and got["attended"] is True, got
    typed = len("python3 -q") + 1 + len("print(6*7)") + 1
    assert got["human_input"]["bytes"] == typed, got
    assert "python3 -q" not in json.dumps(got)  # the command itself reaches no result
    # the shell is busy with the person's command: the box is gone until it ends
    assert not browser.find_all(f'tr[data-shell="{sh}"] input[name="command"]')
    browser.type(browser.find("#screen"), "exit()\ue007")
    end = call(server, "read", {"job_id": job, "wait_ms": 5000, "until": "exit"})
    assert end["human_input"]["bytes"] == len("exit()") + 1, end  # typed since the last read
    browser.find(f'tr[data-shell="{sh}"] input[name="command"]')  # idle again: back
    after = call(server, "exec", {"shell_id": sh, "command": "pwd"})
    assert after["output"] == "/tmp\n" and "human_input" not in after, after  # told once
    call(server, "signal", {"shell_id": sh})
