"""A setuid or setgid file already in the workspace, on both Linux backends (``bwrap``,
``landlock``, ``landlock-nocgroup``: tests/support/sandbox_backends.py), as root here.

No sandboxed job makes a setuid or setgid file (test_no_setuid.py), but one already there is
another matter: the kernel clears the bits when a file is written with ``write``, not when it
is written through a shared mapping (``mmap``), so a workspace-write job could put its own code
in a setuid-root program and keep the bit, for the next person who runs it. Conch knows the
workspace's setuid and setgid files from its change tracker's index, and gives such a workspace
no workspace-write job (``sandbox_unavailable``, naming them) until the bits are gone;
read-only jobs still run. Where change tracking is off nothing is known (docs/containment.md).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_backends import BACKENDS, backend_settings

import conch
from conch.errors import ConchError

pytestmark = [pytest.mark.anyio, pytest.mark.needs("bwrap")]
PY = os.path.realpath(sys.executable)

#: what the job would do to a setuid program it can write: its own code, through a mapping
_MMAP_WRITE = r"""
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 4)
m[:4] = b"#!/b"
m.flush()
print("rewrote", oct(os.stat(sys.argv[1]).st_mode))
"""


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    if os.geteuid() != 0:
        pytest.skip("needs root: a setuid-root file is made in the workspace")
    return request.param


@pytest.fixture
def base() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="conch-suid-", dir="/var/tmp")
    os.chmod(d, 0o755)
    os.makedirs(os.path.join(d, "ws", "bin"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def cfg(base: str, backend: str, **more: object) -> conch.Config:
    return conch.Config(
        result_detail="full",
        data_dir=os.path.join(base, "data"),
        default_cwd=os.path.join(base, "ws"),
        **backend_settings(backend),  # type: ignore[arg-type]
        **more,  # type: ignore[arg-type]
    )


def plant(base: str, mode: int) -> str:
    path = os.path.join(base, "ws", "bin", "tool")
    shutil.copyfile("/bin/true", path)
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize("mode", [0o4755, 0o2755], ids=["setuid", "setgid"])
async def test_a_workspace_holding_a_setuid_file_gets_no_workspace_write_job(
    base: str, backend: str, mode: int
):
    tool = plant(base, mode)
    before = Path(tool).read_bytes()
    async with conch.Runtime(cfg(base, backend)) as rt:
        with pytest.raises(ConchError) as refused:
            await rt.exec(argv=[PY, "-c", _MMAP_WRITE, tool], sandbox="workspace-write")
        assert refused.value.code == "sandbox_unavailable"
        assert "bin/tool" in refused.value.message and "chmod u-s,g-s" in refused.value.message
        # a persistent shell is refused the same way
        with pytest.raises(ConchError) as shell_refused:
            await rt.shell_open(sandbox="workspace-write")
        assert shell_refused.value.code == "sandbox_unavailable"
        # read-only jobs run, and cannot write the file either way
        r = await rt.exec(argv=[PY, "-c", _MMAP_WRITE, tool], sandbox="read-only")
        assert r["state"] == "exited" and r["exit_code"] != 0, r
        assert Path(tool).read_bytes() == before
        assert os.stat(tool).st_mode & 0o7777 == mode
        # the bits gone, the tracker sees it (inotify), and workspace-write jobs run again
        os.chmod(tool, 0o755)
        deadline = time.monotonic() + 10
        while True:
            try:
                r = await rt.exec(argv=["true"], sandbox="workspace-write")
                break
            except ConchError as e:
                assert e.code == "sandbox_unavailable" and time.monotonic() < deadline, e
                time.sleep(0.05)
        assert r["state"] == "exited" and r["exit_code"] == 0, r


async def test_a_setuid_file_that_appears_later_is_seen_by_the_next_job(base: str, backend: str):
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(argv=["true"], sandbox="workspace-write")
        assert r["exit_code"] == 0, r
        plant(base, 0o4755)  # (by a person, or an unsandboxed job)
        deadline = time.monotonic() + 10
        while True:
            try:
                await rt.exec(argv=["true"], sandbox="workspace-write")
            except ConchError as e:
                assert e.code == "sandbox_unavailable", e
                break
            assert time.monotonic() < deadline, "a setuid file in the workspace went unseen"
            time.sleep(0.05)


async def test_a_setgid_directory_is_no_reason_to_refuse(base: str, backend: str):
    os.chmod(os.path.join(base, "ws", "bin"), 0o2775)  # (shared group directories are common)
    async with conch.Runtime(cfg(base, backend)) as rt:
        r = await rt.exec(argv=["true"], sandbox="workspace-write")
        assert r["state"] == "exited" and r["exit_code"] == 0, r
