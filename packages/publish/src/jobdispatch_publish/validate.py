"""Configuration checked against a JSON Schema, every problem reported at its own path.

jsonschema's own messages quote the offending value, and a misplaced secret would then be printed
back; these messages name the path and the rule only. An unknown key is reported at the key's own
path (``credentials[1].auth.rolee: unknown key``), which is what a person fixing the file needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jobdispatch.errors import Problem, ValidationError

__all__ = ["check", "problems"]


def _path(prefix: str, parts: Iterable[Any]) -> str:
    out = prefix
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _describe(err: Any) -> list[tuple[list[Any], str]]:
    """(extra path parts, message) for one jsonschema error, without the instance's value."""
    kind, rule = err.validator, err.validator_value
    if kind == "additionalProperties" and isinstance(err.instance, Mapping):
        known = set(err.schema.get("properties", {}))
        return [([k], "unknown key") for k in sorted(set(err.instance) - known)]
    if kind == "required":
        return [([k], "is required") for k in rule if k not in err.instance]
    messages = {
        "type": lambda: f"must be of type {rule if isinstance(rule, str) else ' or '.join(rule)}",
        "enum": lambda: "must be one of " + ", ".join(map(repr, rule)),
        "const": lambda: f"must be {rule!r}",
        "pattern": lambda: f"must match {rule}",
        "minLength": lambda: f"must be at least {rule} characters long",
        "minimum": lambda: f"must be at least {rule}",
        "maximum": lambda: f"must be at most {rule}",
        "exclusiveMinimum": lambda: f"must be more than {rule}",
        "minItems": lambda: f"must have at least {rule} items",
    }
    return [([], messages[kind]() if kind in messages else f"fails the {kind!r} rule")]


def problems(instance: Any, schema: Mapping[str, Any], *, prefix: str = "") -> list[Problem]:
    """Every problem of ``instance`` against ``schema``, paths starting with ``prefix``."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    found: list[Problem] = []
    for err in validator.iter_errors(instance):
        if err.validator in ("allOf", "if"):
            continue  # their sub-errors are reported on their own
        for extra, message in _describe(err):
            found.append(Problem(_path(prefix, [*err.absolute_path, *extra]), message))
    return sorted(set(found), key=lambda p: p.path)


def check(instance: Any, schema: Mapping[str, Any], *, prefix: str = "", subject: str = "") -> None:
    """Raise :class:`ValidationError` listing every problem, if there is any."""
    found = problems(instance, schema, prefix=prefix)
    if found:
        raise ValidationError(found, subject=subject)
