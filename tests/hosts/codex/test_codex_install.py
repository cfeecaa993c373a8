"""``conch install codex`` into a fresh CODEX_HOME, then the real Codex (pinned) starts Conch
from what install wrote: it lists Conch's tools and calls one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomlkit
from codex_exec import BINARY_GLOB, LOAD_CONCH, PACKAGE, VERSION, run_codex
from fake_responses import NAMESPACE, Call, Say

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def codex(npm_install) -> Path:
    return npm_install("codex", PACKAGE, VERSION, BINARY_GLOB)


def conch_install(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conch", "install", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_codex_runs_conch_from_what_conch_install_wrote(codex, tmp_path, loopback, spawn):
    data = tmp_path / "data"

    def install(home: Path) -> None:
        r = conch_install("codex", "--data-dir", str(data), env={"CODEX_HOME": str(home)})
        assert r.returncode == 0, r.stderr
        table = tomlkit.parse((home / "config.toml").read_text())["mcp_servers"]["conch"]
        assert table.unwrap() == {
            "command": str(REPO / "bin" / "conch"),
            "args": ["serve", "--data-dir", str(data), "--host-timeout-ms", "700000"],
            "required": True,
            "startup_timeout_sec": 60,
            "tool_timeout_sec": 700,
        }

    script = [LOAD_CONCH, Call("exec", {"command": "echo installed"}), Say("done")]
    run = run_codex(
        codex, script, tmp=tmp_path, loopback=loopback, conch=None, spawn=spawn, prepare=install
    )
    search = run.fake.output(0)
    assert search is not None and search["type"] == "tool_search_output", search
    (namespace,) = [t for t in search["tools"] if t.get("name") == NAMESPACE]
    assert {"exec", "read", "write", "list", "changes"} <= {t["name"] for t in namespace["tools"]}
    result = run.json(1)
    assert (result["state"], result["exit_code"], result["output"]) == ("exited", 0, "installed\n")
    # the server Codex started had the settings install wrote: the job's log is in its data dir
    assert any(p.is_file() for p in data.rglob("*")), list(data.rglob("*"))
