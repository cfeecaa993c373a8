"""The fence travels with the processes: a request to Conch's own HTTP API from any process of
a sandboxed job is refused for as long as that process lives — after the job's leader has
exited too, however the process hides (a leftover in the background, a new session, a cleared
environment, a grandchild) — on every sandbox backend. The guard finds such processes by the
fence the kernel keeps for them (another PID namespace, more seccomp filters than the server),
not by a table of running jobs that a leftover outlives.

The red-team case: a Landlock job left ``( sleep 1.5; curl …/invoke ) &`` behind and exited;
the leftover's request got an unsandboxed exec, and every other job's output.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from frontend_servers import kill_group, start_http
from sandbox_backends import BACKENDS, backend_settings, kind

from conch.core.process import peer

pytestmark = [pytest.mark.needs("bwrap")]
INSIDE_PY = os.path.realpath(sys.executable)

#: what a leftover does once its job has exited: call /invoke, write the answer to a file
_CALL = r"""
import json, sys, time, urllib.request, urllib.error
url, out, proof = sys.argv[1:4]
time.sleep(float(sys.argv[4]))
req = urllib.request.Request(
    url + "/invoke",
    data=json.dumps({"method": "exec", "params": {"command": "touch " + proof}}).encode(),
    headers={"Content-Type": "application/json"},
)
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = "status %d %s" % (r.status, r.read().decode()[:300])
except urllib.error.HTTPError as e:
    answer = "status %d %s" % (e.code, e.read().decode()[:300])
except OSError as e:
    answer = "error %s" % e
with open(out, "w") as f:
    f.write(answer)
"""


@pytest.fixture
def base():
    """Outside /tmp (which bwrap makes private), readable by the job."""
    d = tempfile.mkdtemp(prefix="conch-fence-travels-", dir="/var/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _invoke(url: str, method: str, params: dict) -> dict:
    body = json.dumps({"method": method, "params": params}).encode()
    req = urllib.request.Request(
        url + "/invoke", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def _wait_file(path: str, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            time.sleep(0.05)
            with open(path) as f:
                text = f.read()
            if text:
                return text
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


#: how a leftover hides: in the background, in a session of its own with no environment
#: (no Conch tag), as a grandchild of a shell that exits at once
_HOWS = {
    "background": "({py} {script} {url} {out} {proof} 1.5 &)",
    "setsid-env-i": "setsid env -i {py} {script} {url} {out} {proof} 1.5 < /dev/null &",
    "grandchild": "sh -c '(sh -c \"{py} {script} {url} {out} {proof} 1.5\" &) &'",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", sorted(_HOWS))
def test_a_leftover_of_a_finished_sandboxed_job_is_refused(tmp_path, base, backend, how):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in backend_settings(backend).items()]
    ws = os.path.join(base, "ws")
    os.mkdir(ws)
    srv = start_http(tmp_path, "--default-cwd", ws, *flags)
    script = os.path.join(base, "call.py")
    with open(script, "w") as f:
        f.write(_CALL)
    # (the leftover can write only its workspace, under Landlock not at its top)
    os.mkdir(os.path.join(ws, "out"))
    out = os.path.join(ws, "out", "answer")
    proof = os.path.join(base, "made-by-an-unsandboxed-exec")
    try:
        command = _HOWS[how].format(py=INSIDE_PY, script=script, url=srv.url, out=out, proof=proof)
        r = _invoke(
            srv.url,
            "exec",
            {"command": command, "sandbox": "workspace-write", "network": "on"},
        )
        assert r["state"] == "exited", r  # the leader is gone before the leftover calls
        if kind(backend) == "bwrap":
            # no leftover at all: the PID namespace dies with the job's program
            time.sleep(4)
            assert not os.path.exists(out) and not os.path.exists(proof)
            return
        answer = _wait_file(out)
        assert answer.startswith("status 403"), answer
        assert not os.path.exists(proof), answer
    finally:
        kill_group(srv.proc)


def test_an_unsandboxed_jobs_leftover_still_may_call(tmp_path, base):
    """The rule refuses fences, not leftovers: a job without a sandbox had the server user's
    rights already (and a server that never sandboxed anything pays no search at all)."""
    ws = os.path.join(base, "ws")
    os.mkdir(ws)
    srv = start_http(tmp_path, "--default-cwd", ws, "--sandbox-backend=landlock")
    script = os.path.join(base, "call.py")
    with open(script, "w") as f:
        f.write(_CALL)
    out, proof = os.path.join(ws, "answer"), os.path.join(ws, "proof")
    try:
        # a sandboxed call first, so the guard searches
        _invoke(srv.url, "exec", {"command": "true", "sandbox": "read-only"})
        command = _HOWS["setsid-env-i"].format(
            py=INSIDE_PY, script=script, url=srv.url, out=out, proof=proof
        )
        r = _invoke(srv.url, "exec", {"command": command})
        assert r["state"] == "exited", r
        assert _wait_file(out).startswith("status 200")
        deadline = time.monotonic() + 10
        while not os.path.exists(proof) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.path.exists(proof)
    finally:
        kill_group(srv.proc)


def test_marks_read_from_the_kernel():
    """Pure parsing of /proc/<pid>/status, and the rule on the marks."""
    text = "Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t3\nSpeculation_Store_Bypass:\tthread\n"
    assert peer.parse_status_int(text, "Seccomp_filters") == 3
    assert peer.parse_status_int(text, "Seccomp") == 2
    assert peer.parse_status_int(text, "Missing") is None
    assert peer.parse_status_int("Seccomp_filters:\tx\n", "Seccomp_filters") is None
    own = peer.Marks("pid:[1]", 0)
    assert not peer.Marks("pid:[1]", 0).fenced_against(own)
    assert peer.Marks("pid:[2]", 0).fenced_against(own)  # bwrap's PID namespace
    assert peer.Marks("pid:[1]", 1).fenced_against(own)  # a seccomp filter more
    assert peer.Marks(None, 0).fenced_against(own)  # unreadable: fenced (fail closed)
    assert peer.Marks("pid:[1]", None).fenced_against(own)
    me = peer.Marks.of("self")
    assert me.pid_ns and me.filters is not None and not me.fenced_against(me)


def test_a_search_past_its_deadline_fails_closed():
    r, w = os.pipe()
    try:
        with pytest.raises(peer.Untraceable):
            peer.holders(1, [os.getpid()], deadline=time.monotonic() - 1)
    finally:
        os.close(r)
        os.close(w)
