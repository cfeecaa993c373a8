"""Where a node's executor may not lower its niceness (no CAP_SYS_NICE): in a worker of its own
(test_fleet.py covers the worker Ray already has: the nice, the guard that outlives it)."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fleet_cluster import CAP_SYS_NICE

pytestmark = [pytest.mark.anyio]

PR_CAPBSET_DROP = 24


UNPRIVILEGED = textwrap.dedent(
    """
    import asyncio, json, os, sys
    import fleet_cluster  # loopback and no usage reports, as the other fleet tests
    from conch import Config, Runtime

    async def main():
        rt = Runtime(Config(fleet="ray", ray_address="local", data_dir=sys.argv[1]))
        async with rt:
            (node,) = rt.backend.table.usable()
            nice = await rt.exec(command="nice")
            guard = await rt.exec(command="true")
            out = {
                "any_worker": rt.backend.any_worker,
                "job_nice": nice["output"].strip(),
                "executor_nices": sorted(
                    os.getpriority(os.PRIO_PROCESS, int(t))
                    for t in os.listdir(f"/proc/{node.pid}/task")
                ),
                "exited": guard["state"],
            }
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def _drop_sys_nice() -> None:  # (in the child, before exec: root keeps every other capability)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_SYS_NICE, 0, 0, 0) != 0:
        os._exit(97)


def test_without_cap_sys_nice_the_executor_gets_a_worker_of_its_own(tmp_path: Path) -> None:
    """As in Docker's default capabilities: the executor may not leave Ray's nice 15 in a
    worker Ray has, so the fleet starts it again in one Ray starts at the node's niceness."""
    support = Path(__file__).resolve().parents[1] / "support"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(support), *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-c", UNPRIVILEGED, str(tmp_path / "d")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=_drop_sys_nice,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["any_worker"] is False  # the first try could not renice, the second one did
    assert out["job_nice"] == str(os.nice(0))
    assert set(out["executor_nices"]) == {os.nice(0)}
    assert out["exited"] == "exited"


@pytest.mark.parametrize("started_by_a_raylet", [True, False])
def test_a_ray_worker_leaves_rays_niceness_as_it_imports_the_executor(
    started_by_a_raylet: bool,
) -> None:
    """Before the executor's heavy imports (they would run starved at nice 15 on a busy node);
    a program that imports the module for its names keeps its own niceness."""
    code = (
        "import os, sys\n"
        "before = os.getpriority(os.PRIO_PROCESS, 0)\n"
        "import conch.fleet.executor\n"
        "assert 'conch.runtime' in sys.modules\n"
        "print(before, os.getpriority(os.PRIO_PROCESS, 0))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_RAYLET_PID"}
    if started_by_a_raylet:
        env["RAY_RAYLET_PID"] = str(os.getpid())  # as Ray sets it: the worker's parent
    proc = subprocess.run(
        ["nice", "-n", "15", sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    before, after = proc.stdout.split()
    assert before == str(os.nice(0) + 15)
    assert after == (str(os.nice(0)) if started_by_a_raylet else before)
