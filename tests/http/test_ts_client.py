"""An independent client: the official TypeScript MCP SDK (pinned in tests/ts/package.json)
drives Conch over stdio and Streamable HTTP."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from frontend_servers import HttpServer

TS_DIR = Path(__file__).resolve().parents[1] / "ts"
SCRIPT = TS_DIR / "conch_client.mjs"
NODE = shutil.which("node")

pytestmark = pytest.mark.needs("node", "npm")


@pytest.fixture(scope="module")
def ts_sdk() -> Path:
    if not (TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        npm = shutil.which("npm")
        assert npm, "node is installed but npm is not: cannot install tests/ts dependencies"
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund"],
            cwd=TS_DIR,
            check=True,
            timeout=300,
            capture_output=True,
        )
    return TS_DIR


def run_node(*args: str) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    return subprocess.run([NODE, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_typescript_sdk_over_stdio(ts_sdk: Path, tmp_path: Path):
    r = run_node("stdio", sys.executable, str(tmp_path / "data"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"ok":true' in r.stdout


def test_typescript_sdk_over_streamable_http(ts_sdk: Path, http_server: HttpServer):
    r = run_node("http", http_server.url + "/mcp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"ok":true' in r.stdout
