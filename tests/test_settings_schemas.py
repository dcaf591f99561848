"""Every settings schema a plugin registers (adapters, record stores, escalation sinks,
credential sources) refuses a non-finite number at each of its numeric keys, and bounds each
of them above, so ``nan``, ``inf`` and ``10**20`` are errors naming the key instead of a
crashed runner or a traceback (issue 34, item 4). Cross-package: it loads every installed
plugin."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch import ValidationError
from jobdispatch.config import validate_config
from jobdispatch.plugins import KINDS, load


def _schemas() -> list[tuple[str, Mapping[str, Any]]]:
    plugins = load()
    return [
        (f"{kind} {entry.name}", entry.schema)
        for kind in KINDS
        for entry in plugins.registry(kind)
        if entry.schema is not None
    ]


def _numbers(node: Any, at: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Each numeric schema node reachable through ``properties``, with its key path."""
    if not isinstance(node, Mapping):
        return
    kinds = node.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "number" in kinds or "integer" in kinds:
        yield at, node
    for key, sub in (node.get("properties") or {}).items():
        yield from _numbers(sub, (*at, key))
    for combinator in ("oneOf", "anyOf", "allOf"):
        for sub in node.get(combinator) or ():
            yield from _numbers(sub, at)
    if isinstance(node.get("items"), Mapping):
        yield from _numbers(node["items"], at)


_NUMERIC = [
    pytest.param(schema, path, id=f"{name}: {'.'.join(path)}")
    for name, schema in _schemas()
    for path, _ in _numbers(schema)
    if path
]


def test_the_plugins_register_numeric_settings() -> None:
    assert len(_NUMERIC) > 10  # the walk found the settings it is about


@pytest.mark.parametrize(("schema", "path"), _NUMERIC)
@given(value=st.sampled_from([math.nan, math.inf, -math.inf]))
def test_no_settings_schema_lets_a_non_finite_number_through(
    schema: Mapping[str, Any], path: tuple[str, ...], value: float
) -> None:
    config: dict[str, Any] = {}
    node = config
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    with pytest.raises(ValidationError) as info:
        validate_config(config, schema, subject="test")
    assert ".".join(path) in info.value.paths


@pytest.mark.parametrize(("name", "schema"), [pytest.param(n, s, id=n) for n, s in _schemas()])
def test_every_numeric_setting_has_an_upper_bound(name: str, schema: Mapping[str, Any]) -> None:
    unbounded = [
        ".".join(path) or "(items)"
        for path, node in _numbers(schema)
        if "maximum" not in node and "exclusiveMaximum" not in node
    ]
    assert not unbounded, f"{name}: no maximum for {unbounded}"
