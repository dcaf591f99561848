"""Checks of an adapter's configuration: its schema is closed at every level, and a
configuration with a key it does not know is refused before the adapter is built."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from jobdispatch.errors import Invalid

from jobdispatch_conformance.adapter.harness import CheckFailed, expect

__all__ = ["config_refuses_unknown_keys", "schema_is_closed"]

UNKNOWN_KEY = "jobdispatch_conformance_unknown_key"


def _schema(name: str) -> Mapping[str, Any]:
    from jobdispatch import plugins

    entry = plugins.default().registry("adapter").get(name)
    expect(entry.schema is not None, f"adapter {name!r} registered no configuration schema")
    assert entry.schema is not None
    return entry.schema


def _objects(node: Any, path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    if isinstance(node, Mapping):
        if node.get("type") == "object" or "properties" in node:
            yield path or "(top level)", node
        for key, value in node.items():
            yield from _objects(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _objects(value, f"{path}/{i}")


def schema_is_closed(name: str) -> None:
    """Every object in the adapter's schema refuses additional properties."""
    open_objects = [
        p for p, o in _objects(_schema(name)) if o.get("additionalProperties") is not False
    ]
    expect(
        not open_objects,
        f"adapter {name!r} schema leaves objects open to unknown keys: {open_objects}",
    )


def _validate(name: str, config: Mapping[str, Any]) -> None:
    """Validate as a host would, through ``jobdispatch.new_backend``; a backend built on
    success is closed at once."""
    import jobdispatch

    jobdispatch.new_backend(name, config).close()


def _with_unknown_keys(config: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The configuration with an unknown key added at the top and inside every nested object."""
    top = copy.deepcopy(dict(config))
    top[UNKNOWN_KEY] = 1
    yield UNKNOWN_KEY, top

    def nested(node: Any, path: list[str]) -> Iterator[list[str]]:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if isinstance(value, Mapping):
                    yield [*path, key]
                    yield from nested(value, [*path, key])

    for path in nested(config, []):
        changed = copy.deepcopy(dict(config))
        target: Any = changed
        for key in path:
            target = target[key]
        target[UNKNOWN_KEY] = 1
        yield ".".join([*path, UNKNOWN_KEY]), changed


def config_refuses_unknown_keys(name: str, config: Mapping[str, Any]) -> None:
    """A valid configuration is accepted; the same with an unknown key anywhere is Invalid."""
    _validate(name, config)
    for where, bad in _with_unknown_keys(config):
        try:
            _validate(name, bad)
        except Invalid:
            continue
        raise CheckFailed(f"adapter {name!r} accepted a configuration with unknown key {where}")
