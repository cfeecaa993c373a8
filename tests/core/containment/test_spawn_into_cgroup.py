"""Jobs spawned straight into their cgroup (docs/spec.md §9a), where glibc can: ``posix_spawn`` with
``posix_spawnattr_setcgroup_np`` (glibc 2.39+) is ``clone3(CLONE_INTO_CGROUP)``, so a pipe job
is inside its cgroup v2 directory from its first instruction, with no ``sh`` entering it first.

This host runs glibc 2.36 (a sh enters the cgroup); tests/support/newer_glibc.py runs the
same Python on Debian 13's glibc 2.41 to exercise the other path. Both run the jobs of
placed_jobs.py at the cgroup level of this hybrid host and read what each job saw of itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from newer_glibc import python_on_newer_glibc

from conch.core.containment.landlock.rules import gate_script

SCRIPT = Path(__file__).with_name("placed_jobs.py")
REPO = Path(__file__).resolve().parents[3]


def run_jobs(python: list[str], tmp_path: Path, *flags: str) -> dict[str, Any]:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run(
        [*python, str(SCRIPT), str(tmp_path / "data"), str(ws), *flags],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def cgroup_lines(job: dict[str, Any]) -> list[str]:
    return [ln for ln in job["output"].splitlines() if ln.startswith("0::")]


def assert_inside_with_its_child(job: dict[str, Any]) -> None:
    """The job and the child it forked at once are both in the job's own v2 cgroup, and the
    job started with default signals and an empty mask."""
    assert job["state"] == "exited" and job["exit_code"] == 0, job
    lines = cgroup_lines(job)
    assert len(lines) == 2 and lines[0] == lines[1], job["output"]
    assert lines[0].endswith("/" + job["job_id"]), job["output"]
    assert "SigBlk:\t0000000000000000" in job["output"]
    assert "SigIgn:\t0000000000000000" in job["output"]


@pytest.mark.needs("bwrap")
def test_on_glibc_2_39_and_later_a_pipe_job_is_spawned_into_its_cgroup(tmp_path):
    out = run_jobs(python_on_newer_glibc(), tmp_path)
    assert out["glibc"].startswith("glibc 2.4"), out["glibc"]
    assert out["containment"] == "cgroup"
    assert out["placement"] == "clone3"  # the start-up probe found the kernel does it
    assert out["warm_sh"] is False  # nothing left for a warm sh to save

    # argv: exactly the program, started in the job's cgroup, no sh in front
    argv = out["argv"]
    assert_inside_with_its_child(argv)
    assert len(argv["spawns"]) == 1
    spawn = argv["spawns"][0]
    assert spawn["argv"][:2] == ["sh", "-c"] and len(spawn["argv"]) == 3
    assert spawn["cgroup"].endswith("/" + argv["job_id"])

    # a command through the warm bash, and one that cannot use it (its own env): each job's
    # bash was spawned into a cgroup of its own, and so was the next warm bash
    for key in ("command", "cold_command"):
        job = out[key]
        assert_inside_with_its_child(job)
        assert job["spawns"], key
        for s in job["spawns"]:
            assert s["argv"][0].endswith("bash") and s["cgroup"], (key, s)
    assert not any(s["argv"][-1].startswith("sleep 30") for s in out["command"]["spawns"])
    assert any(
        s["cgroup"].endswith(out["cold_command"]["job_id"]) for s in out["cold_command"]["spawns"]
    )

    # a limit this host applies through a v1 controller: that cgroup cannot be given to
    # clone3, so the sh enters both, as on older glibc
    mem = out["memory_max"]
    assert mem["state"] == "exited", mem
    assert [s["cgroup"] for s in mem["spawns"]] == [None]
    assert mem["spawns"][0]["argv"][:2] == ["/bin/sh", "-c"]
    assert any(
        ln.endswith("/" + mem["job_id"]) and ":memory:" in ln for ln in mem["output"].splitlines()
    )
    assert cgroup_lines(mem)[0].endswith("/" + mem["job_id"])

    # on a terminal: the PTY job, and the shell (spawned into the shell's own cgroup, where
    # its commands and their children run)
    pty = out["pty"]
    assert_inside_with_its_child(pty)
    assert [s["cgroup"] for s in pty["spawns"]] == [pty["spawns"][0]["cgroup"]]
    assert pty["spawns"][0]["cgroup"].endswith("/" + pty["job_id"])
    assert pty["spawns"][0]["argv"][:2] == ["sh", "-c"]
    sid = out["shell_open"]["shell_id"]
    (spawn,) = out["shell_open"]["spawns"]
    assert spawn["argv"][0].endswith("bash") and spawn["cgroup"].endswith("/" + sid)
    shell = out["shell"]
    assert shell["state"] == "exited" and shell["exit_code"] == 0, shell
    assert cgroup_lines(shell) == [cgroup_lines(shell)[0]] * 2
    assert cgroup_lines(shell)[0].endswith("/" + sid)

    # sandboxed: spawned into its cgroup too; the sh in front only sets the signals the bwrap
    # monitor ignores (it names no cgroup.procs file to enter), and the program inside the
    # sandbox is in the job's cgroup
    box = out["sandboxed"]
    assert box["state"] == "exited" and box["exit_code"] == 0, box
    assert cgroup_lines(box) and cgroup_lines(box)[0].endswith("/" + box["job_id"])
    (spawn,) = box["spawns"]
    assert spawn["cgroup"].endswith("/" + box["job_id"])
    assert spawn["argv"][:2] == ["/bin/sh", "-c"] and "ignore" in spawn["argv"]
    assert not any(a.endswith("cgroup.procs") for a in spawn["argv"])

    # what a job leaves running is found through its cgroup
    assert out["lingering"]["lingering_pids"] == [int(out["lingering"]["output"])]

    # landlock: the fork server clones a job into its v2 cgroup here too, a terminal job and
    # a shell too: glibc's spawn into a cgroup needs clone3, which the job's filter (loaded
    # by the restricted thread before it spawns) refuses
    for key in ("ll_argv", "ll_pty"):
        assert_inside_with_its_child(out[key])
        assert out[key]["spawns"] == [], out[key]
    assert out["ll_shell_open"]["spawns"] == []
    assert cgroup_lines(out["ll_shell"])[0].endswith("/" + out["ll_shell_open"]["shell_id"])
    assert_landlock_memory_job(out["ll_memory"])


def assert_landlock_memory_job(mem: dict[str, Any]) -> None:
    """A landlock job with a v1 limit directory: the restricted thread spawns the gate sh
    outside any cgroup, with a cgroup.procs descriptor for each directory to write."""
    assert mem["state"] == "exited" and mem["exit_code"] == 0, mem
    (spawn,) = mem["spawns"]
    assert spawn["landlock"] and spawn["cgroup"] is None, spawn
    assert spawn["argv"][2] == gate_script(len(re.findall(r"echo 0 >&", spawn["argv"][2])))
    assert "echo 0 >&4" in spawn["argv"][2] and "echo 0 >&5" in spawn["argv"][2], spawn
    assert not any(a.endswith("cgroup.procs") for a in spawn["argv"])  # (descriptors only)
    assert cgroup_lines(mem)[0].endswith("/" + mem["job_id"])
    assert any(
        ln.endswith("/" + mem["job_id"]) and ":memory:" in ln for ln in mem["output"].splitlines()
    )


@pytest.mark.needs("bwrap")
def test_where_glibc_cannot_place_the_child_a_sh_enters_the_cgroup(tmp_path):
    # this host's glibc 2.36 cannot; on a newer host the script pretends it could not
    out = run_jobs([sys.executable], tmp_path, "--as-before-glibc-2.39")
    assert out["placement"] == "sh"
    assert out["warm_sh"] is True
    for key in ("argv", "command", "cold_command"):
        assert_inside_with_its_child(out[key])
        assert all(s["cgroup"] is None for s in out[key]["spawns"]), key
    assert_inside_with_its_child(out["pty"])
    assert [s["cgroup"] for s in out["pty"]["spawns"]] == [None]
    assert [s["cgroup"] for s in out["shell_open"]["spawns"]] == [None]
    assert cgroup_lines(out["shell"])[0].endswith("/" + out["shell_open"]["shell_id"])
    box = out["sandboxed"]
    assert cgroup_lines(box)[0].endswith("/" + box["job_id"]), box
    (spawn,) = box["spawns"]
    assert spawn["cgroup"] is None
    assert any(a.endswith("cgroup.procs") for a in spawn["argv"])  # the sh enters it
    assert out["lingering"]["lingering_pids"] == [int(out["lingering"]["output"])]
    # landlock: the fork server clones a job into its v2 cgroup (no posix_spawn: a move of the
    # spawned child would wait for an RCU grace period after an idle spell); one with a v1
    # limit directory is the restricted thread's, its gate sh entering through descriptors
    for key in ("ll_argv", "ll_pty"):
        assert_inside_with_its_child(out[key])
        assert out[key]["spawns"] == [], out[key]
    assert out["ll_shell_open"]["spawns"] == []
    assert cgroup_lines(out["ll_shell"])[0].endswith("/" + out["ll_shell_open"]["shell_id"])
    assert_landlock_memory_job(out["ll_memory"])
