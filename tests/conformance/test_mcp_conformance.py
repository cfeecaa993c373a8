"""The official MCP conformance suite (the npm package @modelcontextprotocol/conformance) against
`bin/conch serve --http`, over Streamable HTTP at /mcp on loopback.

The suite and a Node 22 to run it (the npm package ``node``, which ships a node binary) are both
pinned below and installed with npm into the gitignored ``.cache/conformance``, once: a run that
finds both at their pinned versions installs nothing. The suite connects to the server as an
MCP client, one scenario at a time, and writes each scenario's checks to
``<output-dir>/server-<scenario>-<timestamp>/checks.json``; a scenario passes when none of its
checks is a FAILURE. Every scenario of its default ("active") suite must pass except those in
``expected-failures.txt``, and each of those must still fail, so that list stays honest.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import system_tools
from frontend_servers import free_port, kill_group

pytestmark = [pytest.mark.slow, pytest.mark.needs("npm")]

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "conformance"
SUITE_PACKAGE = "@modelcontextprotocol/conformance"
SUITE_VERSION = "0.2.0-alpha.12"  # the newest the registry offers (its `latest` tag: 0.1.16)
NODE_VERSION = "22.23.3"  # the npm package `node`: a prebuilt node binary
EXPECTED_FAILURES = Path(__file__).with_name("expected-failures.txt")

NODE = CACHE / "node_modules" / "node" / "bin" / "node"
SUITE_CLI = CACHE / "node_modules" / SUITE_PACKAGE / "dist" / "index.js"
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
RUNNING = re.compile(r"^=== Running scenario: (?P<scenario>\S+) ===$", re.MULTILINE)


def run_group(
    args: list[str],
    timeout: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """subprocess.run in a process group of its own, the whole group killed on a timeout."""
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=cwd,
        env=env,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{args[:3]} timed out after {timeout} s:\n{out}\n{err}") from None
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def installed_version(package: str) -> str | None:
    try:
        meta = json.loads((CACHE / "node_modules" / package / "package.json").read_text())
        return str(meta["version"])
    except (OSError, ValueError, KeyError):
        return None


def ready() -> bool:
    """The pinned suite and node are in the cache, and that node runs."""
    if installed_version(SUITE_PACKAGE) != SUITE_VERSION or not SUITE_CLI.is_file():
        return False
    if installed_version("node") != NODE_VERSION or not NODE.is_file():
        return False
    try:
        r = run_group([str(NODE), "--version"], timeout=60)
    except (OSError, AssertionError):
        return False
    return r.returncode == 0 and r.stdout.strip() == f"v{NODE_VERSION}"


def install_command() -> list[str]:
    return [
        "npm",
        "install",
        "--prefix",
        str(CACHE),
        "--save-exact",
        "--no-audit",
        "--no-fund",
        f"{SUITE_PACKAGE}@{SUITE_VERSION}",
        f"node@{NODE_VERSION}",
    ]


@pytest.fixture(scope="module")
def suite() -> None:
    """Install the pinned suite and node into .cache/conformance unless they are there."""
    install()


def install() -> None:
    """The pinned suite and node into .cache/conformance, unless they are there (bin/test's
    prefetch calls it too)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".install.lock", "w") as lock:  # concurrent runs install once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            return
        npm = shutil.which("npm")
        assert npm is not None  # the needs("npm") mark checked it
        cmd = install_command()
        try:
            r = run_group([npm, *cmd[1:]], timeout=600, cwd=ROOT)
            said = [ln for ln in (r.stdout + r.stderr).splitlines() if "error" in ln.lower()]
            problem = "" if r.returncode == 0 else " / ".join(said[:3]) or f"exit {r.returncode}"
        except AssertionError as e:  # timed out
            problem = str(e).splitlines()[0]
        if problem or not ready():
            shown = " ".join(cmd).replace(str(ROOT) + "/", "")
            system_tools.unavailable(
                f"the MCP conformance suite {SUITE_PACKAGE}@{SUITE_VERSION} on node "
                f"{NODE_VERSION}: {problem or 'installed, but its node does not run'}",
                f"run: {shown}",
            )


def expected_failures() -> dict[str, str]:
    """expected-failures.txt: `scenario-name  reason` a line; '#' starts a comment line."""
    out: dict[str, str] = {}
    for n, line in enumerate(EXPECTED_FAILURES.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 1)
        assert len(parts) == 2 and parts[1].strip(), f"line {n}: no reason given: {line!r}"
        assert parts[0] not in out, f"line {n}: {parts[0]} listed twice"
        out[parts[0]] = parts[1].strip()
    return out


@dataclass
class Outcome:
    passed: bool
    failures: list[str]  # `check-id: message` of each failed check


def read_results(results: Path) -> dict[str, Outcome]:
    out: dict[str, Outcome] = {}
    for d in sorted(results.iterdir()):
        m = RESULT_DIR.match(d.name)
        assert m, f"unexpected entry in the suite's output directory: {d.name}"
        try:
            checks = json.loads((d / "checks.json").read_text())
        except (OSError, ValueError) as e:
            out[m["scenario"]] = Outcome(False, [f"no readable checks.json: {e}"])
            continue
        failed = [c for c in checks if c.get("status") == "FAILURE"]
        succeeded = [c for c in checks if c.get("status") == "SUCCESS"]
        out[m["scenario"]] = Outcome(
            passed=not failed and bool(succeeded),
            failures=[
                f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}" for c in failed
            ]
            or ([] if succeeded else ["no check passed"]),
        )
    return out


@pytest.fixture
def conch_url(tmp_path: Path) -> Iterator[str]:
    """`bin/conch serve --http` on a free loopback port, in a process group of its own."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONCH_")}
    err = tmp_path / "conch.stderr"
    args = [str(ROOT / "bin" / "conch"), "serve", "--http", "--host", "127.0.0.1"]
    args += ["--port", str(port), "--data-dir", str(tmp_path / "data")]
    args += ["--default-cwd", str(tmp_path)]
    with open(err, "wb") as errf:
        proc = subprocess.Popen(
            args,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errf,
            env=env,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"conch exited {proc.returncode}:\n{err.read_text()}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(base + "/health", timeout=1) as r,
            ):
                if r.status == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"conch did not become healthy:\n{err.read_text()}")
            time.sleep(0.1)
        yield base + "/mcp"
    finally:
        kill_group(proc)


def run_suite(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
    env["PATH"] = f"{CACHE / 'node_modules' / '.bin'}{os.pathsep}{env.get('PATH', '')}"
    return run_group([str(NODE), str(SUITE_CLI), *args], timeout=600, cwd=cwd, env=env)


@pytest.mark.timeout(900)
def test_official_conformance_suite(suite: None, conch_url: str, tmp_path: Path):
    expected = expected_failures()
    listed = run_suite("list", "--server", cwd=tmp_path)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    known = set(re.findall(r"^\s+- (\S+)", listed.stdout, re.MULTILINE))
    assert known, listed.stdout
    unknown = sorted(set(expected) - known)
    assert not unknown, f"expected-failures.txt names scenarios the suite lacks: {unknown}"

    results = tmp_path / "results"
    r = run_suite("server", "--url", conch_url, "--output-dir", str(results), cwd=tmp_path)
    log = r.stdout + r.stderr
    ran = RUNNING.findall(r.stdout)
    assert ran, f"the suite ran no scenario (exit {r.returncode}):\n{log}"
    outcomes = read_results(results)
    assert sorted(outcomes) == sorted(ran), f"scenarios run vs results written:\n{log}"

    table = "\n".join(
        f"  {'pass' if o.passed else 'FAIL'}  {name}"
        + ("" if o.passed else f"  ({'; '.join(o.failures)})")
        for name, o in outcomes.items()
    )
    new_failures = sorted(n for n, o in outcomes.items() if not o.passed and n not in expected)
    now_passing = sorted(n for n, o in outcomes.items() if o.passed and n in expected)
    not_run = sorted(set(expected) - set(outcomes))
    problems = []
    if new_failures:
        problems.append(f"failing, not in expected-failures.txt: {new_failures}")
    if now_passing:
        problems.append(f"passing now, remove from expected-failures.txt: {now_passing}")
    if not_run:
        problems.append(f"in expected-failures.txt but not run by the suite: {not_run}")
    assert not problems, "\n".join(problems) + f"\n{SUITE_PACKAGE}@{SUITE_VERSION}:\n{table}"
    # the suite's own verdict agrees: it exits non-zero exactly when some scenario failed
    assert (r.returncode == 0) == all(o.passed for o in outcomes.values()), log
