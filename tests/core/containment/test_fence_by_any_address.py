"""A sandboxed job reaches a server bound to every interface by the machine's own address as
well as by the loopback; the guard traces a local peer whatever address it came by, so the job
gets 403 there too, with the right token (a job can read a token an MCP host's config holds).

The server runs in a network namespace of the test's own, whose loopback device also holds a
documentation address (198.51.100.7): no traffic leaves the namespace."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from sandbox_backends import BACKENDS, backend_settings

pytestmark = [pytest.mark.needs("bwrap")]
ADDR = "198.51.100.7"
TOKEN = "tok-" + secrets.token_hex(8)
INSIDE_PY = os.path.realpath(sys.executable)

_CALL = r"""
import json, sys, urllib.request, urllib.error
url, token = sys.argv[1:3]
req = urllib.request.Request(
    url + "/invoke",
    data=json.dumps({"method": "exec", "params": {"command": "echo escaped"}}).encode(),
    headers={"Content-Type": "application/json", "Authorization": "Bearer " + token},
)
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print("status", r.status, r.read().decode()[:200])
except urllib.error.HTTPError as e:
    print("status", e.code, e.read().decode()[:200])
"""


def _root_with_ip() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


@pytest.fixture
def netns():
    if not _root_with_ip():
        pytest.skip("needs root and iproute2 (ip) to make a network namespace")
    name = "conch-test-" + secrets.token_hex(4)
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for cmd in (
            "ip link set lo up",
            f"ip addr add {ADDR}/32 dev lo",  # (an address outside 127/8)
        ):
            subprocess.run(["ip", "netns", "exec", name, *cmd.split()], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.fixture
def base():
    d = tempfile.mkdtemp(prefix="conch-any-address-", dir="/var/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _in(ns: str, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_job_coming_by_the_machines_own_address_is_refused(netns, base, backend):
    ws = os.path.join(base, "ws")
    os.mkdir(ws)
    script = os.path.join(base, "call.py")
    with open(script, "w") as f:
        f.write(_CALL)
    port = 7785
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in backend_settings(backend).items()]
    env = {**os.environ, "CONCH_AUTH_TOKEN": TOKEN}
    server = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            netns,
            sys.executable,
            "-m",
            "conch",
            "serve",
            "--http",
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--data-dir",
            os.path.join(base, "data"),
            "--default-cwd",
            ws,
            *flags,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://{ADDR}:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            up = _in(netns, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                     "-H", f"Authorization: Bearer {TOKEN}", url + "/health")  # fmt: skip
            if up.stdout == "200":
                break
            assert time.monotonic() < deadline, "the server did not come up"
            assert server.poll() is None, "the server exited"
            time.sleep(0.2)

        def invoke(params: dict) -> dict:
            r = _in(netns, "curl", "-s", "-H", f"Authorization: Bearer {TOKEN}",
                    "-H", "Content-Type: application/json", url + "/invoke",
                    "-d", json.dumps({"method": "exec", "params": params}))  # fmt: skip
            return json.loads(r.stdout)

        plain = invoke({"argv": [INSIDE_PY, script, url, TOKEN]})
        assert "status 200" in plain["output"], plain  # an unsandboxed job may
        r = invoke(
            {"argv": [INSIDE_PY, script, url, TOKEN], "sandbox": "read-only", "network": "on"}
        )
        assert "status 403" in r["output"] and "escaped" not in r["output"], r
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, 15)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait(10)
