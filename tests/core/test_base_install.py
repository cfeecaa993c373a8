"""docs/spec.md §1: the core works from a base-only install (no mcp, no pydantic)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio, importlib.util, sys, tempfile
assert importlib.util.find_spec("mcp") is None, "mcp must not be installed"
assert importlib.util.find_spec("pydantic") is None, "pydantic must not be installed"
import conch

async def main():
    with tempfile.TemporaryDirectory() as d:
        async with conch.Runtime(conch.Config(data_dir=d + "/data")) as rt:
            a = await rt.exec(command="echo $((6*7))")
            b = await rt.exec(argv=["printf", "%s", "$HOME"])
            c = await rt.exec(script="read -r x\necho got:$x\n", stdin="hello\n")
            d_ = await rt.exec(command="sleep 0.3; echo bg", yield_ms=0)
            e = await rt.read(d_["job_id"], wait_ms=5000, until="exit")
            t = await rt.call_tool("exec", {"command": "exit 3"})
            assert [a["output"], b["output"], c["output"], e["output"]] == \
                ["42\n", "$HOME", "got:hello\n", "bg\n"], (a, b, c, e)
            assert d_["state"] == "running" and e["state"] == "exited"
            assert t["exit_code"] == 3
            assert "mcp" not in sys.modules and "pydantic" not in sys.modules
    print("BASE-OK")

asyncio.run(main())
"""


def test_core_runs_in_a_base_only_environment(tmp_path):
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.fail("uv is required to build the base-only environment (bin/test installs it)")
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(py), str(ROOT)], check=True, cwd=tmp_path
    )
    out = subprocess.run(
        [str(py), "-I", "-c", SCRIPT], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert "BASE-OK" in out.stdout
