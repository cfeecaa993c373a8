"""Fleet tests share one real Ray cluster per module; the usual no-process-left check applies
to everything but the cluster's own processes, and to those too once the module ends."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fleet_cluster import (
    LocalCluster,
    leftovers,
    reap_zombie_children,
    start_cluster,
    stop_cluster,
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    c = start_cluster()
    try:
        yield c
    finally:
        left = stop_cluster(c)
        assert not left, "Ray processes left after the cluster shut down:\n" + "\n".join(left)


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Overrides the suite's check: Ray's own processes may stay up between the tests of a
    module; jobs, guards and node executors may not."""
    yield
    deadline = time.monotonic() + 5.0
    left = leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = leftovers()
    # executors' orphan guards are not their executors' children: they come back to this
    # process (the suite is a subreaper) and end here as zombies for it to reap
    reap_zombie_children()
    if left:
        pytest.fail("processes left behind by this test:\n" + "\n".join(left))
