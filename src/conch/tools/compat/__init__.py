"""Seed-compatible tool profiles: the tool sets of ai-device-bash, tfbash-mcp and
@1agents/bash-mcp with their own names, parameters, result fields and error codes (SPEC §7).

Each module is a thin mapping onto :class:`conch.core.runtime.Runtime`: it validates what the
seed validated, calls the runtime, and reshapes the result. Execution, shells, logs and search
are never reimplemented here.
"""
