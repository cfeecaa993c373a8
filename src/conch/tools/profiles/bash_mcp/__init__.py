"""Profile ``bash-mcp``: @1agents/bash-mcp's ``bash.*`` methods on the runtime.

Mapping: ``bash.exec`` is a one-shot runtime job (``wait_ms`` is the yield, ``timeout_ms`` the
deadline), its ``job_id`` is the Conch job id; stdout and stderr are read apart from the job's
log, each clipped to ``max_output_bytes`` at a UTF-8 boundary (head only, as the seed did);
``bash.search`` is the runtime's ripgrep search. ``isError`` is set whenever ``success`` is
false, with the seed's codes and ``Unknown parameter: <k>`` / ``Missing parameter: <k>``.

The package: ``tools.json`` (the six methods' descriptors as data: name, title, description,
input and output schemas, and the ``readOnlyHint`` / ``destructiveHint`` / ``idempotentHint``
of their annotations; the annotations' ``title`` and ``openWorldHint`` are the ones every
Conch-published tool has), ``handlers`` (the methods) and ``results`` (job results, the seed's
failures and codes); this module puts them together as the profile.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from conch.tools.profiles._common import Profile, guard
from conch.tools.profiles.bash_mcp.handlers import HANDLERS
from conch.tools.profiles.bash_mcp.results import Fail, error_result, failure, result_is_error
from conch.tools.tool import Tool, WireShape

_CONTRACT = Path(__file__).with_name("tools.json")


@lru_cache(maxsize=1)
def _descriptors() -> list[dict[str, Any]]:
    return list(json.loads(_CONTRACT.read_text(encoding="utf-8")))


@lru_cache(maxsize=1)
def tools() -> tuple[Tool, ...]:
    """The profile's six methods."""
    out = []
    for d in _descriptors():
        fn, progress = HANDLERS[d["name"]]
        hints = d["annotations"]
        out.append(
            Tool(
                d["name"],
                d["title"],
                d["description"],
                d["inputSchema"],
                d["outputSchema"],
                guard(fn, lambda e, args: failure(e.code, e.message), Fail),
                read_only=hints["readOnlyHint"],
                destructive=hints["destructiveHint"],
                idempotent=hints["idempotentHint"],
                progress=progress,
                wire=WireShape(own_error_shapes=True),
            )
        )
    return tuple(out)


PROFILE = Profile("bash-mcp", tools, error_result=error_result, result_is_error=result_is_error)
