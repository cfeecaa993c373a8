"""The ten tasks of ``bench/agent_tasks.py``: each sets up its files, plays one policy written
against the :mod:`agent_tasks_toolsets` operations (reacting only to what it was shown), and
checks the answer against the truth (and, at the moment of the answer, the live state: a
server stopped, a hung command gone).

Rules every policy keeps: the task's steps are done one at a time, each after seeing the
previous result; a shell idiom (redirect a long output to a file and grep it) is used the same
way by every tool set; where a tool set has a native means (Conch's ``ready``, ``until``,
``job_ids``, a pty, a persistent shell), its policy uses it.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import socket
import textwrap
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from agent_tasks_toolsets import Out, ToolSet

G = Generator[Any, str, str]


@dataclass
class Setup:
    truth: dict[str, Any]
    # what the person (not the model) knows and does: task 9's secret
    person_secret: str | None = None
    host_timeout_s: float | None = None  # overrides the bench's host tool timeout
    deadline_s: float = 240


@dataclass
class Task:
    key: str
    title: str
    setup: Callable[[Path, bool], Setup]
    policy: Callable[[ToolSet, Path, Setup], G]
    check: Callable[[str, Path, Setup, dict[str, Any]], tuple[bool, str]]
    live: Callable[[Path, Setup], dict[str, Any]] = field(default=lambda w, s: {})
    long: bool = False  # mostly sleeping: run it beside the others


def _write(path: Path, text: str, mode: int = 0o755) -> None:
    path.write_text(textwrap.dedent(text).lstrip())
    path.chmod(mode)


# 1 -------------------------------------------------------------------------------------------


def build_setup(w: Path, quick: bool) -> Setup:
    step = "0.1" if quick else "1"
    _write(
        w / "build.sh",
        f"""
        #!/bin/bash
        # a build: 3000 lines, 40 s (quick: 4 s), fails at line 1700
        n=3000
        for i in $(seq 1 $n); do
          if [ "$i" -eq 1700 ]; then
            echo "src/mod_$i.c:42:7: error: expected ';' before '}}' token"
          else
            echo "[$i/$n] CC src/mod_$i.c"
          fi
          if [ $((i % 75)) -eq 0 ]; then sleep {step}; fi
        done
        echo "make: *** [Makefile:12: all] Error 1"
        exit 2
        """,
    )
    return Setup({"line": "src/mod_1700.c:42:7: error", "number": "1700"}, deadline_s=300)


def build_policy(ts: ToolSet, w: Path, s: Setup) -> G:
    cmd = "./build.sh > build.log 2>&1; echo \"exit=$?\"; grep -n -m5 'error' build.log"
    out: Out = yield from ts.run(cmd, wait_s=120)
    return out.text


def build_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    ok = f"{s.truth['number']}:{s.truth['line']}" in answer and "exit=2" in answer
    return ok, "" if ok else "failing line or exit code not found"


# 2 -------------------------------------------------------------------------------------------

PORT = 8765


def server_setup(w: Path, quick: bool) -> Setup:
    token = secrets.token_hex(6)
    (w / "site").mkdir()
    (w / "site" / "index.html").write_text(f"<h1>bench {token}</h1>\n")
    return Setup({"token": token})


def server_policy(ts: ToolSet, w: Path, s: Setup) -> G:
    srv: Out = yield from ts.start(
        f"sleep 3; exec python3 -m http.server {PORT} --bind 127.0.0.1 -d site", ready_port=PORT
    )
    url = f"http://127.0.0.1:{PORT}/"
    got: Out = yield from ts.run(
        f"curl -s --retry 20 --retry-connrefused --retry-delay 1 {url}", wait_s=60
    )
    yield from ts.stop(srv)
    return got.text


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def server_live(w: Path, s: Setup) -> dict[str, Any]:
    import time

    for _ in range(20):  # a stop's TERM may take a moment: 2 s at most
        if not _port_open(PORT):
            return {"port_open": False}
        time.sleep(0.1)
    return {"port_open": True}


def server_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    if s.truth["token"] not in answer:
        return False, "the page was not fetched"
    if live.get("port_open"):
        return False, "the server still ran when the policy answered"
    return True, ""


# 3 -------------------------------------------------------------------------------------------


def tests_setup(w: Path, quick: bool) -> Setup:
    _write(
        w / "run_tests.py",
        """
        # 202 tests, 2 failing in the middle of about 1 MB of output
        import sys
        FAIL = {77: "test_cache.py::test_eviction_order", 131: "test_api.py::test_retry_backoff"}
        out = sys.stdout
        for n in range(1, 203):
            for k in range(40):
                out.write(f"DEBUG t{n:03d} step {k:02d} " + "x" * 100 + "\\n")
            if n in FAIL:
                out.write(f"FAILED tests/{FAIL[n]} - AssertionError: expected 3, got 4\\n")
            else:
                out.write(f"PASSED tests/test_mod{n:03d}.py::test_case\\n")
        out.write("==== 2 failed, 200 passed in 3.21s ====\\n")
        sys.exit(1)
        """,
        0o644,
    )
    _write(w / "run_tests.sh", "#!/bin/bash\nexec python3 run_tests.py\n")
    return Setup(
        {"failures": ["test_cache.py::test_eviction_order", "test_api.py::test_retry_backoff"]}
    )


def tests_policy(ts: ToolSet, w: Path, s: Setup) -> G:
    cmd = "./run_tests.sh > test.log 2>&1; echo \"exit=$?\"; grep -E '^FAILED' test.log"
    cmd += "; tail -n 1 test.log"
    out: Out = yield from ts.run(cmd, wait_s=120)
    return out.text


def tests_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    ok = all(f in answer for f in s.truth["failures"])
    return ok, "" if ok else "the two failures were not named"


# 4 -------------------------------------------------------------------------------------------


def installer_setup(w: Path, quick: bool) -> Setup:
    code = secrets.token_hex(2).upper()
    (w / ".previous-install").write_text(code + "\n")
    _write(
        w / "install.py",
        """
        # an interactive installer: three questions, on a terminal only
        import sys
        if not sys.stdin.isatty():
            print("error: this installer is interactive; run it in a terminal", file=sys.stderr)
            sys.exit(3)
        code = open(".previous-install").read().strip()
        d = input("Install directory [/opt/bench]: ").strip() or "/opt/bench"
        got = input(f"A previous install (id {code}) was found. Type its id to replace it: ")
        if got.strip() != code:
            print("ids differ: aborted")
            sys.exit(4)
        email = input("Admin email: ").strip()
        with open("install.conf", "w") as f:
            f.write(f"dir={d}\\nreplaced={code}\\nemail={email}\\n")
        print(f"Installed to {d}")
        """,
        0o644,
    )
    return Setup({"code": code})


def installer_policy(ts: ToolSet, w: Path, s: Setup) -> G:
    if not ts.pty:
        out: Out = yield from ts.run("python3 install.py", wait_s=30)
        return "cannot answer the installer: " + (out.text or out.error or "")[-200:]
    h: Out = yield from ts.start("python3 install.py", tty=True)
    text, running = h.text, h.running
    for _ in range(8):
        if "Installed" in text or not running:
            return text
        prompt = text.rstrip()
        m = re.search(r"id (\w+)\) was found\. Type its id to replace it:$", prompt)
        if prompt.endswith("Admin email:"):
            r: Out = yield from ts.write(h, "admin@example.com\n")
        elif m:
            r = yield from ts.write(h, m.group(1) + "\n")
        elif prompt.endswith("Install directory [/opt/bench]:"):
            r = yield from ts.write(h, f"{w}/app\n")
        else:
            r = yield from ts.wait(h, "input", wait_s=5)
        text, running = text + r.text, r.running
    return "the installer did not ask as expected: " + text[-200:]


def installer_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    conf = w / "install.conf"
    if not conf.exists():
        return False, "not installed (no terminal)" if "cannot" in answer else "not installed"
    want = f"dir={w}/app\nreplaced={s.truth['code']}\nemail=admin@example.com\n"
    ok = conf.read_text() == want and "Installed" in answer
    return ok, "" if ok else f"wrong answers: {conf.read_text()!r}"


# 5 -------------------------------------------------------------------------------------------


def repl_setup(w: Path, quick: bool) -> Setup:
    return Setup({"value": "125", "error": "ZeroDivisionError"})


DEF = "def f(x):\n    return 1000 // x\n"


def repl_policy(ts: ToolSet, w: Path, s: Setup) -> G:
    if ts.pty:
        # the definition goes in with the start where the tool takes input for it (Conch's
        # exec: stdin with stdin_open), else in a write; the last call leaves the REPL
        h: Out = yield from ts.start("python3 -q -i", tty=True, text=DEF + "\n")
        if not ts.start_input:
            yield from ts.write(h, DEF + "\n")
        a: Out = yield from ts.write(h, "f(8)\n")
        b: Out = yield from ts.write(h, "f(0)\nexit()\n")
        if "Error" not in b.text:
            b = yield from ts.wait(h, "pattern", r"Error", wait_s=10)
        return a.text + "\n" + b.text
    # no REPL: the function goes to a file, each call is a new interpreter
    yield from ts.run(f"cat > f.py <<'EOF'\n{DEF}EOF")
    a = yield from ts.run("python3 -c 'from f import f; print(f(8))'")
    b = yield from ts.run("python3 -c 'from f import f; f(0)'")
    return a.text + "\n" + b.text


def repl_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    ok = s.truth["value"] in answer and s.truth["error"] in answer
    return ok, "" if ok else "value or exception not read"


# 6 -------------------------------------------------------------------------------------------


def git_setup(w: Path, quick: bool) -> Setup:
    (w / "proj").mkdir()
    (w / "proj" / "README").write_text("hello\n")
    return Setup({})


GIT_ENV = (
    "export GIT_AUTHOR_NAME='Bench Bot' GIT_AUTHOR_EMAIL=bot@bench.invalid"
    " GIT_COMMITTER_NAME='Bench Bot' GIT_COMMITTER_EMAIL=bot@bench.invalid"
)


def git_policy(ts: ToolSet, w: Path, s: Setup) -> G:
    sh: Out = yield from ts.shell()
    state = ["cd proj", GIT_ENV]
    init = "git init -q && git add -A && git commit -qm 'first commit'"
    if sh.handle:  # a persistent shell: cwd and env set once, with the first command
        yield from ts.sh(sh, " && ".join([*state, init]), [])
    else:
        yield from ts.sh(sh, init, state)
    log: Out = yield from ts.sh(sh, "git --no-pager log --format='%h %an <%ae> %s'", state)
    m = re.search(r"\b([0-9a-f]{7,})\b Bench Bot", log.text)
    if not m:
        return "no commit seen: " + log.text[-200:]
    tag: Out = yield from ts.sh(
        sh, f"git tag v0.1 {m.group(1)} && git describe --tags && pwd", state
    )
    return log.text + "\n" + tag.text


def git_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    import subprocess

    r = subprocess.run(
        ["git", "-C", str(w / "proj"), "log", "-1", "--format=%an|%ce", "v0.1"],
        capture_output=True,
        text=True,
    )
    ok = r.stdout.strip() == "Bench Bot|bot@bench.invalid" and "v0.1" in answer
    return ok, "" if ok else f"tag or author wrong: {r.stdout.strip() or r.stderr.strip()}"


# 7 -------------------------------------------------------------------------------------------


def hang_setup(w: Path, quick: bool) -> Setup:
    _write(
        w / "fetch_deps.sh",
        """
        #!/bin/bash
        echo "resolving dependencies..."
        sleep 100000
        echo "resolved"
        """,
    )
    return Setup({})


def hang_policy(ts: ToolSet, w: Path, s: Setup) -> G:
    h: Out = yield from ts.start("./fetch_deps.sh")
    seen = h.text
    for _ in range(3):
        r: Out = yield from ts.wait(h, "change", wait_s=10)
        now = r.text if ts.cumulative else seen + r.text
        if not r.running or r.error:
            break
        if now.strip() == seen.strip():  # 10 s without a new line: it hangs
            yield from ts.stop(h)
            return f"hung after {seen.strip()!r}: stopped"
        seen = now
    return "did not see it hang: " + (r.text or r.error or "")[-200:]


def _procs_in(w: Path) -> list[str]:
    found = []
    for p in psutil.process_iter(["cwd", "cmdline"]):
        try:
            if p.info["cwd"] and Path(p.info["cwd"]) == w and p.info["cmdline"]:
                line = " ".join(p.info["cmdline"])
                if "fetch_deps" in line or "sleep 100000" in line:
                    found.append(line)
        except (psutil.Error, OSError):
            continue
    return found


def hang_live(w: Path, s: Setup) -> dict[str, Any]:
    import time

    for _ in range(20):  # a stop's TERM may take a moment: 2 s at most
        if not _procs_in(w):
            return {"left": []}
        time.sleep(0.1)
    return {"left": _procs_in(w)}


def hang_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    if "stopped" not in answer:
        return False, answer[:200]
    if live.get("left"):
        return False, f"still running: {live['left']}"
    return True, ""


# 8 -------------------------------------------------------------------------------------------


def parallel_setup(w: Path, quick: bool) -> Setup:
    durations = {"alpha": 8, "beta": 4, "gamma": 12}  # the same in --quick
    tokens = {k: secrets.token_hex(4) for k in durations}
    (w / ".jobs").write_text("".join(f"{k} {durations[k]} {tokens[k]}\n" for k in durations))
    _write(
        w / "job.sh",
        """
        #!/bin/bash
        read -r _ secs token < <(grep "^$1 " .jobs)
        echo "job $1 started"
        sleep "$secs"
        echo "result $1: $token"
        """,
    )
    _write(w / "deploy.sh", '#!/bin/bash\necho "$1" >> deploy.log\necho "deployed $1"\n')
    return Setup({"token": tokens["beta"]})


def parallel_policy(ts: ToolSet, w: Path, s: Setup) -> G:
    hs = []
    for name in ("alpha", "beta", "gamma"):
        h: Out = yield from ts.start(f"./job.sh {name}")
        hs.append(h)
    first: Out = yield from ts.wait_any(hs, wait_s=60)
    m = re.search(r"result (\w+): (\w+)", first.text)
    if not m:
        return "no job finished: " + (first.text or first.error or "")[-200:]
    d: Out = yield from ts.run(f"./deploy.sh {m.group(2)}")
    return f"first: {m.group(1)}; " + d.text


def parallel_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    log = w / "deploy.log"
    ok = log.exists() and log.read_text().split() == [s.truth["token"]]
    return ok, "" if ok else f"deployed {log.read_text().split() if log.exists() else 'nothing'}"


# 9 -------------------------------------------------------------------------------------------


def sudo_setup(w: Path, quick: bool) -> Setup:
    secret = "pw-" + secrets.token_hex(8)
    token = secrets.token_hex(4)
    digest = hashlib.sha256(secret.encode()).hexdigest()
    _write(
        w / "admin.py",
        f"""
        # a sudo-style prompt: the password is read with echo off
        import getpass, hashlib, sys
        pw = getpass.getpass("[sudo] password for bench: ")
        if hashlib.sha256(pw.encode()).hexdigest() != "{digest}":
            print("Sorry, try again.")
            sys.exit(1)
        print("authenticated: applied change {token}")
        """,
        0o644,
    )
    return Setup({"token": token, "secret": secret}, person_secret=secret)


def sudo_policy(ts: ToolSet, w: Path, s: Setup) -> G:
    if ts.secret:  # the person types it into Conch's page; the model only waits
        h: Out = yield from ts.start("python3 admin.py", tty=True)
        r = Out("")
        if h.running and h.page:  # no elicitation reached the person: the model names the page
            say = f"The command asks for your password. Please type it at {h.page}"
            r = yield from ts.wait(h, "exit", wait_s=60, say=say)  # type: ignore[call-arg]
        elif h.running:
            r = yield from ts.wait(h, "exit", wait_s=30)
        return h.text + r.text
    # the model has been told the password and must type it itself
    secret = s.truth["secret"]
    if ts.pty:
        h = yield from ts.start("python3 admin.py", tty=True)
        if "password" not in h.text:
            h2 = yield from ts.wait(h, "pattern", "password", wait_s=10)
            h = Out(h.text + h2.text, True, None, h.handle)
        r = yield from ts.write(h, secret + "\n")
        if "authenticated" not in r.text and r.running:
            r = yield from ts.wait(h, "exit", wait_s=10)
        return "typed by the model: " + r.text
    r = yield from ts.run(f"echo '{secret}' | python3 admin.py")
    return "typed by the model: " + r.text


def sudo_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    if s.truth["token"] not in answer:
        return False, "not authenticated"
    if live.get("leaked"):
        return False, "LEAK: the secret was in what the model was shown"
    if answer.startswith("typed by the model"):
        return False, "the model had to know and type the secret"
    return True, ""


# 10 ------------------------------------------------------------------------------------------


def long_setup(w: Path, quick: bool, steps_full: int = 20) -> Setup:
    """A job of ``steps_full`` × 30 s (10 minutes; t11: 4), a line every 30 s."""
    token = secrets.token_hex(4)
    steps, pause = (max(2, steps_full // 2), 2) if quick else (steps_full, 30)
    _write(
        w / "long_job.sh",
        f"""
        #!/bin/bash
        # {steps * pause} s of work, a line every {pause} s
        for i in $(seq 1 {steps}); do sleep {pause}; echo "step $i/{steps}"; done
        echo "done: {token}"
        """,
    )
    return Setup(
        {"token": token},
        host_timeout_s=6 if quick else 60,
        deadline_s=(steps * pause) + 240,
    )


def long_policy(ts: ToolSet, w: Path, s: Setup) -> G:
    if ts.long_run:
        done: Out = yield from ts.run("./long_job.sh", wait_s=1200)
        return done.text
    h: Out = yield from ts.start("./long_job.sh")
    r: Out = yield from ts.wait(h, "exit", wait_s=1200)
    return h.text + r.text


def long_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    ok = f"done: {s.truth['token']}" in answer
    return ok, "" if ok else "the job's end was not seen"


TASKS = [
    Task(
        "t1", "40 s build, 3,000 lines, fails at line 1,700", build_setup, build_policy, build_check
    ),
    Task(
        "t2",
        "dev server: start, curl, stop",
        server_setup,
        server_policy,
        server_check,
        server_live,
    ),
    Task("t3", "202 tests, 2 failures in 1 MB", tests_setup, tests_policy, tests_check),
    Task(
        "t4",
        "interactive installer, 3 questions",
        installer_setup,
        installer_policy,
        installer_check,
    ),
    Task("t5", "Python REPL: def, call, exception", repl_setup, repl_policy, repl_check),
    Task("t6", "git in a persistent shell", git_setup, git_policy, git_check),
    Task("t7", "a hanging command, stopped", hang_setup, hang_policy, hang_check, hang_live),
    Task(
        "t8", "3 parallel jobs, act on the first", parallel_setup, parallel_policy, parallel_check
    ),
    Task("t9", "sudo-style password prompt", sudo_setup, sudo_policy, sudo_check),
    Task("t10", "10-min job", long_setup, long_policy, long_check, long=True),
    Task(
        "t11",
        "4-min job",
        lambda w, q: long_setup(w, q, steps_full=8),
        long_policy,
        long_check,
        long=True,
    ),
]


# 12-14: faithful on red (digests) ----------------------------------------------------------------


def _digest_lines(out: Out) -> list[str] | None:
    """The digest the result showed (``Out.digest``: the result's ``digest`` field, for tool
    sets whose results carry one), as ``@cursor text`` lines; None without one."""
    d = getattr(out, "digest", None)
    if not isinstance(d, dict):
        return None
    return [f"@{e['cursor']} {e['text']}" for e in d.get("lines", [])]


#: a host's window that is not the whole output: Codex ("Warning: truncated output", "…N tokens
#: truncated…"), Claude Code ("... [N characters truncated] ...")
_CUT = re.compile(r"truncated output|tokens truncated|characters truncated|lines truncated")
#: the plain model's second look: a pattern for any failure, not the task's own
GENERIC = "'error|FAILED|ERROR'"
#: the most lines of a grep the model asks for (``head -n``)
CAP = 200
#: the lines the model reads after a failure it saw without what the task asks of it (up to
#: the next such failure)
CONTEXT = 12

#: what the plain model asks of the text it was shown, per task: ``(done, look_at)``: whether
#: every failure the task asks about is named there with what the task asks (so it can answer),
#: and the ``grep -n`` line numbers of failures shown without it (worth a look at their lines)
Asked = Callable[[str], tuple[bool, list[int]]]

_NUMBERED = re.compile(r"^(\d+):", re.M)


def _numbers(lines: list[str]) -> list[int]:
    return [int(m.group(1)) for x in lines if (m := _NUMBERED.match(x))]


def asked_make(text: str) -> tuple[bool, list[int]]:
    """t12: the errors with ``file:line``. gcc's error lines carry both, but make prints no
    count: only a whole text (or a whole grep of the log) is known to hold every error."""
    return False, []


def asked_pytest(text: str) -> tuple[bool, list[int]]:
    """t13: every failing test id and the import error: the ids the ``FAILED`` lines name
    reach pytest's own ``N failed``, and each of its ``N error(s)`` has its reason shown."""
    failed = re.search(r"\b(\d+) failed\b", text)
    errors = re.search(r"\b(\d+) errors?\b", text)
    ids = set(re.findall(r"FAILED (\S+::\S+)", text))
    reasons = re.findall(r"ModuleNotFoundError|ImportError: |No module named|SyntaxError", text)
    if failed is None and errors is None:  # no summary shown: no way to know what is missing
        return False, []
    ok = len(ids) >= int(failed.group(1) if failed else 0)
    need = int(errors.group(1)) if errors else 0
    if len(reasons) >= need:
        return ok, []
    headers = [x for x in text.splitlines() if "ERROR collecting" in x]
    return False, _numbers(headers)


def asked_cargo(text: str) -> tuple[bool, list[int]]:
    """t14: every error with ``file:line``: as many `` --> file:line`` after an ``error``
    header as cargo's ``due to N previous errors`` says."""
    total = re.search(r"due to (\d+) previous errors?", text)
    lines = text.splitlines()
    heads = [
        i
        for i, x in enumerate(lines)
        if re.match(r"(\d+:)?error(\[E\d+\])?: ", x) and "could not compile" not in x
    ]
    located = [i for i in heads if i + 1 < len(lines) and " --> " in lines[i + 1]]
    if total is None:
        return False, []
    if len(located) >= int(total.group(1)):
        return True, []
    return False, _numbers([lines[i] for i in heads if i not in located])


def _whole(text: str) -> bool:
    """Whether what the host showed is the whole output (no cut of its own)."""
    return not _CUT.search(text)


def _red_policy(cmd: str, log: str, grep: str, asked: Asked) -> Callable[[ToolSet, Path, Setup], G]:
    """Run ``cmd``. Three models of it:

    - a tool set whose results carry a digest (``ToolSet.digests``, Conch's ``conch``
      profile) runs it as it is and answers from the digest it was shown;
    - ``ToolSet.plain`` (``codex-plain@codex``, ``claude-plain@claude``): a model that does not
      know the failures' shape runs it as it is and reads the host's own window of it; if
      the window is whole, or shows every failure the task asks about with what it asks
      (``asked``: the ids reach the totals the program printed, each with its reason or
      ``file:line``), it answers. Else (the hosts keep no copy of a cut output) it runs it
      again to a file and greps it with a generic pattern (``GENERIC``); and if the failures
      it then sees still lack what the task asks, a third call prints the lines after each
      (``sed -n`` from the grep's line numbers, up to the next). It answers from all it was
      shown;
    - every other tool set (the hosts' own shells, the dialect profiles, the seeds) keeps the
      shell idiom of the other tasks, the output to a file and ``grep`` in the same call, with
      ``grep``, a pattern chosen for the task's failures: the host's best case, a model that
      already knew the shape."""

    def policy(ts: ToolSet, w: Path, s: Setup) -> G:
        if getattr(ts, "digests", False):
            out: Out = yield from ts.run(cmd, wait_s=300)
            lines = _digest_lines(out)
            if lines is not None:
                return f"exit={out.exit_code}\n" + "\n".join(lines)
            return out.text  # no digest shown: what the window showed is the answer
        if getattr(ts, "plain", False):
            window: Out = yield from ts.run(cmd, wait_s=300)
            if _whole(window.text) or asked(window.text)[0]:
                return window.text
            again: Out = yield from ts.run(
                f'{cmd} > {log} 2>&1; echo "exit=$?"; grep -n -E {GENERIC} {log} | head -n {CAP}',
                wait_s=300,
            )
            seen = window.text + "\n" + again.text
            done, look_at = asked(again.text)
            if done or not look_at:
                return seen
            look_at = sorted(set(look_at))[:20]
            nxt = [*look_at[1:], 1 << 30]
            spans = ";".join(
                f"{n},{min(n + CONTEXT, m - 1)}p" for n, m in zip(look_at, nxt, strict=True)
            )
            more: Out = yield from ts.run(f"sed -n '{spans}' {log}")
            return seen + "\n" + more.text
        shown: Out = yield from ts.run(
            f'{cmd} > {log} 2>&1; echo "exit=$?"; grep -n -E {grep} {log} | head -n 200',
            wait_s=300,
        )
        return shown.text

    return policy


def c_errors_setup(w: Path, quick: bool) -> Setup:
    """30 C files of 10 unused variables each (300 warnings), two of them in the middle with
    an error; `make` keeps going (-k) so both errors are printed."""
    src = w / "src"
    src.mkdir(exist_ok=True)
    errors: dict[int, int] = {}  # file number: line of its error
    for n in range(30):
        body = [f"int f{n}(void) {{"] + [f"  int unused_{n}_{k} = {k};" for k in range(10)]
        if n in (14, 16):
            body.append(f"  return missing_symbol_{n} + 1;")
            errors[n] = len(body)
        body += ["  return 0;", "}"]
        (src / f"f{n:02d}.c").write_text("\n".join(body) + "\n")
    objs = " ".join(f"src/f{n:02d}.o" for n in range(30))
    (w / "Makefile").write_text(
        f"MAKEFLAGS += -k\nCFLAGS = -Wall -O0\nall: {objs}\n"
        "%.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n"
    )
    return Setup(
        {"errors": [f"src/f{n:02d}.c:{line}" for n, line in errors.items()]}, deadline_s=300
    )


def c_errors_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    missing = [e for e in s.truth["errors"] if e not in answer]
    return not missing, "" if not missing else f"not named: {', '.join(missing)}"


def pytest_red_setup(w: Path, quick: bool) -> Setup:
    """3,000 tests in 30 modules, 40 failures spread through the run, and one module whose
    import fails (pytest goes on past it: --continue-on-collection-errors)."""
    import sys

    tests = w / "tests"
    tests.mkdir(exist_ok=True)
    failing = sorted({(k * 73) % 3000 for k in range(40)})
    ids = []
    for m in range(30):
        bad = [i - m * 100 for i in failing if m * 100 <= i < (m + 1) * 100]
        (tests / f"test_mod{m:02d}.py").write_text(
            "import pytest\n\n\n"
            f"@pytest.mark.parametrize('i', range(100))\n"
            "def test_case(i):\n"
            "    print('checking', i, 'x' * 60)\n"
            f"    assert i not in {bad!r}, f'case {{i}} is wrong'\n"
        )
        ids += [f"tests/test_mod{m:02d}.py::test_case[{i}]" for i in bad]
    (tests / "test_plugins.py").write_text(
        "import plugin_registry_v2\n\n\ndef test_x():\n    pass\n"
    )
    (w / "pytest.ini").write_text(
        "[pytest]\naddopts = -p no:cacheprovider --continue-on-collection-errors\n"
    )
    _write(w / "run_tests.sh", f"#!/bin/bash\nexec {sys.executable} -m pytest tests\n")
    return Setup({"failures": ids, "import": "plugin_registry_v2"}, deadline_s=400)


def pytest_red_check(answer: str, w: Path, s: Setup, live: dict[str, Any]) -> tuple[bool, str]:
    missing = [f for f in s.truth["failures"] if f not in answer]
    if s.truth["import"] not in answer:
        return False, "the import error was not named"
    return not missing, "" if not missing else f"{len(missing)} failing tests not named"


def rust_errors_setup(w: Path, quick: bool) -> Setup:
    """A crate (no dependencies: offline) whose build prints 400 warnings of its build script
    and then 3 type errors."""
    (w / "src").mkdir(exist_ok=True)
    (w / "Cargo.toml").write_text(
        '[package]\nname = "noisy"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'
    )
    lines = ["fn main() {"]
    errors = []
    for k in range(150):
        lines.append(f"    let unused_{k} = {k};")
        if k in (40, 75, 110):
            lines.append(f'    let typed_{k}: u32 = "not a number {k}";')
            errors.append(f"src/main.rs:{len(lines)}")
    lines.append("}")
    (w / "src" / "main.rs").write_text("\n".join(lines) + "\n")
    # the noise: a build script's 400 warnings (cargo prints them before compiling the crate)
    (w / "build.rs").write_text(
        'fn main() {\n    for k in 0..400 {\n        println!("cargo:warning=generated '
        'binding {k}: struct field layout checked against the C header, nothing to do");\n'
        "    }\n}\n"
    )
    return Setup({"errors": errors}, deadline_s=400)


TASKS += [
    Task(
        "t12",
        "make: 300 warnings, 2 errors in the middle",
        c_errors_setup,
        _red_policy("make", "build.log", "': error'", asked_make),
        c_errors_check,
    ),
    Task(
        "t13",
        "pytest: 3,000 tests, 40 failures, an import error",
        pytest_red_setup,
        _red_policy("./run_tests.sh", "test.log", "'^(FAILED|ERROR)|^E +.*Error'", asked_pytest),
        pytest_red_check,
    ),
    Task(
        "t14",
        "cargo: 3 type errors after 400 warnings",
        rust_errors_setup,
        _red_policy(
            "CARGO_TARGET_DIR=target cargo build --offline --color never",
            "build.log",
            "-A1 '^error'",
            asked_cargo,
        ),
        c_errors_check,
    ),
]
