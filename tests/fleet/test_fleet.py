"""The fleet on a real 3-node Ray cluster (all on loopback), through the Python API and through
MCP over stdio (`conch serve --fleet ray --ray-address ...`). One cluster for the module."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from typing import Any

import anyio
import psutil
import pytest
from fleet_cluster import (
    LocalCluster,
    descendants,
    leftovers,
    may_renice,
    non_loopback_sockets,
    thread_nices,
)
from mcp import Client, StdioServerParameters

from conch import ConchError, Config, Runtime
from conch.fleet import FleetBackend
from conch.fleet.channel import pack, unpack
from conch.tools.context import ToolContext

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


def fleet(cluster: LocalCluster, tmp_path: Any, **settings: Any) -> Runtime:
    cfg = Config(
        fleet="ray",
        ray_address=cluster.address,
        data_dir=str(tmp_path / "data"),
        **settings,
    )
    return Runtime(cfg)


def backend(rt: Runtime) -> FleetBackend:
    assert isinstance(rt.backend, FleetBackend)
    return rt.backend


def by_label(info: dict[str, Any], key: str, value: str) -> str:
    (node,) = [n["node"] for n in info["nodes"] if n["labels"].get(key) == value]
    return node


async def test_each_node_runs_its_own_jobs_and_calls_follow_the_id(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    async with fleet(cluster, tmp_path) as rt:
        info = await rt.info()
        assert len(info["nodes"]) == 3
        for n in info["nodes"]:
            r = await rt.exec(command="echo $CONCH_NODE_ID", node=n["node"])
            assert r["node"] == n["node"]
            assert r["output"].strip() == n["node"]  # the job ran on that node's executor
            assert r["job_id"].endswith("." + n["tag"])
            # not at the nice 15 Ray gives its workers: the user's work, run as a local job
            niceness = await rt.exec(command="nice", node=n["node"])
            assert niceness["output"].strip() == str(os.nice(0))
            ray_env = await rt.exec(command="echo ${RAY_JOB_ID:-none} ${RAY_RAYLET_PID:-none}")
            assert ray_env["output"].split() == ["none", "none"]  # the worker's, not the job's
            mask = await rt.exec(command="grep SigBlk /proc/self/status", node=n["node"])
            assert mask["output"].split() == ["SigBlk:", "0" * 16]  # Ray's thread mask is not
        zone_b = by_label(info, "zone", "b")
        # placement by label (key=value, or just a value), then every call by the id alone
        cat = await rt.exec(command="cat", node="zone=b", yield_ms=0, stdin_open=True)
        assert cat["node"] == zone_b and cat["state"] == "running"
        wrote = await rt.write(job_id=cat["job_id"], text="over the fleet\n")
        seen = wrote["output"]
        if "over the fleet" not in seen:
            later = await rt.read(job_id=cat["job_id"], until={"pattern": "fleet"}, wait_ms=5000)
            seen += later["output"]
        assert "over the fleet" in seen and wrote["node"] == zone_b
        stopped = await rt.signal(job_id=cat["job_id"], signal="terminate")
        assert stopped["state"] != "running" and stopped["node"] == zone_b
        again = await rt.read(job_id=cat["job_id"], cursor=0)
        assert "over the fleet" in again["output"]  # the log stays on its node, paged by cursor
        marker = tmp_path / "marker.txt"
        marker.write_text("needle in the fleet\n")
        found = await rt.search(pattern="needle", path=str(tmp_path), node="zone=a")
        assert found["node"] == by_label(info, "zone", "a")
        assert [m["path"].endswith("marker.txt") for m in found["matches"]] == [True]
        head = await rt.exec(command="true", node="head")
        assert head["node"] == by_label(info, "role", "head")
        with pytest.raises(ConchError) as e:
            await rt.exec(command="true", node="zone=nowhere")
        assert e.value.code == "invalid_argument"


async def test_a_read_of_several_jobs_goes_to_their_node(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    async with fleet(cluster, tmp_path) as rt:
        info = await rt.info()
        one, other = info["nodes"][0]["node"], info["nodes"][1]["node"]
        slow = await rt.exec(command="sleep 30", node=one, yield_ms=0)
        fast = await rt.exec(command="sleep 0.3; echo done", node=one, yield_ms=0)
        r = await rt.read(job_ids=[slow["job_id"], fast["job_id"]], until="exit", wait_ms=20000)
        assert r["job_id"] == fast["job_id"] and r["node"] == one and r["output"] == "done\n"
        elsewhere = await rt.exec(command="sleep 30", node=other, yield_ms=0)
        with pytest.raises(ConchError) as e:
            await rt.read(job_ids=[slow["job_id"], elsewhere["job_id"]], wait_ms=100)
        assert e.value.code == "invalid_argument" and "another node" in e.value.message
        for job in (slow, elsewhere):
            await rt.signal(job_id=job["job_id"], signal="kill")


async def test_conch_runtime_with_fleet_ray_is_the_fleet(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    import conch

    cfg = Config(fleet="ray", ray_address=cluster.address, data_dir=str(tmp_path / "data"))
    async with conch.Runtime(cfg) as rt:
        assert isinstance(rt, conch.Runtime) and isinstance(rt.backend, FleetBackend)
        names = {t["name"]: t for t in rt.tools()}
        assert "node" in names["exec"]["inputSchema"]["properties"]
        r = await rt.call_tool("exec", {"command": "echo $CONCH_NODE_ID", "node": "zone=a"})
        assert r["output"].strip() == r["node"]
        again = await rt.read(job_id=r["job_id"], cursor=0)
        assert again["output"] == r["output"]


async def test_a_seed_profile_is_routed_by_its_own_ids(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    async with fleet(cluster, tmp_path, profiles=["bash-mcp"]) as rt:
        started = await rt.call_tool(
            "bash.exec", {"command": "sleep 0.5; echo $CONCH_NODE_ID", "timeout_ms": 60000}
        )
        assert started.get("success") is not False, started
        job_id = started["job_id"]
        tag = job_id.rpartition(".")[2]
        node = next(n for n in backend(rt).table.nodes.values() if n.tag == tag)
        if "next_params" in started:
            assert started["next_params"]["job_id"] == job_id  # nested ids carry the node too
        done: dict[str, Any] = {}
        for _ in range(20):
            done = await rt.call_tool("bash.job_get", {"job_id": job_id, "wait_ms": 1000})
            if node.node_id in json.dumps(done):
                break
        assert node.node_id in json.dumps(done)  # the job ran on the node its id names
        listed = await rt.call_tool("bash.jobs", {})
        assert job_id in {j["job_id"] for j in listed["jobs"]}


async def test_list_and_info_cover_every_node(cluster: LocalCluster, tmp_path: Any) -> None:
    async with fleet(cluster, tmp_path) as rt:
        info = await rt.info()
        assert info["fleet"] == "ray"
        assert all(n["alive"] for n in info["nodes"])
        assert {n["labels"].get("zone") for n in info["nodes"]} == {"a", "b", None}
        started = {}
        for n in info["nodes"]:
            r = await rt.exec(command="sleep 30", node=n["node"], yield_ms=0)
            started[r["job_id"]] = n["node"]
        sh = await rt.shell_open(node="zone=a")
        assert sh["node"] == by_label(info, "zone", "a")
        in_shell = await rt.exec(shell_id=sh["shell_id"], command="echo $CONCH_NODE_ID")
        assert in_shell["output"].strip() == sh["node"]
        listed = await rt.list(state="running")
        jobs = {j["job_id"]: j["node"] for j in listed["jobs"]}
        assert started.items() <= jobs.items()
        assert [s["node"] for s in listed["shells"] if s["shell_id"] == sh["shell_id"]] == [
            sh["node"]
        ]
        counts = (await rt.info())["nodes"]
        assert all(n["running_jobs"] >= 1 for n in counts)
        closed = await rt.shell_close(shell_id=sh["shell_id"])
        assert closed["state"] == "closed"


async def test_work_without_a_node_goes_to_the_least_loaded_node(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    async with fleet(cluster, tmp_path) as rt:
        first = [await rt.exec(command="sleep 30", yield_ms=0) for _ in range(3)]
        assert len({r["node"] for r in first}) == 3  # one each: the idle nodes first
        busy = first[0]["node"]
        await rt.exec(command="sleep 30", node=busy, yield_ms=0)
        more = [await rt.exec(command="sleep 30", yield_ms=0) for _ in range(2)]
        assert busy not in {r["node"] for r in more}
        placed = Counter(j["node"] for j in (await rt.list(state="running"))["jobs"])
        assert sorted(placed.values()) == [2, 2, 2]


async def test_a_node_that_does_not_answer_is_node_unreachable(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    async with fleet(cluster, tmp_path, fleet_timeout_ms=300, close_timeout_ms=100) as rt:
        info = await rt.info()
        node = next(n for n in info["nodes"] if n["labels"].get("zone") == "a")
        job = await rt.exec(command="sleep 30", node=node["node"], yield_ms=0)
        os.kill(node["executor_pid"], signal.SIGSTOP)
        try:
            with pytest.raises(ConchError) as e:
                await rt.read(job_id=job["job_id"])
            assert e.value.code == "node_unreachable" and e.value.retryable
        finally:
            os.kill(node["executor_pid"], signal.SIGCONT)
        back = await rt.read(job_id=job["job_id"])  # nothing was lost: the node answers again
        assert back["state"] == "running"


@pytest.mark.parametrize("host_timed_out", [False, True])
async def test_a_cancelled_call_stops_the_job_it_started_on_its_node(
    cluster: LocalCluster, tmp_path: Any, host_timed_out: bool
) -> None:
    """As locally (an MCP cancellation): the job goes, unless the host gave up for its own
    timeout (then it runs on, and a later read finds it)."""

    async def host_gave_up() -> bool:
        return host_timed_out

    async with fleet(cluster, tmp_path) as rt:
        args = {"command": "sleep 30; echo survived", "yield_ms": 20000, "node": "zone=a"}
        call = asyncio.ensure_future(
            rt.call_tool_full("exec", args, ToolContext(host_gave_up=host_gave_up))
        )
        with anyio.fail_after(30):
            while not (running := (await rt.list(state="running"))["jobs"]):
                await anyio.sleep(0.1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        job_id = running[0]["job_id"]
        r = await rt.read(job_id=job_id, until="exit", wait_ms=3000)
        if host_timed_out:
            assert r["state"] == "running"
            await rt.signal(job_id=job_id, signal="kill")
        else:
            assert r["state"] == "cancelled" and "survived" not in r["output"]


async def test_shutdown_stops_every_executor_and_every_job(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    rt = fleet(cluster, tmp_path, result_detail="full")  # full results carry the leader's pid
    await rt.start()
    info = await rt.info()
    pids = []
    for n in info["nodes"]:
        r = await rt.exec(command="sleep 60 & sleep 60; wait", node=n["node"], yield_ms=200)
        pids.append(r["pid"])
    await rt.shell_open(node="zone=b")
    executors = [n["executor_pid"] for n in info["nodes"]]
    assert all(psutil.pid_exists(p) for p in pids + executors)
    await rt.aclose()
    # (a killed executor exits with its Ray worker's threads: under the whole suite's load one
    # was still exiting, its cmdline already empty, 10 s after the close)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (leftovers() or any(map(_running, pids + executors))):
        time.sleep(0.1)
    assert not leftovers()
    assert not [p for p in pids + executors if _running(p)]
    with pytest.raises(ConchError) as e:
        await rt.exec(command="true")
    assert e.value.code == "closed"


async def test_an_executor_in_a_worker_of_rays_runs_at_the_nodes_niceness_and_its_guard_outlives_it(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    """The kind of executor a new node gets first (a worker Ray has: Ray's nice 15, and Ray
    SIGKILLs the worker's direct children when it ends)."""
    import ray

    if not may_renice():
        pytest.fail("wants CAP_SYS_NICE (the suite runs as root); test_fleet_worker: without")
    rt = Runtime(Config(fleet="ray", ray_address=cluster.address, data_dir=str(tmp_path / "d")))
    async with rt:
        fleet = backend(rt)
        assert fleet.any_worker  # no executor had to get a worker of its own
        node = next(n for n in fleet.table.usable() if n.labels.get("zone") == "a")
        actor = fleet.new_executor(
            node, any_worker=True
        )  # one more, of that kind, beside the node's own
        try:
            started = await actor.start.remote(True)
            assert started["ready"] and started["nice"] == os.nice(0)
            pid = started["pid"]
            assert thread_nices(pid) == {os.nice(0)}  # every thread, not Ray's 15
            request = ("exec", {"command": "nice; sleep 60 & sleep 60; wait", "yield_ms": 300})
            batch = pack(([(1, (*request, None, False, False))], [], 5.0))
            ((_, (result, is_error, _, _)),), _ = unpack(await actor.call.remote(batch))
            assert not is_error and result["state"] == "running"
            assert result["output"].split()[0] == str(os.nice(0))
            executor = psutil.Process(pid)
            children = {p.pid for p in executor.children()}
            (guard,) = [
                p
                for p in psutil.process_iter(["cmdline"])
                if (p.info["cmdline"] or [])[-3:] == ["-m", "conch.fleet.guard", str(pid)]
            ]
            assert guard.pid not in children  # not the worker's child: Ray would kill it
            jobs = [p.pid for p in executor.children(recursive=True) if p.pid != guard.pid]
            assert len(jobs) >= 3  # the job's shell and its two sleeps (and warm processes)
        finally:
            # Ray ends the worker and kills its direct children (the job's shell): the guard
            # kills what they started, then exits
            ray.kill(actor, no_restart=True)
        with anyio.fail_after(20):
            while any(map(_running, jobs)) or _running(guard.pid):
                await anyio.sleep(0.1)


async def test_ray_traffic_stays_on_loopback(cluster: LocalCluster, tmp_path: Any) -> None:
    async with fleet(cluster, tmp_path) as rt:
        await rt.exec(command="true")
        procs = [psutil.Process(), *descendants()]
        assert len(procs) > 6  # GCS, raylets, agents, workers and executors are all looked at
        assert non_loopback_sockets(procs) == []


async def test_a_node_that_joins_gets_an_executor_and_its_loss_is_node_lost(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    async with fleet(cluster, tmp_path) as rt:
        assert len((await rt.info())["nodes"]) == 3
        extra = cluster.add_node(zone="c")
        try:
            with anyio.fail_after(60):
                while not [
                    n
                    for n in (await rt.info())["nodes"]
                    if n["labels"].get("zone") == "c" and n["executor_pid"]
                ]:
                    await anyio.sleep(0.2)
            job = await rt.exec(command="sleep 60", node="zone=c", yield_ms=0)
            shell = await rt.shell_open(node="zone=c")
            other = await rt.exec(command="sleep 60", node="zone=a", yield_ms=0)
            waiting = None

            async def wait_on_it() -> None:
                nonlocal waiting
                try:
                    await rt.read(job_id=job["job_id"], until="exit", wait_ms=60000)
                except ConchError as e:
                    waiting = e.code

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_on_it)
                await anyio.sleep(0.5)
                cluster.remove_node(extra)
                extra = None
            assert waiting == "node_lost"  # a call in flight when the node went
            for call in (
                rt.read(job_id=job["job_id"]),
                rt.exec(shell_id=shell["shell_id"], command="true"),
                rt.exec(command="true", node="zone=c"),
            ):
                with pytest.raises(ConchError) as e:
                    await call
                assert e.value.code == "node_lost" and not e.value.retryable
            nodes = {n["labels"].get("zone"): n for n in (await rt.info())["nodes"]}
            assert nodes["c"]["alive"] is False and nodes["a"]["alive"] is True
            assert (await rt.read(job_id=other["job_id"]))["state"] == "running"
            listed = await rt.list()
            assert job["job_id"] not in {j["job_id"] for j in listed["jobs"]}
        finally:
            if extra is not None:
                cluster.remove_node(extra)


async def test_a_dead_executor_on_a_live_node_is_replaced(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    """Its jobs are lost (node_lost, their processes gone with it); the node gets a new
    executor under a new tag, and new work runs there again."""
    async with fleet(cluster, tmp_path, result_detail="full") as rt:
        before = next(n for n in (await rt.info())["nodes"] if n["labels"].get("zone") == "a")
        job = await rt.exec(command="sleep 60", node=before["node"], yield_ms=0)
        os.kill(before["executor_pid"], signal.SIGKILL)
        with pytest.raises(ConchError) as e:
            await rt.read(job_id=job["job_id"])
        assert e.value.code == "node_lost" and "executor died" in e.value.message
        with anyio.fail_after(60):
            while True:
                now = {n["node"]: n for n in (await rt.info())["nodes"]}[before["node"]]
                if now["alive"] and now["executor_pid"] not in (0, before["executor_pid"]):
                    break
                await anyio.sleep(0.2)
        assert now["tag"] != before["tag"] and now["labels"] == before["labels"]
        again = await rt.exec(command="echo again", node=before["node"])
        assert again["output"] == "again\n" and again["node"] == before["node"]
        with pytest.raises(ConchError) as e:  # the old executor's ids stay lost
            await rt.read(job_id=job["job_id"])
        assert e.value.code == "node_lost"
        with anyio.fail_after(10):  # its orphan guard killed what the dead executor ran
            while _running(job["pid"]):
                await anyio.sleep(0.1)


async def test_log_resources_are_read_on_each_jobs_node(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    async with fleet(cluster, tmp_path) as rt:
        info = await rt.info()
        ja = await rt.exec(command="echo from-a", node=by_label(info, "zone", "a"))
        jb = await rt.exec(command="echo from-b", node=by_label(info, "zone", "b"))
        uris = {r["uri"] for r in await rt.list_resources()}
        assert {"conch://jobs", f"conch://jobs/{ja['job_id']}/log"} <= uris
        assert f"conch://jobs/{jb['job_id']}/log" in uris
        mime, text = await rt.read_resource(f"conch://jobs/{ja['job_id']}/log")
        assert mime == "text/plain" and "from-a" in text and "from-b" not in text
        assert "from-b" in (await rt.read_resource(f"conch://jobs/{jb['job_id']}/log"))[1]
        mime, overview = await rt.read_resource("conch://jobs")
        assert mime == "text/markdown" and overview.count("# node ") == 3
        assert ja["job_id"] in overview and jb["job_id"] in overview  # fleet ids
        for uri in ("conch://jobs/j_0000000000/log", "conch://nothing"):
            with pytest.raises(ConchError) as e:
                await rt.read_resource(uri)
            assert e.value.code == "not_found"
        assert await rt.list_resources(seed_only=True) == []


async def test_a_terminal_jobs_screen_and_recording_are_read_on_its_node(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    """A fleet lists and serves a PTY job's screen and asciicast recording, and a shell's
    session recording (issue 23's resources), from the node that runs it, under its fleet
    id."""
    async with fleet(cluster, tmp_path) as rt:
        info = await rt.info()
        job = await rt.exec(
            command="printf 'on-the-node\\n'; sleep 30", pty=True, node=by_label(info, "zone", "b")
        )
        fid = job["job_id"]
        uris = {r["uri"] for r in await rt.list_resources()}
        assert {f"conch://jobs/{fid}/screen", f"conch://jobs/{fid}/cast"} <= uris, uris
        mime, screen = await rt.read_resource(f"conch://jobs/{fid}/screen")
        assert mime == "text/plain" and "on-the-node" in screen
        mime, cast = await rt.read_resource(f"conch://jobs/{fid}/cast")
        header, *events = [json.loads(line) for line in cast.splitlines()]
        assert mime == "application/x-asciicast" and header["version"] == 2
        assert any(e[1] == "o" and "on-the-node" in e[2] for e in events), events
        sh = await rt.shell_open(node="zone=a")
        await rt.exec(shell_id=sh["shell_id"], command="echo in-the-shell")
        uris = {r["uri"] for r in await rt.list_resources()}
        assert f"conch://shells/{sh['shell_id']}/cast" in uris, uris
        mime, session = await rt.read_resource(f"conch://shells/{sh['shell_id']}/cast")
        assert mime == "application/x-asciicast" and "in-the-shell" in session
        await rt.shell_close(sh["shell_id"])
        plain = await rt.exec(command="echo no-terminal")
        for uri in (f"conch://jobs/{plain['job_id']}/cast", "conch://jobs/j_0000000000/screen"):
            with pytest.raises(ConchError) as e:
                await rt.read_resource(uri)
            assert e.value.code == "not_found"
        await rt.signal(job_id=fid, signal="kill")


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_mcp_over_stdio_serves_the_fleet(cluster: LocalCluster, tmp_path: Any) -> None:
    # the server finds loopback by itself: none of the test's RAY_* settings reach it
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            *("-m", "conch", "serve", "--fleet", "ray", "--ray-address", cluster.address),
            *("--data-dir", str(tmp_path / "data")),
        ],
        env=env,
    )
    async with Client(params, mode="legacy") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name in ("exec", "shell_open", "search"):
            assert "node" in tools[name].input_schema["properties"]
        info = (await c.call_tool("info", {})).structured_content
        assert info["fleet"] == "ray" and len(info["nodes"]) == 3
        ids = {}
        for n in info["nodes"]:
            r = await c.call_tool("exec", {"command": "echo $CONCH_NODE_ID", "node": n["node"]})
            assert r.is_error is False
            s = r.structured_content
            assert s["node"] == n["node"] and s["output"].strip() == n["node"]
            assert s["job_id"] in r.content[0].text
            ids[s["job_id"]] = n["node"]
        long = await c.call_tool(
            "exec", {"command": "echo started; sleep 60", "node": "zone=a", "yield_ms": 300}
        )
        job_id = long.structured_content["job_id"]
        page = await c.call_tool("read", {"job_id": job_id, "cursor": 0, "max_bytes": 16})
        assert page.structured_content["output"].startswith("started")
        assert page.structured_content["next_cursor"] > 0
        log = await c.read_resource(f"conch://jobs/{job_id}/log")  # read on the job's node
        assert log.contents[0].text.startswith("started")
        assert f"conch://jobs/{job_id}/log" in {
            str(r.uri) for r in (await c.list_resources()).resources
        }
        listed = (await c.call_tool("list", {})).structured_content
        assert ids.items() <= {j["job_id"]: j["node"] for j in listed["jobs"]}.items()
        missing = await c.call_tool("read", {"job_id": "j_0000000000." + info["nodes"][0]["tag"]})
        assert missing.is_error and missing.structured_content["error"]["code"] == "not_found"
        assert non_loopback_sockets([psutil.Process(), *descendants()]) == []
    # the client closed stdin: the server stopped its executors and the sleeping job with them


def _invoke(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"method": method, "params": params}).encode()
    req = urllib.request.Request(
        url + "/invoke", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        result: dict[str, Any] = json.loads(r.read())
    return result


def _dashboard(url: str, path: str, body: Any = None) -> tuple[int, Any]:
    """(status, JSON) of a dashboard route: GET, or POST with a JSON ``body``."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if data is not None:  # a control action carries the token of a page of the dashboard
        with urllib.request.urlopen(url + "/", timeout=60) as r:
            page = r.read().decode()
        token = page.split("const PAGE_TOKEN = ", 1)[1].split(";", 1)[0]
        headers["X-Conch-Page-Token"] = json.loads(token)
    req = urllib.request.Request(
        url + path, data=data, headers=headers, method="POST" if data else "GET"
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _dashboard_takes_over_a_terminal_on_a_node(url: str, node: str) -> None:
    """The fleet's dashboard: the job list from every node, a terminal's screen, log and
    replay read on its node, a person's typing, hand-back, size and shell command sent there."""
    repl = _invoke(url, "exec", {"argv": ["python3", "-q"], "pty": True, "node": "zone=b"})
    job = repl["job_id"]
    _invoke(url, "read", {"job_id": job, "wait_ms": 10000, "until": "input"})
    status, listed = _dashboard(url, "/api/jobs")
    mine = [j for j in listed["jobs"] if j["job_id"] == job]
    assert status == 200 and len(mine) == 1, listed
    assert mine[0]["node"] == node and mine[0]["what"] == "python3 -q", mine
    assert mine[0]["terminal_mode"] is True and mine[0]["awaiting_input"] is True, mine
    status, screen = _dashboard(url, f"/api/jobs/{job}/screen")
    assert status == 200 and screen["job_id"] == job, screen
    assert any(">>>" in seg["text"] for row in screen["lines"] for seg in row), screen
    status, typed = _dashboard(
        url, f"/api/jobs/{job}/input", {"text": "print(6*7)", "keys": ["enter"]}
    )
    assert (status, typed) == (200, {"bytes": len("print(6*7)") + 1, "attended": True})
    got = _invoke(url, "read", {"job_id": job, "wait_ms": 10000, "until": {"pattern": "42"}})
    assert "42" in got["output"] and got["attended"] is True, got
    assert got["human_input"]["bytes"] == len("print(6*7)") + 1, got
    assert _invoke(url, "write", {"job_id": job, "text": "1"})["error"]["code"] == "busy"
    assert _dashboard(url, f"/api/jobs/{job}/handback", {})[0] == 200
    assert "attended" not in _invoke(url, "read", {"job_id": job})
    size = {"rows": 30, "cols": 90}
    assert _dashboard(url, f"/api/jobs/{job}/resize", size) == (200, size)
    status, log = _dashboard(url, f"/api/jobs/{job}/log")
    assert status == 200 and log["job_id"] == job and "42" in log["text"], log
    status, end = _dashboard(url, f"/api/jobs/{job}/replay?t=1000000")
    assert status == 200 and (end["rows"], end["cols"]) == (30, 90), end
    _invoke(url, "signal", {"job_id": job, "signal": "kill"})
    # a person's command in an idle shell runs on the shell's node
    sh = _invoke(url, "shell_open", {"node": "zone=b"})["shell_id"]
    status, ran = _dashboard(url, f"/api/shells/{sh}/exec", {"command": "echo $CONCH_NODE_ID"})
    assert status == 200 and ran["job_id"].endswith(sh[sh.index(".") :]), ran
    done = _invoke(url, "read", {"job_id": ran["job_id"], "wait_ms": 10000, "until": "exit"})
    assert done["output"].strip() == node and done["human_input"]["bytes"] > 0, done
    _invoke(url, "signal", {"shell_id": sh})
    # an id no node has is not found; a shell id is no job
    assert _dashboard(url, "/api/jobs/j_nosuchjob/screen")[0] == 404
    assert _dashboard(url, f"/api/jobs/{sh}.x/screen")[0] == 404


def test_http_invoke_and_the_dashboard_serve_the_fleet(
    cluster: LocalCluster, tmp_path: Any
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = [sys.executable, "-m", "conch", "serve", "--http", "--port", str(port)]
    args += ["--fleet", "ray", "--ray-address", cluster.address]
    args += ["--data-dir", str(tmp_path / "data"), "--dashboard-control"]
    args += ["--attended-idle-ms", "60000"]
    err = tmp_path / "http.stderr"
    with open(err, "wb") as errf:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=errf, stderr=errf)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, err.read_text()
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the fleet server did not come up"
            time.sleep(0.2)
        info = _invoke(url, "info", {})
        zone_b = by_label(info, "zone", "b")
        r = _invoke(url, "exec", {"command": "echo $CONCH_NODE_ID", "node": "zone=b"})
        assert r["node"] == zone_b and r["output"].strip() == zone_b
        again = _invoke(url, "read", {"job_id": r["job_id"], "cursor": 0})
        assert again["output"].strip() == zone_b
        # `conch cast` (the dashboard's route) reads a terminal job's recording on its node
        term = _invoke(url, "exec", {"command": "echo cast-me", "pty": True, "node": "zone=b"})
        cast = subprocess.run(
            [sys.executable, "-m", "conch", "cast", "--url", url, term["job_id"]],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cast.returncode == 0, cast.stderr
        header, *events = [json.loads(line) for line in cast.stdout.splitlines()]
        assert header["version"] == 2 and any("cast-me" in e[2] for e in events), cast.stdout
        _dashboard_takes_over_a_terminal_on_a_node(url, zone_b)
        _a_sandboxed_job_on_a_node_is_refused_the_api(url)
        _invoke(url, "exec", {"command": "sleep 60", "node": "role=head", "yield_ms": 0})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0, err.read_text()[-2000:]


# a job's call of the server's own API: an exec (unsandboxed, were it let through)
CALL_THE_API = (
    "import json, sys, urllib.error, urllib.request\n"
    "body = json.dumps({'method': 'exec', 'params': {'command': 'echo escaped'}}).encode()\n"
    "req = urllib.request.Request(sys.argv[1] + '/invoke', data=body, method='POST',\n"
    "                             headers={'Content-Type': 'application/json'})\n"
    "try:\n"
    "    print('status', urllib.request.urlopen(req, timeout=30).status)\n"
    "except urllib.error.HTTPError as e:\n"
    "    print('status', e.code, e.read().decode()[:300])\n"
)


def _a_sandboxed_job_on_a_node_is_refused_the_api(url: str) -> None:
    """The guard of a fleet's server asks the nodes that share its loopback (all of them
    here): a sandboxed job on a node gets 403, as it does from a local server; the same
    program unsandboxed gets through."""
    run = [sys.executable, "-c", CALL_THE_API, url]
    wait = {"node": "zone=b", "yield_ms": 60000}
    r = _invoke(url, "exec", {"argv": run, "sandbox": "read-only", **wait})
    assert r.get("exit_code") == 0, r
    assert "status 403" in r["output"] and "sandboxed j_" in r["output"], r["output"]
    assert "on node" in r["output"], r["output"]
    free = _invoke(url, "exec", {"argv": run, **wait})
    assert "status 200" in free["output"], free


def _rpc_lines(address: str, tmp_path: Any) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    args = [sys.executable, "-m", "conch", "serve", "--fleet", "ray", "--ray-address", address]
    args += ["--data-dir", str(tmp_path / "data"), "--result-detail", "full"]  # with pids
    return subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def _request(proc: subprocess.Popen[str], rid: int, method: str, params: dict[str, Any]) -> Any:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
    proc.stdin.write("\n")
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        assert line, "the server closed its stdout"
        msg = json.loads(line)  # every stdout line is protocol: Ray printed nothing there
        if msg.get("id") == rid:
            return msg["result"]


def _start_jobs_over_stdio(proc: subprocess.Popen[str]) -> list[int]:
    _request(
        proc,
        1,
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    )
    assert proc.stdin is not None
    proc.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.flush()
    pids = []
    for i, zone in enumerate(("role=head", "zone=a", "zone=b")):
        r = _request(
            proc,
            10 + i,
            "tools/call",
            # bash stays the leader with sleep its child: what the job started must go too
            {
                "name": "exec",
                "arguments": {"command": "sleep 60; true", "node": zone, "yield_ms": 0},
            },
        )
        assert r["structuredContent"]["state"] == "running", r
        pids.append(r["structuredContent"]["pid"])
    return pids


def _gone_within(pids: list[int], limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if not any(map(_running, pids)) and not leftovers():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_a_stopped_fleet_server_leaves_no_job_on_any_node(
    cluster: LocalCluster, tmp_path: Any, how: str
) -> None:
    proc = _rpc_lines(cluster.address, tmp_path)
    try:
        pids = _start_jobs_over_stdio(proc)
        assert all(map(_running, pids))
        if how == "sigterm":  # a clean stop: executors stop their jobs, then themselves
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
            assert _gone_within(pids, 5)
        else:  # the server dies at once: Ray kills its executors, their guards kill the jobs
            proc.kill()
            proc.wait(10)
            assert _gone_within(pids, 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


async def test_changes_and_undo_go_to_the_jobs_node(cluster: LocalCluster, tmp_path: Any) -> None:
    """`changes` is routed by the job id, as `read` is; the undo's own id comes back as a
    fleet id of the same node, so undoing it (a redo) goes there too; `list {info: true}`
    carries the fleet's info (its nodes), not one node's."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    async with fleet(cluster, tmp_path, default_cwd=str(ws)) as rt:
        info = await rt.info()
        zone_b = by_label(info, "zone", "b")
        ran = await rt.exec(command="echo two >> a.txt; echo new > b.txt", node="zone=b")
        assert ran["node"] == zone_b and ran["changes"] == {"added": 1, "modified": 1}, ran
        got = await rt.changes(ran["job_id"])
        assert got["node"] == zone_b and {f["path"] for f in got["files"]} == {"a.txt", "b.txt"}
        undone = await rt.changes(ran["job_id"], undo=True)
        assert undone["node"] == zone_b and undone["undo_of"] == ran["job_id"], undone
        assert undone["job_id"].endswith("." + ran["job_id"].rsplit(".", 1)[1])
        assert (ws / "a.txt").read_text() == "one\n" and not (ws / "b.txt").exists()
        (ws / "a.txt").write_text("a person's\n")
        with pytest.raises(ConchError) as e:
            await rt.changes(undone["job_id"], undo=True)
        assert e.value.code == "conflict" and "a.txt" in e.value.message
        redone = await rt.changes(undone["job_id"], undo=True, force=["a.txt"])
        assert redone["undo_of"] == undone["job_id"] and (ws / "b.txt").read_text() == "new\n"
        listed = await rt.call_tool("list", {"info": True})
        assert {n["node"] for n in listed["info"]["nodes"]} == {n["node"] for n in info["nodes"]}
        bad = await rt.call_tool("list", {"info": "yes"})
        assert bad["error"]["code"] == "invalid_argument", bad
