"""Fleet ids, node choice and a call's route: the pure rules the fleet routes by (no cluster
needed)."""

from __future__ import annotations

import concurrent.futures
import re

import pytest

from conch import Config, Runtime
from conch.core import ExecRequest, ReadRequest
from conch.errors import ConchError
from conch.fleet import FleetBackend
from conch.fleet import view as fleet_view
from conch.fleet.handles import KINDS, Handles
from conch.fleet.ids import node_tag, qualify, qualify_result, split
from conch.fleet.loopback import loopback_id
from conch.fleet.mirror import Mirrors
from conch.fleet.nodes import Node, NodeTable
from conch.fleet.route import route
from conch.fleet.runtime import arguments_of
from conch.fleet.tools import FleetRegistry
from conch.tools.schemas import ID

A = "a1" * 28
B = "b2" * 28
C = "a1a1a1a1" + "c3" * 24  # shares A's first 8 characters


def table() -> NodeTable:
    t = NodeTable()
    t.update(
        [
            {"NodeID": A, "Alive": True, "Labels": {"zone": "a", "gpu": "yes"}},
            {"NodeID": B, "Alive": True, "Labels": {"zone": "b"}},
            {"NodeID": C, "Alive": True, "Labels": {"zone": "c"}},
        ]
    )
    for n in t.nodes.values():
        n.ready = True
    return t


def test_fleet_ids_carry_their_node_and_still_match_the_id_schema() -> None:
    t = table()
    assert t.nodes[A].tag == A[:8]
    assert t.nodes[C].tag != t.nodes[A].tag and C.startswith(t.nodes[C].tag)
    fid = qualify("j_0123456789", t.nodes[B].tag)
    assert re.match(ID["pattern"], fid)
    assert split(fid, t.tags) == ("j_0123456789", t.nodes[B].tag)
    assert split("web.v2", t.tags) == ("web.v2", None)  # a job's own name: no node in it
    assert node_tag(A, {A[:8]}) == A[:9]


def test_results_get_fleet_ids_and_their_node() -> None:
    out = qualify_result(
        {"jobs": [{"job_id": "j_1", "shell_id": None}], "shells": [{"shell_id": "s_1"}]},
        "tag",
        A,
        add_node=True,
    )
    assert out["jobs"] == [{"job_id": "j_1.tag", "shell_id": None, "node": A}]
    assert out["shells"] == [{"shell_id": "s_1.tag", "node": A}]
    assert "node" not in qualify_result({"job_id": "j_1"}, "tag", A, add_node=False)


def test_a_change_sets_job_ids_get_their_node() -> None:
    """An undo's id, the job it undid or that undid it, and the jobs that overlapped it are
    jobs of the node that answered: each said as a fleet id, so `changes` on it comes back."""
    out = qualify_result(
        {
            "job_id": "u_1",
            "undo_of": "j_1",
            "undone_by": "u_2",
            "overlapping_jobs": ["j_2", "j_3"],
            "files": [{"path": "j_4", "change": "added"}],
        },
        "tag",
        A,
        add_node=True,
    )
    assert (out["job_id"], out["undo_of"], out["undone_by"]) == ("u_1.tag", "j_1.tag", "u_2.tag")
    assert out["overlapping_jobs"] == ["j_2.tag", "j_3.tag"]
    assert out["files"] == [{"path": "j_4", "change": "added"}]  # a path is no id


def test_node_choice_by_id_prefix_label_and_load() -> None:
    t = table()
    assert t.choose(B).node_id == B
    assert t.choose(B[:6]).node_id == B
    assert t.choose("zone=c").node_id == C
    assert t.choose("yes").node_id == A  # a label value
    t.nodes[A].running, t.nodes[B].running, t.nodes[C].running = 3, 1, 2
    assert t.choose(None).node_id == B
    with pytest.raises(ConchError) as e:
        t.choose("zone=z")
    assert e.value.code == "invalid_argument"


def test_a_dead_node_is_never_chosen_and_naming_it_is_node_lost() -> None:
    t = table()
    _, lost = t.update([{"NodeID": B, "Alive": False}])
    assert [n.node_id for n in lost] == [B]
    assert all(t.choose(None).node_id != B for _ in range(6))
    with pytest.raises(ConchError) as e:
        t.choose("zone=b")
    assert e.value.code == "node_lost" and not e.value.retryable


def test_fleet_tools_take_a_node_where_work_is_placed() -> None:
    registry = FleetRegistry(["conch"])
    tools = {t.name: t for t in registry.tools}
    assert registry.resources == ()  # job logs stay on their nodes
    for name in ("exec", "shell_open", "search"):
        assert "node" in tools[name].input_schema["properties"]
    for name in ("read", "write", "signal", "list", "changes"):
        assert "node" not in tools[name].input_schema["properties"]
    info = registry.get("info")  # (unlisted: `list {info: true}`, and callable by name)
    assert info is not None and "nodes" in info.output_schema["properties"]


def test_the_http_guard_asks_the_nodes_that_share_the_servers_loopback(monkeypatch) -> None:
    """A fleet server's guard cannot see its nodes' jobs: it asks each node whose jobs share its
    loopback (same machine and network namespace, or not known), never the others, and refuses
    when one of them cannot say (fails closed). The Ray call is the runtime's (tests/fleet/
    test_fleet.py has a sandboxed job on a node refused through it)."""
    here = loopback_id()
    assert here  # Linux: a boot id and a network namespace
    t = table()
    t.nodes[A].loopback, t.nodes[B].loopback, t.nodes[C].loopback = here, "other-boot/1", ""
    answers: dict[str, object] = {A: None, C: None}
    asked: list[str] = []

    def ask(node: Node, client, server) -> concurrent.futures.Future[str | None]:
        assert (client, server) == (("127.0.0.1", 40000), ("127.0.0.1", 7785))
        asked.append(node.node_id)
        answer = answers[node.node_id]
        if isinstance(answer, Exception):
            raise answer
        future: concurrent.futures.Future[str | None] = concurrent.futures.Future()
        if answer != "silent":
            future.set_result(answer)  # type: ignore[arg-type]
        return future

    view = fleet_view.FleetView(
        lambda fn: lambda: None, t, FleetRegistry(["conch"]), Mirrors(keep=10), ask
    )

    def caller() -> str | None:
        return view.sandboxed_caller(("127.0.0.1", 40000), ("127.0.0.1", 7785))

    assert caller() is None and sorted(asked) == sorted([A, C])  # B: another machine
    answers[C] = "j_0123456789"
    assert caller() == f"j_0123456789 on node {C}"
    monkeypatch.setattr(fleet_view, "CALLER_WAIT_S", 0.05)
    answers[C] = "silent"
    refused = caller()
    assert refused and C in refused and "did not answer" in refused
    answers[C] = RuntimeError("the executor died")
    refused = caller()
    assert refused and C in refused and "the executor died" in refused
    t.nodes[C].ready = t.nodes[A].ready = False  # no node shares it: nothing to ask
    asked.clear()
    assert caller() is None and asked == []


def test_a_call_on_a_fleet_id_goes_to_its_node_with_the_nodes_own_id() -> None:
    t, handles = table(), Handles()
    job = qualify("j_0123456789", t.nodes[B].tag)
    args = {"job_id": job, "wait_ms": 10}
    way = route("read", args, t, handles, placing=False)
    assert way.how == "node" and way.node is t.nodes[B]
    assert way.args == {"job_id": "j_0123456789", "wait_ms": 10}
    assert args["job_id"] == job  # the caller's arguments are left as they were
    shell = qualify("s_0123456789", t.nodes[C].tag)
    way = route("exec", {"shell_id": shell, "node": "zone=c"}, t, handles, placing=True)
    assert way.how == "node" and way.node is t.nodes[C] and way.args == {"shell_id": "s_0123456789"}


def test_ids_on_two_nodes_or_a_node_other_than_the_ids_are_refused() -> None:
    t, handles = table(), Handles()
    on_a, on_b = (qualify("j_0123456789", t.nodes[n].tag) for n in (A, B))
    with pytest.raises(ConchError) as e:
        route("read", {"job_ids": [on_a, on_b]}, t, handles, placing=False)
    assert e.value.code == "invalid_argument" and "another node" in e.value.message
    shell = qualify("s_0123456789", t.nodes[A].tag)
    with pytest.raises(ConchError) as e:
        route("exec", {"shell_id": shell, "node": "zone=b"}, t, handles, placing=True)
    assert e.value.code == "invalid_argument" and A in e.value.message
    for bad in ("", "  ", 7):
        with pytest.raises(ConchError) as e:
            route("exec", {"command": "true", "node": bad}, t, handles, placing=True)
        assert e.value.code == "invalid_argument"


def test_several_jobs_of_one_node_are_read_there_with_their_local_ids() -> None:
    t, handles = table(), Handles()
    ids = [qualify(f"j_000000000{i}", t.nodes[A].tag) for i in (1, 2)]
    way = route("read", {"job_ids": ids}, t, handles, placing=False)
    assert way.how == "node" and way.node is t.nodes[A]
    assert way.args == {"job_ids": ["j_0000000001", "j_0000000002"]}


def test_listings_ask_every_node_and_a_name_asks_until_one_knows_it() -> None:
    t, handles = table(), Handles()
    for tool in ("list", "bash.jobs", "shell_list"):
        assert route(tool, {"state": "all"}, t, handles, placing=False).how == "each"
    assert route("info", {}, t, handles, placing=False).how == "info"
    way = route("read", {"job_id": "web.v2"}, t, handles, placing=False)  # a job's own name
    assert way.how == "anywhere" and way.args == {"job_id": "web.v2"}


def test_new_work_is_placed_where_node_says_or_on_the_least_loaded() -> None:
    t, handles = table(), Handles()
    way = route("exec", {"command": "true", "node": "zone=b"}, t, handles, placing=True)
    assert way.how == "placed" and way.node is t.nodes[B] and way.args == {"command": "true"}
    t.nodes[A].running, t.nodes[B].running, t.nodes[C].running = 3, 1, 2
    assert route("search", {"pattern": "x"}, t, handles, placing=True).node is t.nodes[B]
    # a tool that takes no node leaves an argument of that name to the node's validation
    way = route("write", {"node": "zone=a", "job_id": "j_1"}, t, handles, placing=False)
    assert way.how == "anywhere" and way.args["node"] == "zone=a"


def test_a_profile_handle_goes_to_the_node_that_gave_it_out() -> None:
    t, handles = table(), Handles()
    pid = next(k for k in KINDS if k.arg == "pid")
    given = handles.learn(pid, t.nodes[C].tag, 12_345_678)
    again = handles.learn(pid, t.nodes[A].tag, 12_345_678)  # the same number on another node
    assert again != given
    way = route("get", {"pid": str(again)}, t, handles, placing=False)
    assert way.how == "node" and way.node is t.nodes[A] and way.args == {"pid": "12345678"}
    way = route("get", {"pid": given}, t, handles, placing=False)
    assert way.node is t.nodes[C] and way.args == {"pid": 12_345_678}
    # a handle no node gave out: any node answers it in the profile's own words
    assert route("get", {"pid": 99_999_999}, t, handles, placing=False).how == "placed"


def test_runtime_with_a_fleet_is_a_runtime_holding_the_fleet_backend() -> None:
    """``Runtime(Config(fleet=...))`` is a Runtime whose backend is the fleet (found through
    the ``conch.fleets`` entry point); nothing starts until ``start``."""
    rt = Runtime(Config(fleet="ray"))
    assert isinstance(rt, Runtime) and isinstance(rt.backend, FleetBackend)
    assert rt.config.fleet == "ray" and not rt.closed and not rt.started
    assert {t["name"] for t in rt.tools()} >= {"exec", "read", "list", "changes"}
    with pytest.raises(ConchError) as e:
        _ = rt.engine
    assert e.value.code == "invalid_argument"


def test_the_typed_methods_give_a_fleet_the_arguments_their_caller_set() -> None:
    assert arguments_of(ExecRequest(command="echo hi")) == {"command": "echo hi"}
    assert arguments_of(ExecRequest(argv=("ls", "-l"), pty=True, yield_ms=0)) == {
        "argv": ["ls", "-l"],
        "pty": True,
        "yield_ms": 0,
    }
    assert arguments_of(ReadRequest("j_1", job_ids=None, wait_ms=5)) == {
        "job_id": "j_1",
        "wait_ms": 5,
    }
    assert arguments_of({"state": "running"}) == {"state": "running"}


@pytest.mark.anyio
async def test_a_runtime_on_this_machine_refuses_a_node(tmp_path) -> None:
    async with Runtime(Config(data_dir=str(tmp_path / "data"))) as rt:
        with pytest.raises(ConchError) as e:
            await rt.exec(command="true", node="zone=a")
        assert e.value.code == "invalid_argument" and "fleet" in e.value.message
        r = await rt.exec(command="echo hi")
        assert r["output"] == "hi\n"
