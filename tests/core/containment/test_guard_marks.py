"""The HTTP guard's answer comes from a mark the kernel keeps on the socket: the cgroup v2 a
socket was made in (sock_diag tells it, one exact lookup). At the cgroup level every sandboxed
job runs in a cgroup v2 of its own, which it can neither leave nor split, so a socket made by
any of its processes is refused whoever holds it later, and the answer costs the same however
many descriptors a sandboxed job holds.

The red-team case: a sandboxed job holding 60,000 descriptors made the guard's search of
every new connection run past its budget: every other client was refused (and, before the
budget, every request waited for the whole scan).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import sys
import tempfile
import urllib.error
import urllib.request

import pytest
from frontend_servers import kill_group, start_http

pytestmark = [pytest.mark.needs("bwrap")]
INSIDE_PY = os.path.realpath(sys.executable)
CGROUP_BACKENDS = ["bwrap", "landlock"]


@pytest.fixture
def base():
    """Outside /tmp (which bwrap makes private), readable by the job."""
    d = tempfile.mkdtemp(prefix="conch-guard-marks-", dir="/var/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _call(url: str, method: str, params: dict) -> tuple[int, dict]:
    """One call over a connection of its own (the guard traces each new connection)."""
    req = urllib.request.Request(
        url + "/invoke",
        data=json.dumps({"method": method, "params": params}).encode(),
        headers={"Content-Type": "application/json", "Connection": "close"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read().decode(errors="replace")}


def _server(tmp_path, base: str, backend: str):
    ws = os.path.join(base, "ws")
    os.makedirs(ws, exist_ok=True)
    srv = start_http(tmp_path, "--default-cwd", ws, f"--sandbox-backend={backend}")
    _, info = _call(srv.url, "info", {})
    if info.get("containment") != "cgroup":
        kill_group(srv.proc)
        pytest.skip(f"needs the cgroup containment level (a cgroup v2 per job): {info}")
    return srv


#: N processes, each holding FDS duplicates of /dev/null, then "ready" once all have them
_HOG = r"""
import os, sys, time
n, fds = int(sys.argv[1]), int(sys.argv[2])
r, w = os.pipe()
for _ in range(n):
    if os.fork() == 0:
        fd = os.open("/dev/null", os.O_RDONLY)
        for _ in range(fds):
            os.dup(fd)
        os.write(w, b"x")
        time.sleep(600)
        os._exit(0)
got = 0
while got < n:
    got += len(os.read(r, n))
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("backend", CGROUP_BACKENDS)
def test_a_sandboxed_descriptor_hog_refuses_no_other_client(tmp_path, base, backend):
    """The processes of a sandboxed job hold 120,000 descriptors: another client's requests,
    each on a new connection, are answered (the search this replaces took ~2.7 us a
    descriptor, past its 250 ms budget here, and refused them all); a request from inside a
    sandboxed job is still refused."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    fds = 15000 if hard == resource.RLIM_INFINITY else min(15000, hard - 200)
    if fds < 1000:
        pytest.skip(f"needs a hard RLIMIT_NOFILE over 1200 to make the hog (it is {hard})")
    procs = -(-120000 // fds)
    srv = _server(tmp_path, base, backend)
    script = os.path.join(base, "hog.py")
    with open(script, "w") as f:
        f.write(_HOG)
    try:
        cmd = f"ulimit -n {fds + 50}; exec {INSIDE_PY} {script} {procs} {fds}"
        status, hog = _call(
            srv.url, "exec", {"command": cmd, "sandbox": "read-only", "yield_ms": 0}
        )
        assert status == 200, hog
        status, ready = _call(
            srv.url,
            "read",
            {"job_id": hog["job_id"], "until": {"pattern": "ready"}, "wait_ms": 60000},
        )
        assert status == 200 and "ready" in ready["output"], ready
        for _ in range(5):
            status, r = _call(srv.url, "exec", {"command": "true"})
            assert status == 200, r
            assert r["state"] == "exited", r
        inside = (
            f'{INSIDE_PY} -c "import urllib.request as u, urllib.error as e\n'
            f"try: print(u.urlopen('{srv.url}/health', timeout=10).status)\n"
            f'except e.HTTPError as x: print(x.code)"'
        )
        status, r = _call(
            srv.url, "exec", {"command": inside, "sandbox": "read-only", "network": "on"}
        )
        assert status == 200 and r["output"].strip() == "403", r
    finally:
        kill_group(srv.proc)


#: made inside: a connection to Conch, handed to the process listening on a Unix socket
_HAND_OUT = r"""
import socket, sys
conch = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
out = socket.socket(socket.AF_UNIX)
out.connect(sys.argv[2])
socket.send_fds(out, [b"x"], [conch.fileno()])
print("handed", flush=True)
"""


@pytest.mark.parametrize("backend", CGROUP_BACKENDS)
def test_a_socket_made_inside_a_sandbox_is_refused_whoever_holds_it(tmp_path, base, backend):
    """The mark is the socket's, not a process's: a sandboxed job makes a connection to Conch,
    hands it to a process outside every sandbox (this test) and exits; the request sent on it
    from outside is refused all the same. (A search of the processes finds only the outside
    holder once the job is gone.)"""
    srv = _server(tmp_path, base, backend)
    script = os.path.join(base, "hand_out.py")
    with open(script, "w") as f:
        f.write(_HAND_OUT)
    path = os.path.join(base, "hand.sock")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        os.chmod(path, 0o777)
        listener.listen(1)
        listener.settimeout(60)
        try:
            status, r = _call(
                srv.url,
                "exec",
                {
                    "command": f"{INSIDE_PY} {script} {srv.port} {path}",
                    "sandbox": "read-only",
                    "network": "on",
                },
            )
            assert status == 200 and r["state"] == "exited" and "handed" in r["output"], r
            conn, _ = listener.accept()
            with conn:
                _, fds, _, _ = socket.recv_fds(conn, 16, 1)
            assert len(fds) == 1
            with socket.socket(fileno=fds[0]) as s:
                s.settimeout(30)
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 403"), answer[:300]
            assert b"inside sandboxed" in answer, answer[:300]
            # and this process's own new connection is answered
            with urllib.request.urlopen(srv.url + "/health", timeout=30) as h:
                assert h.status == 200
        finally:
            kill_group(srv.proc)


def test_the_socket_cgroup_is_read_from_a_sock_diag_reply():
    """Pure parsing: the INET_DIAG_CGROUP_ID attribute after struct inet_diag_msg, and a
    reply without it (an older kernel, or no socket cgroup data)."""
    import struct

    from conch.core.process import peer

    msg = struct.pack("=BBBB48sIIIII", 2, 1, 0, 0, bytes(48), 0, 0, 0, 1000, 4242)
    attr = struct.pack("=HHQ", 12, 21, 987654321)
    other = struct.pack("=HHI", 8, 5, 7)
    for body, cgroup in ((msg + other + attr, 987654321), (msg + other, None), (msg, None)):
        data = struct.pack("=IHHII", 16 + len(body), 20, 0, 1, 0) + body
        found = peer.parse_diag_socket(data)
        assert found == peer.Found(1000, 4242, cgroup)
        assert peer.parse_diag_owner(data) == (1000, 4242)


def test_the_socket_of_a_live_connection_names_this_process_cgroup():
    """sock_diag on this kernel: the cgroup of a socket made here is this process's cgroup
    v2 (its directory's inode), the mark the guard reads."""
    from conch.core.process import peer

    if not peer.diag_answers():
        pytest.skip("needs sock_diag for TCP (the inet_diag module) on this kernel")
    with open("/proc/self/cgroup") as f:
        rel = next(line.split(":", 2)[2].strip() for line in f if line.startswith("0::"))
    with open("/proc/self/mountinfo") as f:
        v2 = next(line.split()[4] for line in f if " - cgroup2 " in line)
    with (
        socket.create_server(("127.0.0.1", 0)) as ls,
        socket.create_connection(ls.getsockname()) as c,
    ):
        found = peer.socket_found(c.getsockname(), ls.getsockname())
        accepted, _ = ls.accept()
        accepted.close()
    assert found is not None and found.cgroup is not None
    assert found.cgroup == os.stat(v2 + rel).st_ino


def _v2_mount() -> str | None:
    with open("/proc/self/mountinfo") as f:
        return next((line.split()[4] for line in f if " - cgroup2 " in line), None)


@pytest.mark.parametrize("backend", CGROUP_BACKENDS)
def test_a_sandboxed_jobs_cgroup_can_have_no_child(tmp_path, base, backend):
    """A sandboxed job's cgroup v2 takes no child cgroup (``cgroup.max.descendants`` 0, set
    before it starts): no process of it can make a socket in a cgroup the guard does not
    know. An unsandboxed job's is left as it was."""
    v2 = _v2_mount()
    srv = _server(tmp_path, base, backend)
    try:
        assert v2 is not None
        limits = {}
        for sandbox in ("read-only", "off"):
            status, r = _call(
                srv.url,
                "exec",
                {"command": "sleep 30", "sandbox": sandbox, "yield_ms": 0},
            )
            assert status == 200, r
            found = [
                os.path.join(v2, d, r["job_id"])
                for d in os.listdir(v2)
                if os.path.isdir(os.path.join(v2, d, r["job_id"]))
            ]
            assert len(found) == 1, found
            with open(os.path.join(found[0], "cgroup.max.descendants")) as f:
                limits[sandbox] = f.read().strip()
            if sandbox == "read-only":
                with pytest.raises(OSError):  # EAGAIN: over cgroup.max.descendants
                    os.mkdir(os.path.join(found[0], "child"))
            _call(srv.url, "signal", {"job_id": r["job_id"], "signal": "kill"})
        assert limits == {"read-only": "0", "off": "max"}, limits
    finally:
        kill_group(srv.proc)


def test_a_sandboxed_spawn_without_a_cgroup_v2_turns_the_cgroup_answer_off(tmp_path):
    """Once one sandboxed spawn has no cgroup v2 of its own (cgroups off, v1 only, a failed
    setup), a socket's cgroup proves nothing and the guard searches the processes."""
    from conch.core.process import peer

    marks = peer.CgroupMarks()
    assert marks.complete and marks.unit(1) is None
    marks.add("j_1", None)
    assert not marks.complete
    gone = peer.CgroupMarks()
    gone.add("j_2", str(tmp_path / "no-such-cgroup"))  # its limit cannot be set: not marked
    assert not gone.complete


def test_a_v4_peer_of_a_dual_stack_server_is_found_with_its_cgroup():
    """A server bound to "::" sees a v4 client as ::ffff:127.0.0.1: sock_diag is asked that
    way too, so the socket's cgroup is told (the table, which has no cgroup, is the last
    resort)."""
    from conch.core.process import peer

    if not peer.diag_answers() or not socket.has_dualstack_ipv6():
        pytest.skip("needs sock_diag for TCP and dual-stack IPv6 on this host")
    with (
        socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True) as ls,
        socket.create_connection(("127.0.0.1", ls.getsockname()[1])) as c,
    ):
        accepted, _ = ls.accept()
        with accepted:
            found = peer.socket_found(c.getsockname(), ("127.0.0.1", ls.getsockname()[1]))
    assert found is not None and found.cgroup is not None, found
