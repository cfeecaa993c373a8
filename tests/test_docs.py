"""The repository's documents keep the promises the project makes about them: the README is
short enough to read, and the code and docs cite the contract in the repository
(docs/spec.md), not a file outside it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_stays_under_8_kb():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= 8192, f"README.md is {size} bytes"


def test_no_citation_of_a_spec_outside_the_repository():
    bare = re.compile(r"(?<![\w/.])SPEC §")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in ("src", "tests", "docs", "bench")
        for path in sorted((ROOT / top).rglob("*"))
        if path.suffix in {".py", ".md"}
        and path.is_file()
        and path.name not in {"test_docs.py", "spec.md"}  # (the contract names the old form)
        and "results" not in path.parts  # (benchmark records, kept as they were written)
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if bare.search(line)
    ]
    assert not found, found


def test_the_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    missing = [
        link
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
        if "://" not in link and not (ROOT / link).exists()
    ]
    assert not missing, missing
