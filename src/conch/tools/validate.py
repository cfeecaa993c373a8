"""A small, strict JSON Schema validator for tool inputs (no third-party dependency).

Supports what the catalogue uses: type, properties, required, additionalProperties,
patternProperties, propertyNames, enum, const, minimum, maximum, minLength, maxLength, pattern,
items, minItems, maxItems, anyOf. Booleans are never integers; no string may contain NUL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from conch.errors import ConchError

_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


@lru_cache(maxsize=256)
def _regex(p: str) -> re.Pattern[str]:
    return re.compile(p)


def _type_ok(value: Any, t: str) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[t])


def _fail(path: str, msg: str) -> ConchError:
    return ConchError(
        "invalid_argument", f"{path or 'arguments'}: {msg}", field=path or None, value=msg
    )


def validate(schema: dict[str, Any], value: Any, path: str = "") -> None:
    """Raise ConchError("invalid_argument") naming the first problem found."""
    if "anyOf" in schema:
        errors = []
        for sub in schema["anyOf"]:
            try:
                validate(sub, value, path)
                break
            except ConchError as e:
                errors.append(e.message)
        else:
            raise _fail(path, "does not match any allowed form: " + " | ".join(errors))
    t = schema.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        if not any(_type_ok(value, x) for x in types):
            raise _fail(path, f"expected {' or '.join(types)}, got {_json_type(value)}")
    if "enum" in schema and value not in schema["enum"]:
        raise _fail(path, f"must be one of {', '.join(map(repr, schema['enum']))}")
    if "const" in schema and value != schema["const"]:
        raise _fail(path, f"must be {schema['const']!r}")
    if isinstance(value, str):
        if "\x00" in value:
            raise _fail(path, "must not contain NUL characters")
        if "minLength" in schema and len(value) < schema["minLength"]:
            raise _fail(path, f"must be at least {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise _fail(path, f"must be at most {schema['maxLength']} characters")
        if "pattern" in schema and not _regex(schema["pattern"]).search(value):
            raise _fail(path, f"must match {schema['pattern']}")
    elif _type_ok(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise _fail(path, f"must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise _fail(path, f"must be <= {schema['maximum']}")
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            raise _fail(path, f"must have at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise _fail(path, f"must have at most {schema['maxItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                validate(schema["items"], item, f"{path}[{i}]")
    elif isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                raise _fail(f"{path}.{key}" if path else key, "is required")
        pattern_props = schema.get("patternProperties", {})
        names = schema.get("propertyNames")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            raise _fail(path, f"must have at most {schema['maxProperties']} entries")
        for key, item in value.items():
            sub_path = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str) or "\x00" in key:
                raise _fail(path, "keys must be strings without NUL")
            if names is not None:
                validate(names, key, sub_path)
            if key in props:
                validate(props[key], item, sub_path)
                continue
            matched = False
            for pat, sub in pattern_props.items():
                if _regex(pat).search(key):
                    validate(sub, item, sub_path)
                    matched = True
            if matched:
                continue
            extra = schema.get("additionalProperties", True)
            if extra is False:
                raise _fail(sub_path, "is not a known argument")
            if isinstance(extra, dict):
                validate(extra, item, sub_path)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


# a lone UTF-16 surrogate: a valid JSON escape ("\\udcff") but no Unicode character, so no
# UTF-8 text. All of them, U+DC80-U+DCFF too: that is how Python carries bytes that are not
# UTF-8 (surrogateescape), but a call's strings become bytes in many places (stdin, a script,
# a path, an environment, a pattern), and one rule at the door holds for every field and every
# profile; no result hands such a string out to be passed back (paths that are not UTF-8 come
# with their bytes in base64)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _is_text(s: str) -> bool:
    """No lone surrogate in ``s`` (the common cases in C: a regex over 16 KiB costs ~0.1 ms)."""
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_text(value: Any, path: str = "") -> None:
    """Raise invalid_argument for the first string (a key too) holding a lone surrogate."""
    if isinstance(value, str):
        m = None if _is_text(value) else _LONE_SURROGATE.search(value)
        if m:
            raise _fail(
                path.encode("utf-8", "backslashreplace").decode("utf-8"),  # (a key's own)
                f"holds a lone UTF-16 surrogate (U+{ord(m.group()):04X} at {m.start()}), "
                "which is no Unicode character: send text as UTF-8",
            )
    elif isinstance(value, Mapping):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            check_text(k, sub)
            check_text(v, sub)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_text(v, f"{path}[{i}]")


def encodable(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD, as
    output bytes that are not UTF-8 are: a path Conch reports (a shell's cwd in a directory
    whose name is not UTF-8) then encodes on every wire instead of failing the answer. The
    value itself when nothing needs replacing."""
    if isinstance(value, str):
        return value if _is_text(value) else _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        pairs = [(encodable(k), encodable(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    if isinstance(value, list):
        items = [encodable(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
