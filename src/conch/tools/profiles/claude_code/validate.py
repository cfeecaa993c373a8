"""Arguments checked the way Claude Code 2.1.197 checks its own tools' input, in its words:
``<tool_use_error>InputValidationError: Bash failed due to the following issue:\\n...`` (a
missing required parameter, an unexpected one, a wrong type: each wording seen with the real
CLI). Bash's ``timeout`` takes a numeric string as a number, as the original does; the
defaults TaskOutput lists as required (``block``, ``timeout``) are filled in."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from conch.errors import ConchError

_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "number": (int, float),
    "boolean": bool,
}


def _js_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _numeric(value: Any) -> Any:
    """A numeric string as a number (the original coerces Bash's timeout)."""
    if isinstance(value, str) and value.strip():
        try:
            number = float(value)
        except ValueError:
            return value
        if math.isfinite(number):
            return int(number) if number.is_integer() else number
    return value


def validator(
    name: str, schema: dict[str, Any], coerce: tuple[str, ...] = (), required: tuple[str, ...] = ()
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The check of tool ``name``: ``required`` are the parameters it cannot do without (the
    schema's other required ones have defaults)."""
    props: dict[str, Any] = schema["properties"]

    def check(args: dict[str, Any]) -> dict[str, Any]:
        out = {k: props[k]["default"] for k in props if "default" in props[k]}
        issues = []
        for key, spec in props.items():
            if key not in args:
                if key in required:
                    issues.append(f"The required parameter `{key}` is missing")
                continue
            value = _numeric(args[key]) if key in coerce else args[key]
            wanted = spec["type"]
            ok = isinstance(value, _TYPES[wanted]) and not (
                wanted == "number" and isinstance(value, bool)
            )
            if not ok:
                issues.append(
                    f"The parameter `{key}` type is expected as `{wanted}` but provided as "
                    f"`{_js_type(value)}`"
                )
                continue
            low, high = spec.get("minimum"), spec.get("maximum")
            if low is not None and value < low:
                issues.append(f"The parameter `{key}` must be at least {low}")
            elif high is not None and value > high:
                issues.append(f"The parameter `{key}` must be at most {high}")
            out[key] = value
        issues += [f"An unexpected parameter `{k}` was provided" for k in args if k not in props]
        if issues:
            plural = "issue" if len(issues) == 1 else "issues"
            text = f"{name} failed due to the following {plural}:\n" + "\n".join(issues)
            raise ConchError("invalid_argument", f"InputValidationError: {text}")
        return out

    return check
