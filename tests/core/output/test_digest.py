"""Tests for conch.core.output.digest: the lines that say what went wrong, never more."""

from __future__ import annotations

import random
import time

import pytest
from digest_checks import adversarial, check_faithful

from conch.core.output.digest import (
    ELLIPSIS,
    LINE_BOUND,
    LINE_CHARS,
    Digest,
    Digester,
    digest_bytes,
    unit_text,
)


def texts(d: Digest | None) -> list[str]:
    assert d is not None
    return [e["text"] for e in d["lines"]]


def at(log: bytes, text: str) -> int:
    """The cursor of the line of ``log`` that starts with ``text``."""
    i = log.find(text.encode())
    assert i >= 0
    return log.rfind(b"\n", 0, i) + 1


# -- the families --------------------------------------------------------------------------

GCC = (
    b"a.c: In function \xe2\x80\x98main\xe2\x80\x99:\n"
    b"a.c:1:31: error: \xe2\x80\x98x\xe2\x80\x99 undeclared (first use in this function)\n"
    b"    1 | int main(void){ return x + ; }\n"
    b"a.c:1:31: note: each undeclared identifier is reported only once\n"
    b"a.c:1:21: warning: unused variable \xe2\x80\x98y\xe2\x80\x99 [-Wunused-variable]\n"
    b"make: *** [Makefile:2: all] Error 1\n"
)


def test_gcc_errors_listed_warnings_counted_and_no_counts_invented() -> None:
    d = digest_bytes(GCC)
    assert texts(d) == [
        "a.c:1:31: error: \u2018x\u2019 undeclared (first use in this function)",
        "make: *** [Makefile:2: all] Error 1",
    ]
    assert d is not None and "counts" not in d  # gcc prints no totals
    assert d["omitted"] == [
        {"kind": "warning", "lines": 1, "first": at(GCC, "a.c:1:21"), "last": at(GCC, "a.c:1:21")}
    ]
    check_faithful(GCC, d)


def test_coloured_gcc_is_read_as_a_person_sees_it() -> None:
    log = b"\x1b[01m\x1b[Ka.c:3:5:\x1b[m\x1b[K \x1b[01;31m\x1b[Kerror: \x1b[m\x1b[Kboom\n"
    assert texts(digest_bytes(log)) == ["a.c:3:5: error: boom"]


RUST = (
    b"   Compiling r v0.1.0 (/tmp/r)\n"
    b"warning: unused variable: `y`\n"
    b" --> src/main.rs:1:35\n"
    b"error[E0308]: mismatched types\n"
    b" --> src/main.rs:1:26\n"
    b"  |\n"
    b'1 | fn main() { let x: i32 = "s"; }\n'
    b'error: could not compile `r` (bin "r") due to 1 previous error; 1 warning emitted\n'
)


def test_rust_error_keeps_its_location_and_the_summary_counts() -> None:
    d = digest_bytes(RUST)
    assert texts(d) == [
        "error[E0308]: mismatched types",
        " --> src/main.rs:1:26",
        'error: could not compile `r` (bin "r") due to 1 previous error; 1 warning emitted',
    ]
    assert d is not None
    assert d["counts"] == {"errors": 1, "warnings": 1}
    assert d["counts_from"] == at(RUST, "error: could not")
    assert d["omitted"][0]["kind"] == "warning" and d["omitted"][0]["lines"] == 2
    check_faithful(RUST, d)


@pytest.mark.parametrize(
    ("log", "wanted"),
    [
        (b"src/a.ts(3,5): error TS2322: Type 'string' is not assignable\n", 1),
        (b"src/a.ts:3:5 - error TS2322: Type 'string' is not assignable\n", 1),
        (b"m.py:2: error: Incompatible types in assignment  [assignment]\n", 1),
        (b"m.py:1:8: F401 [*] `os` imported but unused\n", 1),
        (b"./main.go:5:2: undefined: x\n", 1),
        (b"F401 [*] `os` imported but unused\n --> m.py:1:8\n  |\n", 2),
        (b'npm ERR! code ELIFECYCLE\nnpm error Missing script: "tset"\n', 2),
        (b"  \xe2\x97\x8f Suite \xe2\x80\xba adds\n\n    expect(received).toBe(expected)\n", 1),
        (b"gmake[1]: *** [sub.mk:3: x.o] Error 2\n", 1),
        (b"/usr/bin/ld: a.o: in function `main': a.c:(.text+0x5): undefined reference to `f'\n", 1),
    ],
)
def test_each_family_without_configuration(log: bytes, wanted: int) -> None:
    d = digest_bytes(log)
    assert len(texts(d)) == wanted
    check_faithful(log, d)


def test_eslint_problem_comes_with_its_file() -> None:
    log = (
        b"\n/home/u/p/src/a.js\n"
        b"  1:10  error  'foo' is defined but never used  no-unused-vars\n"
        b"  2:1   error  Unexpected console statement     no-console\n\n"
        b"\xe2\x9c\x96 2 problems (2 errors, 0 warnings)\n"
    )
    d = digest_bytes(log)
    assert texts(d)[:3] == [
        "/home/u/p/src/a.js",
        "  1:10  error  'foo' is defined but never used  no-unused-vars",
        "  2:1   error  Unexpected console statement     no-console",
    ]
    assert d is not None and d["counts"] == {"problems": 2, "errors": 2, "warnings": 0}
    check_faithful(log, d)


TRACEBACK = (
    b"starting\n"
    b"Traceback (most recent call last):\n"
    b'  File "/app/main.py", line 9, in <module>\n'
    b"    main()\n"
    b'  File "/app/main.py", line 5, in main\n'
    b"    raise ValueError('bad input')\n"
    b"ValueError: bad input\n"
)


def test_python_traceback_keeps_the_last_frame_and_the_exception() -> None:
    d = digest_bytes(TRACEBACK)
    assert texts(d) == ['  File "/app/main.py", line 5, in main', "ValueError: bad input"]
    check_faithful(TRACEBACK, d)


PYTEST_COLLECTION = (
    b"============================= test session starts ==============================\n"
    b"collected 2 items / 1 error\n\n"
    b"==================================== ERRORS ====================================\n"
    b"______________________ ERROR collecting tests/test_imp.py ______________________\n"
    b"ImportError while importing test module '/tmp/p/tests/test_imp.py'.\n"
    b"Traceback:\n"
    b"/usr/lib/python3.11/importlib/__init__.py:126: in import_module\n"
    b"    return _bootstrap._gcd_import(name[level:], package, level)\n"
    b"tests/test_imp.py:1: in <module>\n"
    b"    import nope\n"
    b"E   ModuleNotFoundError: No module named 'nope'\n"
    b"=========================== short test summary info ============================\n"
    b"ERROR tests/test_imp.py\n"
    b"!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!\n"
    b"=============================== 1 error in 0.25s ===============================\n"
)


def test_pytest_collection_error_reads_as_an_error_not_as_no_tests() -> None:
    d = digest_bytes(PYTEST_COLLECTION)
    assert texts(d) == [
        "______________________ ERROR collecting tests/test_imp.py ______________________",
        "tests/test_imp.py:1: in <module>",
        "E   ModuleNotFoundError: No module named 'nope'",
        "ERROR tests/test_imp.py",
        "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!",
        "=============================== 1 error in 0.25s ===============================",
    ]
    assert d is not None and d["counts"] == {"errors": 1}
    assert not any("no tests" in t.lower() for t in texts(d))
    check_faithful(PYTEST_COLLECTION, d)


def pytest_run(n: int, failing: set[int], fake_summary_at: int | None = None) -> bytes:
    out = [b"============================= test session starts ==============================\n"]
    for i in range(n):
        verdict = b"FAILED" if i in failing else b"PASSED"
        out.append(b"tests/test_m.py::test_%d %s [ %d%%]\n" % (i, verdict, 100 * i // n))
        if i == fake_summary_at:
            out.append(
                b"========================= %d passed in 1.00s =========================\n" % n
            )
    out.append(
        b"=========================== short test summary info ============================\n"
    )
    for i in sorted(failing):
        out.append(b"FAILED tests/test_m.py::test_%d - assert %d == 0\n" % (i, i))
    out.append(
        b"================== %d failed, %d passed in 3.10s ==================\n"
        % (len(failing), n - len(failing))
    )
    out.append(b"Name  Stmts  Miss  Cover\n" + b"src/x.py  10  0  100%\n" * 200)
    return b"".join(out)


def test_pytest_failures_from_the_short_summary_and_its_final_line() -> None:
    log = pytest_run(300, {3, 150, 299})
    d = digest_bytes(log)
    assert texts(d) == [
        "FAILED tests/test_m.py::test_3 - assert 3 == 0",
        "FAILED tests/test_m.py::test_150 - assert 150 == 0",
        "FAILED tests/test_m.py::test_299 - assert 299 == 0",
        "================== 3 failed, 297 passed in 3.10s ==================",
    ]
    assert d is not None and d["counts"] == {"failed": 3, "passed": 297}
    check_faithful(log, d)


def test_a_summary_line_printed_by_a_test_is_not_taken_for_the_programs() -> None:
    log = pytest_run(50, {7}, fake_summary_at=10)
    d = digest_bytes(log)
    assert d is not None
    assert d["counts"] == {"failed": 1, "passed": 49}  # the last one
    assert d["summaries"] == 2  # and it says there was another
    fake = at(log, "========================= 50 passed")
    assert fake in [e["cursor"] for e in d["lines"]]  # which is listed too
    assert d["counts_from"] > fake


def test_a_fake_summary_after_the_real_one_is_listed_beside_it() -> None:
    # the last summary-shaped line wins, so a fake one printed last would be taken: the
    # digest lists every summary line and says how many, and the exit code stands beside it
    log = pytest_run(20, {1}) + b"=== 20 passed in 0.10s ===\n"
    d = digest_bytes(log)
    assert d is not None and d["summaries"] == 2
    assert "================== 1 failed, 19 passed in 3.10s ==================" in texts(d)
    assert "FAILED tests/test_m.py::test_1 - assert 1 == 0" in texts(d)


UNITTEST = (
    b"FE.\n"
    b"======================================================================\n"
    b"ERROR: test_b (__main__.T.test_b)\n"
    b"----------------------------------------------------------------------\n"
    b"Traceback (most recent call last):\n"
    b'  File "/tmp/u.py", line 4, in test_b\n'
    b'    def test_b(self): raise ValueError("boom")\n'
    b"ValueError: boom\n\n"
    b"----------------------------------------------------------------------\n"
    b"Ran 3 tests in 0.005s\n\n"
    b"FAILED (errors=1)\n"
)


def test_unittest_failure_and_its_verdict() -> None:
    d = digest_bytes(UNITTEST)
    assert texts(d) == [
        "ERROR: test_b (__main__.T.test_b)",
        '  File "/tmp/u.py", line 4, in test_b',
        "ValueError: boom",
        "Ran 3 tests in 0.005s",
        "FAILED (errors=1)",
    ]
    assert d is not None and d["counts"] == {"tests": 3, "errors": 1}
    assert "summaries" not in d  # `Ran` and its verdict are one summary


def test_an_ok_line_alone_is_no_verdict() -> None:
    assert digest_bytes(b"checking\nOK\n") is None


GO_TEST = (
    b"=== RUN   TestAdd\n"
    b"--- FAIL: TestAdd (0.00s)\n"
    b"    add_test.go:9: got 3, want 4\n"
    b"    --- FAIL: TestAdd/neg (0.00s)\n"
    b"        add_test.go:14: got -1, want 1\n"
    b"FAIL\n"
    b"FAIL\texample.com/add\t0.003s\n"
)


def test_go_test_failures_with_their_messages() -> None:
    d = digest_bytes(GO_TEST)
    assert texts(d) == [
        "--- FAIL: TestAdd (0.00s)",
        "    add_test.go:9: got 3, want 4",
        "    --- FAIL: TestAdd/neg (0.00s)",
        "        add_test.go:14: got -1, want 1",
        "FAIL",
        "FAIL\texample.com/add\t0.003s",
    ]
    check_faithful(GO_TEST, d)


def test_go_panic_keeps_its_first_frame() -> None:
    log = (
        b"panic: runtime error: index out of range\n\ngoroutine 1 [running]:\n"
        b"main.main()\n\t/src/main.go:7 +0x1d\nexit status 2\n"
    )
    assert texts(digest_bytes(log)) == [
        "panic: runtime error: index out of range",
        "\t/src/main.go:7 +0x1d",
    ]


def test_node_uncaught_error_keeps_its_first_at_line() -> None:
    log = (
        b"/app/x.js:2\n  throw new Error('nope');\n  ^\n\n"
        b"Error: nope\n    at Object.<anonymous> (/app/x.js:2:9)\n    at Module._compile\n"
    )
    assert texts(digest_bytes(log)) == ["Error: nope", "    at Object.<anonymous> (/app/x.js:2:9)"]


def test_jest_summary_counts() -> None:
    log = (
        b"  \xe2\x97\x8f math \xe2\x80\xba adds\n\nTest Suites: 1 failed, 1 total\n"
        b"Tests:       1 failed, 3 passed, 4 total\n"
    )
    d = digest_bytes(log)
    assert d is not None and d["counts"] == {"failed": 1, "passed": 3, "total": 4}
    assert d["summaries"] == 2


@pytest.mark.parametrize("thread_id", ["", " (7664)"])  # newer Rust prints the thread's id
def test_cargo_test_failures_and_result(thread_id: str) -> None:
    log = (
        b"running 2 tests\ntest tests::ok ... ok\ntest tests::bad ... FAILED\n\nfailures:\n\n"
        b"---- tests::bad stdout ----\nthread 'tests::bad'%s panicked at src/lib.rs:10:5:\n"
        b"assertion `left == right` failed\n\n"
        b"test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; "
        b"finished in 0.00s\n"
    ) % thread_id.encode()
    d = digest_bytes(log)
    assert texts(d)[:3] == [
        "test tests::bad ... FAILED",
        f"thread 'tests::bad'{thread_id} panicked at src/lib.rs:10:5:",
        "assertion `left == right` failed",
    ]
    assert d is not None
    assert d["counts"] == {"passed": 1, "failed": 1, "ignored": 0, "measured": 0, "filtered out": 0}


def test_other_programs_fall_back_to_lines_marked_as_errors() -> None:
    log = b"fetching\nfatal: not a git repository\n[12:00] ERROR db down\nall fine\n"
    assert texts(digest_bytes(log)) == ["fatal: not a git repository", "[12:00] ERROR db down"]


def test_nothing_recognised_is_no_digest() -> None:
    assert digest_bytes(b"compiling\n" * 1000 + b"done\n") is None
    assert digest_bytes(b"") is None
    assert digest_bytes(b"", always=True) == {"lines": []}


def test_zero_exit_with_an_unrecognised_summary_gets_no_status() -> None:
    # a test runner whose summary is not one the digest knows: nothing is made up for it
    log = b"suite A ... 12 ok\nsuite B ... 3 ok\nResults: 15 checks green\n"
    assert digest_bytes(log) is None


# -- the bound ------------------------------------------------------------------------------


def test_every_failure_up_to_the_bound_then_the_count_and_cursors_of_the_rest() -> None:
    errors = [b"src/f%d.c:%d:1: error: bad %d\n" % (i, i, i) for i in range(LINE_BOUND + 70)]
    log = b"".join(b"noise line %d\n" % i + e for i, e in enumerate(errors))
    d = digest_bytes(log)
    assert d is not None
    assert texts(d) == [e.decode().rstrip("\n") for e in errors[:LINE_BOUND]]
    [omitted] = d["omitted"]
    assert omitted["kind"] == "failure" and omitted["lines"] == 70
    assert omitted["first"] == at(log, f"src/f{LINE_BOUND}.c")
    assert omitted["last"] == at(log, f"src/f{LINE_BOUND + 69}.c")


def test_failure_heads_come_before_their_details_when_room_is_short() -> None:
    one = (
        b"Traceback (most recent call last):\n"
        b'  File "t.py", line %d, in f\n'
        b"    x()\n"
        b"RuntimeError: case %d\n"
    )
    log = b"".join(one % (i, i) for i in range(LINE_BOUND))
    d = digest_bytes(log)
    assert d is not None
    assert [t for t in texts(d) if t.startswith("RuntimeError")] == [
        f"RuntimeError: case {i}" for i in range(LINE_BOUND)
    ]
    assert d["omitted"] == [
        {
            "kind": "failure",
            "lines": LINE_BOUND,
            "first": at(log, '  File "t.py", line 0'),
            "last": at(log, f'  File "t.py", line {LINE_BOUND - 1}'),
        }
    ]


def test_warnings_listed_when_nothing_failed() -> None:
    log = b"a.c:1:1: warning: one\nb.c:2:2: warning: two\n"
    assert texts(digest_bytes(log)) == ["a.c:1:1: warning: one", "b.c:2:2: warning: two"]


def test_a_long_line_is_cut_and_says_so() -> None:
    log = b"a.c:1:1: error: " + b"x" * 5000 + b"\n"
    [line] = texts(digest_bytes(log))
    assert len(line) == LINE_CHARS + 1 and line.endswith(ELLIPSIS)


# -- any split, any bytes ------------------------------------------------------------------------

MIXED = (
    GCC
    + RUST
    + TRACEBACK
    + PYTEST_COLLECTION
    + UNITTEST
    + GO_TEST
    + b"tail without newline error: x"
)


def chunked(data: bytes, cuts: list[int]) -> Digest | None:
    d = Digester()
    prev = 0
    for c in [*cuts, len(data)]:
        d.feed(data[prev:c])
        prev = c
    d.close()
    return d.digest()


def test_the_same_digest_for_every_split_in_two() -> None:
    whole = digest_bytes(MIXED)
    for i in range(len(MIXED) + 1):
        assert chunked(MIXED, [i]) == whole, i


def test_the_same_digest_fed_byte_by_byte_and_in_random_chunks() -> None:
    whole = digest_bytes(MIXED)
    assert chunked(MIXED, list(range(1, len(MIXED)))) == whole
    rng = random.Random(7)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(MIXED)), rng.randint(1, 30)))
        assert chunked(MIXED, cuts) == whole


def test_long_lines_are_cut_into_the_same_pieces_for_any_split() -> None:
    long = ("é" * 20000).encode() + b" error: deep inside\n" + b"\x1b[31m" * 5000 + b"FATAL x\n"
    whole = digest_bytes(long)
    assert whole is not None and whole["lines"]
    rng = random.Random(3)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(long)), rng.randint(1, 8)))
        assert chunked(long, cuts) == whole
    check_faithful(long, whole)


def test_random_and_adversarial_output_never_crashes_nor_invents_a_line() -> None:
    rng = random.Random(11)
    for _ in range(150):
        log = adversarial(rng, rng.randint(0, 60000))
        d = digest_bytes(log, always=True)
        check_faithful(log, d)
        cuts = sorted(rng.sample(range(1, len(log)), min(5, len(log) - 1))) if len(log) > 1 else []
        assert chunked(log, cuts) == digest_bytes(log)


@pytest.mark.parametrize(
    "log",
    [
        pytest.param(b"x" * (8 << 20), id="one 8 MB line"),
        pytest.param(b"\rerror: frame" * (1 << 19), id="a carriage-return storm"),
        pytest.param(b"\x1b[1;31merror\x1b[0m: \x1b]8;;u\x07y\n" * (1 << 15), id="ANSI noise"),
        pytest.param(bytes(range(256)) * (1 << 15), id="invalid UTF-8"),
        pytest.param(b"error: e\n" * (1 << 17), id="every line a hit"),
    ],
)
def test_adversarial_output_is_digested_in_bounded_time(log: bytes) -> None:
    started = time.process_time()
    d = digest_bytes(log, always=True)
    spent = time.process_time() - started
    check_faithful(log, d)
    assert d is not None and len(d["lines"]) <= LINE_BOUND
    # ~4-8 MB of the worst kind (every line hit) in seconds, not minutes; the reader's time
    # budget (digest_log.TIME_BUDGET_S) bounds what a result waits whatever the rate
    assert spent < 20, spent


def test_unit_text_normalizes_and_cuts() -> None:
    assert unit_text(b"\x1b[31mred\x1b[0m\r\n") == "red"
    assert unit_text(b"50%\r100%\n") == "100%"
    assert unit_text(b"bad \xff\n") == "bad \ufffd"
