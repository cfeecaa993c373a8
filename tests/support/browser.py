"""A headless Chromium driven over the W3C WebDriver protocol (chromedriver), with the stdlib
only: enough to load the dashboard, type into it, click it, read its DOM and screenshot it."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psutil
from frontend_servers import free_port

T = TypeVar("T")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


class Browser:
    def __init__(self, base: str, session: str) -> None:
        self.base = base
        self.session = session

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.base}/session/{self.session}{path}",
            data=data if method == "POST" else None,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())["value"]
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"webdriver {method} {path}: {e.read()[:500]!r}") from None

    # -- pages ---------------------------------------------------------------------------------

    def get(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def source(self) -> str:
        return str(self._call("GET", "/source"))

    def run(self, script: str, *args: Any) -> Any:
        """Run ``script`` (a function body; ``arguments`` holds ``args``) and return its value;
        a returned Promise is awaited."""
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self._call("GET", "/screenshot")))
        return path

    def set_size(self, width: int, height: int) -> None:
        self._call("POST", "/window/rect", {"width": width, "height": height})

    # -- elements ------------------------------------------------------------------------------

    def find_all(self, css: str) -> list[str]:
        found = self._call("POST", "/elements", {"using": "css selector", "value": css})
        return [e[ELEMENT] for e in found]

    def find(self, css: str, timeout: float = 10.0) -> str:
        return self.wait(lambda: (self.find_all(css) or [None])[0], timeout, f"no {css}")

    def text(self, element: str) -> str:
        return str(self._call("GET", f"/element/{element}/text"))

    def type(self, element: str, text: str) -> None:
        self._call("POST", f"/element/{element}/value", {"text": text})

    def click(self, element: str) -> None:
        self._call("POST", f"/element/{element}/click", {})

    def wait(self, probe: Callable[[], T | None], timeout: float = 10.0, what: str = "") -> T:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(RuntimeError):
                value = probe()
                if value:
                    return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting: {what}")
            time.sleep(0.1)


@contextlib.contextmanager
def chromium(tmp: Path) -> Iterator[Browser]:
    """A headless Chromium under chromedriver, both gone when the block ends."""
    port = free_port()
    log = open(tmp / "chromedriver.log", "wb")  # noqa: SIM115 - closed below
    driver = subprocess.Popen(
        [CHROMEDRIVER, f"--port={port}", "--allowed-ips=127.0.0.1"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    session = None
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(base + "/status", timeout=1) as r:
                    if json.loads(r.read())["value"].get("ready"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or driver.poll() is not None:
                raise RuntimeError("chromedriver did not start")
            time.sleep(0.05)
        profile = tmp / "chromium-profile"
        profile.mkdir(exist_ok=True)
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [
                            "--headless",
                            "--no-sandbox",
                            "--disable-gpu",
                            "--disable-dev-shm-usage",
                            "--disable-background-networking",
                            "--disable-component-update",
                            "--disable-sync",
                            "--no-first-run",
                            "--disable-crash-reporter",
                            "--disable-breakpad",
                            f"--user-data-dir={profile}",
                            "--window-size=1400,800",
                        ],
                    },
                }
            }
        }
        req = urllib.request.Request(
            base + "/session",
            data=json.dumps(caps).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            session = json.loads(r.read())["value"]["sessionId"]
        yield Browser(base, session)
    finally:
        # Chromium's processes, collected first: once chromedriver is gone they are
        # reparented (to this process, when a test made it a child subreaper).
        tree = _chromium_processes(driver.pid)
        if session is not None:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(
                    urllib.request.Request(f"{base}/session/{session}", method="DELETE"),
                    timeout=30,
                ).close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, 15)
        try:
            driver.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(driver.pid, 9)
            driver.wait(5)
        log.close()
        _reap_group(driver.pid)
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(tree, timeout=10)  # reaps the ones that became our children
        _reap_stragglers()


def _reap_stragglers() -> None:
    """Chromium helpers that double-forked late are reparented to this process (a child
    subreaper) after the tree above was taken, some already dead: kill and reap every
    Chromium child until none has shown up for a while (bounded)."""
    deadline = time.monotonic() + 10
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        found = []
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "chrom" in child.name():
                    found.append(child)
        if not found:
            if time.monotonic() - quiet_since > 0.5:
                return
        else:
            quiet_since = time.monotonic()
            for proc in found:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            for proc in found:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(proc.pid, os.WNOHANG)
        time.sleep(0.05)


def _chromium_processes(driver_pid: int) -> list[psutil.Process]:
    """chromedriver's descendants, and Chromium helpers (crashpad) that double-forked and were
    reparented to this process already."""
    found: list[psutil.Process] = []
    with contextlib.suppress(psutil.NoSuchProcess):
        found += psutil.Process(driver_pid).children(recursive=True)
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.pid != driver_pid and "chromium" in (child.cmdline() or [""])[0]:
                found.append(child)
    return list({p.pid: p for p in found}.values())


def _reap_group(pgid: int) -> None:
    """Wait (bounded) until nothing of chromedriver's process group is left."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, 9)
        time.sleep(0.1)
