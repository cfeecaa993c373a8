"""A full data dir while a job's changes are captured: said in the record (and the result),
never a silent partial record; undo restores what was kept and names what was not."""

from __future__ import annotations

import contextlib
import os

import pytest
from conftest import config, run
from small_disk import mounted as small_disk_mounted

from conch.core.engine import Engine

pytestmark = pytest.mark.anyio


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs for the data dir (needs root and mount)."""
    yield from small_disk_mounted(tmp_path / "small")


def fill(d) -> None:
    fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"x" * 4096)
    finally:
        os.close(fd)


async def test_a_full_data_dir_during_capture_is_said_and_undo_names_what_it_lacks(
    small_disk, tmp_path, ws
):
    (ws / "kept").write_text("before\n")
    cfg = config(tmp_path, ws)
    cfg = type(cfg)(**{**cfg.__dict__, "data_dir": str(small_disk / "data")})
    async with Engine(cfg) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        await run(e, "true")  # the logs and the store exist
        fill(small_disk)
        r = await run(e, "echo after > kept && head -c 300000 /dev/urandom > new.bin")
        assert r["changes"] == {"added": 1, "modified": 1}
        c = await e.changes(r["job_id"])
        why = " ".join(n["reason"] for n in c["not_covered"])
        assert "data dir is full" in why, c["not_covered"]
        os.unlink(small_disk / "filler")
        u = await e.changes(r["job_id"], undo=True)
        # what was kept before the job came back; the added file (its content never kept,
        # but its digest known) was removed
        assert (ws / "kept").read_text() == "before\n"
        assert not (ws / "new.bin").exists()
        assert u["undo_of"] == r["job_id"]
