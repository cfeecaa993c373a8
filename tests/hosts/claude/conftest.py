"""Fixtures of the Claude Code host tests: the pinned CLI, and a way to run it against a script."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import system_tools

# fake_messages.py lives one level up, next to the other host's fake model
HOSTS = str(Path(__file__).resolve().parents[1])
if HOSTS not in sys.path:
    sys.path.insert(0, HOSTS)

import claude_host  # noqa: E402
from fake_messages import Step  # noqa: E402


@pytest.fixture(scope="session")
def claude_binary() -> Path:
    """The pinned Claude Code, installed into .cache/hosts/claude/ on first use."""
    try:
        return claude_host.install()
    except claude_host.InstallError as e:
        system_tools.unavailable(
            f"Claude Code {claude_host.VERSION} could not be installed ({e})",
            "it is installed with npm from its registry on first use; or install it by hand:"
            f" npm install --prefix {claude_host.CACHE} --no-save --ignore-scripts "
            + " ".join(claude_host.PACKAGES),
        )


@pytest.fixture
def claude(claude_binary: Path, tmp_path: Path) -> Callable[..., claude_host.Run]:
    """``claude(script, env={...}, interrupt_on=None, conch_args=(), timeout=60,
    prepare=None)``: one finished offline run of the host playing ``script`` (see
    :func:`claude_host.run`). It fails the test if the run tried to leave loopback, started
    without Conch's tools or did not end cleanly."""
    runs = 0

    def go(
        script: list[Step],
        env: dict[str, str] | None = None,
        interrupt_on: str | None = None,
        conch_args: tuple[str, ...] = (),
        timeout: float = 60,
        prepare: Callable[[Path], None] | None = None,
    ) -> claude_host.Run:
        nonlocal runs
        runs += 1
        workdir = tmp_path / f"run{runs}"
        run, offline = claude_host.run(
            claude_binary,
            script,
            workdir,
            env,
            timeout=timeout,
            interrupt_on=interrupt_on,
            conch_args=conch_args,
            prepare=prepare,
        )
        assert offline.attempts() == [], f"{offline.describe()} saw: {offline.attempts()}"
        assert run.fake.errors == [], run.fake.errors
        [init] = [e for e in run.events if e.get("subtype") == "init"] or [{}]
        servers = init.get("mcp_servers")
        assert servers == [{"name": "conch", "status": "connected"}], run.diagnostics()
        assert run.returncode == 0, run.diagnostics()
        return run

    return go
