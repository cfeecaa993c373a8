"""The pure parts of containment (layout parsing, bwrap argv, Seatbelt profile, tightening)
and the cgroup v1 level, exercised directly on this host's v1 controllers.

Levels: the parsing/builder tests are pure; the v1 tests run at level ``cgroup`` through the
v1 freezer/memory/pids hierarchies only (no v2), as on a host without a writable v2 tree.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from procs import gone, read_pid, reap_zombie_children, wait_for

import conch
from conch.core.containment import sandbox as sb
from conch.core.containment.cgroup import layout as cgroup_layout
from conch.core.containment.cgroup.layout import Layout, parse_layout, read_layout
from conch.core.containment.cgroup.tree import Cgroups
from conch.core.containment.fence import SpawnFence
from conch.core.process import procfs
from conch.core.process.hygiene import instance_id

pytestmark = pytest.mark.anyio
MiB = 1024 * 1024

DESKTOP_MOUNTINFO = (
    "24 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
    "25 24 0:23 / /proc rw - proc proc rw\n"
)
DESKTOP_CGROUP = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/conch.scope\n"
HYBRID_MOUNTINFO = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "38 31 0:35 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)
HYBRID_CGROUP = "8:pids:/\n6:freezer:/\n4:memory:/process_api/abc\n0::/\n"


def test_a_desktop_layout_is_the_delegated_v2_scope():
    lay = parse_layout(DESKTOP_MOUNTINFO, DESKTOP_CGROUP)
    assert lay.v2 == (
        "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/conch.scope"
    )
    assert lay.v1 == {}
    assert lay.v2_mount == "/sys/fs/cgroup"


def test_a_hybrid_layout_has_the_v2_tree_and_the_v1_controllers():
    lay = parse_layout(HYBRID_MOUNTINFO, HYBRID_CGROUP)
    assert lay.v2 == "/sys/fs/cgroup/unified"
    assert lay.v1 == {
        "memory": "/sys/fs/cgroup/memory/process_api/abc",
        "freezer": "/sys/fs/cgroup/freezer",
        "pids": "/sys/fs/cgroup/pids",
    }


def test_a_container_mount_of_a_subtree_maps_paths_below_its_root():
    mi = "50 40 0:30 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    assert parse_layout(mi, "0::/docker/abc/job\n").v2 == "/sys/fs/cgroup/job"
    assert parse_layout(mi, "0::/elsewhere\n").v2 is None  # not reachable from this mount


def test_this_host_layout_is_detected():
    lay = read_layout()
    assert lay.v2 is not None or lay.v1  # this host has cgroups (CI and the dev machine)


def _fence(mode: str, network: str = "on", cwd: str = "/work/ws") -> sb.Fence:
    return sb.Fence(
        sb.Policy(mode, network), "/work/ws", ("/state/conch",), ("/state/conch/tmp/j.sh",), cwd
    )


def test_bwrap_argv_binds_read_only_and_fences_pids_and_network():
    argv = sb.bwrap_argv(
        "/usr/bin/bwrap",
        "/usr/bin/env",
        _fence("workspace-write", "off"),
        ["echo", "hi"],
        root=True,
    )
    joined = " ".join(argv)
    assert argv[:5] == ["/usr/bin/bwrap", "--ro-bind", "/", "/", "--dev"]
    assert "--tmpfs /tmp" in joined and "--proc /proc" in joined
    assert "--bind /work/ws /work/ws" in joined
    assert "--tmpfs /state/conch" in joined and "--remount-ro /state/conch" in joined
    assert "--ro-bind /state/conch/tmp/j.sh /state/conch/tmp/j.sh" in joined
    assert "--unshare-pid" in argv and "--die-with-parent" in argv and "--unshare-net" in argv
    assert "--cap-drop ALL" in joined
    assert argv[-6:] == ["--", "/usr/bin/env", "--default-signal", "--", "echo", "hi"]
    # the hidden dir is hidden after the workspace is bound, so it wins when nested
    assert joined.index("--bind /work/ws") < joined.index("--tmpfs /state/conch")


def test_bwrap_argv_read_only_has_no_writable_bind_and_keeps_the_network_when_on():
    argv = sb.bwrap_argv("bwrap", "env", _fence("read-only"), ["true"], root=False)
    assert "--bind" not in argv and "--unshare-net" not in argv and "--cap-drop" not in argv


@pytest.mark.parametrize(("mode", "network"), [("read-only", "on"), ("workspace-write", "on")])
def test_every_bwrap_job_loads_its_seccomp_program(mode, network):
    """The filter (no setuid mode, lease or user namespace) is loaded with the network on
    too, not only under ``network: off``; the sh in front opens its file as descriptor 3."""
    argv = sb.bwrap_argv("bwrap", "env", _fence(mode, network), ["true"], root=True, seccomp_fd=3)
    assert argv[argv.index("--seccomp") + 1] == "3"
    fence = SpawnFence(
        sandbox=_fence(mode, network), bwrap="bwrap", seccomp_file="/state/conch/on.bpf"
    )
    run, _ = fence.wrap(["true"], cwd="/work/ws", env={})
    assert "fd3=/state/conch/on.bpf" in run and run[run.index("--seccomp") + 1] == "3", run


def test_the_tmp_entries_holding_the_workspace_cwd_and_data_dir_stay_visible():
    f = sb.Fence(sb.Policy("read-only"), "/tmp/a/ws", ("/tmp/b/data",), (), "/tmp/a/ws/sub")
    argv = " ".join(sb.bwrap_argv("bwrap", "env", f, ["true"], root=False))
    assert "--tmpfs /tmp --ro-bind /tmp/a /tmp/a --ro-bind /tmp/b /tmp/b" in argv
    assert sb.tmp_tops(["/tmp", "/tmp/x", "/var/tmp/y", "/tmp/x/z"]) == ["/tmp/x"]


def test_network_off_alone_leaves_the_filesystem_writable():
    argv = sb.bwrap_argv("bwrap", "env", _fence("off", "off"), ["true"], root=False)
    assert argv[1:4] == ["--bind", "/", "/"] and "--unshare-net" in argv
    # but /dev is the sandbox's own there too: the host's /dev/pts holds every terminal
    assert argv[4:6] == ["--dev", "/dev"] and "--dev-bind" not in argv
    assert "--ro-bind" in argv  # only the exposed script file
    assert "--tmpfs" in argv and "/tmp" not in argv  # the data dir is hidden; /tmp is the host's


def test_the_seatbelt_profile_denies_writes_but_the_workspace_and_tmp():
    prof = sb.seatbelt_profile(_fence("workspace-write", "off"), "/private/tmp/conch-j")
    assert prof.startswith("(version 1)\n(allow default)\n(deny file-write*)\n")
    assert '(subpath "/work/ws")' in prof and '(subpath "/private/tmp/conch-j")' in prof
    assert '(deny file-read* (subpath "/state/conch"))' in prof
    assert '(allow file-read* (literal "/state/conch/tmp/j.sh"))' in prof
    assert "(deny network*)" in prof
    ro = sb.seatbelt_profile(_fence("read-only"), "/tmp/x")
    assert '"/work/ws"' not in ro and "network" not in ro
    assert sb.seatbelt_argv(_fence("read-only"), ["ls"], "/tmp/x")[:2] == [
        "/usr/bin/sandbox-exec",
        "-p",
    ]


def test_seatbelt_strings_are_escaped():
    f = sb.Fence(sb.Policy("workspace-write"), '/w/"quoted"\\dir', ())
    assert '(subpath "/w/\\"quoted\\"\\\\dir")' in sb.seatbelt_profile(f, "/t")


@pytest.mark.parametrize(
    ("server", "call", "ok"),
    [
        ("off", "workspace-write", True),
        ("off", "read-only", True),
        ("workspace-write", "read-only", True),
        ("workspace-write", "off", False),
        ("read-only", "workspace-write", False),
        ("read-only", "off", False),
        ("read-only", "read-only", True),
    ],
)
def test_a_call_may_only_tighten_the_sandbox(server, call, ok):
    if ok:
        assert sb.effective(sb.Policy(server), call, None).sandbox == call
    else:
        with pytest.raises(sb.Loosening):
            sb.effective(sb.Policy(server), call, None)


def test_a_call_may_only_turn_the_network_off():
    assert sb.effective(sb.Policy("off", "on"), None, "off").network == "off"
    assert sb.effective(sb.Policy("off", "off"), None, None).network == "off"
    with pytest.raises(sb.Loosening):
        sb.effective(sb.Policy("off", "off"), None, "on")


# -- the v1 level (freeze + kill), on this host's v1 controllers ----------------------------


def _v1_only() -> Layout:
    return Layout(v2=None, v1=read_layout().v1)


def test_v1_freezer_tracking_kills_a_forking_tree_and_escapees(tmp_path):
    cg = Cgroups(instance_id(), layout=_v1_only())
    support = cg.setup()
    assert support.level and support.version == "v1"
    job = cg.new("j_v1", {"pids_max": 64})
    assert job.kind == "v1" and job.freezer is not None
    pidfile = tmp_path / "d.pid"
    argv, env = SpawnFence(cgroup=job).wrap(
        [
            "/bin/sh",
            "-c",
            f'(setsid env -i /bin/sh -c \'trap "" TERM; echo $$ > {pidfile}; '
            "while :; do sleep 100 & done' &); sleep 300",
        ],
        cwd="/",
        env=dict(os.environ),
    )
    proc = subprocess.Popen(argv, start_new_session=True, env=env)
    daemon = read_pid(str(pidfile))
    assert wait_for(lambda: len(job.pids()) > 5, 3.0)  # the daemon keeps forking
    job.kill()
    proc.wait(5)
    assert wait_for(lambda: not job.populated, 3.0)
    assert gone(daemon)
    reap_zombie_children()
    assert job.remove()
    parents = cg.parents
    assert parents and all(os.path.isdir(p) for p in parents)
    cg.close()
    assert cg.parents == ()
    assert not any(os.path.exists(p) for p in parents)


async def test_the_runtime_at_the_v1_level_kills_escapees_and_applies_memory_max(
    config, tmp_path, monkeypatch
):
    monkeypatch.setattr(cgroup_layout, "read_layout", _v1_only)
    async with conch.Runtime(config()) as rt:
        info = await rt.info()
        assert info["containment"] == "cgroup" and info["cgroup"]["version"] == "v1"
        pidfile = tmp_path / "d.pid"
        r = await rt.exec(
            command=f"(setsid env -i /bin/sh -c 'echo $$ > {pidfile}; exec sleep 300' &)"
        )
        daemon = read_pid(str(pidfile))
        assert daemon in r["lingering_pids"]
        await rt.signal(r["job_id"], "kill")
        assert wait_for(lambda: gone(daemon), 3.0)
        hog = "python3 -c 'x = bytearray(300 * 1024 * 1024); x[::4096] = b\"1\" * len(x[::4096])'"
        r = await rt.exec(command=hog, memory_max=48 * MiB, yield_ms=20000)
        assert r["state"] == "limit" and r["limit"] == "memory_max"


async def test_a_dead_servers_cgroups_are_killed_and_removed_at_start(config):
    lay = read_layout()
    base = lay.v2 or lay.v1["freezer"]
    ns = procfs.pid_namespace()
    dead = os.path.join(base, f"conch-999999999.1.{ns}.deadbeef")
    # a parent of another PID namespace's server (or an id without one) is not ours to judge
    foreign = [os.path.join(base, f"conch-999999999.1.{n}.deadbeef") for n in ("1", "x")]
    for d in foreign:
        os.makedirs(os.path.join(d, "j_orphan"), exist_ok=True)
    orphan = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        # (a runtime starting in another worker meanwhile sweeps the dead server's tree too, and
        # may remove it between its making and the write: make it again then; that sweep kills
        # the orphan the same way, which this test's own start then finds done)
        for _ in range(50):
            os.makedirs(os.path.join(dead, "j_orphan"), exist_ok=True)
            try:
                with open(os.path.join(dead, "j_orphan", "cgroup.procs"), "w") as f:
                    f.write(str(orphan.pid))
                break
            except FileNotFoundError:
                continue
        else:
            raise AssertionError("the dead server's cgroup kept vanishing")
        async with conch.Runtime(config()):
            assert orphan.wait(3) == -9
            assert not os.path.exists(dead)
            assert all(os.path.isdir(d) for d in foreign)
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()
        for d in foreign:
            os.rmdir(os.path.join(d, "j_orphan"))
            os.rmdir(d)


async def test_a_v2_tree_without_controllers_kills_but_refuses_limits_naming_why(
    config, tmp_path, monkeypatch
):
    # level: cgroup through the v2 tree only (as on a pure v2 host whose scope delegates no
    # controllers): cgroup.kill works, memory_max/pids_max are refused, never ignored
    real = read_layout()
    monkeypatch.setattr(
        cgroup_layout, "read_layout", lambda: Layout(v2=real.v2, v1={}, v2_mount=real.v2_mount)
    )
    async with conch.Runtime(config()) as rt:
        info = await rt.info()
        assert info["containment"] == "cgroup" and info["cgroup"]["version"] == "v2"
        assert info["cgroup"]["limits"]["memory_max"]["available"] is False
        for args in ({"memory_max": 64 * MiB}, {"pids_max": 8}):
            with pytest.raises(conch.ConchError) as e:
                await rt.exec(command="touch ran", **args)
            assert e.value.code == "invalid_argument" and "controller" in e.value.message
        pidfile = tmp_path / "d.pid"
        r = await rt.exec(
            command=f"(setsid env -i /bin/sh -c 'echo $$ > {pidfile}; exec sleep 300' &)"
        )
        daemon = read_pid(str(pidfile))
        await rt.signal(r["job_id"], "kill")
        assert wait_for(lambda: gone(daemon), 3.0)
    assert not os.path.exists(os.path.join(rt.config.resolved_default_cwd, "ran"))


def test_the_containment_settings_pass_whole_from_the_config_to_the_backends(tmp_path):
    """``Config.containment()`` carries every containment setting in one value;
    ``Containment`` takes it whole (paths resolved once) and hands the same value to
    ``Backends``: no field is copied by hand on the way."""
    from conch.config import ContainmentSettings
    from conch.core.containment.containment import Containment

    real = tmp_path / "ws"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    cfg = conch.Config(
        data_dir=str(tmp_path / "data"),
        default_cwd=str(tmp_path / "link"),
        cgroup="off",
        sandbox="read-only",
        network="off",
        memory_max=64 * MiB,
        sandbox_backend="landlock",
        sandbox_partial="allow",
        landlock_abi_max=3,
        sandbox_sockets=["/run/a.sock"],
    )
    settings = cfg.containment()
    assert settings == ContainmentSettings(
        cgroups=False,
        sandbox="read-only",
        network="off",
        limits={"memory_max": 64 * MiB, "pids_max": 0},
        workspace=str(tmp_path / "link"),
        bwrap="",
        private_files=("",),
        backend="landlock",
        partial="allow",
        abi_max=3,
        sockets=("/run/a.sock",),
    )
    c = Containment(settings, instance="test", data_dir=str(tmp_path / "data"))
    try:
        assert c.backends.settings is c.settings
        assert c.settings.workspace == c.workspace == str(real)
        assert c.settings.private_files == ()
        assert c.policy == sb.Policy("read-only", "off")
        assert c.default_limits == {"memory_max": 64 * MiB}
    finally:
        c.close()
