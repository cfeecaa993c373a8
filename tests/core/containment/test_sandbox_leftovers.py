"""What a sandboxed job can leave behind on the host, attacked on both Linux
backends (``bwrap``; ``landlock`` at the cgroup level: the fork server starts it on this glibc;
``landlock-nocgroup``: the server's restricted thread; tests/support/sandbox_backends.py).

Level exercised: ``cgroup`` and ``subreaper`` (this host; see conftest), the sandbox on top,
as root here (a root server's job is uid 0 without capabilities: the case that matters most).

* No setuid or setgid file, whatever call makes it: each call that takes a mode (``open``,
  ``openat``, ``creat``, ``O_TMPFILE``, ``mknod(at)``, ``mkdir(at)``, ``chmod``, ``fchmod``,
  ``fchmodat``, ``fchmodat2``; ``openat2`` is ENOSYS), the tools that copy a mode (``cp -p``,
  ``cp -a``, ``install -m 4755``, ``tar xp``), a write over a setuid file of the workspace
  (the kernel clears the bit: no ``CAP_FSETID``), a host setuid program written or linked
  into the workspace; no file capability (``security.capability``), directly or from a user
  namespace of its own. After every job the workspace is walked for a setuid/setgid file.
* No ``.git`` written or made at the workspace's top, whether the workspace is a repository's
  top, a subdirectory of one, or no repository (git's discovery would then take a ``.git``
  the job planted: ``core.fsmonitor`` runs at a person's next ``git status``); under bwrap
  the empty directory Conch puts there meanwhile is ignored by git and goes a moment after
  the last job of the runtime using it is done (not when it became a repository meanwhile,
  not while another server's job uses it); under Landlock no new entry at all is made at the
  top.
* No lease on a file (``fcntl(F_SETLEASE)``: an outside writer would wait 45 s per open).
* No user namespace (``unshare``/``clone`` with ``CLONE_NEWUSER``; ``clone3`` is ENOSYS), while
  fork, threads, ``posix_spawn`` and subprocesses (glibc falls back to ``clone``) still work.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator

import pytest
import system_tools
from job_programs import ATTEMPT
from sandbox_backends import BACKENDS, backend_settings

import conch
from conch.core.containment import gitdir

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap", "git")]
PY = os.path.realpath(sys.executable)
ROOT = os.geteuid() == 0


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def base() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="conch-left-", dir="/var/tmp")
    os.chmod(d, 0o755)  # (a shared project directory: other users reach what is in it)
    os.makedirs(os.path.join(d, "ws", "sub"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def cfg(base: str, backend: str, **settings: object) -> conch.Config:
    return conch.Config(
        result_detail="full",
        data_dir=os.path.join(base, "data"),
        default_cwd=os.path.join(base, "ws"),
        **{**backend_settings(backend), **settings},  # type: ignore[arg-type]
    )


def _results(output: str) -> dict[str, str]:
    return {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in output.splitlines() if " " in ln}


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def setid_files(top: str) -> list[str]:
    """Every file or directory below ``top`` with S_ISUID or S_ISGID (symlinks not followed)."""
    out = []
    for d, dirs, files in os.walk(top):
        for name in dirs + files:
            st = os.lstat(os.path.join(d, name))
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o6000:
                out.append(f"{os.path.join(d, name)} {oct(st.st_mode)}")
    return out


# -- setuid and setgid -----------------------------------------------------------------------

#: every call that takes a mode, with a setuid, a setgid and a plain mode (each one's own file)
_MODES = (
    ATTEMPT
    + r"""
import ctypes, os, stat, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {"x86_64": {"open": 2, "creat": 85, "mknod": 133, "mkdir": 83, "chmod": 90},
      "aarch64": {}}[os.uname().machine]
NR.update(openat2=437, fchmodat2=452)
AT_FDCWD = -100
def sc(name, *args):
    r = libc.syscall(NR[name], *args)
    if r < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    return r
d = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
W = os.O_CREAT | os.O_WRONLY
def tmpfile(name, m):
    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, m)
    # (linkat with AT_SYMLINK_FOLLOW through the descriptor's magic link: os.link calls link)
    if libc.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD, name.encode(), 0x400):
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
def how(m):  # struct open_how: flags, mode, resolve
    return ctypes.create_string_buffer(struct.pack("=QQQ", W, m, 0), 24)
calls = {
    "openat": lambda n, m: os.close(os.open(n, W, m)),
    "openat_dirfd": lambda n, m: os.close(os.open(n, W | os.O_TRUNC, m, dir_fd=d)),
    "o_tmpfile": tmpfile,
    "mknodat": lambda n, m: os.mknod(n, stat.S_IFREG | m),
    "mknodat_dirfd": lambda n, m: os.mknod(n, stat.S_IFREG | m, dir_fd=d),
    "mkdirat": lambda n, m: os.mkdir(n, m, dir_fd=d),
    "openat2": lambda n, m: os.close(sc("openat2", AT_FDCWD, n.encode(), how(m), 24)),
    "chmod_at": lambda n, m: (open(n, "w").close(), os.chmod(n, m, dir_fd=d)),
    "fchmod": lambda n, m: os.fchmod(os.open(n, W), m),
    "fchmodat2": lambda n, m: (open(n, "w").close(), sc("fchmodat2", AT_FDCWD, n.encode(), m, 0)),
}
if "open" in NR:  # (the legacy calls glibc no longer makes itself: made here directly)
    calls["open"] = lambda n, m: os.close(sc("open", n.encode(), W, m))
    calls["creat"] = lambda n, m: os.close(sc("creat", n.encode(), m))
    calls["mknod"] = lambda n, m: sc("mknod", n.encode(), stat.S_IFREG | m, 0)
    calls["mkdir"] = lambda n, m: sc("mkdir", n.encode(), m)
    calls["chmod"] = lambda n, m: (open(n, "w").close(), sc("chmod", n.encode(), m))
for name, call in calls.items():
    for tag, mode in (("suid", 0o4755), ("sgid", 0o2775), ("plain", 0o755)):
        attempt(f"{name}.{tag}", lambda: call(f"{name}-{tag}", mode))
"""
)


@pytest.mark.parametrize("level", ["workspace-write", "off"])
async def test_no_call_that_takes_a_mode_makes_a_setuid_or_setgid_file(base, backend, level):
    """Each call that creates a file, a node or a directory, or changes a mode, is refused
    (EPERM) with S_ISUID or S_ISGID in its mode and works with a plain one; ``openat2`` is
    ENOSYS (libc falls back to openat). Nothing in the workspace has either bit afterwards.
    At ``sandbox: off`` with ``network: off`` (the whole filesystem writable) too."""
    sub = os.path.join(base, "ws", "sub")
    network = "off" if level == "off" else "on"
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(
            argv=[PY, "-c", _MODES], cwd=sub, sandbox=level, network=network, timeout_ms=60000
        )
    got = _results(r["output"])
    assert r["exit_code"] == 0 and "openat.plain" in got, r
    calls = {k.split(".")[0] for k in got}
    assert len(calls) >= 10, got
    for call in calls:
        want_plain = "blocked ENOSYS" if call == "openat2" else "ok"
        assert got[f"{call}.plain"] == want_plain, (call, got)
        for tag in ("suid", "sgid"):
            want = "blocked ENOSYS" if call == "openat2" else "blocked EPERM"
            assert got[f"{call}.{tag}"] == want, (call, tag, got)
    assert setid_files(os.path.join(base, "ws")) == []


_TOOLS = r"""
cd "$1"
cp -p "$2" cp-p; cp -a "$2" cp-a
install -m 4755 /bin/true install-4755; install -m 2755 -d install-dir-2755
tar xpf "$3"
mkdir -p tools && cp --preserve=mode "$2" tools/cp-mode
ls -l
"""


async def test_copying_tools_leave_no_setuid_or_setgid_file(base, backend):
    """``cp -p``/``cp -a`` of a setuid program, ``install -m 4755``/``-m 2755 -d`` and
    ``tar xp`` of an archive holding a setuid file and a setgid directory end without the
    bits (the tools report the refused mode, or make the file without it)."""
    src = os.path.join(base, "suid-true")
    shutil.copy("/bin/true", src)
    os.chmod(src, 0o4755)
    archive = os.path.join(base, "setid.tar")
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("t-suid")
        info.mode, info.size = 0o4755, 3
        tar.addfile(info, __import__("io").BytesIO(b"#!\n"))
        info = tarfile.TarInfo("t-sgid-dir")
        info.type, info.mode = tarfile.DIRTYPE, 0o2775
        tar.addfile(info)
    sub = os.path.join(base, "ws", "sub")
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(
            argv=["sh", "-c", _TOOLS, "sh", sub, src, archive], sandbox="workspace-write"
        )
    made = set(os.listdir(sub))
    assert {"cp-p", "cp-a", "t-suid", "t-sgid-dir", "tools"} <= made, (made, r)
    assert setid_files(os.path.join(base, "ws")) == [], r["output"]
    assert os.stat(src).st_mode & 0o6000  # (the copies' source kept its bit)


_OVER = (
    ATTEMPT
    + r"""
import os, sys
host, placed = sys.argv[1:3]
attempt("write_host", lambda: open(host, "r+b").write(b"x"))
attempt("link_host", lambda: os.link(host, "hardlink"))
attempt("append_placed", lambda: open(placed, "ab").write(b"\n"))
"""
)


async def test_a_setuid_program_is_neither_written_nor_kept_setuid_by_a_job(base, backend):
    """A setuid program of the host outside the writable roots cannot be written (bwrap:
    EROFS, Landlock: EACCES) or hard-linked into the workspace (EXDEV). (A setuid file a
    person left in the workspace gets the workspace no workspace-write job at all:
    test_setuid_in_workspace.py; here ``placed`` is a new file the job appends to.)"""
    host = os.path.join(base, "host-suid")
    shutil.copy("/bin/true", host)
    os.chmod(host, 0o4755)
    placed = os.path.join(base, "ws", "sub", "placed")
    before = _read(host)
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(
            argv=[PY, "-c", _OVER, host, placed],
            cwd=os.path.join(base, "ws", "sub"),
            sandbox="workspace-write",
        )
    got = _results(r["output"])
    assert got["write_host"] in ("blocked EROFS", "blocked EACCES"), got
    assert got["link_host"] == "blocked EXDEV", got
    assert got["append_placed"] == "ok", got
    assert _read(host) == before and os.stat(host).st_mode & 0o4000
    assert setid_files(os.path.join(base, "ws")) == []


_FCAPS = (
    ATTEMPT
    + r"""
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
# VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE; CAP_SETUID permitted
blob = struct.pack("<IIIII", 0x02000001, 1 << 7, 0, 0, 0)
open("capped", "w").close()
attempt("setxattr", lambda: os.setxattr("capped", "security.capability", blob))
def in_userns():
    uid = os.getuid()
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    open("/proc/self/setgroups", "w").write("deny")
    open("/proc/self/uid_map", "w").write(f"0 {uid} 1")
    os.setxattr("capped", "security.capability", blob)
attempt("userns_setxattr", in_userns)
"""
)


async def test_no_file_capability_can_be_planted(base, backend):
    """``security.capability`` needs CAP_SETFCAP, which no sandboxed job holds, and a user
    namespace where the job would hold it cannot be made. The same write outside the sandbox
    (as root) does give the file the capability: the check below would see one."""
    if not ROOT:
        system_tools.unavailable("a root server", "needs root")
    sub = os.path.join(base, "ws", "sub")
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(argv=[PY, "-c", _FCAPS], cwd=sub, sandbox="workspace-write")
    got = _results(r["output"])
    assert got["setxattr"] == "blocked EPERM", got
    assert got["userns_setxattr"].startswith("blocked"), got
    with pytest.raises(OSError):
        os.getxattr(os.path.join(sub, "capped"), "security.capability")
    control = os.path.join(base, "control")
    open(control, "w").close()
    os.setxattr(control, "security.capability", struct.pack("<IIIII", 0x02000001, 1 << 7, 0, 0, 0))
    assert os.getxattr(control, "security.capability")


# -- the workspace's .git ----------------------------------------------------------------------

_EVIL_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch {proof}; false\n"

#: a repository made by hand in sub/evil, then every way to put a .git at the workspace's top
_GIT = (
    ATTEMPT
    + r"""
import os, sys
proof = sys.argv[1]
evil = "sub/evil"
os.makedirs(evil + "/objects"); os.makedirs(evil + "/refs")
open(evil + "/HEAD", "w").write("ref: refs/heads/main\n")
config = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch " + proof + "; false\n"
open(evil + "/config", "w").write(config)
attempt("mkdir", lambda: os.mkdir(".git/objects") if os.path.isdir(".git") else os.mkdir(".git"))
attempt("write_config", lambda: open(".git/config", "a").write(config))
attempt("write_hook", lambda: open(".git/hooks-post-checkout", "w").write("#!/bin/sh\n"))
attempt("gitfile", lambda: open(".git", "w").write("gitdir: sub/evil\n"))
attempt("symlink", lambda: os.symlink("sub/evil", ".git"))
attempt("rename", lambda: os.rename(evil, ".git"))
attempt("rmdir", lambda: os.rmdir(".git"))
attempt("rename_away", lambda: os.rename(".git", "sub/moved"))
attempt("nested", lambda: os.mkdir("sub/.git"))
"""
)


def _repo(path: str) -> None:
    subprocess.run(["git", "init", "-q", path], check=True)


def _git_status(ws: str) -> None:
    subprocess.run(["git", "status", "--short"], cwd=ws, capture_output=True, timeout=30)


@pytest.mark.parametrize("layout", ["subdir_of_repo", "no_repo", "repo_top"])
async def test_no_git_is_written_or_made_at_the_workspace_top(base, backend, layout):
    """Whatever the workspace is, a job neither writes the repository's ``.git`` nor makes one
    at the top of its workspace (a directory, a gitfile, a symlink, a rename onto it), nor
    removes or moves it: a person's ``git status`` there afterwards runs nothing of the job's.
    A ``.git`` deeper in the tree can be made (documented)."""
    ws = os.path.join(base, "ws")
    proof = os.path.join(base, "proof")
    if layout == "subdir_of_repo":
        _repo(base)
    elif layout == "repo_top":
        _repo(ws)
    config = os.path.join(ws, ".git", "config")
    before = _read(config) if layout == "repo_top" else None
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(argv=[PY, "-c", _GIT, proof], sandbox="workspace-write")
    got = _results(r["output"])
    assert r["exit_code"] == 0 and "nested" in got, r
    for name in ("mkdir", "write_config", "write_hook", "gitfile", "symlink", "rename"):
        assert got[name].startswith("blocked"), (name, got)
    for name in ("rmdir", "rename_away"):
        assert got[name].startswith("blocked"), (name, got)
    assert got["nested"] == "ok", got
    os.rmdir(os.path.join(ws, "sub", ".git"))
    _git_status(ws)
    assert not os.path.exists(proof)
    if layout == "repo_top":
        assert _read(config) == before
    else:  # (bwrap's placeholder went with the last job)
        assert not os.path.lexists(os.path.join(ws, ".git")), os.listdir(ws)


async def _running(rt: conch.Runtime, **call: object) -> str:
    r = await rt.exec(command="echo up; sleep 30", ready={"pattern": "up"}, **call)  # type: ignore[arg-type]
    assert r["state"] == "running", r
    return str(r["job_id"])


async def _stop(rt: conch.Runtime, job_id: str) -> None:
    s = await rt.signal(job_id, "kill", wait_ms=5000)
    assert s["state"] != "running", s


async def _gone(path: str) -> bool:
    """Whether ``path`` is gone within 5 s (a job's end is handled on the loop after it)."""
    for _ in range(500):
        if not os.path.lexists(path):
            return True
        await asyncio.sleep(0.01)
    return False


def _toplevel(ws: str) -> str:
    r = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=ws, capture_output=True, text=True
    )
    return r.stdout.strip() if r.returncode == 0 else f"not a repository ({r.returncode})"


async def test_bwraps_git_placeholder_is_ignored_by_git_and_goes_with_the_last_job(base):
    """Under bwrap, where the workspace has no .git, an empty directory (mode ``MARK``) stands
    there while a sandboxed job uses the workspace: git's discovery skips it (the workspace,
    a subdirectory of a repository, still belongs to that repository), and it goes a moment
    after the last job's end. A second job holding it keeps it; ``git init`` run there
    meanwhile keeps it (a repository now, not Conch's)."""
    _repo(base)
    ws = os.path.join(base, "ws")
    dotgit = os.path.join(ws, ".git")
    async with conch.Runtime(cfg(base, "bwrap")) as rt:
        first = await _running(rt, sandbox="workspace-write")
        st = os.lstat(dotgit)
        assert gitdir.is_placeholder(st) and os.listdir(dotgit) == []
        assert _toplevel(ws) == base
        second = await _running(rt, sandbox="workspace-write")
        await _stop(rt, first)
        assert os.path.isdir(dotgit)  # (the second job still uses it)
        await _stop(rt, second)
        assert await _gone(dotgit)
        # a read-only job binds nothing writable: it makes none
        await rt.exec(command="true", sandbox="read-only")
        assert not os.path.lexists(dotgit)
        # a git init while a job runs: the placeholder becomes a repository, which stays
        job = await _running(rt, sandbox="workspace-write")
        subprocess.run(["git", "init", "-q", ws], check=True)
        await _stop(rt, job)
        assert _toplevel(ws) == ws
    assert os.path.isdir(os.path.join(dotgit, "objects"))


async def test_a_git_placeholder_another_server_uses_stays_until_its_job_is_done(base):
    """Two servers share a workspace: the placeholder the first one made stays while the
    second one's job runs (its shared lock), which still cannot write into it; it goes once
    neither uses it. One left behind by a server that died goes after the next one's job."""
    ws = os.path.join(base, "ws")
    dotgit = os.path.join(ws, ".git")
    a_cfg = cfg(base, "bwrap")
    b_cfg = conch.Config(
        result_detail="full",
        data_dir=os.path.join(base, "data-b"),
        default_cwd=ws,
        sandbox_backend="bwrap",
    )
    async with conch.Runtime(a_cfg) as a, conch.Runtime(b_cfg) as b:
        ja = await _running(a, sandbox="workspace-write")
        jb = await _running(b, sandbox="workspace-write")
        await _stop(a, ja)
        assert gitdir.is_placeholder(os.lstat(dotgit))
        r = await b.exec(command="mkdir .git/objects", sandbox="workspace-write")
        assert r["exit_code"] != 0 and "Read-only" in r["output"], r
        await _stop(b, jb)
        assert await _gone(dotgit)
    os.mkdir(dotgit, gitdir.MARK)  # (as a server that died would leave it)
    os.chmod(dotgit, gitdir.MARK)
    async with conch.Runtime(b_cfg) as b:
        await b.exec(command="true", sandbox="workspace-write")
        assert await _gone(dotgit)


async def test_a_landlock_job_makes_no_entry_at_the_workspace_top(base):
    """Landlock never grants the workspace directory itself (its .git is a hole whether or
    not it exists): a job works inside the existing entries, a new top-level entry is
    EACCES (the cost docs/containment.md states), and nothing is put in the workspace."""
    ws = os.path.join(base, "ws")
    async with conch.Runtime(cfg(base, "landlock")) as rt:
        r = await rt.exec(
            command="echo x > sub/f && echo inside; echo y > top; mkdir newdir; ls -A",
            sandbox="workspace-write",
        )
    assert r["output"].splitlines()[0] == "inside", r
    assert "Permission denied" in r["output"]
    assert sorted(os.listdir(ws)) == ["sub"]


# -- leases ------------------------------------------------------------------------------------

_LEASE = (
    ATTEMPT
    + r"""
import fcntl, os, sys, time
host = sys.argv[1]
mine = os.path.join(os.environ.get("TMPDIR", "/tmp"), "own")
F_SETLEASE = 1024
def lease(path, flags, kind):
    fcntl.fcntl(os.open(path, flags), F_SETLEASE, kind)
attempt("read_lease_host", lambda: lease(host, os.O_RDONLY, fcntl.F_RDLCK))
attempt("write_lease_own", lambda: lease(mine, os.O_RDWR | os.O_CREAT, fcntl.F_WRLCK))
attempt("flock_host", lambda: fcntl.flock(os.open(host, os.O_RDONLY), fcntl.LOCK_SH))
print("held", flush=True)
time.sleep(30)
"""
)


@pytest.mark.parametrize(("sandbox", "network"), [("read-only", "on"), ("workspace-write", "off")])
async def test_no_lease_is_taken_so_no_outside_writer_waits(base, backend, sandbox, network):
    """``fcntl(F_SETLEASE)`` is EPERM (a read lease through a read-only descriptor on a host
    file the job's uid owns would make every outside opener for writing wait
    ``lease-break-time``, 45 s by default); an outside write while the job runs goes through
    at once. (``flock`` on a readable file stays possible: docs/containment.md.)"""
    host = os.path.join(base, "host-config")
    with open(host, "w") as f:
        f.write("setting=1\n")
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(
            argv=[PY, "-c", _LEASE, host],
            sandbox=sandbox,
            network=network,
            ready={"pattern": "held"},
        )
        got = _results(r["output"])
        t = time.monotonic()
        p = subprocess.run(["timeout", "10", "sh", "-c", f"echo setting=2 > {host}"], check=False)
        waited = time.monotonic() - t
        await rt.signal(r["job_id"], "kill", wait_ms=5000)
    assert got["read_lease_host"] == "blocked EPERM", (got, r)
    assert got["write_lease_own"] == "blocked EPERM", got
    assert got["flock_host"] == "ok", got
    assert p.returncode == 0 and waited < 5, waited


# -- user namespaces ---------------------------------------------------------------------------

_USERNS = (
    ATTEMPT
    + r"""
import ctypes, errno, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {"x86_64": {"clone": 56}, "aarch64": {"clone": 220}}[os.uname().machine]
def ok(r):
    if r < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    return r
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
attempt("unshare_user", lambda: ok(libc.unshare(CLONE_NEWUSER)))
def clone_user():
    pid = ok(libc.syscall(NR["clone"], CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0))
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
attempt("clone_user", clone_user)
attempt("clone3", lambda: ok(libc.syscall(435, 0, 0)))
def tool():
    if subprocess.run(["unshare", "--user", "true"], stderr=subprocess.DEVNULL).returncode:
        raise OSError(errno.EPERM, "unshare failed")
attempt("unshare_tool", tool)
def forked():
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    if os.waitpid(pid, 0)[1] >> 8 != 3:
        raise OSError(errno.EIO, "fork")
attempt("fork", forked)
attempt("posix_spawn", lambda: os.waitpid(os.posix_spawn("/bin/true", ["true"], os.environ), 0))
def thread():
    seen = []
    t = threading.Thread(target=lambda: seen.append(1)); t.start(); t.join()
    if not seen:
        raise OSError(errno.EIO, "thread")
attempt("thread", thread)
def shell():
    line = "echo a | cat; (true &); wait; echo b"
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True)
    if out.stdout.split() != ["a", "b"]:
        raise OSError(errno.EIO, out.stdout)
attempt("subprocess", shell)
"""
)


@pytest.mark.parametrize(("sandbox", "network"), [("read-only", "on"), ("workspace-write", "off")])
async def test_no_user_namespace_while_forks_threads_and_spawns_work(
    base, backend, sandbox, network
):
    """``unshare`` and ``clone`` with CLONE_NEWUSER are EPERM, ``clone3`` ENOSYS (its flags are
    in a struct), so no job gets the capabilities of a user namespace of its own (file
    capabilities, mounts, the kernel's namespaced attack surface); glibc 2.36 falls back to
    ``clone`` for ``fork``, ``posix_spawn``, threads and a shell's pipelines."""
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(argv=[PY, "-c", _USERNS], sandbox=sandbox, network=network)
    got = _results(r["output"])
    assert r["exit_code"] == 0 and "subprocess" in got, r
    assert got["unshare_user"] == "blocked EPERM", got
    assert got["clone_user"] == "blocked EPERM", got
    assert got["clone3"] == "blocked ENOSYS", got
    assert got["unshare_tool"] == "blocked EPERM", got
    for name in ("fork", "posix_spawn", "thread", "subprocess"):
        assert got[name] == "ok", (name, got)
