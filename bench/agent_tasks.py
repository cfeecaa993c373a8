"""Conch's task benchmark through the real hosts (issue 21, part 2).

``bench/agent_tasks.py`` runs ten deterministic tasks (``agent_tasks_tasks.py``) with scripted
*reactive* policies through the real Codex CLI 0.171.0 and Claude Code 2.1.197. Each host talks
to a fake model on loopback (``agent_tasks_hosts.py``) that computes the next step when the
host's request arrives, from the tool results in that request: a policy acts only on what the
model was shown. Per finished task it counts

- **turns**: the model's tool calls, Codex's ``tool_search`` included. Codex defers an MCP
  server's tools and shows the model only a listing line (the first 247 characters of the
  server's instructions); a policy calls a deferred tool directly only when that line names
  the tool and every argument the call passes (Conch's call sheet, ``exec{command,…}``), and
  otherwise runs one ``tool_search`` first (``Driver``, ``listed`` in agent_tasks_hosts.py);
- **bytes received**: the sum of the content strings the host put in the conversation for the
  tool results (Codex ``function_call_output``, Claude Code ``tool_result`` and its
  ``<task-notification>`` messages), in UTF-8 bytes;
- **seconds**: from the host's start to the policy's answer (host start-up included);
- **pass**: the answer checked against the truth, and the live state at the answer (a server
  stopped, a hung command gone); task 9 fails if the secret reached the model or the model had
  to type it.

Tool sets and their policies (the natural use of each, see ``agent_tasks_toolsets.py``):

- ``conch@codex``, ``conch@claude``: Conch's ``conch`` profile (``bin/conch serve``): ``exec``
  with ``ready``/``pty``, one ``read`` with ``until``/``job_ids`` instead of polling,
  ``write``, ``signal``, ``shell_open``; with ``--secret-prompt elicit``: a password prompt
  goes to the person on a one-time page, by URL elicitation where the host takes it to a
  person, else named in the result (``secret_page``: ``codex exec`` declines elicitation,
  Claude Code 2.1.197 declares form mode only), which the model passes on in a message with
  its wait. The bench plays the person: it opens the page the host asks about or shows.
- ``conch-codex@codex``, ``conch-claude-code@claude``: Conch's dialect profiles, used exactly
  as the host's own tools are.
- ``codex@codex`` (``exec_command``/``write_stdin``), ``claude@claude``
  (``Bash``/``TaskOutput``/``TaskStop``): the hosts' built-in shell tools.
- ``codex-plain@codex``, ``claude-plain@claude``: the same built-in tools; they differ only in
  tasks 12-14 (below), where they model a model that does not know the failures' shape.
- ``tfbash@claude``, ``ai-device-bash@claude``: the seed originals (tfbash-mcp 0.2.0,
  ai-device-bash 0.2.0, in ``.venv-originals/``).
- ``shell-server@claude``: ``mcp-shell-server`` 1.1.14 from PyPI (``.cache/bench/``).

MCP tool timeouts: 60 s in both hosts (Codex ``tool_timeout_sec = 60``, Claude Code
``MCP_TOOL_TIMEOUT=60000``; Conch is told the same with ``CONCH_HOST_TIMEOUT_MS``).

``--quick`` scales durations down (the build 4 s, the 10-minute job
20 s under a 6 s host timeout) and says so in its output. Raw logs (every request body the
fake model got, the MCP stdio, the host's output) go to ``.cache/bench/agent-tasks/<stamp>/``;
the table to ``bench/results/<date>-agent-tasks-<config>[-quick][<suffix>].md``.

Tasks 12-14 (faithful on red), three models of the same step (``_red_policy`` in
agent_tasks_tasks.py):

- the ``conch`` profile runs the build or test run as it is and answers from the digest its
  result carries;
- ``codex-plain@codex``, ``claude-plain@claude``: the model the digests are for, one that does
  not know what it will find. It runs the command as it is and reads the host's own window
  (Codex 0.171.0: ~10,000 tokens, the head and the tail of the output, "…N tokens
  truncated…"; Claude Code 2.1.197: the first 30,000 characters of the output, of which the
  model sees the first and the last 5,000, "[... N characters truncated ...]", so the real
  tail of a longer output is not shown at all). If the window is whole, or
  shows every failure the task asks about with what it asks (the ids reach the totals the
  program printed, each with its reason or ``file:line``), it answers. Else, as neither host
  keeps a copy of the cut output, it runs the command again to a file and greps it with a
  generic pattern (``error|FAILED|ERROR``), and when a failure it then sees still lacks what
  the task asks (pytest's collection error without its reason, rustc's ``error[E…]`` without
  its ``-->`` line), a third call prints the lines after each (``sed -n`` from the grep's
  line numbers). It answers from all it was shown;
- every other tool set (``codex@codex``, ``claude@claude``, the dialect profiles, the seeds)
  keeps the shell idiom of tasks 1 and 3, the output to a file and ``grep`` in the same call,
  with a pattern chosen for the task's failure shape: the host's best case, a model that
  already knew the shape and the pattern. In t13 its pattern also takes pytest's ``E`` lines,
  which repeat what the ``FAILED`` lines say (~1.8 KB of its ~5 KB).

    .venv/bin/python bench/agent_tasks.py [--quick] [--tasks t1,t3] [--policies conch@codex,...]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_tasks_hosts import REPO, McpServer, run_host
from agent_tasks_tasks import TASKS, Setup, Task
from agent_tasks_toolsets import (
    AiDeviceBashTools,
    ClaudeTools,
    CodexTools,
    ConchTools,
    ShellServerTools,
    TfbashTools,
    ToolSet,
)

CONCH = REPO / "bin" / "conch"
LOGS = REPO / ".cache" / "bench" / "agent-tasks"
RESULTS = REPO / "bench" / "results"
SHELL_SERVER = ("mcp-shell-server", "1.1.14")
SHELL_SERVER_VENV = REPO / ".cache" / "bench" / "mcp-shell-server"


# --- tool sets -----------------------------------------------------------------------------------


#: makes a tool set's MCP server for a run: (run dir, what Conch is told of the host's timeout)
ServerMaker = Callable[[Path, "int | None"], "McpServer | None"]


@dataclass(frozen=True)
class ToolSetSpec:
    key: str
    host: str
    make: Callable[[Path], ToolSet]
    server: ServerMaker


def _conch(profile: str | None, elicit: bool = False) -> ServerMaker:
    def make(run_dir: Path, told_ms: int | None) -> McpServer:
        argv = [str(CONCH), "serve", "--data-dir", str(run_dir / "conch-data")]
        if profile:
            argv += ["--profile", profile]
        if elicit:
            argv += ["--secret-prompt", "elicit"]
        env = {"CONCH_HOST_TIMEOUT_MS": str(told_ms)} if told_ms is not None else {}
        return McpServer("conch", tuple(argv), env)

    return make


#: the configurations a host runs in (``--config``)
CONFIGS = {
    "shipped": "as shipped: no timeout setting in the host, Conch told nothing",
    "installed": "after `conch install HOST`: the host config and Conch's command line it writes",
    "constrained": "a 60 s MCP tool timeout set in the host, Conch not told (reported, no goal)",
}


def installed_entry(host: str, run_dir: Path) -> tuple[list[str], dict[str, str], float | None]:
    """What ``conch install`` registers for ``host`` in a fresh config home: the server's
    command line, its environment and the host's tool timeout it wrote (None: none)."""
    import tomllib

    home = run_dir / "install-home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    if host == "codex":
        env["CODEX_HOME"] = str(home / "codex")
        (home / "codex").mkdir(exist_ok=True)
        subprocess.run([str(CONCH), "install", "codex"], env=env, check=True, capture_output=True)
        entry = tomllib.loads((home / "codex" / "config.toml").read_text())["mcp_servers"]["conch"]
        tt = entry.get("tool_timeout_sec")
        return [entry["command"], *entry.get("args", [])], entry.get("env", {}), tt
    env["CLAUDE_CONFIG_DIR"] = str(home / "claude")
    (home / "claude").mkdir(exist_ok=True)
    subprocess.run([str(CONCH), "install", "claude-code"], env=env, check=True, capture_output=True)
    found = [p for p in (home / "claude").rglob("*.json") if "conch" in p.read_text()]
    found += [p for p in home.glob(".claude*.json") if "conch" in p.read_text()]
    if not found:
        raise RuntimeError("conch install claude-code wrote no config with a conch server")
    entry = json.loads(found[0].read_text())["mcpServers"]["conch"]
    timeout_ms = entry.get("timeout")
    return (
        [entry["command"], *entry.get("args", [])],
        entry.get("env", {}),
        timeout_ms / 1000 if timeout_ms else None,
    )


def _original(name: str) -> ServerMaker:
    def make(run_dir: Path, told_ms: int | None) -> McpServer:
        from harness import original_venv, venv_script

        if name == "tfbash":
            venv = original_venv("tfbash-mcp", "3.12", "tfbash-mcp==0.2.0")
            return McpServer("tfbash", (venv_script(venv, "tfbash-mcp"),))
        venv = original_venv("ai-device-bash", "3.13", "ai-device-bash[mcp]==0.2.0")
        import glob

        (lib,) = glob.glob(str(venv / "lib" / "python3.*"))
        dotenv = Path(lib) / ".env"
        want = (
            "SERVER_LOG_ENABLED=false\n"
            f"BASH_OUTPUT_DIR={venv / 'outputs'}\n"
            f"BASH_ARTIFACT_DIR={venv / 'artifacts'}\n"
        )
        if not dotenv.exists() or dotenv.read_text() != want:
            dotenv.write_text(want)
        return McpServer("ai-device-bash", (venv_script(venv, "mcp-server-bash"),))

    return make


_install_lock = threading.Lock()


def shell_server_bin() -> Path:
    """mcp-shell-server, pinned, installed by pip into a gitignored venv once."""
    exe = SHELL_SERVER_VENV / "bin" / "mcp-shell-server"
    marker = SHELL_SERVER_VENV / ".installed"
    want = "==".join(SHELL_SERVER)
    with _install_lock:
        if exe.exists() and marker.exists() and marker.read_text() == want:
            return exe
        from harness import original_python

        shutil.rmtree(SHELL_SERVER_VENV, ignore_errors=True)
        subprocess.run([original_python("3.12"), "-m", "venv", str(SHELL_SERVER_VENV)], check=True)
        pip = [str(SHELL_SERVER_VENV / "bin" / "python"), "-m", "pip", "-q"]
        subprocess.run([*pip, "install", "--disable-pip-version-check", want], check=True)
        marker.write_text(want)
        return exe


def _shell_server(run_dir: Path, told_ms: int | None) -> McpServer:
    scripts = ("build.sh", "run_tests.sh", "job.sh", "deploy.sh", "fetch_deps.sh", "long_job.sh")
    allow = ",".join(["cat", "curl", "python3", "git", "kill", "sleep", "tail", "grep", "echo"])
    allow += "," + ",".join(f"{s},./{s}" for s in scripts)
    return McpServer("shell", (str(shell_server_bin()),), {"ALLOW_COMMANDS": allow})


TOOLSETS = [
    ToolSetSpec(
        "conch@codex", "codex", lambda w: ConchTools("codex", secret=True), _conch(None, True)
    ),
    ToolSetSpec(
        "conch@claude", "claude", lambda w: ConchTools("claude", secret=True), _conch(None, True)
    ),
    ToolSetSpec("conch-codex@codex", "codex", lambda w: CodexTools("conch"), _conch("codex")),
    ToolSetSpec(
        "conch-claude-code@claude", "claude", lambda w: ClaudeTools("conch"), _conch("claude-code")
    ),
    ToolSetSpec("codex@codex", "codex", lambda w: CodexTools(None), lambda r, t: None),
    ToolSetSpec("claude@claude", "claude", lambda w: ClaudeTools(None), lambda r, t: None),
    ToolSetSpec(
        "codex-plain@codex", "codex", lambda w: CodexTools(None, plain=True), lambda r, t: None
    ),
    ToolSetSpec(
        "claude-plain@claude", "claude", lambda w: ClaudeTools(None, plain=True), lambda r, t: None
    ),
    ToolSetSpec("tfbash@claude", "claude", lambda w: TfbashTools("claude"), _original("tfbash")),
    ToolSetSpec(
        "ai-device-bash@claude",
        "claude",
        lambda w: AiDeviceBashTools("claude"),
        _original("ai-device-bash"),
    ),
    ToolSetSpec(
        "shell-server@claude", "claude", lambda w: ShellServerTools("claude", str(w)), _shell_server
    ),
]
CONCH_KEYS = {"conch@codex", "conch@claude", "conch-codex@codex", "conch-claude-code@claude"}


# --- the person of task 9 ------------------------------------------------------------------------


SECRET_PAGE = re.compile(r"http://127\.0\.0\.1:\d+/secret/[A-Za-z0-9_-]+")


def person(secret: str, stop: threading.Event) -> Callable[[Path, Callable[..., Any]], None]:
    """Plays the person at the host, who types the password on Conch's page: the page the
    host asks them about (``elicitation/create`` with a URL, seen on the server's stdout as
    the host gets it), or the one the model's message names (what the host prints of the
    conversation, its stdout). The model never sees the value."""

    def pages(run_dir: Path) -> list[str]:
        found: list[str] = []
        with contextlib.suppress(OSError):
            for line in (run_dir / "from-server.jsonl").read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    msg = json.loads(line)
                    if msg.get("method") == "elicitation/create":
                        found.append(str(msg.get("params", {}).get("url") or ""))
        with contextlib.suppress(OSError):
            found += SECRET_PAGE.findall((run_dir / "host.stdout").read_text(errors="replace"))
        return [u for u in found if u]

    def watch(run_dir: Path, in_netns: Callable[..., Any]) -> None:
        done: set[str] = set()
        while not stop.is_set():
            for url in pages(run_dir):
                if url in done:
                    continue
                done.add(url)
                data = f"secret={secret}".encode()
                req = urllib.request.Request(url, data=data, method="POST")
                req.add_header("Content-Type", "application/x-www-form-urlencoded")
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                with contextlib.suppress(Exception):
                    in_netns(lambda r=req, o=opener: o.open(r, timeout=10).read())
            stop.wait(0.2)

    return watch


# --- one run -------------------------------------------------------------------------------------


@dataclass
class Result:
    task: str
    toolset: str
    turns: int
    bytes: int
    seconds: float
    ok: bool
    why: str
    answer: str
    run_dir: str


def run_one(
    task: Task, spec: ToolSetSpec, root: Path, quick: bool, config: str = "installed"
) -> Result:
    run_dir = root / task.key / spec.key.replace("@", "-at-")
    work = run_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    setup: Setup = task.setup(work, quick)
    ts = spec.make(work)
    timeout_s: float | None = None  # the host's own default
    try:
        server = spec.server(run_dir, None)  # Conch is told nothing but what install writes
        if config == "constrained":
            timeout_s = setup.host_timeout_s or 60
        elif config == "installed" and spec.key in CONCH_KEYS and server is not None:
            argv, env, timeout_s = installed_entry(spec.host, run_dir)
            server = McpServer("conch", (*argv, *server.argv[2:]), {**env, **server.env})
    except Exception as e:  # an install failed: say so in the table
        return Result(task.key, spec.key, 0, 0, 0.0, False, f"not run: {e}", "", str(run_dir))
    stop = threading.Event()
    watcher = person(setup.person_secret, stop) if setup.person_secret and ts.secret else None
    live: dict[str, Any] = {}
    try:
        run = run_host(
            spec.host,
            task.policy(ts, work, setup),
            run_dir,
            work,
            server,
            timeout_s,
            setup.deadline_s,
            person=watcher,
            at_done=lambda: live.update(task.live(work, setup)),
        )
    finally:
        stop.set()
    d = run.driver
    answer = d.answer or ""
    if setup.person_secret:
        seen = json.dumps(run.requests)
        live["leaked"] = setup.person_secret in seen and not answer.startswith("typed by")
        if ts.secret and setup.person_secret in seen:
            live["leaked"] = True
    if d.answer is None:
        ok, why = False, f"no answer within {setup.deadline_s:.0f} s (host rc {run.returncode})"
    elif d.error:
        ok, why = False, d.error
    else:
        ok, why = task.check(answer, work, setup, live)
    if setup.person_secret and ts.secret and not ok:
        to_server = (run_dir / "to-server.jsonl").read_text(errors="replace")
        if '"action":"decline"' in to_server:
            why = "the host declined Conch's URL elicitation (no person was asked): " + why
    if run.attempts:  # blocked by the sandbox; the server's own traffic, not the policy's
        why = (why + "; " if why else "") + f"blocked going off-box: {run.attempts[:2]}"
    turns = [
        {"call": t.call if isinstance(t.call, str) else vars(t.call), "shown": t.shown, "at": t.at}
        for t in d.turns
    ]
    record = {
        "task": task.key,
        "toolset": spec.key,
        "n_turns": len(d.turns),
        "bytes": sum(t.shown_bytes for t in d.turns),
        "seconds": run.seconds,
        "answer": answer,
        "ok": ok,
        "why": why,
        "live": live,
        "turns": turns,
    }
    (run_dir / "result.json").write_text(json.dumps(record, indent=1, default=str))
    return Result(
        task.key,
        spec.key,
        len(d.turns),
        sum(t.shown_bytes for t in d.turns),
        run.seconds,
        ok,
        why,
        answer,
        str(run_dir),
    )


# --- the table -----------------------------------------------------------------------------------


def cell(r: Result | None) -> str:
    if r is None:
        return "–"
    if r.why.startswith("not run"):
        return "not run"
    mark = "✓" if r.ok else "✗"
    return f"{r.turns} / {r.bytes / 1024:.1f} / {r.seconds:.0f} {mark}"


def table(results: list[Result], tasks: list[Task], keys: list[str]) -> str:
    by = {(r.task, r.toolset): r for r in results}
    lines = [
        "| task | " + " | ".join(keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for t in tasks:
        row = [cell(by.get((t.key, k))) for k in keys]
        lines.append(f"| {t.key} {t.title} | " + " | ".join(row) + " |")
    tot = []
    for k in keys:
        rs = [by[(t.key, k)] for t in tasks if (t.key, k) in by]
        tot.append(
            f"{sum(r.turns for r in rs)} / {sum(r.bytes for r in rs) / 1024:.1f} / "
            f"{sum(r.seconds for r in rs):.0f} · {sum(r.ok for r in rs)}/{len(rs)} ✓"
        )
    lines.append("| **total** | " + " | ".join(tot) + " |")
    return "\n".join(lines)


#: the host's own shell tool set, per host
OWN = {"codex": "codex@codex", "claude": "claude@claude"}
#: the host's own shell as a model that does not know the failures' shape uses it (t12-t14)
PLAIN = {"codex": "codex-plain@codex", "claude": "claude-plain@claude"}
#: the byte goal per host over the agent tasks: Conch's best at most this many times the host's
#: own shell (over the faithful-on-red tasks t12-t14: 0.5 on both)
BYTE_GOAL = {"codex": 1.0, "claude": 0.8}
RUN_TASKS = {f"t{i}" for i in range(1, 12)}
RED_TASKS = {"t12", "t13", "t14"}


def goals(results: list[Result], tasks: list[Task]) -> str:
    """The goals, per host: Conch's best profile against the host's own shell: no more turns
    on any task both pass, and its total bytes within the host's ratio. Over t12-t14 against
    both baselines where both ran: the best case (``codex@codex``, ``claude@claude``) and the
    plain model (``codex-plain@codex``, ``claude-plain@claude``)."""
    host = {s.key: s.host for s in TOOLSETS}
    lines = []
    for h in ("codex", "claude"):
        mine = [r for r in results if host.get(r.toolset) == h and r.toolset in CONCH_KEYS]
        if not mine:
            continue
        mk = {r.toolset for r in mine}

        def total(rs: list[Result], key: str) -> int:
            return sum(r.bytes for r in rs if r.toolset == key)

        def passed(rs: list[Result], key: str) -> int:
            return sum(r.ok for r in rs if r.toolset == key)

        for base in (OWN[h], PLAIN[h]):
            own = [r for r in results if r.toolset == base]
            if not own:
                continue
            worse = []
            for t in tasks:
                a = [r.turns for r in mine if r.task == t.key and r.ok]
                b = [r.turns for r in own if r.task == t.key and r.ok]
                if a and b and min(a) > min(b):
                    worse.append(f"{t.key} ({min(a)} vs {min(b)})")
                elif b and not a:
                    worse.append(f"{t.key} (Conch failed, the host's shell passed)")
            lines.append(
                f"- {h}: turns, Conch's best ≤ `{base}` on every task both pass: "
                + ("yes" if not worse else "no: " + ", ".join(worse))
            )
            groups = [("t1-t11", RUN_TASKS, BYTE_GOAL[h]), ("t12-t14", RED_TASKS, 0.5)]
            for label, group, goal in groups if base == OWN[h] else groups[1:]:
                m = [r for r in mine if r.task in group]
                o = [r for r in own if r.task in group]
                if not m or not o:
                    continue
                best = min((-passed(m, k), total(m, k), k) for k in mk)[2]
                bm, bo = total(m, best), total(o, base)
                both = {r.task for r in m if r.ok and r.toolset == best} & {
                    r.task for r in o if r.ok
                }
                bm2 = sum(r.bytes for r in m if r.toolset == best and r.task in both)
                bo2 = sum(r.bytes for r in o if r.task in both)
                ratio = bm / max(bo, 1)
                met = "met" if ratio <= goal else "not met"
                lines.append(
                    f"- {h}: bytes over {label}, Conch's best by passes then bytes (`{best}`,"
                    f" {passed(m, best)} passed) {bm / 1024:.1f} KB against `{base}`"
                    f" ({passed(o, base)} passed) {bo / 1024:.1f} KB: {ratio:.2f}× (goal ≤"
                    f" {goal}×: {met}); over the {len(both)} tasks both passed"
                    f" {bm2 / max(bo2, 1):.2f}×"
                )
    for key in sorted(CONCH_KEYS):
        for tk in ("t10", "t11"):
            rl = [r for r in results if r.task == tk and r.toolset == key]
            if rl:
                lines.append(
                    f"- {tk} `{key}`: {'survived' if rl[0].ok else 'FAILED: ' + rl[0].why}"
                )
    leaks = [r for r in results if r.task == "t9" and "LEAK" in r.why]
    lines.append(f"- t9 leaks (the secret in what the model was shown): {len(leaks)}")
    return "\n".join(lines)


def failures(results: list[Result]) -> str:
    out = [
        f"- {r.task} `{r.toolset}`: {'' if r.ok else 'FAILED: '}{r.why[:300]}"
        for r in results
        if r.why
    ]
    return "\n".join(out) or "- none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="durations scaled down (see the doc)")
    ap.add_argument("--tasks", default="", help="comma-separated task keys (t1..t10)")
    ap.add_argument("--policies", default="", help="comma-separated tool set keys")
    ap.add_argument("--jobs", type=int, default=3, help="runs at once (long tasks run beside)")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    ap.add_argument(
        "--config",
        choices=sorted(CONFIGS),
        default="installed",
        help="how the hosts are set up: " + "; ".join(f"{k}: {v}" for k, v in CONFIGS.items()),
    )
    ap.add_argument(
        "--suffix",
        default="",
        help="added to the results file's name (e.g. -r2: a second run of the same day)",
    )
    ap.add_argument(
        "--merge",
        default="",
        help="comma-separated earlier log dirs: their results are in the table unless rerun here",
    )
    args = ap.parse_args()
    tasks = [t for t in TASKS if not args.tasks or t.key in args.tasks.split(",")]
    specs = [s for s in TOOLSETS if not args.policies or s.key in args.policies.split(",")]
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    root = LOGS / (stamp + f"-{args.config}" + ("-quick" if args.quick else ""))
    root.mkdir(parents=True, exist_ok=True)
    if args.quick:
        print(
            "QUICK RUN: durations scaled down (the build 4 s, the 10-min job 20 s "
            "under a 6 s host timeout); the published table is the full run",
            flush=True,
        )
    print(f"raw logs: {root}", flush=True)
    results: list[Result] = []
    lock = threading.Lock()

    def one(t: Task, s: ToolSetSpec) -> None:
        r = run_one(t, s, root, args.quick, args.config)
        with lock:
            results.append(r)
            print(f"{t.key:4} {s.key:26} {cell(r):24} {r.why[:100]}", flush=True)

    started = time.monotonic()
    long_jobs = [(t, s) for t in tasks if t.long for s in specs]
    short_jobs = [(t, s) for t in tasks if not t.long for s in specs]
    with ThreadPoolExecutor(max(1, len(long_jobs))) as longs, ThreadPoolExecutor(args.jobs) as pool:
        futures = [longs.submit(one, t, s) for t, s in long_jobs]
        futures += [pool.submit(one, t, s) for t, s in short_jobs]
        for f in futures:
            f.result()
    rerun = {(r.task, r.toolset) for r in results}
    for earlier in [d for d in args.merge.split(",") if d]:
        for f in sorted(Path(earlier).glob("*/*/result.json")):
            rec = json.loads(f.read_text())
            if "n_turns" not in rec or (rec["task"], rec["toolset"]) in rerun:
                continue
            results.append(
                Result(
                    rec["task"],
                    rec["toolset"],
                    rec["n_turns"],
                    rec["bytes"],
                    rec["seconds"],
                    rec["ok"],
                    rec["why"],
                    rec["answer"],
                    str(f.parent),
                )
            )
            rerun.add((rec["task"], rec["toolset"]))
    if args.merge:
        tasks = [t for t in TASKS if any(r.task == t.key for r in results)]
        specs = [s for s in TOOLSETS if any(r.toolset == s.key for r in results)]
    keys = [s.key for s in specs]
    order = {(t.key, k): i for i, t in enumerate(tasks) for k in keys}
    results.sort(key=lambda r: order.get((r.task, r.toolset), 0))
    body = table(results, tasks, keys)
    print(body)
    print(failures(results))
    if args.no_write:
        return
    merged = [d for d in args.merge.split(",") if d]
    date = datetime.date.today().isoformat()
    name = f"{date}-agent-tasks-{args.config}{'-quick' if args.quick else ''}{args.suffix}.md"
    doc = [
        f"# Agent tasks through the real hosts ({'quick' if args.quick else 'full'} run, {date})",
        "",
        "`bench/agent_tasks.py`" + (" --quick" if args.quick else "") + ": Codex CLI 0.171.0 and"
        " Claude Code 2.1.197, a reactive fake model on loopback; configuration"
        f" **{args.config}**: {CONFIGS[args.config]}"
        + (" (quick: 6 s for t10 when constrained; durations scaled down)" if args.quick else "")
        + ".",
        "Each cell: model turns / KB the model received for tool results / seconds (host"
        " start-up included) ✓ pass or ✗ fail. Through Codex an MCP server's tools are"
        " deferred: a policy calls one directly when the listing Codex shows (the first 247"
        " characters of the server's instructions) names the tool and every argument it passes,"
        " else it pays one `tool_search` turn first.",
        "t12-t14 (faithful on red): the `conch` profile runs the command as it is and answers"
        " from the digest its result carries. `codex-plain@codex` and `claude-plain@claude`"
        " (the host's own shell, a model that does not know what it will find) run it as it"
        " is and read the host's own window (Codex: ~10,000 tokens, the output's head and"
        " tail; Claude Code: the first and last 5,000 of the output's first 30,000"
        " characters); when that window is cut and"
        " does not show every failure the task asks about (the ids reaching the totals the"
        " program printed, each with its reason or `file:line`), they run it again to a file"
        " and grep it with a generic pattern (`error|FAILED|ERROR`), and if a failure is"
        " still shown without what the task asks, a third call prints its lines (`sed -n`)."
        " Every other tool set, `codex@codex` and `claude@claude` included, runs it redirected"
        " to a file and greps the file in the same call, with a pattern chosen for the task's"
        " failures (`: error`, `^(FAILED|ERROR)|^E +.*Error`, `-A1 '^error'`): the host's best"
        " case, as a model that knew what to look for.",
        "",
        body,
        "",
        "Goals (Conch's best profile against the host's own shell; over t12-t14 against"
        " both of its models where they ran, the best case and the plain one):",
        "",
        goals(results, tasks),
        "",
        "Failures and notes:",
        "",
        failures(results),
        "",
        "Raw logs: `"
        + ", ".join(str(Path(d).resolve().relative_to(REPO)) for d in [root, *merged])
        + "/<task>/<tool set>/` (gitignored): the fake model's"
        " request bodies (`model-requests.jsonl`), the MCP server's stdio, `result.json`.",
        (
            f"Wall time of the whole run: {time.monotonic() - started:.0f} s."
            if not merged
            else "Merged from the runs above: a row is taken from the first that has it."
        ),
        "",
    ]
    out = RESULTS / name
    out.write_text("\n".join(doc))
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
