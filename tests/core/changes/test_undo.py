"""Per job, what it changed under the workspace, and undo: exact restore of content, mode,
type and symlink target, removal of what it added, nothing else touched."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from conftest import config, run

from conch.core.engine import Engine
from conch.core.requests import ExecRequest
from conch.errors import ConchError

pytestmark = pytest.mark.anyio


def tree(root: Path, skip: tuple[str, ...] = ()) -> dict[str, tuple]:
    """What every path under root holds: (type, mode, content or target)."""
    out: dict[str, tuple] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("f", stat.S_IMODE(st.st_mode), Path(p).read_bytes())
            else:
                out[rel] = ("other", stat.S_IFMT(st.st_mode))
    return out


def populate(ws: Path) -> None:
    (ws / "a.txt").write_text("alpha\n")
    (ws / "b.bin").write_bytes(bytes(range(256)) * 10)
    (ws / "keep").write_text("untouched\n")
    (ws / "sub").mkdir()
    (ws / "sub" / "c.txt").write_text("gamma\n")
    os.chmod(ws / "sub" / "c.txt", 0o640)
    (ws / "link").symlink_to("a.txt")


async def fresh(tmp_path: Path, ws: Path) -> Engine:
    e = Engine(config(tmp_path, ws))
    await e.start()
    assert e.tracker is not None and e.tracker.wait_ready(10)
    return e


async def test_edits_creates_deletes_renames_and_modes_are_listed_and_undone(tmp_path, ws):
    populate(ws)
    e = await fresh(tmp_path, ws)
    try:
        before = tree(ws)
        r = await run(
            e,
            "echo more >> a.txt && rm b.bin && mv sub/c.txt sub/d.txt && chmod 700 keep.x "
            "2>/dev/null; chmod 600 a.txt && mkdir -p new/deep && echo n > new/deep/f && "
            "ln -sfn sub link",
        )
        assert r["changes"] == {"added": 4, "modified": 2, "deleted": 2}
        c = await e.changes(r["job_id"])
        kinds = {f["path"]: f["change"] for f in c["files"]}
        assert kinds == {
            "a.txt": "modified",
            "b.bin": "deleted",
            "sub/c.txt": "deleted",
            "sub/d.txt": "added",
            "new": "added",
            "new/deep": "added",
            "new/deep/f": "added",
            "link": "modified",
        }
        assert "+more" in c["diff"] and "a/a.txt" in c["diff"]
        u = await e.changes(r["job_id"], undo=True)
        assert u["job_id"].startswith("u_") and u["undo_of"] == r["job_id"]
        assert tree(ws) == before  # content, modes, types and targets exactly
        assert (await e.changes(r["job_id"]))["undone_by"] == u["job_id"]
        # the undo is a change set of its own: undoing it redoes the job
        await e.changes(u["job_id"], undo=True)
        assert (ws / "a.txt").read_text() == "alpha\nmore\n"
        assert stat.S_IMODE(os.lstat(ws / "a.txt").st_mode) == 0o600
        assert os.readlink(ws / "link") == "sub" and (ws / "new/deep/f").read_text() == "n\n"
        assert not (ws / "b.bin").exists()
    finally:
        await e.aclose()


async def test_a_job_that_changes_nothing_has_no_changes_and_an_empty_record(engine, ws):
    r = await run(engine, "cat /etc/hostname > /dev/null; ls")
    assert "changes" not in r
    c = await engine.changes(r["job_id"])
    assert "files" not in c and "added" not in c
    # tracking covers the workspace only: said in every result
    assert any("workspace only" in n["reason"] for n in c["not_covered"])


async def test_per_call_changes_false_keeps_no_record(engine, ws):
    r = await run(engine, "echo x > f", changes=False)
    assert "changes" not in r
    with pytest.raises(ConchError) as ei:
        await engine.changes(r["job_id"])
    assert ei.value.code == "not_found"


async def test_a_symlink_to_a_file_outside_is_replaced_never_written_through(tmp_path, ws, engine):
    (ws / "conf").write_text("mine\n")
    victim = tmp_path / "victim"
    victim.write_text("outside\n")
    r = await run(engine, f"rm conf && ln -s {victim} conf")
    await engine.changes(r["job_id"], undo=True)
    assert victim.read_text() == "outside\n"
    assert not (ws / "conf").is_symlink() and (ws / "conf").read_text() == "mine\n"


async def test_a_directory_replaced_by_a_file_and_the_reverse(engine, ws):
    (ws / "d").mkdir()
    (ws / "d" / "x").write_text("x\n")
    (ws / "f").write_text("file\n")
    before = tree(ws, skip=("data",))
    r = await run(engine, "rm -r d && echo now-a-file > d && rm f && mkdir f && echo y > f/y")
    c = await engine.changes(r["job_id"])
    kinds = {f["path"]: f["change"] for f in c["files"]}
    assert kinds["d"] == "type_changed" and kinds["f"] == "type_changed"
    await engine.changes(r["job_id"], undo=True)
    assert tree(ws) == before


async def test_hard_links_a_write_through_one_name_changes_the_other(engine, ws):
    (ws / "a").write_text("one\n")
    before = tree(ws)
    r = await run(engine, "ln a b && echo two >> b")
    kinds = {f["path"]: f["change"] for f in (await engine.changes(r["job_id"]))["files"]}
    assert kinds == {"a": "modified", "b": "added"}
    await engine.changes(r["job_id"], undo=True)
    assert tree(ws) == before
    # a file that was already a hard link pair: written through one name, both restored
    r = await run(engine, "ln a b")
    r = await run(engine, "echo three >> b")
    kinds = {f["path"]: f["change"] for f in (await engine.changes(r["job_id"]))["files"]}
    assert kinds == {"a": "modified", "b": "modified"}


async def test_special_files_and_files_over_the_cap_are_said_not_covered(tmp_path, ws):
    async with Engine(config(tmp_path, ws, changes_max_file_bytes=1000)) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        (ws / "big").write_bytes(b"b" * 5000)
        sock = socket.socket(socket.AF_UNIX)
        try:
            r = await run(
                e,
                "mkfifo pipe && head -c 3000 /dev/zero > big && "
                "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'",
            )
        finally:
            sock.close()
        c = await e.changes(r["job_id"])
        why = {n["path"]: n["reason"] for n in c["not_covered"]}
        assert why["pipe"].startswith("a fifo: ") and why["sock"].startswith("a socket: ")
        assert "changes_max_file_bytes" in why["big"]
        await e.changes(r["job_id"], undo=True)
        # not restorable: left as the job left it (and the undo says so)
        assert (ws / "big").stat().st_size == 3000
        # what the job made is removed (unlinked, never opened)
        assert not os.path.lexists(ws / "pipe") and not os.path.lexists(ws / "sock")


async def test_a_person_edit_since_is_a_conflict_and_nothing_is_written(engine, ws):
    (ws / "a").write_text("1\n")
    (ws / "b").write_text("1\n")
    r = await run(engine, "echo 2 > a && echo 2 > b && echo new > c")
    (ws / "b").write_text("person\n")
    with pytest.raises(ConchError) as ei:
        await engine.changes(r["job_id"], undo=True)
    assert ei.value.code == "conflict" and "b" in ei.value.message
    assert (ws / "a").read_text() == "2\n" and (ws / "c").exists()  # nothing written
    assert (ws / "b").read_text() == "person\n"
    u = await engine.changes(r["job_id"], undo=True, force=["b"])
    assert [(ws / n).read_text() for n in "ab"] == ["1\n", "1\n"] and not (ws / "c").exists()
    # the person's edit is kept by the undo's own record: undoing the undo brings it back
    await engine.changes(u["job_id"], undo=True)
    assert (ws / "b").read_text() == "person\n"


async def test_undo_never_touches_a_path_the_job_did_not_change(engine, ws):
    (ws / "d").mkdir()
    r = await run(engine, "echo x > d/added")
    (ws / "d" / "person").write_text("mine\n")  # made after the job, in a dir it changed
    (ws / "other").write_text("mine\n")
    await engine.changes(r["job_id"], undo=True)
    assert not (ws / "d" / "added").exists()
    assert (ws / "d" / "person").read_text() == "mine\n" and (ws / "other").exists()


async def test_a_removed_directory_holding_a_new_entry_stops_the_undo_naming_it(engine, ws):
    r = await run(engine, "mkdir d && echo x > d/f")
    (ws / "d" / "person").write_text("mine\n")
    with pytest.raises(ConchError) as ei:
        await engine.changes(r["job_id"], undo=True)
    assert ei.value.code == "conflict" and "d" in ei.value.message
    assert (ws / "d" / "person").read_text() == "mine\n"


async def test_overlapping_jobs_are_named_and_a_path_both_changed_is_a_conflict(engine, ws):
    from conch.core.requests import ExecRequest

    slow = await engine.exec(
        ExecRequest(command="echo s > s; sleep 0.6; echo s2 >> shared", yield_ms=0)
    )
    fast = await run(engine, "echo f > shared")
    await engine.read(
        __import__("conch").core.requests.ReadRequest(job_id=slow["job_id"], wait_ms=10_000)
    )  # type: ignore[attr-defined]
    c = await engine.changes(slow["job_id"])
    assert fast["job_id"] in c["overlapping_jobs"]
    with pytest.raises(ConchError) as ei:
        await engine.changes(fast["job_id"], undo=True)
    assert ei.value.code == "conflict" and "shared" in ei.value.message


async def test_nested_git_is_tracked_like_any_files(engine, ws):
    r = await run(engine, "git init -q repo && cd repo && echo x > f && git add f")
    paths = {f["path"] for f in (await engine.changes(r["job_id"]))["files"]}
    assert "repo/.git/index" in paths and "repo/f" in paths
    await engine.changes(r["job_id"], undo=True)
    assert not (ws / "repo").exists()


async def test_rm_rf_of_5000_files_is_undone_exactly(engine, ws):
    big = ws / "big"
    big.mkdir()
    for i in range(50):
        d = big / f"d{i}"
        d.mkdir()
        for j in range(100):
            (d / f"f{j}").write_text(f"{i}/{j}\n")
    engine.tracker.settle_now()  # type: ignore[union-attr]
    before = tree(ws, skip=("data",))
    r = await run(engine, "rm -rf big")
    assert r["changes"] == {"deleted": 5051}
    await engine.changes(r["job_id"], undo=True)
    assert tree(ws, skip=("data",)) == before


async def test_a_running_job_and_an_unknown_one_are_refused(engine):
    from conch.core.requests import ExecRequest, SignalRequest

    r = await engine.exec(ExecRequest(command="sleep 30", yield_ms=0))
    with pytest.raises(ConchError) as ei:
        await engine.changes(r["job_id"])
    assert ei.value.code == "conflict" and "still running" in ei.value.message
    await engine.signal(SignalRequest(job_id=r["job_id"], signal="kill"))
    with pytest.raises(ConchError) as ei:
        await engine.changes("j_0000000000")
    assert ei.value.code == "not_found"


async def test_a_shell_command_is_a_job_whose_changes_are_kept(engine, ws):
    from conch.core.requests import ExecRequest, ShellOpenRequest

    sh = await engine.shell_open(ShellOpenRequest())
    try:
        r = await engine.exec(
            ExecRequest(command="echo hi > from-shell", shell_id=sh["shell_id"], yield_ms=30_000)
        )
        assert r["changes"] == {"added": 1}
        await engine.changes(r["job_id"], undo=True)
        assert not (ws / "from-shell").exists()
    finally:
        await engine.shell_close(sh["shell_id"])


async def test_the_record_survives_a_restart(tmp_path, ws):
    (ws / "a").write_text("before\n")
    e = await fresh(tmp_path, ws)
    try:
        r = await run(e, "echo after > a && echo n > n")
    finally:
        await e.aclose()
    e = await fresh(tmp_path, ws)
    try:
        c = await e.changes(r["job_id"], undo=True)
        assert c["undo_of"] == r["job_id"]
        assert (ws / "a").read_text() == "before\n" and not (ws / "n").exists()
    finally:
        await e.aclose()


async def test_info_says_whether_tracking_is_on_and_why(tmp_path, ws):
    (ws / "a").write_text("x")
    (ws / "b").write_text("x")
    async with Engine(config(tmp_path, ws, changes_max_files=1)) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        info = (await e.info())["changes"]
        assert info["state"] == "off" and "changes_max_files" in info["reason"]
        r = await run(e, "echo x > c")
        assert "changes" not in r
    async with Engine(config(tmp_path, ws, changes="off")) as e:
        assert (await e.info())["changes"]["state"] == "off"
    async with Engine(config(tmp_path, ws)) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        info = (await e.info())["changes"]
        assert info["state"] == "on" and info["files"] == 3 and info["workspace"] == str(ws)


async def test_a_job_starting_while_the_tracker_is_busy_never_gets_a_wrong_before(engine, ws):
    """The tracker's lock is held (an undo, a large job's end) as a person edits a file and
    a job starts that edits it again: the job does not wait, and its record never claims a
    "before" it does not know (the person's edit is not taken for the job's, nor the index's
    older content for what was there)."""
    import threading

    from conch.core.requests import ReadRequest

    tracker = engine.tracker
    (ws / "a").write_text("one\n")
    (ws / "b").write_text("one\n")
    tracker.settle_now()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with tracker.lock:
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    try:
        held.wait(10)
        (ws / "a").write_text("person\n")  # queued: nobody's
        r = await engine.exec(ExecRequest(command="echo job > a; echo job > b", yield_ms=0))
    finally:
        release.set()
        t.join()
    await engine.read(ReadRequest(job_id=r["job_id"], wait_ms=30_000, until="exit"))
    c = await engine.changes(r["job_id"])
    listed = {f["path"] for f in c.get("files", [])}
    unknown = {n["path"] for n in c["not_covered"] if "not known" in n["reason"]}
    assert "a" in unknown and "a" not in listed
    assert listed == {"b"}
    await engine.changes(r["job_id"], undo=True)
    assert (ws / "b").read_text() == "one\n" and (ws / "a").read_text() == "job\n"


async def test_excluded_paths_are_not_tracked_and_said_so(tmp_path, ws):
    async with Engine(config(tmp_path, ws, changes_exclude=["node_modules", "build/*"])) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        r = await run(
            e,
            "mkdir -p node_modules/x build/y && echo 1 > node_modules/x/f && echo 2 > "
            "build/y/g && echo 3 > kept",
        )
        c = await e.changes(r["job_id"])
        assert {f["path"] for f in c["files"]} == {"kept", "build"}
        assert any("changes_exclude" in n["reason"] for n in c["not_covered"])


async def test_writes_outside_the_workspace_are_not_listed_and_the_result_says_so(engine, tmp_path):
    outside = tmp_path / "outside.txt"
    r = await run(engine, f"echo x > {outside} && echo y > inside")
    c = await engine.changes(r["job_id"])
    assert {f["path"] for f in c["files"]} == {"inside"}
    assert any("workspace only" in n["reason"] for n in c["not_covered"])
    await engine.changes(r["job_id"], undo=True)
    assert outside.read_text() == "x\n"  # never touched


async def test_the_store_is_bounded_and_a_content_past_it_is_said_not_kept(tmp_path, ws):
    (ws / "small").write_text("s\n")
    async with Engine(config(tmp_path, ws, changes_max_store_bytes=2000)) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        r = await run(e, "head -c 5000 /dev/urandom > big && echo t > small")
        c = await e.changes(r["job_id"])
        why = {n["path"]: n["reason"] for n in c["not_covered"]}
        assert "cap" in why["big"]
        assert e.tracker.store.bytes <= 4000
        assert (await e.info())["changes"]["store_bytes"] == e.tracker.store.bytes


async def test_a_record_follows_its_job_out_of_retention(tmp_path, ws):
    async with Engine(config(tmp_path, ws, max_jobs=1)) as e:
        assert e.tracker is not None and e.tracker.wait_ready(10)
        first = await run(e, "echo 1 > one")
        records = tmp_path / "data" / "changes" / "records"
        assert (records / f"{first['job_id']}.json").exists()
        await run(e, "echo 2 > two")
        e.jobs.evict()
        with pytest.raises(ConchError) as ei:
            await e.changes(first["job_id"])
        assert ei.value.code == "not_found"
        assert not (records / f"{first['job_id']}.json").exists()
