"""conch.core.search: real ripgrep, real temp dirs."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from conch.core.requests import SearchRequest
from conch.core.search import RgInfo, Searcher, find_rg
from conch.errors import ConchError
from conch.tools.profiles.conch import SEARCH_DESCRIPTION
from conch.tools.schemas import SEARCH_INPUT as SEARCH_INPUT_SCHEMA
from conch.tools.schemas import SEARCH_OUTPUT as SEARCH_OUTPUT_SCHEMA

RG = find_rg()
pytestmark = pytest.mark.skipif(RG is None, reason="ripgrep not available")

KEYS = {"mode", "matches", "files", "counts", "truncated", "timed_out", "elapsed_ms"}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def search(root: Path, **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = run(Searcher(str(root)).search(SearchRequest(**kw)))
    assert set(result) >= KEYS
    return result


def fail(root: Path, **kw: Any) -> ConchError:
    with pytest.raises(ConchError) as info:
        run(Searcher(str(root)).search(SearchRequest(**kw)))
    return info.value


def rg_children() -> list[psutil.Process]:
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == "rg" or (RG is not None and child.exe() == RG.path):
                out.append(child)
        except psutil.Error:
            continue
    return out


def make_tree(root: Path, dirs: int, files_per_dir: int, needle_every: int = 0) -> int:
    n = 0
    for d in range(dirs):
        sub = root / f"d{d // 10}" / f"e{d}"
        sub.mkdir(parents=True, exist_ok=True)
        for f in range(files_per_dir):
            body = f"line one {d} {f}\nfiller text here\n"
            if needle_every and (d * files_per_dir + f) % needle_every == 0:
                body += "the NEEDLE is here\n"
                n += 1
            (sub / f"f{f}.txt").write_text(body)
    return n


# -- rg discovery ------------------------------------------------------------------------


def test_find_rg_and_info(tmp_path: Path) -> None:
    assert RG is not None
    assert os.path.isabs(RG.path) and os.access(RG.path, os.X_OK)
    assert RG.version and RG.version[0].isdigit()
    assert find_rg() is RG  # cached
    assert Searcher(str(tmp_path)).info() == {"path": RG.path, "version": RG.version}
    assert Searcher(str(tmp_path), rg=None).info() == {"path": None, "version": None}


def test_rg_not_found(tmp_path: Path) -> None:
    err = fail_with(Searcher(str(tmp_path), rg=None), pattern="x")
    assert err.code == "rg_not_found"
    assert "ripgrep" in err.message
    missing = RgInfo(path=str(tmp_path / "no-such-rg"), version="0")
    err = fail_with(Searcher(str(tmp_path), rg=missing), pattern="x")
    assert err.code == "rg_not_found"


def fail_with(searcher: Searcher, **kw: Any) -> ConchError:
    with pytest.raises(ConchError) as info:
        run(searcher.search(SearchRequest(**kw)))
    return info.value


def test_import_is_lazy() -> None:
    code = (
        "import subprocess, time\n"
        "calls = []\n"
        "orig = subprocess.run\n"
        "subprocess.run = lambda *a, **k: calls.append(a) or orig(*a, **k)\n"
        "import conch.core.search\n"
        "assert calls == [], calls\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- argument validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {"pattern": ""},
        {"pattern": "a\0b"},
        {"pattern": "x", "path": "a\0b"},
        {"pattern": "x", "path": ""},
        {"pattern": "x", "glob": ["*.py\0"]},
        {"pattern": "x", "glob": [""]},
        {"pattern": "x", "mode": "lines"},
        {"pattern": "x", "max_matches": 0},
        {"pattern": "x", "max_matches": True},
        {"pattern": "x", "context": 101},
        {"pattern": "x", "timeout_ms": 0},
        {"pattern": "x", "regex": "yes"},
    ],
)
def test_invalid_arguments(tmp_path: Path, kw: dict[str, Any]) -> None:
    assert fail(tmp_path, **kw).code == "invalid_argument"


# -- the seed-3 contract -----------------------------------------------------------------


def test_literal_with_glob_and_quoted_file_name(tmp_path: Path) -> None:
    name = 'it\'s a "quoted" file.ts'
    (tmp_path / name).write_text("first line\nconst x = 1; // TODO [a] fix\nTODO a\n")
    (tmp_path / "other.js").write_text("TODO [a]\n")
    r = search(tmp_path, pattern="TODO [a]", glob=["*.ts"])
    assert r["mode"] == "matches"
    assert len(r["matches"]) == 1
    m = r["matches"][0]
    assert m["path"] == name
    assert m["line"] == 2
    assert m["text"] == "const x = 1; // TODO [a] fix"
    start = m["text"].encode().index(b"TODO [a]")
    assert m["submatches"] == [{"start": start, "end": start + 8, "text": "TODO [a]"}]
    assert m["column"] == start + 1
    assert m["before"] == [] and m["after"] == []
    assert r["files"] == [name]
    assert r["counts"] == {name: 1}
    assert r["truncated"] is False and r["timed_out"] is False
    assert isinstance(r["elapsed_ms"], int)
    assert "errors" not in r and "files_base64" not in r


def test_no_match_is_success(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    r = search(tmp_path, pattern="absent")
    assert r["matches"] == [] and r["files"] == [] and r["counts"] == {}
    assert r["truncated"] is False


def test_invalid_regex_fails(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("[\n")
    err = fail(tmp_path, pattern="[", regex=True)
    assert err.code == "search_failed"
    assert "regex" in err.message
    assert len(err.message.encode()) <= 2048
    # Literal by default: the same pattern is fine.
    assert search(tmp_path, pattern="[")["counts"] == {"a.txt": 1}


def test_invalid_glob_fails(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    err = fail(tmp_path, pattern="x", glob=["["])
    assert err.code == "search_failed"
    assert "glob" in err.message


def test_missing_path_fails(tmp_path: Path) -> None:
    err = fail(tmp_path, pattern="x", path="nope")
    assert err.code == "search_failed"
    assert "nope" in err.message
    err = fail_with(Searcher(str(tmp_path / "gone")), pattern="x")
    assert err.code == "search_failed"


def test_max_matches_truncates(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hit\nhit\nhit\n")
    (tmp_path / "b.txt").write_text("hit\n")
    r = search(tmp_path, pattern="hit", max_matches=1)
    assert len(r["matches"]) == 1 and r["truncated"] is True
    assert r["timed_out"] is False
    r = search(tmp_path, pattern="hit", max_matches=4)
    assert len(r["matches"]) == 4 and r["truncated"] is False
    r = search(tmp_path, pattern="hit", max_matches=3)
    assert len(r["matches"]) == 3 and r["truncated"] is True
    r = search(tmp_path, pattern="hit", mode="files", max_matches=1)
    assert len(r["files"]) == 1 and r["truncated"] is True
    r = search(tmp_path, pattern="hit", mode="count", max_matches=1)
    assert len(r["files"]) == 1 and len(r["counts"]) == 1 and r["truncated"] is True
    r = search(tmp_path, pattern="hit", mode="count", max_matches=2)
    assert r["counts"] == {"a.txt": 3, "b.txt": 1} and r["truncated"] is False


def test_max_matches_stops_rg_early(tmp_path: Path) -> None:
    # 200k matching lines; with max_matches=5 we must not wait for (or parse) all of them.
    (tmp_path / "big.txt").write_text("needle\n" * 200_000)
    r = search(tmp_path, pattern="needle", max_matches=5)
    assert len(r["matches"]) == 5 and r["truncated"] is True
    assert [m["line"] for m in r["matches"]] == [1, 2, 3, 4, 5]
    assert rg_children() == []


# -- nothing a caller passes becomes an rg option ----------------------------------------


@pytest.fixture
def pre_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A program on PATH that, if rg ever ran it as a --pre preprocessor, makes a marker file.

    Returns its name (``--pre=NAME`` would run it) and the marker's path.
    """
    marker = tmp_path / "PWNED"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "conchpre"
    script.write_text(f'#!/bin/sh\ntouch "{marker}"\ncat "$1"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    # The script really works as a preprocessor when asked for explicitly.
    assert RG is not None
    probe = tmp_path / "probe.txt"
    probe.write_text("z\n")
    subprocess.run(
        [RG.path, "--no-config", "--pre=conchpre", "z", str(probe)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    assert marker.exists()
    marker.unlink()
    probe.unlink()
    return "conchpre", marker


def test_option_like_patterns_are_literal(tmp_path: Path, pre_script: tuple[str, Path]) -> None:
    script, marker = pre_script
    data = tmp_path / "data"
    data.mkdir()
    (data / "opts.txt").write_text(
        f"x --pre={script} y\nuse -e here\nrun --files now\nplain\nsh --pre=/bin/sh\n"
    )
    cases = [(f"--pre={script}", 1), ("-e", 2), ("--files", 3), ("--pre=/bin/sh", 5)]
    for pattern, line in cases:
        r = search(tmp_path, pattern=pattern, path="data")
        assert [(m["path"], m["line"]) for m in r["matches"]] == [("data/opts.txt", line)]
        assert r["matches"][0]["submatches"][0]["text"] == pattern
    assert not marker.exists()


def test_option_like_path_and_glob_are_literal(
    tmp_path: Path, pre_script: tuple[str, Path]
) -> None:
    script, marker = pre_script
    weird = tmp_path / f"--pre={script}"
    weird.write_text("needle in option-named file\n")
    (tmp_path / "--pre=x").mkdir()
    (tmp_path / "--pre=x" / "f.txt").write_text("needle\n")
    r = search(tmp_path, pattern="needle", path=f"--pre={script}")
    assert [m["line"] for m in r["matches"]] == [1]
    r = search(tmp_path, pattern="needle", path="--pre=x")
    assert r["files"] == ["--pre=x/f.txt"]
    # A glob that looks like an option is a glob: it matches the oddly named file only.
    r = search(tmp_path, pattern="needle", glob=[f"--pre={script}"])
    assert r["files"] == [f"--pre={script}"]
    r = search(tmp_path, pattern="needle", glob=["--pre=sh"])
    assert r["files"] == []
    r = search(tmp_path, pattern="needle", glob=["--files"], mode="files")
    assert r["files"] == []
    assert not marker.exists()


def test_ripgrep_config_path_is_ignored(
    tmp_path: Path, pre_script: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    script, marker = pre_script
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("alpha\nbeta\n")
    config = tmp_path / "rgrc"
    config.write_text(f"--pre={script}\n--invert-match\n--ignore-case\n--max-count=0\n")
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(config))
    r = search(tmp_path, pattern="ALPHA", path="data")
    assert r["matches"] == []  # --ignore-case from the config did not apply
    r = search(tmp_path, pattern="alpha", path="data")
    assert [(m["line"], m["text"]) for m in r["matches"]] == [(1, "alpha")]  # not inverted
    r = search(tmp_path, pattern="a.p", regex=True, path="data", mode="count")
    assert r["counts"] == {"data/a.txt": 1}
    assert not marker.exists()


# -- engine safety -----------------------------------------------------------------------


def test_catastrophic_regex_is_fast(tmp_path: Path) -> None:
    (tmp_path / "aaa.txt").write_bytes(b"a" * (10 * 1024 * 1024))
    t0 = time.monotonic()
    r = search(tmp_path, pattern="(a*)*b", regex=True, timeout_ms=60000)
    elapsed = time.monotonic() - t0
    assert r["matches"] == [] and r["timed_out"] is False
    assert elapsed < 30


# -- encodings, binary files -------------------------------------------------------------


def test_binary_files(tmp_path: Path) -> None:
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01\x02needle\x00\xff\xfe\n" * 10)
    (tmp_path / "text.txt").write_text("a needle\n")
    r = search(tmp_path, pattern="needle")
    # rg skips binary files found while walking a directory.
    assert r["files"] == ["text.txt"]
    # Given explicitly, rg searches it; the result is sane whatever rg reports.
    r = search(tmp_path, pattern="needle", path="bin.dat")
    assert r["truncated"] is False
    for m in r["matches"]:
        assert m["path"] == "bin.dat" and isinstance(m["text"], str)


def test_non_utf8_line(tmp_path: Path) -> None:
    raw = b"caf\xe9 needle \xff end"
    (tmp_path / "latin1.txt").write_bytes(b"first\n" + raw + b"\r\n")
    r = search(tmp_path, pattern="needle", context=1)
    (m,) = r["matches"]
    assert m["line"] == 2
    assert base64.b64decode(m["text_base64"]) == raw
    assert m["text"] == raw.decode("utf-8", "replace")
    start = raw.index(b"needle")
    assert m["submatches"] == [{"start": start, "end": start + 6, "text": "needle"}]
    assert m["column"] == start + 1
    assert m["before"] == ["first"]
    assert "path_base64" not in m


@pytest.mark.skipif(sys.platform != "linux", reason="needs a filesystem taking any bytes")
def test_non_utf8_file_name(tmp_path: Path) -> None:
    name = b"caf\xe9.txt"
    with open(os.path.join(os.fsencode(tmp_path), name), "wb") as f:
        f.write(b"needle\n")
    (tmp_path / "ok.txt").write_text("needle\n")
    for mode in ("matches", "files", "count"):
        r = search(tmp_path, pattern="needle", mode=mode)
        assert sorted(r["files"]) == sorted(["ok.txt", name.decode("utf-8", "replace")])
        assert len(r["files_base64"]) == len(r["files"])
        pairs = dict(zip(r["files"], r["files_base64"], strict=True))
        assert pairs["ok.txt"] is None
        assert base64.b64decode(pairs[name.decode("utf-8", "replace")]) == name
        if mode == "matches":
            (bad,) = [m for m in r["matches"] if "path_base64" in m]
            assert base64.b64decode(bad["path_base64"]) == name
            assert bad["path"] == name.decode("utf-8", "replace")
            (good,) = [m for m in r["matches"] if "path_base64" not in m]
            assert good["path"] == "ok.txt"
        if mode == "count":
            assert sorted(r["counts"].values()) == [1, 1]


# -- rg's filters ------------------------------------------------------------------------


@pytest.mark.needs("git")
def test_gitignore_respected(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("ignored.txt\nbuild/\n")
    (tmp_path / "ignored.txt").write_text("needle\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.txt").write_text("needle\n")
    (tmp_path / "kept.txt").write_text("needle\n")
    assert search(tmp_path, pattern="needle")["files"] == ["kept.txt"]


def test_dot_ignore_respected(tmp_path: Path) -> None:
    (tmp_path / ".ignore").write_text("skip.txt\n")
    (tmp_path / "skip.txt").write_text("needle\n")
    (tmp_path / "kept.txt").write_text("needle\n")
    assert search(tmp_path, pattern="needle", mode="files")["files"] == ["kept.txt"]


def test_hidden_only_when_asked(tmp_path: Path) -> None:
    (tmp_path / ".secret").write_text("needle\n")
    (tmp_path / ".hdir").mkdir()
    (tmp_path / ".hdir" / "x.txt").write_text("needle\n")
    (tmp_path / "shown.txt").write_text("needle\n")
    assert search(tmp_path, pattern="needle")["files"] == ["shown.txt"]
    r = search(tmp_path, pattern="needle", hidden=True, mode="files")
    assert sorted(r["files"]) == [".hdir/x.txt", ".secret", "shown.txt"]


def test_ignore_case(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("Needle\nNEEDLE\nneedle\nother\n")
    assert search(tmp_path, pattern="needle")["counts"] == {"a.txt": 1}
    r = search(tmp_path, pattern="needle", ignore_case=True)
    assert [m["line"] for m in r["matches"]] == [1, 2, 3]
    assert [m["submatches"][0]["text"] for m in r["matches"]] == ["Needle", "NEEDLE", "needle"]


def test_regex_submatches(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x foo12 bar foo345\n")
    (m,) = search(tmp_path, pattern=r"foo\d+", regex=True)["matches"]
    assert [(s["start"], s["end"], s["text"]) for s in m["submatches"]] == [
        (2, 7, "foo12"),
        (12, 18, "foo345"),
    ]
    assert m["column"] == 3


def test_context(tmp_path: Path) -> None:
    lines = [f"line{i}" for i in range(1, 13)]
    lines[4] = "hit5"
    lines[6] = "hit7"
    lines[11] = "hit12"
    (tmp_path / "a.txt").write_text("\n".join(lines) + "\n")
    r = search(tmp_path, pattern="hit", context=2)
    m5, m7, m12 = r["matches"]
    assert (m5["line"], m5["before"], m5["after"]) == (5, ["line3", "line4"], ["line6"])
    assert (m7["line"], m7["before"], m7["after"]) == (7, ["line6"], ["line8", "line9"])
    assert (m12["line"], m12["before"], m12["after"]) == (12, ["line10", "line11"], [])
    r = search(tmp_path, pattern="hit")
    assert all(m["before"] == [] and m["after"] == [] for m in r["matches"])


def test_files_and_count_modes(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hit hit\nhit\nno\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("hit\n")
    (tmp_path / "c.txt").write_text("nothing\n")
    r = search(tmp_path, pattern="hit", mode="files")
    assert r["mode"] == "files" and r["matches"] == [] and r["counts"] == {}
    assert sorted(r["files"]) == ["a.txt", "sub/b.txt"]
    r = search(tmp_path, pattern="hit", mode="count")
    assert r["mode"] == "count" and r["matches"] == []
    assert r["counts"] == {"a.txt": 2, "sub/b.txt": 1}  # matching lines, not matches
    assert sorted(r["files"]) == ["a.txt", "sub/b.txt"]
    # A single file given as path still reports its name.
    r = search(tmp_path, pattern="hit", mode="count", path="a.txt")
    assert r["counts"] == {"a.txt": 2}
    r = search(tmp_path, pattern="zzz", mode="count")
    assert r["counts"] == {} and r["files"] == []


def test_paths_relative_to_default_cwd(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("hit\n")
    assert search(tmp_path, pattern="hit")["files"] == ["sub/a.txt"]
    assert search(tmp_path, pattern="hit", path="sub")["files"] == ["sub/a.txt"]
    assert search(tmp_path, pattern="hit", path=".")["files"] == ["./sub/a.txt"]
    absolute = str(tmp_path / "sub")
    assert search(tmp_path, pattern="hit", path=absolute)["files"] == [absolute + "/a.txt"]


def test_unreadable_file_is_reported_not_fatal() -> None:
    root = Path(tempfile.mkdtemp(prefix="conch-unreadable-"))
    try:
        root.chmod(0o755)
        (root / "ok.txt").write_text("hit\n")
        locked = root / "locked.txt"
        locked.write_text("hit\n")
        locked.chmod(0)
        rg = find_rg()
        assert rg is not None
        if os.geteuid() == 0:
            # root reads everything: run rg itself as an unprivileged user
            setpriv = shutil.which("setpriv")
            assert setpriv, "setpriv (util-linux) is needed to drop privileges"
            wrapper = root / "rg-as-nobody"
            wrapper.write_text(
                f"#!/bin/sh\nexec {setpriv} --reuid=65534 --regid=65534 --clear-groups "
                f'{rg.path} "$@"\n'
            )
            wrapper.chmod(0o755)
            rg = RgInfo(str(wrapper), rg.version)
        searcher = Searcher(str(root), rg=rg)
        a = asyncio.run(searcher.search(SearchRequest(pattern="hit", glob=["*.txt"])))
        assert a["files"] == ["ok.txt"]
        assert any("locked.txt" in e for e in a["errors"])
        b = asyncio.run(searcher.search(SearchRequest(pattern="absent", glob=["*.txt"])))
        assert b["files"] == [] and b["errors"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- time limits and cancellation --------------------------------------------------------


def test_timeout_reported(tmp_path: Path) -> None:
    make_tree(tmp_path, dirs=30, files_per_dir=40, needle_every=7)
    r = search(tmp_path, pattern="NEEDLE", timeout_ms=1, max_matches=1000)
    if r["timed_out"]:
        assert r["truncated"] is True
    else:  # finished within 1 ms: then it is complete
        assert r["truncated"] is False and len(r["matches"]) == 1200 // 7 + 1
    assert rg_children() == []


def test_timeout_on_blocked_rg(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # rg blocks opening a FIFO nobody writes to
    t0 = time.monotonic()
    r = search(tmp_path, pattern="x", path="fifo", timeout_ms=300)
    assert r["timed_out"] is True and r["truncated"] is True and r["matches"] == []
    assert 0.25 < time.monotonic() - t0 < 10
    assert rg_children() == []


async def _wait_for_rg() -> None:
    deadline = time.monotonic() + 10
    while not rg_children():
        assert time.monotonic() < deadline, "rg never started"
        await asyncio.sleep(0.01)


def test_cancellation_kills_rg(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    async def main() -> None:
        task = asyncio.ensure_future(
            Searcher(str(tmp_path)).search(SearchRequest(pattern="x", path="fifo"))
        )
        await _wait_for_rg()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Killed and reaped before the cancellation propagated: no child, no zombie.
        assert rg_children() == []

    run(main())


def test_cancellation_kills_rg_on_big_tree(tmp_path: Path) -> None:
    make_tree(tmp_path, dirs=40, files_per_dir=30, needle_every=3)

    async def main() -> None:
        searcher = Searcher(str(tmp_path))
        task = asyncio.ensure_future(
            searcher.search(SearchRequest(pattern="line", max_matches=1000))
        )
        await asyncio.sleep(0)  # let it spawn rg
        for _ in range(200):
            if rg_children() or task.done():
                break
            await asyncio.sleep(0.001)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        assert rg_children() == []

    run(main())


def test_concurrent_searches(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("beta\n")

    async def main() -> list[dict[str, Any]]:
        s = Searcher(str(tmp_path))
        return list(
            await asyncio.gather(
                *(s.search(SearchRequest(pattern=p)) for p in ["alpha", "beta"] * 10)
            )
        )

    results = run(main())
    assert [r["files"] for r in results] == [["a.txt"], ["b.txt"]] * 10


# -- the tool's schemas ------------------------------------------------------------------


def test_schemas() -> None:
    assert SEARCH_INPUT_SCHEMA["type"] == "object"
    assert SEARCH_INPUT_SCHEMA["additionalProperties"] is False
    assert SEARCH_INPUT_SCHEMA["required"] == ["pattern"]
    props = SEARCH_INPUT_SCHEMA["properties"]
    assert set(props) == {
        "pattern",
        "path",
        "regex",
        "ignore_case",
        "hidden",
        "glob",
        "context",
        "mode",
        "max_matches",
        "timeout_ms",
    }
    assert all(p.get("description") for p in props.values())
    assert props["mode"]["enum"] == ["matches", "files", "count"]
    assert (props["max_matches"]["minimum"], props["max_matches"]["maximum"]) == (1, 1000)
    assert SEARCH_OUTPUT_SCHEMA["type"] == "object"
    out_props = SEARCH_OUTPUT_SCHEMA["properties"]
    assert set(out_props) >= KEYS
    # lean results leave fields at their default out: the schema states each one
    assert all("default" in p for p in out_props.values())
    assert 2 <= SEARCH_DESCRIPTION.count(". ") + 1 <= 5


def test_results_validate_against_output_schema(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    (tmp_path / "a.txt").write_bytes(b"x\nhit \xff\ny\n")
    for mode in ("matches", "files", "count"):
        r = search(tmp_path, pattern="hit", mode=mode, context=1)
        jsonschema.validate(r, SEARCH_OUTPUT_SCHEMA)
    jsonschema.Draft202012Validator.check_schema(SEARCH_INPUT_SCHEMA)
    jsonschema.validate({"pattern": "x", "glob": ["*.py"]}, SEARCH_INPUT_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"pattern": "x", "host": "h"}, SEARCH_INPUT_SCHEMA)


def test_rg_gets_the_child_env_without_conch_secrets(tmp_path: Path) -> None:
    """The runtime's rg runs with the environment every child gets: no Conch secret in it."""
    secret = "tok-8c2d41e0aa"
    seen = tmp_path / "env.txt"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    rg = bin_dir / "rg"  # answers --version like ripgrep, records its environment otherwise
    rg.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "ripgrep 14.1.0"; exit 0; fi\n'
        f"env > {seen}\nexit 1\n"
    )
    rg.chmod(0o755)
    child = (
        "import asyncio, conch\n"
        "async def main():\n"
        f"    cfg = conch.Config(data_dir={str(tmp_path / 'd')!r}, auth_token={secret!r})\n"
        "    async with conch.Runtime(cfg) as rt:\n"
        "        await rt.call_tool('search', {'pattern': 'x'})\n"
        "asyncio.run(main())\n"
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "CONCH_AUTH_TOKEN": secret,
        "SOMETHING_ELSE": secret,
    }
    subprocess.run([sys.executable, "-c", child], env=env, check=True, timeout=60)
    text = seen.read_text()
    assert secret not in text and "CONCH_AUTH_TOKEN" not in text
    assert "CONCH_TAG=" in text
