"""Issue 22b: a warm process under the server's own Landlock policy (core/jobs/warm.py).

Level exercised: ``cgroup`` (this host; see conftest), glibc 2.36: a Landlock job there starts
through the fork server (clone3 into its cgroup), and so does the warm sh started ahead for
the next plain ``argv`` job, restricted, in its own cgroup, with its own ``TMPDIR``. A call with
the server's very policy takes it when the ruleset it would get is the one the process has;
any other call spawns as before. The warm bash for ``command`` jobs is started under the
policy the same way (at every level).

What must hold: a job the warm process runs is fenced exactly as a fresh one (the same
attacks give the same answers); a call that needs a fence of its own (a tighter policy,
limits, a file of the data dir it names, a program in a hole) never runs in it; a warm
process whose ruleset no longer matches (the directories it was found from changed) is
replaced, never used; none is ever left behind; under bwrap no warm process is started.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from job_programs import ATTEMPT
from warmth import ready_pid

import conch
from conch import ConchError

pytestmark = [pytest.mark.anyio]
PY = os.path.realpath(sys.executable)
ROOT = os.geteuid() == 0


@pytest.fixture
def base() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="conch-llw-", dir="/var/tmp")
    for sub in ("ws", "outside", "ws/sub"):  # (Landlock: no new entry at the workspace's top)
        os.mkdir(os.path.join(d, sub))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def cfg(base: str, **settings: object) -> conch.Config:
    return conch.Config(
        result_detail="full",
        data_dir=os.path.join(base, "data"),
        default_cwd=os.path.join(base, "ws"),
        sandbox_backend="landlock",
        **settings,  # type: ignore[arg-type]
    )


def _results(output: str) -> dict[str, str]:
    return {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in output.splitlines() if " " in ln}


#: what a job is allowed and refused, and what it is (its pid, cgroup, TMPDIR)
_PROBE = (
    ATTEMPT
    + r"""
import ctypes, os, sys
outside, data, victim = sys.argv[1], sys.argv[2], int(sys.argv[3])
attempt("write_outside", lambda: open(os.path.join(outside, "x"), "w").close())
attempt("write_workspace", lambda: open("sub/inside", "w").close())
attempt("read_data_dir", lambda: os.listdir(data))
attempt("list_dev_pts", lambda: os.listdir("/dev/pts"))
attempt("signal_outside", lambda: os.kill(victim, 0))
libc = ctypes.CDLL(None, use_errno=True)
lim = (ctypes.c_uint64 * 2)(64, 64)
def prlimit():
    if libc.prlimit(victim, 7, ctypes.byref(lim), None) != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
attempt("prlimit_outside", prlimit)
tmp = os.environ["TMPDIR"]
attempt("write_tmpdir", lambda: open(os.path.join(tmp, "t"), "w").close())
status = dict(ln.rstrip("\n").split(":\t", 1) for ln in open("/proc/self/status") if ":\t" in ln)
print("restricted", status["NoNewPrivs"], status["Seccomp"], status["CapEff"], status["CapBnd"])
print("tmpdir_in_data", tmp.startswith(data + "/"))
cg = [ln.strip() for ln in open("/proc/self/cgroup") if ln.startswith("0::")][0]
print("cgroup", cg.rsplit("/", 1)[1])
print("pid", os.getpid())
"""
)


async def _probe(rt: conch.Runtime, base: str, victim: int, **call: object) -> dict[str, str]:
    argv = [PY, "-c", _PROBE, os.path.join(base, "outside"), os.path.join(base, "data")]
    r = await rt.exec(argv=[*argv, str(victim)], **call)  # type: ignore[arg-type]
    assert r["state"] == "exited" and r["exit_code"] == 0, r
    got = _results(r["output"])
    got["job_id"] = r["job_id"]
    return got


async def in_warm(
    rt: conch.Runtime, kind: str, run: Callable[[], Awaitable[dict[str, Any]]]
) -> tuple[dict[str, Any], int]:
    """(``run()``'s result, the warm ``kind`` process's pid) for a call the warm process
    served (the job's pid, as its probe says it or as ``exec`` reports it). A warm process whose
    ruleset was found from a directory that changed since is replaced, not used: the data
    dir's ancestors (/var/tmp) change whenever another test makes a directory there, so a
    call may spawn fresh; it is tried again, a bounded number of times."""
    for _ in range(20):
        pid = await ready_pid(rt, kind)
        got = await run()
        if str(got["pid"]) == str(pid):
            return got, pid
    raise AssertionError(f"no call was served by the warm {kind} in 20 tries")


def _fenced_alike(got: dict[str, str]) -> dict[str, str]:
    """A probe's answers without what differs per job (its pid, cgroup, TMPDIR's name)."""
    return {k: v for k, v in got.items() if k not in ("pid", "cgroup", "job_id")}


@pytest.mark.parametrize(("sandbox", "network"), [("read-only", "on"), ("workspace-write", "off")])
async def test_a_warm_process_runs_a_job_of_the_servers_policy_fenced_as_a_fresh_one(
    base, sandbox, network
):
    """The warm sh (and the warm bash) started under the server's Landlock policy runs the
    next plain job: the job's pid is the warm process's, it is in a cgroup of its own (its
    job id) with a TMPDIR of its own, and every attack gives the answer it gives a job
    spawned fresh under the same policy (a call with stdin always spawns fresh)."""
    victim = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        async with conch.Runtime(cfg(base, sandbox=sandbox, network=network)) as rt:
            warm, warm_pid = await in_warm(rt, "sh", lambda: _probe(rt, base, victim.pid))
            fresh = await _probe(rt, base, victim.pid, stdin="")
            r, _ = await in_warm(
                rt, "bash", lambda: rt.exec(command="echo $$; touch ../outside/b; echo rc=$?")
            )
            restricted = (await rt.exec(command="grep -h NoNewPrivs /proc/self/status"))["output"]
    finally:
        victim.kill()
        await victim.wait()
    assert warm["pid"] == str(warm_pid), (warm, warm_pid)
    assert fresh["pid"] != str(warm_pid)
    assert warm["cgroup"] == warm["job_id"] and fresh["cgroup"] == fresh["job_id"], warm
    assert _fenced_alike(warm) == _fenced_alike(fresh), (warm, fresh)
    assert warm["write_outside"] == "blocked EACCES" and warm["read_data_dir"] == "blocked EACCES"
    assert warm["prlimit_outside"] == "blocked EPERM", warm
    assert warm["signal_outside"] == "blocked EPERM" and warm["write_tmpdir"] == "ok", warm
    assert warm["tmpdir_in_data"] == "True", warm
    want_ws = "ok" if sandbox == "workspace-write" else "blocked EACCES"
    assert warm["write_workspace"] == want_ws, warm
    nnp, seccomp, eff, bnd = warm["restricted"].split()
    assert nnp == "1" and seccomp == "2", warm
    if ROOT:
        assert int(eff, 16) == 0 and int(bnd, 16) == 0, warm
    # the warm bash: a command job, in the same fence
    assert "Permission denied" in r["output"] and "rc=1" in r["output"], r
    assert restricted.split() == ["NoNewPrivs:", "1"], restricted
    assert os.listdir(os.path.join(base, "outside")) == []


async def test_a_call_that_needs_a_fence_of_its_own_never_runs_in_the_warm_process(
    base, monkeypatch
):
    """A tighter policy, a limit, a file of the data dir the argv names (a fresh spawn lets
    the job read it), a program found in the data dir (a fresh spawn refuses it: EACCES):
    each call spawns fresh, with its own fence, while a warm process was ready; the next
    plain call is served by one."""
    data = os.path.join(base, "data")
    os.makedirs(data)
    shutil.copy("/bin/true", os.path.join(data, "hidden-true"))
    # (the server's own PATH, as the warm process got it: a plain call still fits it)
    monkeypatch.setenv("PATH", f"{data}:{os.environ['PATH']}")
    async with conch.Runtime(cfg(base, sandbox="workspace-write")) as rt:
        warm_pid = await ready_pid(rt, "sh")
        note = os.path.join(data, "note.txt")
        with open(note, "w") as f:
            f.write("exposed\n")
        pids = []
        for call in (
            {"sandbox": "read-only"},
            {"network": "off"},
            {"memory_max": 256 << 20},
        ):
            r = await rt.exec(argv=["sh", "-c", "echo $$"], **call)  # type: ignore[arg-type]
            assert r["exit_code"] == 0, (call, r)
            pids.append(int(r["output"]))
        r = await rt.exec(argv=["cat", note])
        assert r["output"] == "exposed\n", r  # (the warm process's ruleset does not grant it)
        with pytest.raises(ConchError) as e:
            await rt.exec(argv=["hidden-true"])
        assert (e.value.code, e.value.value) == ("spawn_failed", "not permitted"), e.value
        assert warm_pid not in pids
        await in_warm(rt, "sh", lambda: rt.exec(argv=["sh", "-c", "echo $$"]))


@pytest.mark.parametrize("git", [True, False], ids=["repo", "no_repo"])
async def test_a_warm_process_whose_ruleset_no_longer_matches_is_replaced_not_used(base, git):
    """A workspace-write ruleset grants each entry of the workspace but its .git (there or
    not: the workspace directory itself is never granted), found when it is built: a
    top-level directory made after the warm process started is not in its ruleset, but is in
    a fresh job's. The next job must get the fresh ruleset (it writes into the new
    directory), and the stale process is gone."""
    ws = os.path.join(base, "ws")
    if git:
        os.mkdir(os.path.join(ws, ".git"))
    async with conch.Runtime(cfg(base, sandbox="workspace-write")) as rt:
        warm_pid = await ready_pid(rt, "sh")
        os.mkdir(os.path.join(ws, "made-later"))
        r = await rt.exec(argv=["sh", "-c", "echo $$; echo x > made-later/f && echo wrote"])
        pid, wrote = r["output"].split()
        assert wrote == "wrote" and int(pid) != warm_pid, r
        for _ in range(200):  # (discarded: EOF on its stdin ends it)
            if not os.path.exists(f"/proc/{warm_pid}"):
                break
            await asyncio.sleep(0.01)
        assert not os.path.exists(f"/proc/{warm_pid}")
        r, replacement = await in_warm(
            rt, "sh", lambda: rt.exec(argv=["sh", "-c", "echo $$; echo y > made-later/g; echo $?"])
        )
        assert replacement != warm_pid and r["output"].split()[1] == "0", r  # (it has it)


async def test_no_warm_process_or_its_tmpdir_outlives_the_runtime(base):
    """Closing the runtime ends the warm processes (no process is left: the suite's fixture
    checks every test) and removes their TMPDIRs."""
    async with conch.Runtime(cfg(base, sandbox="read-only")) as rt:
        sh, bash = await ready_pid(rt, "sh"), await ready_pid(rt, "bash")
        tmp_root = rt.engine.spawn.containment.backends.tmpdirs.root  # type: ignore[union-attr]
        assert len(os.listdir(tmp_root)) == 2, os.listdir(tmp_root)  # (each warm one's own)
    assert not os.path.exists(f"/proc/{sh}") and not os.path.exists(f"/proc/{bash}")
    assert not os.path.exists(tmp_root)


@pytest.mark.needs("bwrap")
async def test_no_warm_process_is_started_under_a_bwrap_policy(base):
    """bwrap's mounts depend on each job's directory and files: no call takes a process
    started ahead under them, so none is started (the calls spawn as before)."""
    c = conch.Config(
        result_detail="full",
        data_dir=os.path.join(base, "data"),
        default_cwd=os.path.join(base, "ws"),
        sandbox_backend="bwrap",
        sandbox="read-only",
    )
    async with conch.Runtime(c) as rt:
        assert rt.engine.starter.warm is None and rt.engine.starter.warm_sh is None
        assert (await rt.exec(argv=["true"]))["exit_code"] == 0
        assert (await rt.exec(command="true"))["exit_code"] == 0


async def test_a_warm_process_is_replaced_while_a_long_job_it_ran_still_runs(base):
    """The replacement of a sandboxed warm process starts once calls have left the runtime
    alone a moment (warm.SANDBOXED_REFILL_IDLE_S), whether or not the job taken has ended: a
    long job does not leave the next call without one."""
    async with conch.Runtime(cfg(base, sandbox="read-only")) as rt:
        r, warm_pid = await in_warm(
            rt, "sh", lambda: rt.exec(argv=["sh", "-c", "echo $$; exec sleep 30"], yield_ms=50)
        )
        assert r["state"] == "running", r
        starter = rt.engine.starter
        for _ in range(300):  # (no call meanwhile: the timer alone starts it)
            ready = starter.warm_sh.ready_pid  # type: ignore[union-attr]
            if ready:
                break
            await asyncio.sleep(0.01)
        assert ready not in (None, warm_pid)
        await rt.call_tool("signal", {"job_id": r["job_id"], "signal": "kill"})


async def test_without_a_cgroup_the_warm_bash_alone_runs_under_the_policy(base):
    """Without a cgroup (the restricted thread spawns, through the gate) there is no warm sh
    (one spawn of the program is as quick), but the warm bash is started under the server's
    policy and serves a plain ``command`` job, fenced."""
    async with conch.Runtime(cfg(base, sandbox="workspace-write", cgroup="off")) as rt:
        assert rt.engine.starter.warm_sh is None
        r, _ = await in_warm(
            rt, "bash", lambda: rt.exec(command="touch ../outside/b; echo rc=$?; touch sub/mine")
        )
    assert "Permission denied" in r["output"] and "rc=1" in r["output"], r
    assert os.listdir(os.path.join(base, "outside")) == []
    assert os.path.exists(os.path.join(base, "ws", "sub", "mine"))
