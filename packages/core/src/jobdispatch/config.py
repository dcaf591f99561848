"""Validating a plugin's configuration against its JSON Schema before the plugin sees it.

Additional properties are refused at every level, whatever the plugin's schema says, so a typo
in a key is an error that names the key's path instead of a setting silently ignored.

Non-finite numbers (``nan``, ``inf``, ``-inf``, which TOML writes plainly) are refused at every
level too. JSON Schema cannot do it: ``minimum`` and ``maximum`` are comparisons, and every
comparison with NaN is false, so ``poll = nan`` passed ``exclusiveMinimum: 0`` and reached
``time.sleep``. Every configuration (each adapter's cluster table, the record store's, each
escalation sink's, an adapter's ``[resources.ADAPTER]`` table) goes through
:func:`validate_config`, so checking here covers them all, whatever a plugin's schema forgets.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema

from jobdispatch.errors import Problem, ValidationError

__all__ = ["ecma_pattern", "non_finite", "strict_schema", "validate_config"]


def ecma_pattern(pattern: str) -> str:
    r"""A JSON Schema ``pattern`` (an ECMA-262 regular expression) for Python's ``re``.

    In ECMA-262 ``$`` matches only at the end of the text; in Python it also matches before a
    final newline, so ``^[a-z]+$`` let ``"gpu\n"`` through, and a partition, path or name with
    a trailing newline passed every schema. Each ``$`` that is an anchor (not escaped, not in
    a character class) becomes ``\Z``, Python's end of text."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        out.append("\\Z" if c == "$" and not in_class else c)
        i += 1
    return "".join(out)


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` in which every object refuses properties it does not name, and
    every ``pattern`` means for Python what it means in JSON Schema (see ``ecma_pattern``)."""
    strict = copy.deepcopy(dict(schema))

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" or "properties" in node:
                node.setdefault("additionalProperties", False)
            if isinstance(node.get("pattern"), str):
                node["pattern"] = ecma_pattern(node["pattern"])
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


def non_finite(config: Any) -> Iterator[tuple[tuple[str | int, ...], float]]:
    """The path and value of every NaN or infinity anywhere in ``config``, in document order.

    Iterative, so a deeply nested value cannot exhaust the stack that is checking it."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), config)]
    while stack:
        at, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            yield at, value
        elif isinstance(value, Mapping):
            stack.extend(((*at, k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list | tuple):
            stack.extend(((*at, i), v) for i, v in reversed(list(enumerate(value))))


def validate_config(config: Any, schema: Mapping[str, Any] | None, *, subject: str) -> None:
    """Raise ValidationError naming every offending key's path (``transport.host``)."""
    if schema is None:
        schema = {"type": "object", "properties": {}}
    validator = jsonschema.Draft202012Validator(strict_schema(schema))
    problems = [
        Problem(_path(at) or "(top level)", f"must be a finite number, got {value!r}")
        for at, value in non_finite(config)
    ]
    # The schema's own words about a non-finite value ("inf is greater than the maximum of
    # 600") would only repeat the problem above, less clearly.
    told = {p.path for p in problems}
    for error in sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path)):
        where = _path(error.absolute_path)
        if where in told:
            continue
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
