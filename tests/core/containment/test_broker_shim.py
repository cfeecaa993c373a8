"""The bwrap broker's shim (landlock/shim.py) builds no filter: Conch sends it both
first on the job's channel (``fence.shim_filters``). It runs here outside any sandbox, as the
standalone script it is, against a channel this test serves."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from conch.core.containment import fence
from conch.core.containment.landlock import shim

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp: Linux")


def _shim(tmp_path, frame: bytes, *, whole: bool = True) -> tuple[int, str, bool]:
    """(exit status, stderr, whether the program ran) of the shim given ``frame`` (and
    nothing more, unless ``whole``: the channel's sending side then stays open)."""
    path = str(tmp_path / "channel")
    marker = tmp_path / "ran"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
        srv.bind(path)
        srv.listen(1)
        srv.settimeout(30)
        proc = subprocess.Popen(
            [*fence.broker_shim_argv(path), "/bin/sh", "-c", f"echo > {marker}"],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(30)
                conn.sendall(frame)
                if not whole:
                    conn.shutdown(socket.SHUT_WR)
                try:
                    _, fds, _, _ = socket.recv_fds(conn, 16, 4)
                except OSError:
                    fds = []
                for fd in fds:
                    os.close(fd)
                if fds:
                    conn.sendall(b"K")
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return proc.returncode, err.decode(), marker.exists()


def test_the_shim_loads_the_filters_conch_sends_and_runs_the_program(tmp_path):
    code, err, ran = _shim(tmp_path, fence.shim_filters())
    assert (code, ran) == (0, True), err


@pytest.mark.parametrize(
    "frame",
    [
        b"",  # the channel ends before any filter
        b"\x08\x00\x00",  # a short header
        b"\x00\x00\x00\x00\x08\x00\x00\x00" + bytes(8),  # an empty filter
        b"\x09\x00\x00\x00\x08\x00\x00\x00" + bytes(17),  # not whole instructions
        b"\x08\x00\x00\x00\x08\x00\x00\x00" + bytes(8),  # a filter cut short
    ],
)
def test_a_missing_or_malformed_filter_ends_the_shim_before_the_program(tmp_path, frame):
    """Fail closed: anything but two whole filters ends it (125), and the program never
    runs."""
    code, err, ran = _shim(tmp_path, frame, whole=False)
    assert (code, ran) == (125, False), err
    assert "socket broker failed" in err


def test_the_script_names_its_entry_point_publicly():
    """The shim's bootstrap calls ``shim.main``: no private name crosses the boundary."""
    assert "shim.main(" in " ".join(fence.broker_shim_argv("/x"))
    assert callable(shim.main) and callable(shim.receive_filters)
