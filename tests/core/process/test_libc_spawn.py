"""core/process/libc_spawn.py: the pipe child spawned by glibc's posix_spawn through ctypes
gets what popen.spawn promises (docs/spec.md §2: its own session, no descriptor but its stdio,
default signal dispositions and an empty mask whatever the server inherited, exactly its
environment, its working directory), and fails as Popen would. Real spawns of this Python, which
reports what it finds of itself."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import sys

import pytest

from conch.core.process import libc_spawn, popen
from conch.core.process.spec import SpawnSpec
from conch.errors import ConchError

REPORT = (
    "import json, os\n"
    "print(json.dumps({'sid': os.getsid(0), 'pid': os.getpid(), 'cwd': os.getcwd(),"
    " 'env': dict(os.environ), 'fds': sorted(int(f) for f in os.listdir('/proc/self/fd'))}))\n"
)


def _glibc() -> tuple[int, int]:
    name, _, version = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    assert name == "glibc", "these tests run on glibc"
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def run(argv: list[str], *, env: dict[str, str], cwd: str) -> tuple[int, str]:
    """Spawn with pipes; (wait status, stdout)."""
    r, w = os.pipe()
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        pid = libc_spawn.spawn(SpawnSpec(argv[0], argv, env, cwd, null, w, w))
    finally:
        os.close(w)
        os.close(null)
    with os.fdopen(r) as f:
        out = f.read()
    _, status = os.waitpid(pid, 0)
    return status, out


def test_available_on_this_glibc():
    # addchdir_np and addclosefrom_np are glibc 2.34+; spawning into a cgroup is 2.39+
    assert libc_spawn.available() == (_glibc() >= (2, 34))
    assert libc_spawn.into_cgroup_available() == (_glibc() >= (2, 39))


def test_the_child_gets_its_session_stdio_signals_env_and_cwd(tmp_path):
    leak = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(leak, True)  # a descriptor the server holds without close-on-exec
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as under nohup
    old_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    try:
        env = {"ONLY": "this", "WITH_EQ": "a=b", "EMPTY": "", "UTF": "é"}
        status, out = run([sys.executable, "-c", REPORT], env=env, cwd=str(tmp_path))
        # (Python ignores SIGPIPE and SIGXFSZ itself: grep reads its own signal state)
        grep = "/usr/bin/grep" if os.path.exists("/usr/bin/grep") else "/bin/grep"
        _, sig = run([grep, "-E", "^Sig(Ign|Blk)", "/proc/self/status"], env={}, cwd="/")
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR1])
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGHUP, old_hup)
        os.close(leak)
    assert status == 0, out
    seen = json.loads(out)
    assert seen["sid"] == seen["pid"]  # leads a session of its own
    assert seen["cwd"] == str(tmp_path)
    assert {k: v for k, v in seen["env"].items() if k != "LC_CTYPE"} == env
    assert seen["fds"][:3] == [0, 1, 2] and leak not in seen["fds"]
    assert len(seen["fds"]) <= 4  # its stdio, and the directory its listdir opened
    assert sig.split() == ["SigBlk:", "0000000000000000", "SigIgn:", "0000000000000000"]


@pytest.mark.parametrize(
    "case, error, code",
    [
        ("missing", FileNotFoundError, errno.ENOENT),
        ("not_executable", PermissionError, errno.EACCES),
        ("no_interpreter_line", OSError, errno.ENOEXEC),
        ("missing_cwd", FileNotFoundError, errno.ENOENT),
    ],
)
def test_a_failed_start_is_the_oserror_popen_raises(tmp_path, case, error, code):
    prog = tmp_path / "prog"
    cwd = str(tmp_path)
    if case == "not_executable":
        prog.write_text("#!/bin/sh\n")
    elif case == "no_interpreter_line":
        prog.write_text("echo hi\n")
        prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    elif case == "missing_cwd":
        prog = "/bin/true"  # type: ignore[assignment]
        cwd = str(tmp_path / "gone")
    with pytest.raises(error) as e:
        libc_spawn.spawn(SpawnSpec(str(prog), [str(prog)], {}, cwd, 0, 1, 2))
    assert e.value.errno == code


def test_no_child_is_left_after_a_failed_start(tmp_path):
    with pytest.raises(FileNotFoundError):
        libc_spawn.spawn(SpawnSpec(str(tmp_path / "nope"), ["x"], {}, "/", 0, 1, 2))
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # glibc reaped the child that could not exec


def test_an_embedded_nul_is_refused_before_spawning():
    with pytest.raises(ValueError, match="null byte"):
        libc_spawn.spawn(SpawnSpec("/bin/true", ["true", "a\0b"], {}, "/", 0, 1, 2))
    with pytest.raises(ValueError, match="null byte"):
        libc_spawn.spawn(SpawnSpec("/bin/true", ["true"], {"A": "x\0"}, "/", 0, 1, 2))


def test_popen_spawn_uses_it_and_words_failures_as_before(tmp_path):
    calls = []
    real = libc_spawn.spawn

    def recording(spec):
        calls.append(spec.path)
        return real(spec)

    libc_spawn.spawn = recording
    try:
        r, w = os.pipe()
        pid = popen.spawn(
            SpawnSpec(None, ["true"], {"PATH": "/usr/bin:/bin"}, str(tmp_path), 0, w, w)
        )
        os.close(w)
        os.close(r)
        assert os.waitpid(pid, 0)[1] == 0
        assert calls and calls[0].endswith("/true")
        with pytest.raises(ConchError) as e:
            popen.spawn(SpawnSpec(None, [str(tmp_path / "nope")], {}, "/", 0, 1, 2))
        assert e.value.code == "spawn_failed" and "program not found" in str(e.value)
    finally:
        libc_spawn.spawn = real


def test_a_terminal_becomes_the_childs_controlling_terminal():
    master, slave = os.openpty()
    tty = os.ttyname(slave)
    rdev = os.stat(tty).st_rdev  # (the node goes with the terminal)
    try:
        pid = libc_spawn.spawn(
            SpawnSpec(
                "/bin/sh",
                ["/bin/sh", "-c", "cut -d' ' -f5-8 /proc/$$/stat; tty"],
                {"PATH": "/usr/bin:/bin"},
                "/",
                slave,
                slave,
                slave,
                terminal=tty,
            )
        )
    finally:
        os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's last user is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert os.waitpid(pid, 0)[1] == 0
    pgrp, sid, tty_nr, tpgid = (int(x) for x in out.decode().split()[:4])
    # its own session and process group, the terminal its controlling one, in the foreground
    assert sid == pid and pgrp == pid and tpgid == pid
    assert tty_nr == rdev
    assert out.decode().split()[4] == tty


def test_a_cgroup_the_spawn_cannot_start_in_is_named_as_such(tmp_path):
    # a directory that is not there (on glibc 2.39+), or no way to spawn into one (older)
    with pytest.raises(ConchError) as e:
        popen.spawn(
            SpawnSpec(
                None,
                ["true"],
                {"PATH": "/usr/bin:/bin"},
                "/",
                0,
                1,
                2,
                cgroup=str(tmp_path / "no-such-cgroup"),
            )
        )
    assert e.value.code == "spawn_failed"
    assert "cannot start the job in its cgroup" in str(e.value)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # nothing was started
