"""The workspace's top made a repository without any ``.git``, attacked on both Linux backends
(``bwrap``, ``landlock``, ``landlock-nocgroup``: tests/support/sandbox_backends.py), as root
here.

Git takes a directory that holds ``HEAD``, ``objects`` and ``refs`` (or a ``commondir`` file in
place of the last two) as a bare repository when it finds no ``.git`` there first, and reads
its ``config``: ``core.worktree`` makes it a work tree, ``core.pager`` runs at a person's next
``git branch``/``git log`` on a terminal, ``core.fsmonitor`` at the next ``git status``. A job
that plants those at its workspace's top would run its commands outside the sandbox. ``HEAD``
takes no substitute: no job makes or writes one at the workspace's top, by any call (a file, a
symbolic link, a rename onto it), whatever the workspace is; one a person has there stays as
it is. (Deeper in the tree a job can make a repository: documented.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest
from job_programs import ATTEMPT
from sandbox_backends import BACKENDS, backend_settings

import conch

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap", "git")]
PY = os.path.realpath(sys.executable)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def base() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="conch-bare-", dir="/var/tmp")
    os.chmod(d, 0o755)
    os.makedirs(os.path.join(d, "ws", "sub"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def cfg(base: str, backend: str) -> conch.Config:
    return conch.Config(
        result_detail="full",
        data_dir=os.path.join(base, "data"),
        default_cwd=os.path.join(base, "ws"),
        **backend_settings(backend),  # type: ignore[arg-type]
    )


#: a repository's pieces in sub/evil, then every way to make the top a bare repository
_BARE = (
    ATTEMPT
    + r"""
import os, sys
proof, ws = sys.argv[1], os.getcwd()
config = ("[core]\n\tbare = false\n\tworktree = " + ws + "\n\tpager = touch " + proof
          + "-pager; cat\n\tfsmonitor = touch " + proof + "-fsmonitor; false\n")
evil = "sub/evil"
os.makedirs(evil + "/objects"); os.makedirs(evil + "/refs")
open(evil + "/HEAD", "w").write("ref: refs/heads/main\n")
open(evil + "/config", "w").write(config)
def write(path, text):
    with open(path, "w") as f:
        f.write(text)
attempt("objects", lambda: os.mkdir("objects"))
attempt("refs", lambda: os.mkdir("refs"))
attempt("config", lambda: write("config", config))
attempt("commondir", lambda: write("commondir", evil + "\n"))
attempt("head", lambda: write("HEAD", "ref: refs/heads/main\n"))
attempt("head_symlink", lambda: os.symlink("refs/heads/main", "HEAD"))
attempt("head_rename", lambda: os.rename(evil + "/HEAD", "HEAD"))
attempt("head_link", lambda: os.link(evil + "/HEAD", "HEAD"))
attempt("head_remove", lambda: os.rmdir("HEAD") if os.path.isdir("HEAD") else os.unlink("HEAD"))
"""
)


def _results(output: str) -> dict[str, str]:
    return {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in output.splitlines() if " " in ln}


def _person_runs_git(ws: str) -> None:
    """What a person runs there later: ``git status``, and ``git branch`` on a terminal (its
    pager)."""
    subprocess.run(["git", "status"], cwd=ws, capture_output=True, timeout=30)
    main, tty = os.openpty()
    try:
        subprocess.run(
            ["git", "branch", "-a"],
            cwd=ws,
            stdin=tty,
            stdout=tty,
            stderr=subprocess.DEVNULL,
            timeout=30,
            env={k: v for k, v in os.environ.items() if k not in ("PAGER", "GIT_PAGER")},
        )
    finally:
        os.close(tty)
        os.close(main)


def _git_dir(ws: str) -> str:
    r = subprocess.run(
        ["git", "rev-parse", "--absolute-git-dir"], cwd=ws, capture_output=True, text=True
    )
    return r.stdout.strip() if r.returncode == 0 else "no repository"


@pytest.mark.parametrize("layout", ["subdir_of_repo", "no_repo", "a_head_file"])
async def test_the_workspace_top_is_not_made_a_bare_repository(base, backend, layout):
    """A job that plants ``objects``, ``refs``, ``config`` and ``commondir`` at its workspace's
    top cannot give it a ``HEAD`` (a file, a symlink, a rename or a link onto it), nor write
    or remove a ``HEAD`` a person has there: git still finds no repository at the top (or
    the enclosing one), and a person's ``git status`` and ``git branch`` there afterwards run
    nothing of the job's."""
    ws = os.path.join(base, "ws")
    proof = os.path.join(base, "proof")
    if layout == "subdir_of_repo":
        subprocess.run(["git", "init", "-q", base], check=True)
    head = os.path.join(ws, "HEAD")
    if layout == "a_head_file":  # (a person's file that happens to be named HEAD)
        with open(head, "w") as f:
            f.write("notes\n")
    before = _git_dir(ws)
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(argv=[PY, "-c", _BARE, proof], sandbox="workspace-write")
    got = _results(r["output"])
    assert r["exit_code"] == 0 and "head_remove" in got, r
    for name in ("head", "head_symlink", "head_rename", "head_link", "head_remove"):
        assert got[name].startswith("blocked"), (name, got)
    assert _git_dir(ws) == before != ws
    _person_runs_git(ws)
    assert sorted(p for p in os.listdir(base) if p.startswith("proof")) == []
    if layout == "a_head_file":
        with open(head) as f:
            assert f.read() == "notes\n"
    else:  # (bwrap's placeholder went with the last job)
        assert not os.path.lexists(head), os.listdir(ws)
