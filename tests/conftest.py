"""Suite-wide rules: asyncio for async tests, and no test may leave a process behind; the
fixtures more than one directory uses (the helpers themselves live in tests/support/)."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import system_tools
from frontend_servers import HttpServer, kill_group, start_http

import conch

# pytest's own process keeps the bytecode of what it imports (its rewritten test modules
# included) even under PYTHONDONTWRITEBYTECODE: else each worker of each run rewrote and
# compiled every test module again (collection: 6.8 s of CPU against 2.5). The processes the
# tests start keep the variable.
sys.dont_write_bytecode = False


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# the runtimes of the in-process tests: one factory, and `rt` built with it


RuntimeFactory = Callable[..., Awaitable[conch.Runtime]]


@pytest.fixture
async def make_runtime(tmp_path: Path) -> AsyncIterator[RuntimeFactory]:
    """``await make_runtime(**settings)``: a started runtime, closed after the test. Its Config
    has a private data dir, default cwd tmp_path and results in full detail (tests read pid,
    log_path, duration_ms); ``settings`` override any of these (``result_detail="lean"``: as a
    model gets them). A second runtime of the same test gets a data dir of its own. Closing
    them leaves no process behind at once: not a child more than when the factory was made."""
    before = {p.pid for p in _leftovers()}
    async with contextlib.AsyncExitStack() as stack:
        made = 0

        async def make(**settings: Any) -> conch.Runtime:
            nonlocal made
            made += 1
            data = tmp_path / ("data" if made == 1 else f"data-{made}")
            defaults = {
                "data_dir": str(data),
                "default_cwd": str(tmp_path),
                "result_detail": "full",
            }
            cfg = conch.Config(**{**defaults, **settings})
            return await stack.enter_async_context(conch.Runtime(cfg))

        yield make
    left = [_describe(p) for p in _leftovers() if p.pid not in before]
    assert not left, f"processes left after the runtimes closed: {left}"


@pytest.fixture
def rt_settings() -> dict[str, Any]:
    """The Config settings of ``rt`` beyond the factory's defaults. A module whose runtime
    differs overrides this fixture (it may use other fixtures: tmp_path, a backend, ...)."""
    return {}


@pytest.fixture
async def rt(make_runtime: RuntimeFactory, rt_settings: dict[str, Any]) -> conch.Runtime:
    """A runtime from ``make_runtime`` with the module's ``rt_settings``."""
    return await make_runtime(**rt_settings)


# -- the front ends' (tests/mcp, tests/http, tests/cli): real `conch serve` subprocesses


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    srv = start_http(tmp_path)
    try:
        yield srv
    finally:
        kill_group(srv.proc)


@pytest.fixture
def serve_args(tmp_path: Path) -> list[str]:
    """Arguments of `python -m conch serve` over stdio with a private data dir."""
    return ["-m", "conch", "serve", "--data-dir", str(tmp_path / "data")]


def _leftovers() -> list[psutil.Process]:
    # zombies count: a zombie child nobody reaped is a leak as well
    return list(psutil.Process().children(recursive=True))


def _describe(p: psutil.Process) -> str:
    try:
        status = p.status()
        try:
            cmd = " ".join(p.cmdline())[:120]
        except psutil.Error:  # a zombie has no command line left
            cmd = p.name()
    except psutil.NoSuchProcess:
        return f"{p.pid} (gone)"
    return f"{p.pid} {status} {cmd}"


_CPU_LOG = os.environ.get("CONCH_TEST_CPU_LOG")


@pytest.fixture(autouse=True)
def no_process_left_behind(request: pytest.FixtureRequest):
    """Every test cleans up what it starts: after it, this process has no children left.
    With ``CONCH_TEST_CPU_LOG=path``, each test's wall time and CPU time (this worker's own
    and that of the processes it reaped: servers, jobs, hosts) is appended to ``path``, a
    line of tab-separated fields per test: where a suite's CPU goes."""
    before = (time.monotonic(), os.times()) if _CPU_LOG else None
    yield
    if before is not None and _CPU_LOG:
        t0, c0 = before
        c1 = os.times()
        own = c1.user + c1.system - c0.user - c0.system
        kids = c1.children_user + c1.children_system - c0.children_user - c0.children_system
        with open(_CPU_LOG, "a") as f:
            f.write(f"{request.node.nodeid}\t{time.monotonic() - t0:.2f}\t{own:.2f}\t{kids:.2f}\n")
    deadline = time.monotonic() + 3.0
    left = _leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _leftovers()
    if left:
        desc = []
        for p in left:
            desc.append(_describe(p))
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
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


# the tests that start a Ray cluster (one per module, tests/fleet/conftest.py), in two chains:
# under xdist (bin/test) each chain runs on one worker, so at most two clusters run at once on
# the 2-core box and each module's cluster is started once. (Each test on a worker of its own
# started a cluster per test, up to six at once; all on one worker made one 12-minute chain.)
RAY_CHAINS = (
    (
        "tests/fleet/test_fleet.py::",
        "tests/test_bench_smoke.py::test_each_benchmark_runs_in_quick_mode[bench_fleet.py]",
    ),
    (
        "tests/fleet/test_fleet_notifications.py::",
        "tests/fleet/test_fleet_profiles.py::",
    ),
)
RAY_TESTS = tuple(prefix for chain in RAY_CHAINS for prefix in chain)


def ray_chain(nodeid: str) -> str | None:
    for i, chain in enumerate(RAY_CHAINS):
        if nodeid.startswith(chain):
            return f"ray-{i}"
    return None


# what `bin/test -m "not slow"` (the quick loop) leaves out: the Ray cluster, the published
# originals, the browser, Node, the nested pytest runs, and single tests of 5 s or more
SLOW_TESTS = (
    *RAY_TESTS,
    "tests/fleet/test_fleet_worker.py::test_without_cap_sys_nice",  # a Ray cluster of its own
    "tests/test_bench_smoke.py::",
    "tests/tools/profiles/differential/",
    "tests/test_provisioning.py::",
    "tests/http/test_dashboard_browser.py::",
    "tests/http/test_ts_client.py::",
    "tests/mcp/test_mcp_tasks.py::test_a_five_second_exec",
    "tests/mcp/test_mcp_tasks.py::test_a_waiting_read_runs_as_a_task",
    "tests/mcp/test_mcp_tasks.py::test_listening_for_task_ids",
    "tests/mcp/test_secret_prompt.py::test_without_",
    "tests/mcp/test_mcp_stdio.py::test_progress_notifications_carry",
    "tests/core/jobs/test_job_regressions.py::test_descriptors_stay_flat",
    "tests/core/test_base_install.py::",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
    # the longest serial chain first, so it starts at once while the other workers share
    # everything else (putting the slow tests next made no difference: 446 s against 447 and
    # 451, the box's two cores are the limit)
    items.sort(key=lambda item: not item.nodeid.startswith(RAY_TESTS))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Each test a unit of work of its own, but each chain of Ray tests one unit. (xdist's
    ``xdist_group`` marks do not group under pytest 9: its loadgroup renames item ids.)"""
    from xdist.scheduler import LoadScopeScheduling

    class OneRayWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return ray_chain(nodeid) or nodeid

    return OneRayWorker(config, log)


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
