"""Issue 18.7: a person reads on the dashboard the command that runs: invisible and bidi
format characters are shown escaped, and refused in `purpose`."""

from __future__ import annotations

import sys
import unicodedata

import pytest

import conch

pytestmark = pytest.mark.anyio

# every format character (Cf) of Unicode, and the line and paragraph separators
INVISIBLE = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"] + [
    "\u2028",
    "\u2029",
]


async def test_every_invisible_character_of_a_command_is_shown_escaped(tmp_path):
    trick = "echo ok #\u202e ;fr- mr\u202c\u2066\u200b"
    cfg = conch.Config(data_dir=str(tmp_path / "d"), default_cwd=str(tmp_path))
    async with conch.Runtime(cfg) as rt:
        await rt.call_tool("exec", {"command": trick})
        await rt.call_tool("exec", {"argv": ["printf", "%s", "".join(INVISIBLE)]})
        await rt.call_tool("exec", {"script": "echo \u2067x\u2069\n"})
        state = await rt.watch.jobs()
    shown = [j["what"] for j in state["jobs"]]
    assert r"echo ok #\u202e ;fr- mr\u202c\u2066\u200b" in shown
    assert any(r"\u2067x\u2069" in w for w in shown)
    for text in shown:
        assert not any(c in text for c in INVISIBLE), text
    assert all(f"\\u{ord(c):04x}" in "".join(shown) for c in INVISIBLE if ord(c) <= 0xFFFF)


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u200b", "\ufeff", "\u061c", "\u2028"])
async def test_purpose_refuses_invisible_and_bidi_characters(tmp_path, char):
    cfg = conch.Config(data_dir=str(tmp_path / "d"), default_cwd=str(tmp_path))
    async with conch.Runtime(cfg) as rt:
        r = await rt.call_tool("exec", {"command": "true", "purpose": f"check{char} it"})
    assert r["error"]["code"] == "invalid_argument", r
    assert f"U+{ord(char):04X}" in r["error"]["message"]
