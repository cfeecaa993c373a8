"""docs/spec.md §5: logs, normalization in results, budgets, cursors."""

from __future__ import annotations

import os
import re
import stat
import time

import pytest

import conch
from conch import ConchError

pytestmark = pytest.mark.anyio


async def test_seq_through_a_100_byte_budget(rt):
    r = await rt.exec(command="seq 1 100000", max_output_bytes=100)
    out = r["output"]
    assert len(out.encode()) <= 100
    assert out.startswith("1\n2\n") and out.endswith("99999\n100000\n")
    assert r["truncated"] is True and r["omitted_bytes"] > 500000
    assert "bytes omitted" in out
    # the marker's cursor range reads exactly the omitted bytes
    a, b = map(int, re.search(r"cursor (\d+)-(\d+)", out).groups())
    assert b - a == r["omitted_bytes"]
    total = r["total_bytes"]
    got = b""
    cursor = a
    while True:
        w = await rt.read(r["job_id"], cursor=cursor, max_bytes=65536)
        got += w["output"].encode()
        if w["next_cursor"] >= total:
            break
        cursor = w["next_cursor"]
    full = "".join(f"{i}\n" for i in range(1, 100001)).encode()
    assert full[:a] + got == full


@pytest.mark.parametrize("budget", [0, 1, 2, 3, 5, 7, 13, 61, 62, 63, 64, 65, 66, 67, 99, 101, 127])
async def test_odd_budgets_over_multibyte_text_stay_valid(rt, budget):
    r = await rt.exec(
        command="for i in $(seq 1 300); do printf '你好😀é'; done; echo", max_output_bytes=budget
    )
    out = r["output"]
    assert len(out.encode("utf-8")) <= budget
    assert "\ufffd" not in out
    assert r["truncated"] is True


async def test_short_output_is_whole(rt):
    r = await rt.exec(command="printf 'abc'", max_output_bytes=3)
    assert r["output"] == "abc" and r["truncated"] is False and r["omitted_bytes"] == 0


async def test_invalid_utf8_becomes_replacement_char(rt):
    r = await rt.exec(command=r"printf 'a\xff\xfeb\xe4\xbd'")
    assert r["output"] == "a\ufffd\ufffdb\ufffd"
    raw = await rt.read(r["job_id"], cursor=0, raw=True)
    assert raw["total_bytes"] == 6


async def test_ansi_osc_and_carriage_returns_are_normalized(rt):
    r = await rt.exec(
        command=r"printf '\033]0;title\007\033[1;31mred\033[0m\r\n10%%\r50%%\r100%%\ndone\n'"
    )
    assert r["output"] == "red\n100%\ndone\n"
    raw = await rt.read(r["job_id"], cursor=0, raw=True)
    assert "\x1b[1;31m" in raw["output"] and "\r" in raw["output"]


async def test_read_continues_where_last_read_stopped(rt):
    r = await rt.exec(command="echo one; sleep 0.3; echo two; sleep 0.3; echo three", yield_ms=100)
    assert r["output"] == "one\n"
    seen = [r["output"]]
    while True:
        w = await rt.read(r["job_id"], wait_ms=3000)
        seen.append(w["output"])
        if w["eof"]:
            break
    assert "".join(seen) == "one\ntwo\nthree\n"
    again = await rt.read(r["job_id"])
    assert again["output"] == "" and again["eof"] is True
    assert (await rt.read(r["job_id"], cursor=0))["output"] == "one\ntwo\nthree\n"


async def test_read_window_respects_max_bytes_and_reports_rest(rt):
    r = await rt.exec(command="seq 1 1000", max_output_bytes=0)
    assert r["output"] == "" and r["next_cursor"] == r["total_bytes"]
    w = await rt.read(r["job_id"], cursor=0, max_bytes=20)
    assert len(w["output"].encode()) <= 20 and w["truncated"] is True
    assert w["next_cursor"] == len(w["output"].encode())
    assert w["omitted_bytes"] == w["total_bytes"] - w["next_cursor"]


async def test_tail_gives_last_bytes(rt):
    r = await rt.exec(command="seq 1 1000", max_output_bytes=0)
    w = await rt.read(r["job_id"], tail=True, max_bytes=16)
    assert w["output"].endswith("999\n1000\n") and len(w["output"].encode()) <= 16
    assert w["next_cursor"] == w["total_bytes"]


async def test_streams_are_apart_and_in_arrival_order(rt):
    # (gaps of 0.3 s: the order across two pipes is the order they are read in, and a loaded
    # machine under xdist can hold the reader back for tens of milliseconds)
    r = await rt.exec(
        command="for i in 1 2 3; do echo o$i; sleep 0.3; echo e$i >&2; sleep 0.3; done"
    )
    assert r["output"] == "o1\ne1\no2\ne2\no3\ne3\n"
    out = await rt.read(r["job_id"], cursor=0, stream="stdout")
    err = await rt.read(r["job_id"], cursor=0, stream="stderr")
    assert out["output"] == "o1\no2\no3\n" and out["total_bytes"] == 9
    assert err["output"] == "e1\ne2\ne3\n"
    part = await rt.read(r["job_id"], cursor=3, stream="stdout", max_bytes=16)
    assert part["output"] == "o2\no3\n"


async def test_cursor_past_end_is_invalid(rt):
    r = await rt.exec(command="echo hi")
    with pytest.raises(ConchError) as e:
        await rt.read(r["job_id"], cursor=1000)
    assert e.value.code == "invalid_argument"


async def test_log_cap_kills_tree_and_keeps_first_bytes(tmp_path):
    cfg = conch.Config(result_detail="full", data_dir=str(tmp_path / "d"), max_log_bytes=100_000)
    async with conch.Runtime(cfg) as rt:
        r = await rt.exec(command="yes | tr -d '\\n' ; sleep 30", yield_ms=10000)
        assert r["state"] == "output_limit"
        assert r["total_bytes"] == 100_000
        assert os.path.getsize(r["log_path"]) == 100_000


async def test_log_files_are_private(rt):
    r = await rt.exec(command="echo secret")
    st = os.stat(r["log_path"])
    assert stat.S_IMODE(st.st_mode) == 0o600
    d = os.path.dirname(os.path.dirname(r["log_path"]))
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    with open(r["log_path"], "rb") as f:
        assert f.read() == b"secret\n"


async def test_startup_removes_only_old_conch_logs(tmp_path):
    data = tmp_path / "d"
    async with conch.Runtime(conch.Config(result_detail="full", data_dir=str(data))) as rt:
        r = await rt.exec(command="echo x")
    old = time.time() - 10 * 86400
    logs = data / "logs"
    mine = r["log_path"]
    other = logs / "notes.txt"
    other.write_text("keep")
    target = tmp_path / "victim.log"
    target.write_text("keep")
    link = logs / "20200101-000000-j_0123456789.log"
    os.symlink(target, link)
    for p in (mine, other, target):
        os.utime(p, (old, old))
    async with conch.Runtime(
        conch.Config(result_detail="full", data_dir=str(data), log_ttl_s=86400)
    ):
        pass
    assert not os.path.exists(mine)
    assert other.exists() and target.exists() and os.path.islink(link)


async def test_data_dir_symlink_is_not_followed(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    os.symlink(real, link)
    with pytest.raises(OSError):
        async with conch.Runtime(conch.Config(result_detail="full", data_dir=str(link))):
            pass


async def test_memory_stays_flat_for_50mb(rt):
    import psutil

    me = psutil.Process()
    before = me.memory_info().rss
    r = await rt.exec(command="head -c 50000000 /dev/urandom | base64 -w 100", yield_ms=60000)
    after = me.memory_info().rss
    assert r["state"] == "exited" and r["total_bytes"] > 60_000_000
    assert len(r["output"].encode()) <= 16384
    assert after - before < 20 * 1024 * 1024


async def test_cursor_inside_a_character_starts_at_the_next_one(rt):
    r = await rt.exec(command="printf 'a你b'")
    w = await rt.read(r["job_id"], cursor=2)
    assert w["output"] == "b" and w["cursor"] == 4 and "\ufffd" not in w["output"]


async def test_a_data_dir_renamed_under_the_server_changes_nothing_it_serves(tmp_path):
    """Issue 18.2: the server holds its data dir by descriptor. Renaming it (or a directory
    above it) aside and putting forged logs at its path changes no log the server serves,
    writes or removes: past jobs, spare logs made ahead and new jobs all stay in the real one."""
    parent = tmp_path / "state"
    data = parent / "conch"
    cfg = conch.Config(result_detail="full", data_dir=str(data), default_cwd=str(tmp_path))
    async with conch.Runtime(cfg) as rt:
        past = await rt.exec(command="echo real; exit 1")
        await rt.exec(command="true")  # spare logs exist
        shell = await rt.call_tool("shell_open", {})
        name = os.path.basename(past["log_path"])
        os.rename(parent, tmp_path / "moved")  # the directory above the data dir
        forged = data / "logs"
        forged.mkdir(parents=True)
        (data / "tmp").mkdir()
        (forged / name).write_text("FORGED: all tests passed\n")
        for spare in os.listdir(tmp_path / "moved" / "conch" / "logs"):
            (forged / spare).write_text("FORGED: all tests passed\n")
        r = await rt.read(job_id=past["job_id"], cursor=0)
        assert r["output"] == "real\n", r
        for _ in range(3):  # through the spare logs made ahead, and past them
            r = await rt.exec(command="echo new")
            assert r["output"] == "new\n", r
            assert (
                tmp_path / "moved" / "conch" / "logs" / os.path.basename(r["log_path"])
            ).exists()
            again = await rt.read(job_id=r["job_id"], cursor=0)
            assert again["output"] == "new\n"
        r = await rt.call_tool("exec", {"script": "echo from a script"})
        # a script (and a shell's command file) is opened by the child by its path: refused
        # with the reason, never a forged file run nor a made-up syntax error
        assert r["error"]["code"] == "spawn_failed", r
        assert "was moved or replaced" in r["error"]["message"]
        r = await rt.call_tool("exec", {"shell_id": shell["shell_id"], "command": "echo x"})
        assert r["error"]["code"] == "spawn_failed", r
    assert (forged / name).read_text() == "FORGED: all tests passed\n"  # never touched
