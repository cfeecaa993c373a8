"""The sh started ahead of need for `argv` jobs (core/jobs/warm.py): the program gets the very
argv and environment a direct spawn gives it, and whatever the sh could change spawns as before."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from warmth import ready_pid

import conch
from conch.core import CallContext, ExecRequest
from conch.core.containment import shenv
from conch.core.jobs import warm
from conch.core.process import libc_spawn

pytestmark = pytest.mark.anyio

#: arguments the exec line must carry exactly: quotes, spaces, newlines, globs, `$`, empty,
#: non-UTF-8 bytes (surrogateescape), a leading dash
AWKWARD = [
    "plain",
    "two words",
    "it's",
    "'",
    "''",
    '"double"',
    "back\\slash",
    "new\nline",
    "tab\there",
    "*",
    "$HOME",
    "$(echo no)",
    "`echo no`",
    "",
    "-x",
    "--",
    "\udcff\udcfe",
    "é ü 雪",
    ";exit 9;",
]


async def warm_sh_pid(rt: conch.Runtime) -> int:
    return await ready_pid(rt, "sh")


@pytest.fixture
def rt_settings(tmp_path, monkeypatch) -> dict[str, str]:
    # as when a host starts the server in its project: PWD names the default cwd
    monkeypatch.setenv("PWD", str(tmp_path))
    # the warm sh exists where a sh must enter each job's cgroup; on glibc 2.39+ the spawn
    # places the child itself (test_spawn_into_cgroup.py): these tests keep to the sh's path
    libc_spawn.available()
    monkeypatch.setattr(libc_spawn, "_into_cgroup", False)
    return {}


async def test_the_warm_sh_serves_the_cgroup_level_only(rt, tmp_path):
    # the suite's machines (Debian, a writable cgroup tree): dash, and the cgroup level, where
    # an argv job would otherwise cost a mkdir and a cgroup-entering sh before its program
    assert warm.sh_is_dash() and rt.engine.spawn.containment.level == "cgroup"
    assert rt.engine.starter.warm_sh is not None
    cfg = conch.Config(data_dir=str(tmp_path / "d"), cgroup="off")
    async with conch.Runtime(cfg) as plain:
        assert plain.engine.starter.warm_sh is None  # one vfork of the program is quicker there
        assert (await plain.exec(argv=["echo", "direct"]))["output"] == "direct\n"


@pytest.mark.parametrize("arg", AWKWARD)
def test_the_exec_line_carries_every_argument_exactly(arg, tmp_path):
    line = warm.exec_line(["printf", "%s\\0", arg, "after"])
    out = subprocess.run(
        [warm.SH, "-c", warm.SH_BOOTSTRAP], input=line, capture_output=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    want = arg.encode("utf-8", "surrogateescape") + b"\0after\0"
    assert out.stdout == want


def test_sh_keeps_env_refuses_what_dash_would_change(tmp_path):
    base = {"PATH": "/usr/bin:/bin", "PWD": str(tmp_path)}
    assert warm.sh_keeps_env(base, str(tmp_path))
    for name in ("IFS", "OPTIND", "PPID", "__conch_c", "__conch_l", "a-b", "1x", "é"):
        assert not warm.sh_keeps_env({**base, name: "v"}, str(tmp_path)), name
    assert not warm.sh_keeps_env({"PATH": "/bin"}, str(tmp_path))  # dash would add PWD
    assert not warm.sh_keeps_env({**base, "PWD": "/"}, str(tmp_path))
    assert not warm.sh_keeps_env({**base, "PWD": str(tmp_path) + "/."}, str(tmp_path))
    assert not warm.sh_keeps_env({**base, "PWD": "relative"}, str(tmp_path))
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    assert warm.sh_keeps_env({**base, "PWD": str(link)}, str(tmp_path))  # dash keeps it too


def test_sh_keeps_env_agrees_with_dash_itself(tmp_path):
    """What the predicate accepts, dash passes on unchanged; what it refuses, dash changes."""
    cases = [
        {"PATH": "/usr/bin:/bin", "PWD": str(tmp_path), "X": "1", "_": "/usr/bin/x"},
        {"PATH": "/usr/bin:/bin", "PWD": str(tmp_path), "SHLVL": "4", "OLDPWD": "/o"},
        {"PATH": "/usr/bin:/bin", "PWD": str(tmp_path), "IFS": ":"},
        {"PATH": "/usr/bin:/bin", "PWD": str(tmp_path), "PPID": "1"},
        {"PATH": "/usr/bin:/bin"},
        {"PATH": "/usr/bin:/bin", "PWD": "/"},
        {"PATH": "/usr/bin:/bin", "PWD": str(tmp_path), "bad-name": "1"},
    ]
    for env in cases:
        out = subprocess.run(
            [warm.SH, "-c", warm.SH_BOOTSTRAP],
            input=warm.exec_line(["env", "-0"]),
            capture_output=True,
            cwd=tmp_path,
            env=env,
        )
        got = dict(kv.split("=", 1) for kv in out.stdout.decode().split("\0") if kv)
        assert (got == env) is warm.sh_keeps_env(env, str(tmp_path)), env


async def test_a_plain_argv_job_is_the_warm_sh_with_a_direct_spawns_env(rt, tmp_path):
    pid = await warm_sh_pid(rt)
    r = await rt.exec(argv=["env", "-0"])
    assert r["pid"] == pid and r["mode"] == "argv" and r["exit_code"] == 0
    assert dump_env(r["log_path"]) == rt.engine.spawn.child_env(
        r["job_id"], pty=False, cwd=rt.default_cwd
    )
    await warm_sh_pid(rt)
    r = await rt.exec(argv=["sh", "-c", 'echo "$0" "$@"; ls /proc/$$/fd; cat', "zero", "a b"])
    assert r["output"].splitlines() == ["zero a b", "0", "1", "2"]  # stdin /dev/null, no fd


async def test_awkward_argv_reaches_the_program_exactly(rt):
    pid = await warm_sh_pid(rt)
    r = await rt.exec(argv=["printf", "%s\\0", *AWKWARD], output_format="text")
    assert r["pid"] == pid
    cold = await rt.engine.exec(ExecRequest(argv=["printf", "%s\\0", *AWKWARD]))
    assert r["output"] == cold["output"]
    log = Path(r["log_path"]).read_bytes()  # the bytes as printed
    assert log.split(b"\0")[:-1] == [a.encode("utf-8", "surrogateescape") for a in AWKWARD]


def dump_env(output: str | bytes) -> dict[str, str]:
    """`env -0` output as a dict (from a job's log: the output view drops NULs)."""
    if isinstance(output, str):
        output = Path(output).read_bytes()
    return dict(kv.split("=", 1) for kv in output.decode().split("\0") if kv)


@pytest.mark.parametrize(
    "name, value",
    [("IFS", ":"), ("OPTIND", "junk"), ("PPID", "1"), ("a-b", "dash drops it")],
)
async def test_an_environment_dash_would_change_reaches_the_program_as_given(
    rt, monkeypatch, name, value
):
    """The warm sh is not used, and a direct spawn (through the cgroup-entering sh at the
    cgroup level) still gives the program exactly its environment."""
    monkeypatch.setenv(name, value)
    pid = await warm_sh_pid(rt)
    for warm_ok in (True, False):
        r = await rt.engine.exec(ExecRequest(argv=["env", "-0"]), CallContext(warm=warm_ok))
        assert r["pid"] != pid and r["exit_code"] == 0, r
        assert dump_env(r["log_path"]) == rt.engine.spawn.child_env(
            r["job_id"], pty=False, cwd=rt.default_cwd
        )


def test_shenv_restore_gives_dash_s_program_its_environment(tmp_path):
    base = {"PATH": "/usr/bin:/bin", "PWD": str(tmp_path)}
    cases = [
        base,
        {**base, "IFS": ":", "OPTIND": "x", "PPID": "1", "a-b": "c", "X": "y z"},
        {"PATH": "/usr/bin:/bin"},
        {"PATH": "/usr/bin:/bin", "PWD": "/"},
    ]
    for env in cases:
        fix, start = shenv.restore(env, str(tmp_path), "/usr/bin/env")
        assert bool(fix) is not shenv.keeps_env(env, str(tmp_path))
        out = subprocess.run(
            [warm.SH, "-c", 'exec "$@"', "sh", *fix, "env", "-0"],
            capture_output=True,
            cwd=tmp_path,
            env=start,
        )
        assert out.returncode == 0, out.stderr
        assert dump_env(out.stdout) == env


async def test_what_the_sh_could_change_spawns_directly(rt, tmp_path):
    # a shebang-less script: a direct exec refuses it, sh would run it itself
    script = tmp_path / "noshebang"
    script.write_text("echo ran\n")
    script.chmod(0o755)
    pid = await warm_sh_pid(rt)
    warm_run = await rt.exec(argv=[str(script)])
    assert warm_run["pid"] != pid
    cold_run = await rt.engine.exec(ExecRequest(argv=[str(script)]))
    assert (warm_run["state"], warm_run["output"]) == (cold_run["state"], cold_run["output"])
    # another cwd, an env, stdin: direct spawns
    pid = await warm_sh_pid(rt)
    r = await rt.exec(argv=["pwd"], cwd="/")
    assert r["output"] == "/\n" and r["pid"] != pid
    pid = await warm_sh_pid(rt)
    r = await rt.exec(argv=["printenv", "X"], env={"X": "given"})
    assert r["output"] == "given\n" and r["pid"] != pid
    pid = await warm_sh_pid(rt)
    r = await rt.exec(argv=["cat"], stdin="typed")
    assert r["output"] == "typed" and r["pid"] != pid


async def test_missing_and_unrunnable_programs_fail_as_a_direct_spawn_does(rt, tmp_path):
    await warm_sh_pid(rt)
    for argv in (["no-such-program-here"], [str(tmp_path)]):
        with pytest.raises(conch.ConchError) as warm_err:
            await rt.exec(argv=argv)
        with pytest.raises(conch.ConchError) as cold_err:
            await rt.engine.exec(ExecRequest(argv=argv))
        assert warm_err.value.code == cold_err.value.code == "spawn_failed"


async def test_warm_sh_jobs_keep_deadlines_signals_and_exit_codes(rt):
    await warm_sh_pid(rt)
    r = await rt.exec(argv=["sleep", "5"], timeout_ms=300)
    assert r["state"] == "timed_out"
    await warm_sh_pid(rt)
    r = await rt.exec(argv=["sh", "-c", "exit 7"])
    assert r["exit_code"] == 7
    await warm_sh_pid(rt)
    r = await rt.exec(argv=["sleep", "30"], yield_ms=100)
    assert r["state"] == "running"
    s = await rt.signal(r["job_id"], "kill", wait_ms=2000)
    assert s["state"] == "cancelled" and s["signal"] == "SIGKILL"


async def test_warm_bash_off_turns_the_warm_sh_off_too(tmp_path):
    cfg = conch.Config(data_dir=str(tmp_path / "d"), warm_bash=False)
    async with conch.Runtime(cfg) as rt:
        assert rt.engine.starter.warm_sh is None
        r = await rt.exec(argv=["true"])
        assert r["exit_code"] == 0
    assert os.path.isdir(tmp_path / "d")


async def test_warm_processes_run_in_their_jobs_own_cgroup(rt):
    """Started in a cgroup of their own, like any job: the job's program is in the job's
    cgroup, as a cold spawn's is."""
    pid = await warm_sh_pid(rt)
    r = await rt.exec(argv=["cat", "/proc/self/cgroup"])
    assert r["pid"] == pid and r["job_id"] in r["output"], r["output"]
    await rt.call_tool("exec", {"command": "true"})  # starts the warm bash
    for _ in range(200):
        if rt.engine.starter.warm is not None and rt.engine.starter.warm.ready_job is not None:
            break
        await asyncio.sleep(0.01)
    bash_pid = rt.engine.starter.warm.ready_pid if rt.engine.starter.warm else None
    c = await rt.exec(command="cat /proc/self/cgroup; echo $$")
    assert c["output"].split()[-1] == str(bash_pid)
    assert c["job_id"] in c["output"]
    cold = await rt.engine.exec(ExecRequest(argv=["cat", "/proc/self/cgroup"]))
    assert cold["job_id"] in cold["output"]


async def test_pwd_names_the_jobs_own_working_directory(rt, tmp_path, monkeypatch):
    """As a shell sets it for what it runs (the server's PWD names the server's cwd), at every
    containment level and whether the warm sh runs the job or not; a PWD given wins."""
    monkeypatch.setenv("PWD", "/nonexistent/server/dir")
    sub = tmp_path / "sub"
    sub.mkdir()
    for args, warm_ok in (({}, True), ({}, False), ({"cwd": str(sub)}, True)):
        req = ExecRequest(argv=["printenv", "PWD"], **args)
        r = await rt.engine.exec(req, CallContext(warm=warm_ok))
        assert r["output"] == f"{args.get('cwd', tmp_path)}\n", (args, r["output"])
    given = await rt.exec(argv=["printenv", "PWD"], env={"PWD": "/given"})
    assert given["output"] == "/given\n"
    cfg = conch.Config(data_dir=str(tmp_path / "d"), default_cwd=str(tmp_path), cgroup="off")
    async with conch.Runtime(cfg) as plain:
        r = await plain.exec(argv=["printenv", "PWD"], cwd=str(sub))
        assert r["output"] == f"{sub}\n"
