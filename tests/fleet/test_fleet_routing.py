"""Fleet ids and node choice: the pure rules the fleet routes by (no cluster needed)."""

from __future__ import annotations

import concurrent.futures
import re

import pytest

from conch.errors import ConchError
from conch.fleet import view as fleet_view
from conch.fleet.ids import node_tag, qualify, qualify_result, split
from conch.fleet.loopback import loopback_id
from conch.fleet.mirror import Mirrors
from conch.fleet.nodes import Node, NodeTable
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
