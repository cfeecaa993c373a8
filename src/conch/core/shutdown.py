"""Shutdown (docs/spec.md §2: at most 3 s whatever the jobs do), one owner per thing and in order.

The shells first (each kills its own tree and ends its command's job), then every pipe and PTY
driver in one sweep over their trees, then one sweep over the instance's tag for whatever
escaped both (a search's rg, a shell's runaway); then the files and the containment.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass

from conch.config import Config
from conch.core.datadir import DataDir, LogPool
from conch.core.jobs.driver import ProcessDriver
from conch.core.jobs.table import JobTable
from conch.core.jobs.warm import Warm
from conch.core.process import hygiene, procfs
from conch.core.shell.manager import ShellManager
from conch.core.spawn import SpawnContext

SHUTDOWN_LIMIT_S = 2.6
_SHELLS_LIMIT_S = 1.0
_DRIVERS_GRACE_S = 1.0
_KILL_S = 0.3  # a KILLed tree is gone and reaped
_END_LIMIT_S = 0.5  # a killed leader's exit status, at the most
_SWEEP_RESERVE_S = 0.3


async def within(work: Awaitable[object], deadline: float) -> None:
    """Await work until the loop's clock reaches deadline (then cancel it); never raises but
    for the caller's own cancellation."""
    limit = max(0.05, deadline - asyncio.get_running_loop().time())
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(work, limit)


@dataclass
class Owned:
    """What an engine owns, in the order it goes."""

    config: Config
    spawn: SpawnContext
    jobs: JobTable
    log_pool: LogPool
    data: DataDir
    starting: asyncio.Task[None] | None
    warm: Iterable[Warm | None]
    housekeeping: asyncio.Task[None] | None
    shells: ShellManager | None
    drivers: dict[str, ProcessDriver]


async def shut_down(o: Owned) -> None:
    """Everything ``o`` holds stopped, reaped and closed within SHUTDOWN_LIMIT_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SHUTDOWN_LIMIT_S
    if o.starting is not None and not o.starting.done():
        # a start still under way (a server answers its handshake meanwhile) ends first,
        # so nothing it starts outlives the close
        with contextlib.suppress(BaseException):
            await within(asyncio.shield(o.starting), deadline)
    for warm in o.warm:
        if warm is not None:
            await within(warm.aclose(), deadline)
    if o.housekeeping:
        o.housekeeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await o.housekeeping
    if o.shells is not None:
        await o.shells.aclose(min(_SHELLS_LIMIT_S, o.config.close_timeout_ms / 1000))
    reaper = o.spawn.reaper
    await stop_drivers(list(o.drivers.values()), o.config, reaper, deadline - _SWEEP_RESERVE_S)
    await within(sweep_instance(o.spawn.instance, reaper), deadline)
    for t in list(o.spawn.tasks):
        t.cancel()
    o.log_pool.close()
    for job in o.jobs:
        job.log.close()
    o.data.close()
    for _ in range(20):
        if not reaper.sweep(final=True):
            break
    o.drivers.clear()
    if o.spawn.containment is not None:
        await asyncio.to_thread(o.spawn.containment.close)


async def stop_drivers(
    drivers: list[ProcessDriver], config: Config, reaper: hygiene.Reaper, deadline: float
) -> None:
    """Every pipe and PTY job's tree in one sweep (TERM, grace, KILL), however many jobs
    are retained: their sessions where a process may still live, and their tags; then
    each driver records how its job ended and closes its files (all by ``deadline``)."""
    sids: set[str] = set()
    tags: set[bytes] = set()
    for d in drivers:
        sid, tag = d.begin_shutdown()
        if sid is not None:
            sids.add(sid)
        if tag:
            tags.add(tag)
    cgroups = [d.cgroup for d in drivers if d.cgroup is not None]
    key = hygiene.TAG_VAR.encode()

    def collect() -> set[int]:
        pids = procfs.scan_jobs(key, sids, tags)
        for cg in cgroups:
            pids |= cg.pids()
        return pids

    if sids or tags or cgroups:
        # the grace fits what is left, so the KILL after it is still sent in time
        left = deadline - asyncio.get_running_loop().time() - _END_LIMIT_S - _KILL_S
        grace = max(0.0, min(config.kill_grace_ms / 1000, _DRIVERS_GRACE_S, left))
        sweep = hygiene.terminate_tree(collect, map(int, sids), grace, reaper)
        await within(sweep, deadline - _END_LIMIT_S)
    if cgroups:  # whatever escaped the sweep (cgroup level)
        kills = (cg.kill_and_wait(reaper.sweep, limit_s=0.5) for cg in cgroups)
        await within(asyncio.gather(*kills, return_exceptions=True), deadline)
    limit = min(_END_LIMIT_S, max(0.05, deadline - asyncio.get_running_loop().time()))
    await asyncio.gather(*(d.end_shutdown(limit) for d in drivers), return_exceptions=True)


async def sweep_instance(instance: str, reaper: hygiene.Reaper) -> None:
    """Kill whatever carries this instance's tag and escaped its owner."""
    if not instance:
        return
    key, prefix = hygiene.TAG_VAR.encode(), f"{instance}/".encode()

    def collect() -> set[int]:
        return procfs.scan_instance(key, prefix)

    if collect():
        await hygiene.kill_tree_now(collect, [], reaper)
