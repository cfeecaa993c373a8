"""Suite-wide rules: asyncio for async tests, and no test may leave a process behind."""

from __future__ import annotations

import os
import time

import psutil
import pytest
import system_tools


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _leftovers() -> list[psutil.Process]:
    # zombies count: a zombie child nobody reaped is a leak as well
    return list(psutil.Process().children(recursive=True))


@pytest.fixture(autouse=True)
def no_process_left_behind():
    """Every test cleans up what it starts: after it, this process has no children left."""
    yield
    deadline = time.monotonic() + 3.0
    left = _leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _leftovers()
    if left:
        desc = []
        for p in left:
            try:
                status = p.status()
                try:
                    cmd = " ".join(p.cmdline())[:120]
                except psutil.Error:  # a zombie has no command line left
                    cmd = p.name()
                desc.append(f"{p.pid} {status} {cmd}")
                p.kill()
            except psutil.NoSuchProcess:
                pass
        time.sleep(0.1)
        for p in left:  # reap, so one leak does not fail every later test
            try:
                os.waitpid(p.pid, os.WNOHANG)
            except ChildProcessError:
                pass
        pytest.fail("processes left behind by this test:\n" + "\n".join(desc))


# the reasons of tests skipped for a missing prerequisite, for the run's last line
_skipped: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(*commands): system tools the test drives (tests/support/system-tools.txt)"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs"):
        system_tools.require(*mark.args)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # (runs in the controller under xdist too: the reports come back from the workers)
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        if reason.startswith(system_tools.PREFIX):
            _skipped.append(reason)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _skipped:
        terminalreporter.write_line(system_tools.summary_line(_skipped), yellow=True, bold=True)
