"""Ray is imported only in fleet mode: the CLI's fast paths and a stdio server never load it."""

from __future__ import annotations

import subprocess
import sys

PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write(f'RAY_LOADED={\"ray\" in sys.modules}\\n'))\n"
    "from conch.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_and_tools_do_not_import_ray() -> None:
    for args in (("--help",), ("serve", "--help"), ("tools",)):
        out = run(*args)
        assert out.returncode == 0, out.stderr
        assert "RAY_LOADED=False" in out.stderr, (args, out.stderr)
    assert "--fleet" in run("serve", "--help").stdout
    assert "--ray-address" in run("serve", "--help").stdout


def test_a_stdio_server_without_the_fleet_does_not_import_ray(tmp_path) -> None:
    init = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        '"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
    )
    out = run("serve", "--data-dir", str(tmp_path / "data"), stdin=init)
    assert out.returncode == 0, out.stderr
    assert '"id":1' in out.stdout.replace(" ", "")  # it served
    assert "RAY_LOADED=False" in out.stderr
