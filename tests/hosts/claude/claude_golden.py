"""Golden files of what Claude Code showed the model: ``golden/<scenario>.json``.

Only the random parts are normalized: Conch's job and shell ids, the run's tmp dir (also as the
host spells it in its project dir names), the host's session ids and millisecond timestamps.
:func:`check` compares; with ``CONCH_UPDATE_GOLDEN=1`` it rewrites the file instead.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).with_name("golden")
UPDATE = os.environ.get("CONCH_UPDATE_GOLDEN", "") not in ("", "0")

_RANDOM = [
    (re.compile(r"\bj_[0-9a-f]{10}\b"), "j_<id>"),
    (re.compile(r"\bs_[0-9a-f]{6,}\b"), "s_<id>"),
    (re.compile(r"(?<![0-9])1[6-9][0-9]{11}(?![0-9])"), "<ms>"),  # epoch ms, 2020-2033
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
]


def _slug(path: Path) -> str:
    """The name Claude Code gives a project dir under ``<config>/projects/``."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


def normalize(value: Any, run_dir: Path) -> Any:
    """``value`` with every string's random parts replaced by placeholders."""
    if isinstance(value, str):
        value = value.replace(str(run_dir), "<run>").replace(_slug(run_dir), "<run-slug>")
        for pattern, placeholder in _RANDOM:
            value = pattern.sub(placeholder, value)
        return value
    if isinstance(value, dict):
        return {k: normalize(v, run_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v, run_dir) for v in value]
    return value


def check(scenario: str, seen: Any) -> None:
    """Assert ``seen`` (already normalized) equals ``golden/<scenario>.json``."""
    path = GOLDEN / f"{scenario}.json"
    text = json.dumps(seen, indent=1, ensure_ascii=False) + "\n"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no {path.relative_to(GOLDEN.parent)}: run with CONCH_UPDATE_GOLDEN=1"
    assert seen == json.loads(path.read_text()), (
        f"Claude Code showed the model something else than {path.name} holds"
        " (rerun with CONCH_UPDATE_GOLDEN=1 if the change is meant)"
    )
