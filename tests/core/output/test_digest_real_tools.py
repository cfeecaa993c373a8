"""Digests of what real compilers, linters and test runners print (core/output/digest.py):
each tool runs for real on a small project with known faults, and the digest of its output
must name every fault (location and message), hold the counts the tool printed and no
other, and never a line the output does not hold."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from digest_checks import check_faithful

from conch.core.output.digest import Digest, digest_bytes

BIN = Path(sys.executable).parent


def run(argv: list[str], cwd: Path, **env: str) -> tuple[int, bytes]:
    """The tool's exit code and its output, stdout and stderr as one stream (as a job's)."""
    p = subprocess.run(
        argv,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "NO_COLOR": "1", **env},
        timeout=300,
        check=False,
    )
    return p.returncode, p.stdout


def digest_of(out: bytes) -> tuple[Digest, list[str]]:
    d = digest_bytes(out)
    assert d is not None, out.decode(errors="replace")[-2000:]
    check_faithful(out, d)
    return d, [e["text"] for e in d["lines"]]


def has(lines: list[str], *parts: str) -> bool:
    """Whether one line holds every part."""
    return any(all(p in line for p in parts) for line in lines)


@pytest.mark.needs("gcc", "make")
def test_make_with_gcc_names_both_errors_among_the_warnings(tmp_path: Path) -> None:
    for name in ("w1", "w2"):
        body = "".join(f"  int v{i} = {i};\n" for i in range(40))
        (tmp_path / f"{name}.c").write_text(f"int {name}(void) {{\n{body}  return 0;\n}}\n")
    (tmp_path / "bad.c").write_text(
        "int bad(void) {\n  int a = 1;\n  return a + missing_one;\n}\n"
        "int worse(void) {\n  return undefined_two * 2;\n}\n"
    )
    (tmp_path / "Makefile").write_text(
        "OBJS = w1.o bad.o w2.o\nall: $(OBJS)\n%.o: %.c\n\tgcc -Wall -c $< -o $@\n"
    )
    code, out = run(["make", "-k"], tmp_path, LC_ALL="C")
    assert code != 0
    d, lines = digest_of(out)
    assert has(lines, "bad.c:3:14: error:", "missing_one")
    assert has(lines, "bad.c:6:10: error:", "undefined_two")
    assert has(lines, "make: *** [Makefile:", "bad.o] Error 1")
    assert not any("warning:" in t for t in lines)  # counted, not listed, when errors exist
    assert "counts" not in d  # gcc and make print no totals
    (warned,) = [o for o in d["omitted"] if o["kind"] == "warning"]
    assert warned["lines"] == out.count(b": warning: ")


RUST_MAIN = """\
fn main() {
    let x: i32 = "one";
    let y: String = 5;
    println!("{} {}", x, y);
}
"""

RUST_TESTS = """\
fn main() {}

#[cfg(test)]
mod tests {
    #[test]
    fn passes() {}
    #[test]
    fn fails() { assert_eq!(1 + 1, 3, "arithmetic"); }
}
"""


def crate(root: Path, main: str) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "Cargo.toml").write_text(
        '[package]\nname = "noisy"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    (root / "src" / "main.rs").write_text(main)
    return root


@pytest.mark.needs("cargo")
def test_cargo_build_type_errors_with_their_locations_and_counts(tmp_path: Path) -> None:
    root = crate(tmp_path / "c", RUST_MAIN)
    target = str(tmp_path / "target")
    code, out = run(
        ["cargo", "build", "--offline", "--color", "never"], root, CARGO_TARGET_DIR=target
    )
    assert code != 0
    d, lines = digest_of(out)
    assert lines.count("error[E0308]: mismatched types") == 2
    assert " --> src/main.rs:2:18" in lines and " --> src/main.rs:3:21" in lines
    assert d["counts"] == {"errors": 2}  # "could not compile … due to 2 previous errors"


@pytest.mark.needs("cargo")
def test_cargo_test_failure_with_its_panic_and_the_result_line(tmp_path: Path) -> None:
    root = crate(tmp_path / "c", RUST_TESTS)
    target = str(tmp_path / "target")
    code, out = run(
        ["cargo", "test", "--offline", "--color", "never"],
        root,
        CARGO_TARGET_DIR=target,
        RUST_BACKTRACE="0",
    )
    assert code != 0
    d, lines = digest_of(out)
    assert "test tests::fails ... FAILED" in lines
    # the panic says where and why (rustc prints the thread's id beside its name now)
    assert has(lines, "thread 'tests::fails'", "panicked at src/main.rs:8:")
    assert "assertion `left == right` failed: arithmetic" in lines
    assert d["counts"] == {
        "passed": 1,
        "failed": 1,
        "ignored": 0,
        "measured": 0,
        "filtered out": 0,
    }


LINTED = """\
import os
import sys


def f(x: int) -> str:
    unused = 1
    return x


y: int = "s"
"""


@pytest.mark.parametrize("form", ["full", "concise"])
def test_ruff_names_each_problem_with_its_location(tmp_path: Path, form: str) -> None:
    (tmp_path / "m.py").write_text(LINTED)
    argv = [str(BIN / "ruff"), "check", "--no-cache", "--output-format", form, "m.py"]
    code, out = run(argv, tmp_path)
    assert code == 1
    d, lines = digest_of(out)
    for where, rule in (("1:8", "F401"), ("2:8", "F401"), ("6:5", "F841")):
        if form == "concise":
            assert has(lines, f"m.py:{where}: {rule}")
        else:
            assert has(lines, rule) and f" --> m.py:{where}" in lines
    assert d["counts"] == {"errors": 3}  # "Found 3 errors."


def test_mypy_names_each_error_and_its_totals(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(LINTED)
    code, out = run([str(BIN / "mypy"), "--no-incremental", "m.py"], tmp_path)
    assert code == 1
    d, lines = digest_of(out)
    assert has(lines, "m.py:7: error: Incompatible return value type")
    assert has(lines, "m.py:10: error: Incompatible types in assignment")
    assert d["counts"] == {"errors": 2, "files": 1}  # "Found 2 errors in 1 file (…)"


def test_pytest_names_every_failure_and_the_module_that_fails_to_import(tmp_path: Path) -> None:
    failing = []
    for m in range(1, 4):
        body = []
        for n in range(30):
            body.append(f"def test_{m}_{n}():\n    print('x' * 80)\n    assert {n} % 7 != 3\n")
            if n % 7 == 3:
                failing.append(f"test_m{m}.py::test_{m}_{n}")
        (tmp_path / f"test_m{m}.py").write_text("\n".join(body))
    (tmp_path / "test_broken.py").write_text("import not_a_module\n\ndef test_never():\n    pass\n")
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist"]
    code, out = run([*argv, "--continue-on-collection-errors", "-o", "addopts="], tmp_path)
    assert code == 1
    d, lines = digest_of(out)
    for test_id in failing:
        assert has(lines, f"FAILED {test_id} ")
    assert has(lines, "ERROR collecting test_broken.py")
    assert "E   ModuleNotFoundError: No module named 'not_a_module'" in lines
    assert d["counts"] == {"failed": 12, "passed": 78, "errors": 1}


def test_pytest_stopped_by_a_collection_error_never_reads_as_no_tests(tmp_path: Path) -> None:
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    (tmp_path / "test_broken.py").write_text("import not_a_module\n")
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist"]
    code, out = run([*argv, "-o", "addopts="], tmp_path)
    assert code == 2
    d, lines = digest_of(out)
    assert has(lines, "Interrupted: 1 error during collection")
    assert "E   ModuleNotFoundError: No module named 'not_a_module'" in lines
    assert d["counts"] == {"errors": 1}
    assert "passed" not in d["counts"] and "no tests ran" not in " ".join(lines)


def test_unittest_names_the_failure_and_the_error_and_its_verdict(tmp_path: Path) -> None:
    (tmp_path / "ut_mod.py").write_text(
        "import unittest\n\nclass T(unittest.TestCase):\n"
        "    def test_ok(self):\n        pass\n"
        "    def test_fail(self):\n        self.assertEqual(1, 2)\n"
        "    def test_err(self):\n        raise KeyError('k')\n"
    )
    code, out = run([sys.executable, "-m", "unittest", "ut_mod"], tmp_path)
    assert code == 1
    d, lines = digest_of(out)
    assert has(lines, "FAIL: test_fail (ut_mod.T.test_fail)")
    assert has(lines, "ERROR: test_err (ut_mod.T.test_err)")
    assert "AssertionError: 1 != 2" in lines and "KeyError: 'k'" in lines
    assert has(lines, "ut_mod.py", "line 7, in test_fail")
    assert d["counts"] == {"tests": 3, "failures": 1, "errors": 1}


def test_a_python_traceback_keeps_its_last_frame_and_exception(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(
        "def parse(s):\n    return int(s)\n\nfor i in range(50):\n    print('step', i)\n"
        "parse('x1')\n"
    )
    code, out = run([sys.executable, "app.py"], tmp_path)
    assert code == 1
    d, lines = digest_of(out)
    assert has(lines, "app.py", "line 2, in parse")
    assert "ValueError: invalid literal for int() with base 10: 'x1'" in lines
    assert "counts" not in d


NODE_APP = """\
function parse(s) {
  if (!s) throw new TypeError("parse: empty input");
}
for (let i = 0; i < 50; i++) console.log("step " + i);
parse("");
"""


@pytest.mark.needs("node")
def test_node_uncaught_error_keeps_its_message_and_where_it_was_thrown(tmp_path: Path) -> None:
    (tmp_path / "app.js").write_text(NODE_APP)
    code, out = run(["node", "app.js"], tmp_path)
    assert code == 1
    d, lines = digest_of(out)
    assert "TypeError: parse: empty input" in lines
    assert has(lines, "at parse (", "app.js:2:")
    assert "counts" not in d


@pytest.mark.needs("npm")
def test_npm_errors_are_listed(tmp_path: Path) -> None:
    (tmp_path / "app.js").write_text(NODE_APP)
    (tmp_path / "package.json").write_text(
        '{"name": "app", "version": "1.0.0", "scripts": {"build": "node app.js"}}\n'
    )
    npm_env = {
        "HOME": str(tmp_path),
        "npm_config_cache": str(tmp_path / ".npm"),
        "npm_config_update_notifier": "false",
    }
    code, out = run(["npm", "run", "build", "--offline"], tmp_path, **npm_env)
    assert code != 0
    _, lines = digest_of(out)
    assert "TypeError: parse: empty input" in lines  # the script's own error, through npm
    code, out = run(["npm", "run", "tset", "--offline"], tmp_path, **npm_env)
    assert code != 0
    _, lines = digest_of(out)
    assert has(lines, "npm ", "Missing script:", "tset")
