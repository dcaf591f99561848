"""Settings declared once: the schema is derived from the fields, and ``from_config`` reads a
configuration into the class, every problem named by its key's path."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import attrs
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.errors import Problem, ValidationError
from jobdispatch.kit.settings import (
    ConfigSection,
    capabilities_setting,
    json_schema,
    section,
    setting,
)
from jobdispatch.types import Capability, Source, Support, Tristate


def _even(value: int) -> int:
    if value % 2:
        msg = f"must be even, got {value}"
        raise ValueError(msg)
    return value


@attrs.frozen
class Inner(ConfigSection):
    subject: ClassVar[str] = "inner"

    host: str = setting(schema={"type": "string", "minLength": 1}, description="where")
    port: int = setting(
        schema={"type": "integer", "minimum": 1}, default=22, description="which port"
    )


@attrs.frozen(kw_only=True)
class Example(ConfigSection):
    subject: ClassVar[str] = "example configuration"

    name: str = setting(schema={"type": "string"}, default="x", description="a name")
    grace: float = setting(
        schema={"type": "number", "minimum": 0}, default=1.0, description="seconds"
    )
    tags: tuple[str, ...] = setting(
        schema={"type": "array", "items": {"type": "string"}}, default=(), description="tags"
    )
    even: int | None = setting(
        schema={"type": "integer"}, default=None, read=_even, description="an even number"
    )
    inner: Inner | None = section(Inner, default=None, description="a nested table")
    declared: Mapping[Capability, Support] = capabilities_setting()

    @classmethod
    def conflicts(cls, config: Mapping[str, Any]) -> Iterable[Problem]:
        if config.get("name") == "both" and "inner" not in config:
            yield Problem("inner", "name both needs an inner table")


def test_the_schema_is_derived_from_the_declarations() -> None:
    schema = json_schema(Example)
    assert list(schema["properties"]) == ["name", "grace", "tags", "even", "inner", "capabilities"]
    assert schema["additionalProperties"] is False
    assert "required" not in schema
    assert schema["properties"]["grace"] == {
        "type": "number",
        "minimum": 0,
        "description": "seconds",
        "default": 1.0,
    }
    inner = schema["properties"]["inner"]
    assert inner["required"] == ["host"]
    assert inner["additionalProperties"] is False
    assert inner["properties"]["port"]["default"] == 22
    assert "default" not in inner["properties"]["host"]
    jsonschema.Draft202012Validator.check_schema(schema)


def test_a_configuration_is_read_into_the_class() -> None:
    got = Example.from_config(
        {
            "grace": 2,
            "tags": ["a"],
            "even": 4,
            "inner": {"host": "h"},
            "capabilities": {"hold": "no"},
        }
    )
    assert got.grace == 2.0 and isinstance(got.grace, float)
    assert got.tags == ("a",)
    assert got.even == 4
    assert got.inner == Inner(host="h", port=22)
    assert got.declared == {
        Capability.HOLD: Support(Tristate.NO, Source.DECLARED, "declared by the site")
    }
    assert Example.from_config({}) == Example()


@pytest.mark.parametrize(
    ("config", "paths"),
    [
        ({"nope": 1}, ["nope"]),
        ({"inner": {"host": "h", "nope": 1}}, ["inner.nope"]),
        ({"inner": {}}, ["inner"]),
        ({"grace": -1, "even": 3}, ["grace"]),  # the schema first: read runs on what it passed
        ({"even": 3}, ["even"]),
        ({"capabilities": {"teleport": "yes"}}, ["capabilities.teleport"]),
        ({"name": "both"}, ["inner"]),
    ],
)
def test_every_problem_names_its_key_and_the_subject(
    config: dict[str, Any], paths: list[str]
) -> None:
    with pytest.raises(ValidationError) as err:
        Example.from_config(config)
    assert list(err.value.paths) == paths
    assert str(err.value).startswith("invalid: example configuration: ")


def test_a_read_refusal_in_a_section_names_the_full_path() -> None:
    @attrs.frozen
    class Picky(ConfigSection):
        n: int = setting(schema={"type": "integer"}, read=_even, description="even")

    @attrs.frozen
    class Outer(ConfigSection):
        subject: ClassVar[str] = "outer"
        picky: Picky = section(Picky, description="picky")

    with pytest.raises(ValidationError) as err:
        Outer.from_config({"picky": {"n": 1}})
    assert err.value.paths == ["picky.n"]
    assert "must be even, got 1" in str(err.value)


@given(
    grace=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    tags=st.lists(st.text(max_size=5), max_size=4),
    port=st.integers(min_value=1, max_value=65535),
)
def test_what_the_schema_accepts_is_read_back_as_given(
    grace: float, tags: list[str], port: int
) -> None:
    config = {"grace": grace, "tags": tags, "inner": {"host": "h", "port": port}}
    jsonschema.validate(config, json_schema(Example))
    got = Example.from_config(config)
    assert (got.grace, got.tags, got.inner) == (grace, tuple(tags), Inner(host="h", port=port))
