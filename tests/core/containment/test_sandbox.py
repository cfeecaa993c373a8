"""docs/spec.md §9a, the sandbox, attacked: every case against both Linux backends (issue 22),
bubblewrap and Landlock + seccomp (``backend`` is the parameter of every test that runs jobs).

Level exercised: ``cgroup`` (this host; see conftest) with the sandbox on top.

Where the backends differ the test says so: a write outside the level fails with EROFS under
bwrap (read-only binds) and EACCES under Landlock; bwrap gives a private /tmp and a PID
namespace, Landlock a per-job ``TMPDIR`` and no PID namespace; the directories above Conch's
data dir are not listable under Landlock (it grants hierarchies, never "all but one").
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import stat
import sys
import tempfile
import time
import urllib.request

import pytest
from procs import gone, read_bytes, read_pid, wait_for
from sandbox_backends import BACKENDS, backend_settings, kind

import conch
from conch import ConchError

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]
# a Python the sandbox can run (stdlib only): the venv's may lie under the private /tmp (a
# checkout there), its interpreter does not
INSIDE_PY = os.path.realpath(sys.executable)
#: a UDP datagram to the loopback: blocked by the seccomp filter of `network: off`
_UDP_SEND = (
    "import socket\n"
    "try:\n"
    "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    '    s.sendto(b"x", ("127.0.0.1", 9)); print("sent")\n'
    "except OSError as e:\n"
    '    print("blocked", e.errno)\n'
)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


#: what a denied write says, per backend
DENIED = {"bwrap": "Read-only file system", "landlock": "Permission denied"}


@pytest.fixture
def denied(backend) -> str:
    return DENIED[kind(backend)]


@pytest.fixture
def sandbox_settings(backend) -> dict[str, object]:
    """Every ``config`` of this module's tests on the backend (conftest.py)."""
    return backend_settings(backend)


@pytest.fixture
def rt_settings(workspace, sandbox_settings) -> dict[str, object]:
    return {"default_cwd": workspace, **sandbox_settings}


@pytest.fixture
def base():
    """Workspace and its sibling live outside /tmp (which the sandbox makes private)."""
    d = tempfile.mkdtemp(prefix="conch-sandbox-", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def workspace(base) -> str:
    # (an entry in it: Landlock makes no new entry at the workspace's top)
    os.makedirs(os.path.join(base, "ws", "sub"))
    return os.path.join(base, "ws")


@pytest.fixture
def outside(base) -> str:
    os.mkdir(os.path.join(base, "outside"))
    return os.path.join(base, "outside")


async def test_a_workspace_under_tmp_stays_visible_through_the_private_tmp(
    tmp_path, backend, denied
):
    ws = tmp_path / "ws-in-tmp"
    ws.mkdir()
    cfg = conch.Config(
        result_detail="full",
        data_dir=str(tmp_path / "data"),
        default_cwd=str(ws),
        sandbox="read-only",
        **backend_settings(backend),  # type: ignore[arg-type]
    )
    (ws / "f").write_text("visible\n")
    async with conch.Runtime(cfg) as rt:
        r = await rt.exec(command="cat f; touch g")
        assert r["output"].startswith("visible\n") and denied in r["output"]
        r = await rt.exec(command="touch g", sandbox="read-only")
    assert not (ws / "g").exists()


async def test_workspace_write_allows_the_workspace_and_a_private_tmp(
    config, workspace, backend, denied
):
    marker = f"/tmp/conch-sandbox-{os.getpid()}-{id(workspace)}"
    # bwrap: a private /tmp; Landlock: /tmp read-only, the job's own TMPDIR writable
    where = marker if backend == "bwrap" else "$TMPDIR/marker"
    async with conch.Runtime(config(sandbox="workspace-write")) as rt:
        r = await rt.exec(
            command=f"mkdir -p sub && echo hi > sub/f && echo tmp > {where} && cat {where}"
        )
        assert r["state"] == "exited" and r["exit_code"] == 0, r["output"]
        assert r["output"] == "tmp\n"
        if kind(backend) == "landlock":
            r = await rt.exec(command=f"echo tmp > {marker}")
            assert denied in r["output"]
    assert read_bytes(os.path.join(workspace, "sub", "f")) == b"hi\n"
    assert not os.path.exists(marker)  # /tmp inside was private (bwrap), or read-only


async def test_writes_outside_the_workspace_fail_whatever_the_path_trick(
    config, workspace, outside, denied
):
    os.symlink(outside, os.path.join(workspace, "link"))
    rel = os.path.relpath(outside, workspace)
    attempts = {
        "absolute": f"{outside}/abs",
        "dotdot": f"{workspace}/../outside/dotdot",
        "relative": f"{rel}/relative",
        "symlink": "link/symlinked",
        "home": os.path.expanduser("~/conch-sandbox-escape"),
        "etc": "/etc/conch-sandbox-escape",
    }
    async with conch.Runtime(config(sandbox="workspace-write")) as rt:
        for how, path in attempts.items():
            r = await rt.exec(command=f"echo x > {path}")
            assert r["exit_code"] != 0, how
            assert denied in r["output"], (how, r["output"])
        # moving the symlink's target into reach, or swapping in a new link, fails the same
        r = await rt.exec(command=f"ln -sfn {outside} link2 && echo x > link2/new")
        assert denied in r["output"]
    for how, path in attempts.items():
        assert not os.path.exists(path), how
    assert os.listdir(outside) == []


async def test_under_tmp_the_workspaces_neighbours_are_read_only_and_new_files_private(
    tmp_path, backend, denied
):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    os.symlink(outside, ws / "link")
    cfg = conch.Config(
        result_detail="full",
        data_dir=str(tmp_path / "data"),
        default_cwd=str(ws),
        sandbox="workspace-write",
        **backend_settings(backend),  # type: ignore[arg-type]
    )
    fresh = f"/tmp/conch-private-{os.getpid()}" if backend == "bwrap" else "$TMPDIR/p"
    async with conch.Runtime(cfg) as rt:
        for path in (outside / "abs", ws / ".." / "outside" / "dotdot", "link/symlinked"):
            r = await rt.exec(command=f"echo x > {path}")
            assert denied in r["output"], (path, r["output"])
        r = await rt.exec(command=f"echo ok > sub/in-ws && echo p > {fresh} && cat {fresh}")
        assert r["exit_code"] == 0 and r["output"] == "p\n"
    assert os.listdir(outside) == [] and (ws / "sub" / "in-ws").exists()
    assert not os.path.exists(f"/tmp/conch-private-{os.getpid()}")


async def test_read_only_makes_the_workspace_read_only_too(config, workspace, backend, denied):
    tmp = "/tmp" if backend == "bwrap" else "$TMPDIR"
    async with conch.Runtime(config(sandbox="read-only")) as rt:
        r = await rt.exec(command=f"exec 2>&1; touch inside; echo tmp > {tmp}/t && cat {tmp}/t")
        assert denied in r["output"]
        assert r["output"].endswith("tmp\n")
    assert not os.path.exists(os.path.join(workspace, "inside"))


async def test_the_data_dir_and_other_jobs_logs_are_out_of_reach(config, tmp_path, denied):
    data = str(tmp_path / "data")
    async with conch.Runtime(config(sandbox="workspace-write")) as rt:
        first = await rt.exec(command="echo secret-output")
        log = first["log_path"]
        assert log.startswith(data)
        before = read_bytes(log)
        r = await rt.exec(
            command=(
                f"echo tampered > {log}; echo x > {data}/planted; ls -A {data}; "
                f"cat {log} || echo unreadable"
            )
        )
        assert denied in r["output"]
        assert "secret-output" not in r["output"] and "unreadable" in r["output"]
        assert read_bytes(log) == before
        assert not os.path.exists(os.path.join(data, "planted"))
        # a sandboxed script job still runs from its private file in the data dir
        s = await rt.exec(script="echo from-script\nexit 3\n")
        assert s["output"] == "from-script\n" and s["exit_code"] == 3


async def test_network_off_cannot_reach_a_loopback_listener(config):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    probe = (
        "import socket,sys\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')\n"
        "except OSError as e:\n"
        "    print('blocked', e.errno)\n"
    )
    try:
        async with conch.Runtime(config(sandbox="workspace-write")) as rt:
            on = await rt.exec(argv=["python3", "-c", probe])
            assert on["output"] == "connected\n"  # control: the listener is reachable
            off = await rt.exec(argv=["python3", "-c", probe], network="off")
            assert off["output"].startswith("blocked"), off["output"]
        async with conch.Runtime(config(network="off")) as rt:
            r = await rt.exec(argv=["python3", "-c", probe])
            assert r["output"].startswith("blocked")
            with pytest.raises(ConchError) as e:
                await rt.exec(argv=["python3", "-c", probe], network="on")
            assert e.value.code == "invalid_argument"
    finally:
        srv.close()


async def test_network_off_without_a_filesystem_sandbox_keeps_files_writable(
    config, outside, backend
):
    # bwrap: a network namespace with its own loopback only; Landlock: the host's interfaces,
    # but no socket but AF_UNIX (seccomp) and no TCP (Landlock ABI 4)
    probe = "cat /proc/net/dev | grep -c :" if backend == "bwrap" else "echo 1"
    async with conch.Runtime(config(network="off")) as rt:
        r = await rt.exec(command=f"touch {outside}/w && {probe}")
        assert r["exit_code"] == 0 and r["output"] == "1\n"  # only its own loopback
    assert os.path.exists(os.path.join(outside, "w"))


async def test_per_call_values_may_only_tighten_the_servers_sandbox(config, workspace, denied):
    async with conch.Runtime(config(sandbox="read-only")) as rt:
        for loosen in ("off", "workspace-write"):
            with pytest.raises(ConchError) as e:
                await rt.exec(command="touch loosened", sandbox=loosen)
            assert e.value.code == "invalid_argument" and "loosen" in e.value.message
            with pytest.raises(ConchError) as e:
                await rt.shell_open(sandbox=loosen)
            assert e.value.code == "invalid_argument"
            res = await rt.call_tool("exec", {"command": "touch loosened", "sandbox": loosen})
            assert res["error"]["code"] == "invalid_argument"
        same = await rt.exec(command="touch x", sandbox="read-only")
        assert denied in same["output"]
    async with conch.Runtime(config(sandbox="workspace-write")) as rt:
        tighter = await rt.exec(command="touch tighter", sandbox="read-only")
        assert denied in tighter["output"]
        with pytest.raises(ConchError) as e:
            await rt.exec(command="touch loosened", sandbox="off")
        assert e.value.code == "invalid_argument"
    assert not os.path.exists(os.path.join(workspace, "loosened"))
    assert not os.path.exists(os.path.join(workspace, "tighter"))


async def test_a_server_without_a_sandbox_can_be_tightened_per_call(rt, workspace, outside, denied):
    r = await rt.exec(command=f"touch {outside}/f", sandbox="workspace-write")
    assert denied in r["output"]
    assert not os.path.exists(os.path.join(outside, "f"))
    plain = await rt.exec(command=f"touch {outside}/g")
    assert plain["exit_code"] == 0 and os.path.exists(os.path.join(outside, "g"))


async def test_a_sandbox_that_cannot_be_set_up_is_sandbox_unavailable(tmp_path, workspace):
    """With ``sandbox_backend: bwrap`` a bwrap that cannot start is no fence: refused, never a
    silent fallback (``auto`` falls back to Landlock: test_landlock.py)."""

    def config(**settings: object) -> conch.Config:
        return conch.Config(
            result_detail="full",
            data_dir=str(tmp_path / "data"),
            default_cwd=workspace,
            sandbox_backend="bwrap",
            **settings,  # type: ignore[arg-type]
        )

    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    for bwrap in (str(tmp_path / "missing-bwrap"), str(broken)):
        async with conch.Runtime(config(bwrap=bwrap)) as rt:
            with pytest.raises(ConchError) as e:
                await rt.exec(command="touch ran", sandbox="read-only")
            assert e.value.code == "sandbox_unavailable"
            assert e.value.retryable is False
            with pytest.raises(ConchError) as e:
                await rt.shell_open(sandbox="workspace-write")
            assert e.value.code == "sandbox_unavailable"
            with pytest.raises(ConchError) as e:
                await rt.exec(command="touch ran", pty=True, network="off")
            assert e.value.code == "sandbox_unavailable"
            res = await rt.call_tool("exec", {"command": "touch ran", "sandbox": "read-only"})
            assert res["error"]["code"] == "sandbox_unavailable"
        async with conch.Runtime(config(bwrap=bwrap, sandbox="workspace-write")) as rt:
            with pytest.raises(ConchError) as e:
                await rt.exec(command="touch ran")  # the server's own setting: no fallback
            assert e.value.code == "sandbox_unavailable"
    assert not os.path.exists(os.path.join(workspace, "ran"))


async def test_every_descendant_dies_with_a_sandboxed_job(config, workspace, backend):
    # bwrap: level subreaper + bwrap's PID namespace (no cgroup to fall back on). Landlock has
    # no PID namespace: a daemon that leaves the session and clears its environment is found
    # through the job's cgroup only (without one it would escape: docs/containment.md)
    cgroup = "off" if backend == "bwrap" else "auto"
    async with conch.Runtime(config(sandbox="workspace-write", cgroup=cgroup)) as rt:
        r = await rt.exec(
            command=(
                "(setsid env -i /bin/sh -c 'trap \"\" TERM HUP; exec sleep 300' &) ;"
                " echo $$ > sub/inner.pid; sleep 300"
            ),
            yield_ms=300,
        )
        if backend == "bwrap":
            assert read_pid(os.path.join(workspace, "sub", "inner.pid")) < 100  # its own
            # bwrap monitor's descendants: the namespace's init, the shell (exec'd into sleep)
            # and the daemon, which left the session and now hangs off the namespace's init
            assert wait_for(lambda: len(_descendants(r["pid"])) >= 3, 3.0)
            tree = _descendants(r["pid"])
        else:  # the daemon is an orphan of the server now (subreaper), in the job's cgroup
            assert read_pid(os.path.join(workspace, "sub", "inner.pid")) == r["pid"]
            assert wait_for(lambda: len(_cgroup_pids(rt, r["job_id"])) >= 2, 3.0)
            tree = _cgroup_pids(rt, r["job_id"])
            assert len(tree - {r["pid"]} - _descendants(r["pid"])) >= 1  # escaped the tree
        s = await rt.signal(r["job_id"], "kill")
        assert s["state"] == "cancelled"
        assert wait_for(lambda: all(gone(p) for p in tree), 3.0)


def _descendants(pid: int) -> set[int]:
    import psutil

    return {c.pid for c in psutil.Process(pid).children(recursive=True)}


def _cgroup_pids(rt: conch.Runtime, job_id: str) -> set[int]:
    driver = rt.engine.starter.drivers[job_id]  # (the job's own cgroup)
    assert driver.cgroup is not None
    return set(driver.cgroup.pids())


async def test_a_sandboxed_job_ends_with_the_signal_it_got(config):
    async with conch.Runtime(config(sandbox="read-only")) as rt:
        # (a wait well past the default 2 s: under the whole suite's load a bwrap job's stop
        # through its monitor and the cgroup took longer, and the result said `running`)
        r = await rt.exec(command="trap 'echo got-int; exit 3' INT; sleep 30 & wait", yield_ms=300)
        s = await rt.signal(r["job_id"], "interrupt", wait_ms=15000)
        assert s["state"] == "exited" and s["exit_code"] == 3 and "got-int" in s["output"]
        # (the TERM goes once the program runs: one sent while bwrap still sets up has its
        # own test, test_a_signal_sent_while_bwrap_sets_up_reaches_the_program)
        r = await rt.exec(command="echo up; exec sleep 30", yield_ms=100)
        seen = r["output"]
        if "up" not in seen:
            seen += (await rt.read(job_id=r["job_id"], until={"pattern": "up"}, wait_ms=15000))[
                "output"
            ]
        assert "up" in seen
        s = await rt.signal(r["job_id"], "terminate", wait_ms=15000)
        assert s["state"] == "cancelled" and s["signal"] == "SIGTERM"


@pytest.mark.parametrize("how", ["terminate", "interrupt"])
@pytest.mark.parametrize("pty", [False, True], ids=["pipes", "pty"])
async def test_a_signal_sent_while_bwrap_sets_up_reaches_the_program(tmp_path, workspace, pty, how):
    """Everything before a bwrap job's program ignores the signals Conch forwards (so bwrap's
    monitor outlives the program): a TERM sent while bwrap still sets up is sent again once
    the program runs, and the job ends by that TERM, inside the grace, not by the KILL after
    it; an interrupt, which has no grace, is not lost either. The test signals only when it
    has seen every process of the job in that state."""
    from conch.core.jobs import driver as driver_mod
    from conch.core.process import procfs

    signum = signal.SIGTERM if how == "terminate" else signal.SIGINT
    term = 1 << (signum - 1)
    caught = 0
    cfg = conch.Config(
        result_detail="full",
        data_dir=str(tmp_path / "data"),
        default_cwd=workspace,
        sandbox_backend="bwrap",  # (only bwrap has a monitor, and a setup that ignores them)
        sandbox="read-only",
    )
    async with conch.Runtime(cfg) as rt:
        for _ in range(40):
            r = await rt.exec(argv=["sleep", "30"], yield_ms=0, pty=pty)
            d = rt.engine.starter.drivers[r["job_id"]]
            deadline = time.monotonic() + 1
            in_setup = False
            while time.monotonic() < deadline and not in_setup:
                pids = d.pids()
                in_setup = (
                    bool(pids)
                    and all(
                        driver_mod.setting_up(p, procfs.comm(p), d.pid) and procfs.ignored(p) & term
                        for p in pids
                    )
                    and any(procfs.comm(p) == "bwrap" for p in pids)
                )
                if not in_setup:
                    time.sleep(0.0005)  # (the loop is held: nothing of Conch's runs meanwhile)
            if in_setup:
                caught += 1
            s = await rt.signal(r["job_id"], how, wait_ms=15000)
            assert s["state"] == "cancelled" and s["signal"] == signum.name, s
            if in_setup:
                assert s["duration_ms"] < 1800, s
                if caught == 3:
                    break
    assert caught, "no job was seen while bwrap set up"


async def test_a_missing_program_in_the_sandbox_is_spawn_failed(config):
    async with conch.Runtime(config(sandbox="read-only")) as rt:
        with pytest.raises(ConchError) as e:
            await rt.exec(argv=["no-such-program-xyz"])
        assert e.value.code == "spawn_failed" and "no-such-program-xyz" in e.value.message


async def test_a_shell_opened_under_a_sandbox_stays_in_it(
    config, workspace, outside, backend, denied
):
    async with conch.Runtime(config()) as rt:
        sh = await rt.shell_open(sandbox="workspace-write", network="off")
        sid = sh["shell_id"]
        r = await rt.exec(shell_id=sid, command=f"touch {outside}/f; echo rc=$?")
        assert denied in r["output"] and "rc=1" in r["output"]
        cd = "mkdir -p sub/d && cd sub/d && export KEEP=1 && touch ok"
        r = await rt.exec(shell_id=sid, command=cd)
        assert r["exit_code"] == 0
        r = await rt.exec(shell_id=sid, command="pwd; echo $KEEP")
        assert r["output"] == f"{workspace}/sub/d\n1\n" and r["cwd"] == f"{workspace}/sub/d"
        r = await rt.exec(shell_id=sid, command="echo a; sleep 30; echo b", yield_ms=300)
        s = await rt.signal(r["job_id"], "interrupt")
        assert s["state"] == "cancelled" and "b" not in s["output"]
        r = await rt.exec(shell_id=sid, command="echo after")
        assert r["output"] == "after\n"
        # the shell's commands cannot reach the network either
        if backend == "bwrap":
            r = await rt.exec(shell_id=sid, command="cat /proc/net/dev | grep -c :")
            assert r["output"].strip() == "1"  # only the namespace's own loopback
        r = await rt.exec(shell_id=sid, command=f"{INSIDE_PY} -c '{_UDP_SEND}'")
        assert r["output"].strip() == f"blocked {errno.EAFNOSUPPORT}", r["output"]
        await rt.shell_close(sid)
    assert os.path.exists(os.path.join(workspace, "sub", "d", "ok"))
    assert os.listdir(outside) == []


async def test_a_pty_job_under_a_sandbox_stays_in_it(config, outside):
    async with conch.Runtime(config()) as rt:
        r = await rt.exec(
            command=f"touch {outside}/f; echo rc=$?; tty >/dev/null && echo has-tty",
            pty=True,
            sandbox="read-only",
        )
        assert r["state"] == "exited"
        assert "rc=1" in r["output"] and "has-tty" in r["output"]
        r = await rt.exec(
            command="read -r a; echo got:$a", pty=True, sandbox="read-only", yield_ms=300
        )
        assert r["awaiting_input"] is True
        w = await rt.write(r["job_id"], text="typed", keys=["enter"])
        assert "got:typed" in w["output"]
        r = await rt.exec(command="sleep 30", pty=True, sandbox="read-only", yield_ms=200)
        w = await rt.write(r["job_id"], keys=["ctrl-c"], yield_ms=2000)
        assert w["state"] != "running"
    assert os.listdir(outside) == []


async def test_info_reports_the_sandbox(config, backend):
    async with conch.Runtime(config(sandbox="workspace-write", network="off")) as rt:
        info = await rt.info()
    sb = info["sandbox"]
    assert sb["mode"] == "workspace-write" and sb["network"] == "off"
    assert sb["backend"] == kind(backend) and sb["backend_setting"] == kind(backend)
    assert sb["landlock_abi"] >= 6  # (this kernel: 7)
    common = {"fs_write", "fs_hide_data_dir", "net_tcp", "net_all", "unix_sockets", "signals"}
    if backend == "bwrap":
        assert set(sb["guarantees"]) == common | {"private_tmp", "pid_namespace"}
    else:
        assert set(sb["guarantees"]) == common


def test_sandbox_settings_are_checked_at_startup():
    with pytest.raises(conch.ConfigError):
        conch.Config(result_detail="full", sandbox="loose")
    with pytest.raises(conch.ConfigError):
        conch.Config(result_detail="full", network="maybe")


async def test_limits_apply_inside_the_sandbox_too(config, backend):
    hog = "python3 -c 'x = bytearray(300 << 20); x[::4096] = b\"1\" * len(x[::4096])'"
    # (limits need the cgroup level: landlock-nocgroup is the same case as landlock here, whose
    # job, with cgroup v1 limit directories on this host, the spawning thread starts)
    async with conch.Runtime(config(sandbox="read-only", cgroup="auto")) as rt:
        r = await rt.exec(command=hog, memory_max=48 << 20, yield_ms=20000)
        assert r["state"] == "limit" and r["limit"] == "memory_max"
        code = (
            "import os\n"
            "n = 0\n"
            "try:\n"
            "    for _ in range(50):\n"
            "        if os.fork() == 0:\n"
            "            import time; time.sleep(3); os._exit(0)\n"
            "        n += 1\n"
            "except BlockingIOError:\n"
            "    print('refused after', n)\n"
        )
        r = await rt.exec(argv=["python3", "-c", code], pids_max=10, yield_ms=10000)
        # bwrap's monitor and the namespace's init count too: python + 7 children; Landlock
        # adds no process: python + 9
        n = 7 if backend == "bwrap" else 9
        assert r["output"] == f"refused after {n}\n", r["output"]


async def test_a_data_dir_below_a_symlink_is_hidden_and_scripts_still_run(
    tmp_path, workspace, backend
):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")  # a parent of the data dir
    cfg = conch.Config(
        result_detail="full",
        data_dir=str(tmp_path / "link" / "data"),
        default_cwd=workspace,
        sandbox="read-only",
        **backend_settings(backend),  # type: ignore[arg-type]
    )
    async with conch.Runtime(cfg) as rt:
        s = await rt.exec(script="echo from-script\n")
        assert s["output"] == "from-script\n"
        r = await rt.exec(command=f"ls -A {tmp_path}/real/data; ls -A {tmp_path}/link/data")
        if backend == "bwrap":
            assert r["output"] == ""  # hidden: an empty directory, by either path
        else:  # hidden: not readable, by either path
            assert r["output"].count("Permission denied") == 2, r["output"]
        sh = await rt.shell_open()
        r = await rt.exec(shell_id=sh["shell_id"], command="echo in-shell")
        assert r["output"] == "in-shell\n"
        await rt.shell_close(sh["shell_id"])


# Every regular file of procfs (less the per-process directories) and of sysfs that the job
# may open for writing, found by walking them from inside: a root server's job is root with
# its capabilities dropped, and sysctl files trust the file mode, not a capability.
_WRITABLE_HOST_FILES = r"""
import os, stat, sys
found = []
def walk(top, depth):
    try:
        names = os.listdir(top)
    except OSError:
        return
    for name in names:
        p = os.path.join(top, name)
        if top == "/proc" and (name.isdigit() or name in ("self", "thread-self")):
            continue
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and depth < 12:
            walk(p, depth + 1)
        elif stat.S_ISREG(st.st_mode) and os.access(p, os.W_OK):
            try:  # (access() asks the file mode only: Landlock denies at open)
                os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                continue
            found.append(p)
walk("/proc", 0)
walk("/sys", 0)
print(len(found), *found[:20])
try:  # the escape of the report: writing it back unchanged must fail
    old = open("/proc/sys/kernel/core_pattern").read()
    with open("/proc/sys/kernel/core_pattern", "w") as f:
        f.write(old)
    print("core_pattern: written")
except OSError as e:
    print("core_pattern:", e.strerror)
"""


@pytest.mark.parametrize(
    ("sandbox", "network"), [("read-only", "off"), ("workspace-write", "on"), ("off", "off")]
)
async def test_no_host_kernel_setting_is_writable_from_inside(config, sandbox, network):
    """Issue 18.1: no sandboxed job (of a root server too) can change a host kernel setting
    (/proc/sys, /proc/sysrq-trigger, /sys, and the rest of procfs outside its processes)."""
    async with conch.Runtime(config(sandbox=sandbox, network=network)) as rt:
        r = await rt.exec(
            argv=[INSIDE_PY, "-c", _WRITABLE_HOST_FILES], yield_ms=60_000, timeout_ms=60_000
        )
    assert r["state"] == "exited" and r["exit_code"] == 0, r
    count, *paths = r["output"].splitlines()[0].split()
    assert count == "0", paths
    assert "core_pattern: written" not in r["output"]


async def test_workspace_write_refuses_the_root_directory_as_its_workspace(tmp_path, backend):
    """Issue 18.12: '/' as the writable root fences nothing: refused at start and per call."""
    cfg = conch.Config(
        data_dir=str(tmp_path / "d"),
        default_cwd="/",
        sandbox="workspace-write",
        **backend_settings(backend),  # type: ignore[arg-type]
    )
    with pytest.raises(conch.ConfigError, match="workspace '/'"):
        async with conch.Runtime(cfg):
            pass
    cfg = conch.Config(
        data_dir=str(tmp_path / "e"),
        default_cwd="/",
        **backend_settings(backend),  # type: ignore[arg-type]
    )
    async with conch.Runtime(cfg) as rt:
        with pytest.raises(ConchError) as e:
            await rt.exec(command="touch /etc/conch-x", sandbox="workspace-write")
        assert e.value.code == "invalid_argument" and "workspace '/'" in e.value.message
    assert not os.path.exists("/etc/conch-x")


async def test_workspace_write_keeps_the_repository_metadata_read_only(
    config, workspace, backend, denied
):
    """Issue 18.12: a hook or config written into .git would run later, outside the sandbox
    (Codex's sandbox keeps it read-only too); the rest of the workspace stays writable."""
    hooks = os.path.join(workspace, ".git", "hooks")
    os.makedirs(hooks)
    with open(os.path.join(workspace, ".git", "config"), "w") as f:
        f.write("[core]\n")
    attacks = [
        "echo evil > .git/hooks/pre-commit",
        "echo '[core] fsmonitor = evil' >> .git/config",
        "mv .git .git-old",
        "rm -rf .git",
        "ln -s /tmp .git/hooks/x",
    ]
    async with conch.Runtime(config(sandbox="workspace-write")) as rt:
        for attack in attacks:
            r = await rt.exec(command=attack)
            assert r["exit_code"] != 0, (attack, r["output"])
        # Landlock cannot grant the workspace but .git: it grants every other entry, so new
        # entries go below the existing ones (docs/containment.md)
        os.mkdir(os.path.join(workspace, "src")) if kind(backend) == "landlock" else None
        notes = "notes" if backend == "bwrap" else "src/notes"
        r = await rt.exec(command=f"echo fine > {notes} && cat {notes}")
        assert r["output"] == "fine\n"
        if kind(backend) == "landlock":
            r = await rt.exec(command="echo new > top-level")
            assert denied in r["output"]
    assert os.listdir(hooks) == []
    with open(os.path.join(workspace, ".git", "config")) as f:
        assert f.read() == "[core]\n"


async def test_the_sandboxs_own_processes_are_never_a_jobs_lingering_ones(config):
    """Issue 18.11: bwrap's monitor reports the program's end before the namespace's init (a
    bwrap too) is gone; that helper must not show as lingering, nor hold the output open."""
    async with conch.Runtime(config(sandbox="read-only")) as rt:
        results = [await rt.exec(command="echo hi") for _ in range(30)]
    for r in results:
        assert r["output"] == "hi\n" and r["lingering_pids"] == [] and r["eof"] is True, r


async def test_a_data_dir_inside_a_writable_workspace_is_refused_naming_both(tmp_path, backend):
    """Issue 18.2: with the data dir inside the workspace (the default data dir with the
    server started in $HOME), a workspace-write job could rename a directory above the hidden
    mount and forge the logs the server serves: refused at start and per call."""
    ws = tmp_path / "home"
    data = ws / ".local" / "state" / "conch"
    ws.mkdir()
    cfg = conch.Config(
        data_dir=str(data),
        default_cwd=str(ws),
        sandbox="workspace-write",
        **backend_settings(backend),  # type: ignore[arg-type]
    )
    with pytest.raises(conch.ConfigError) as e:
        async with conch.Runtime(cfg):
            pass
    assert str(data) in str(e.value) and f"workspace {ws}" in str(e.value)
    cfg = conch.Config(
        data_dir=str(data),
        default_cwd=str(ws),
        **backend_settings(backend),  # type: ignore[arg-type]
    )
    async with conch.Runtime(cfg) as rt:
        with pytest.raises(ConchError) as err:
            await rt.exec(command="mv .local .moved", sandbox="workspace-write")
        assert err.value.code == "sandbox_unavailable" and str(data) in err.value.message
        r = await rt.exec(command="cat /etc/hostname >/dev/null", sandbox="read-only")
        assert r["exit_code"] == 0  # read-only cannot rename anything: still served
    assert (ws / ".local").is_dir()


_CALL_CONCH = r"""
import json, sys, urllib.request, urllib.error
req = urllib.request.Request(
    sys.argv[1] + "/invoke",
    data=json.dumps({"method": "exec", "params": {"command": "echo escaped"}}).encode(),
    headers={"Content-Type": "application/json"},
)
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print("status", r.status, r.read().decode()[:200])
except urllib.error.HTTPError as e:
    print("status", e.code, e.read().decode()[:200])
"""


def test_a_sandboxed_job_cannot_call_conchs_own_api(tmp_path, base, workspace, backend):
    """Issue 18.3: with the network on, a job sandboxed for one call could POST /invoke to
    the server and get an unsandboxed exec (and every other job). A loopback request is
    traced to the process holding its socket: from inside a sandbox it gets 403, however the
    job hides (no tag, a shell, a grandchild)."""
    from frontend_servers import kill_group, start_http

    flags = [f"--{k.replace('_', '-')}={v}" for k, v in backend_settings(backend).items()]
    srv = start_http(tmp_path, "--default-cwd", workspace, *flags)
    script = os.path.join(base, "call.py")
    with open(script, "w") as f:
        f.write(_CALL_CONCH)
    py = INSIDE_PY

    def invoke(params: dict) -> dict:
        body = json.dumps({"method": "exec", "params": params}).encode()
        req = urllib.request.Request(
            srv.url + "/invoke", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    try:
        plain = invoke({"argv": [py, script, srv.url]})
        assert "status 200" in plain["output"], plain  # an unsandboxed job may call it
        for sandbox in ("read-only", "workspace-write"):
            hows = [f"{py} {script} {srv.url}", f"env -i {py} {script} {srv.url}"]
            # an orphan is found through the job's cgroup (Landlock) or PID namespace (bwrap);
            # without a cgroup a Landlock job's orphan is not (docs/containment.md)
            if backend != "landlock-nocgroup":
                hows.append(f"(sh -c '{py} {script} {srv.url}' &) ; sleep 2")
            for how in hows:
                r = invoke({"command": how, "sandbox": sandbox, "network": "on"})
                assert "status 403" in r["output"] and "escaped" not in r["output"], (how, r)
        sid = invoke_tool(srv.url, "shell_open", {"sandbox": "read-only"})["shell_id"]
        r = invoke({"shell_id": sid, "command": f"{py} {script} {srv.url}"})
        assert "status 403" in r["output"], r
    finally:
        kill_group(srv.proc)


def invoke_tool(url: str, method: str, params: dict) -> dict:
    body = json.dumps({"method": method, "params": params}).encode()
    req = urllib.request.Request(
        url + "/invoke", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


@pytest.mark.parametrize(
    ("level", "network"),
    [("read-only", "on"), ("workspace-write", "on"), ("off", "off")],
)
async def test_the_servers_env_file_is_out_of_reach_at_every_level(
    base, workspace, level, network, backend
):
    """Issue 18.3: the --env-file holds the server's tokens (CONCH_AUTH_TOKEN, the
    caller-context token). No sandboxed job reads it, moves it aside or writes it, wherever it
    lies (here: inside the writable workspace), and the shell of a sandboxed shell neither."""
    env_file = os.path.join(workspace, "conch.env")
    with open(env_file, "w") as f:
        f.write("CONCH_AUTH_TOKEN=tok-3f9a-secret\n")
    os.chmod(env_file, 0o600)
    cfg = conch.Config.from_sources(
        {
            "result_detail": "full",
            "data_dir": os.path.join(base, "data"),
            "default_cwd": workspace,
            **backend_settings(backend),
        },
        {},
        env_file,
    )
    assert cfg.auth_token == "tok-3f9a-secret" and cfg.env_file == os.path.realpath(env_file)
    attack = (
        "cat conch.env; cat /proc/1/root" + env_file + " 2>/dev/null; "
        "grep -r tok-3f9a . 2>/dev/null; env | grep -c tok-3f9a; "
        "mv conch.env moved.env 2>/dev/null && echo MOVED; "
        "echo CONCH_AUTH_TOKEN=forged >conch.env 2>/dev/null && echo WROTE; "
        "ln conch.env hard.env 2>/dev/null && cat hard.env; echo end"
    )
    async with conch.Runtime(cfg) as rt:
        r = await rt.exec(command=attack, sandbox=level, network=network)
        s = await rt.call_tool("shell_open", {"sandbox": level, "network": network})
        r2 = await rt.call_tool("exec", {"shell_id": s["shell_id"], "command": attack})
    for out in (r["output"], r2["output"]):
        assert "tok-3f9a" not in out and "MOVED" not in out and "WROTE" not in out, out
        assert {"0", "end"} <= set(out.splitlines()), out  # (stderr lines may come after)
    with open(env_file) as f:
        assert f.read() == "CONCH_AUTH_TOKEN=tok-3f9a-secret\n"
