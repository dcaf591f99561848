"""``validate_config`` refuses NaN and infinities anywhere in a configuration, whatever the
schema says (issue 34, item 4): JSON Schema's bounds are comparisons, false for NaN, so
``poll = nan`` passed ``exclusiveMinimum: 0`` and every local runner died of it."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch import ValidationError
from jobdispatch.config import validate_config

_NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
_KEY = st.from_regex(r"[a-z_]{1,8}", fullmatch=True)
_FINITE = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
)
_DATA = st.recursive(
    _FINITE,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY, inner, max_size=3),
    max_leaves=12,
)


@st.composite
def _planted(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A table of finite values with one non-finite number somewhere inside it, and its path
    as a problem names it (``a.b[2]``)."""
    data: dict[str, Any] = draw(st.dictionaries(_KEY, _DATA, max_size=4))
    keys = draw(
        st.lists(_KEY | st.integers(0, 2), min_size=1, max_size=4).filter(
            lambda ks: isinstance(ks[0], str)
        )
    )
    node: Any = data
    path = ""
    for key, after in zip(keys, [*keys[1:], None], strict=True):
        path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else key)
        value: Any
        if after is None:
            value = draw(_NON_FINITE)
        else:
            value = [None] * (after + 1) if isinstance(after, int) else {}
        node[key] = value
        node = value
    return data, path


_SCHEMAS = [
    None,
    {"type": "object"},
    {"type": "object", "additionalProperties": True},
    {"type": "object", "additionalProperties": {"type": "number"}},
    {"type": "object", "additionalProperties": {"type": "number", "minimum": 0, "maximum": 5}},
    {"type": "object", "additionalProperties": {}},
]


@given(_planted(), st.sampled_from(_SCHEMAS))
def test_no_schema_lets_a_non_finite_number_through(
    planted: tuple[dict[str, Any], str], schema: dict[str, Any] | None
) -> None:
    config, path = planted
    with pytest.raises(ValidationError) as info:
        validate_config(config, schema, subject="test")
    assert path in info.value.paths


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_bounded_number_that_is_not_finite_is_told_once_and_plainly(value: float) -> None:
    schema = {
        "type": "object",
        "properties": {"poll": {"type": "number", "exclusiveMinimum": 0, "maximum": 5}},
    }
    with pytest.raises(ValidationError) as info:
        validate_config({"poll": value}, schema, subject="local adapter configuration")
    assert info.value.paths == ["poll"]
    assert str(info.value) == (
        f"invalid: local adapter configuration: poll: must be a finite number, got {value!r}"
    )


def test_finite_numbers_pass() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "array"}}}
    validate_config({"a": 1e308, "b": [0.0, -1.5, 3]}, schema, subject="test")
