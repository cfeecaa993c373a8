"""What the model sees (issue 10): bytes of a tool result beyond the command's own output, per
call, for five small commands, in the two views hosts give a model:

* structured view: ``JSON.stringify(structuredContent)`` (compact), what Claude Code and VS Code
  hand the model whenever a result has structured content (text block dropped); a result
  without structured content falls back to its text;
* text view: the text blocks only.

"Beyond the command's own output" subtracts what ``bash -c CMD 2>&1`` prints, JSON-escaped in
the structured view (any JSON carrying the output pays the escaping) and raw in the text view.

    uv run python bench/model_view.py [--quick]                     # Conch, lean and full
    uv run python bench/model_view.py --server 'tfbash-mcp' --tool shell_exec \\
        --args '{"shell_id": "{shell}", "command": "{cmd}"}' --setup shell_open

``--server`` measures any stdio MCP server: a command line, the tool to call and an argument
template in which the string ``{cmd}`` is replaced by the command (``--setup TOOL`` first calls
TOOL with ``{}`` before each command and makes the ``shell_id`` it returns available as
``{shell}``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from mcp import Client, StdioServerParameters

COMMANDS = [
    ("echo hi", "echo hi"),
    ("failing ls", "ls /nonexistent-conch-model-view"),
    ("exit 2", "exit 2"),
    ("seq 1 200", "seq 1 200"),
    ("stdout+stderr", "echo out; echo err >&2"),
]


def own_output(cmd: str) -> str:
    out = subprocess.run(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return out.stdout.decode("utf-8", "replace")


def json_body(text: str) -> int:
    """Bytes ``text`` takes inside a JSON string (without the quotes)."""
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


def views(result: Any) -> tuple[int, int]:
    text = "".join(c.text for c in result.content if getattr(c, "type", None) == "text")
    if result.structured_content is not None:
        structured = json.dumps(
            result.structured_content, ensure_ascii=False, separators=(",", ":")
        )
    else:
        structured = text
    return len(structured.encode()), len(text.encode())


def fill(template: Any, values: dict[str, str]) -> Any:
    if isinstance(template, str):
        for k, v in values.items():
            template = template.replace("{" + k + "}", v)
        return template
    if isinstance(template, list):
        return [fill(t, values) for t in template]
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    return template


async def measure(
    argv: list[str],
    tool: str,
    template: Any,
    *,
    setup: str | None = None,
    env: dict[str, str] | None = None,
) -> list[tuple[str, int, int]]:
    """(label, structured overhead, text overhead) per command."""
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env or dict(os.environ))
    rows = []
    async with Client(params, mode="legacy") as c:
        values: dict[str, str] = {}
        for label, cmd in COMMANDS:
            if setup:  # a fresh shell per command: `exit 2` ends the one it runs in
                r = await c.call_tool(setup, {})
                sc = r.structured_content or json.loads(r.content[0].text)
                values["shell"] = str(sc.get("shell_id", ""))
            own = own_output(cmd)
            r = await c.call_tool(tool, fill(template, {**values, "cmd": cmd}))
            s, t = views(r)
            rows.append((label, s - json_body(own), t - len(own.encode())))
    return rows


def conch_argv(data_dir: str, detail: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "conch",
        "serve",
        "--data-dir",
        data_dir,
        "--result-detail",
        detail,
    ]


def table(columns: list[tuple[str, list[tuple[str, int, int]]]]) -> None:
    head = f"{'command':<15}" + "".join(f" | {name:^21}" for name, _ in columns)
    sub = f"{'':<15}" + "".join(f" | {'structured':>10} {'text':>10}" for _ in columns)
    print(head)
    print(sub)
    for i, (label, _) in enumerate(COMMANDS):
        line = f"{label:<15}"
        for _, rows in columns:
            line += f" | {rows[i][1]:>10} {rows[i][2]:>10}"
        print(line)
    line = f"{'median':<15}"
    for _, rows in columns:
        s = statistics.median(r[1] for r in rows)
        t = statistics.median(r[2] for r in rows)
        line += f" | {s:>10.0f} {t:>10.0f}"
    print(line)
    line = f"{'max':<15}"
    for _, rows in columns:
        line += f" | {max(r[1] for r in rows):>10} {max(r[2] for r in rows):>10}"
    print(line)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--server", help="a stdio MCP server's command line (measured instead of Conch)"
    )
    ap.add_argument("--tool", default="exec")
    ap.add_argument("--args", default='{"command": "{cmd}"}', help="argument template")
    ap.add_argument("--setup", help="tool called before each command ({shell} = its shell_id)")
    ap.add_argument("--name", help="column title for --server")
    opts = ap.parse_args()
    template = json.loads(opts.args)
    print("bytes beyond the command's own output, per call (structured = compact JSON of")
    print("structuredContent, or the text when there is none; text = the text blocks)\n")
    if opts.server:
        rows = await measure(shlex.split(opts.server), opts.tool, template, setup=opts.setup)
        table([(opts.name or opts.server[:21], rows)])
        return 0
    with tempfile.TemporaryDirectory(prefix="conch-model-view-") as d:
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        lean = await measure(conch_argv(d, "lean"), "exec", template, env=env)
        full = await measure(conch_argv(d, "full"), "exec", template, env=env)
    table([("conch lean", lean), ("conch full", full)])
    worst_s = max(r[1] for r in lean)
    worst_t = max(r[2] for r in lean)
    ratio = statistics.median(r[1] for r in full) / max(1, statistics.median(r[1] for r in lean))
    print(
        f"\nconch lean, worst call: structured {worst_s} B (target <= 80), "
        f"text {worst_t} B (target <= 40); full/lean structured ratio {ratio:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
