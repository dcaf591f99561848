"""Validating a plugin's configuration against its JSON Schema before the plugin sees it.

Additional properties are refused at every level, whatever the plugin's schema says, so a typo
in a key is an error that names the key's path instead of a setting silently ignored.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonschema

from jobdispatch.errors import Problem, ValidationError

__all__ = ["strict_schema", "validate_config"]


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` in which every object refuses properties it does not name."""
    strict = copy.deepcopy(dict(schema))

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" or "properties" in node:
                node.setdefault("additionalProperties", False)
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(strict)
    return strict


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validate_config(config: Any, schema: Mapping[str, Any] | None, *, subject: str) -> None:
    """Raise ValidationError naming every offending key's path (``transport.host``)."""
    if schema is None:
        schema = {"type": "object", "properties": {}}
    validator = jsonschema.Draft202012Validator(strict_schema(schema))
    problems = []
    for error in sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path)):
        where = _path(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = set((error.schema.get("properties") or {}).keys())
            for key in sorted(k for k in error.instance if k not in allowed):
                known = ", ".join(sorted(allowed)) or "none"
                full = f"{where}.{key}" if where else key
                problems.append(Problem(full, f"unknown key (known keys: {known})"))
            continue
        problems.append(Problem(where or "(top level)", error.message))
    if problems:
        raise ValidationError(problems, subject=subject)
