"""The memory adapter's configuration: its JSON Schema and the checked settings built from it.

Every object in the schema refuses additional properties, so a misspelt key is an error that
names it instead of a setting silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from jobdispatch.config import validate_config
from jobdispatch.memory.shape import Shape
from jobdispatch.types import Capability, Inventory, NodeGroup, Support, Tristate

__all__ = ["CONFIG_SCHEMA", "Settings", "parse_config"]

_DECLARATION: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "enum": [str(t) for t in Tristate]},
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["answer"],
            "properties": {
                "answer": {"type": "string", "enum": [str(t) for t in Tristate]},
                "detail": {"type": "string"},
            },
        },
    ]
}

#: Past this, a count of nodes, CPUs, MiB or GPUs in an inventory is a typo (a PiB in MiB).
_MOST = 1 << 30
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": _MOST}
_NAMES: dict[str, Any] = {"type": "array", "items": {"type": "string", "minLength": 1}}

#: Nodes and queues a site declares, for the plan's resource check (``inventory``).
INVENTORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "queues": _NAMES,
        "default_queue": {"type": "string", "minLength": 1},
        "groups": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["count"],
                "properties": {
                    "count": {"type": "integer", "minimum": 1, "maximum": _MOST},
                    "cpus": _COUNT,
                    "memory_mib": _COUNT,
                    "gpus": _COUNT,
                    "gpu_type": {"type": "string", "minLength": 1},
                    "features": _NAMES,
                    "queues": _NAMES,
                },
            },
        },
    },
}

#: The JSON Schema of the memory adapter's configuration.
CONFIG_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "memory adapter",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "shape": {"type": "string", "enum": [str(s) for s in Shape], "default": "slurm"},
        "auto_run": {
            "type": "boolean",
            "default": False,
            "description": "an opened object starts running at once, without env.run",
        },
        "seed": {
            "type": "integer",
            "minimum": -(1 << 63),
            "maximum": (1 << 63) - 1,
            "default": 0,
        },
        "namespace": {
            "type": "string",
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "default": "default",
            "description": "the namespace of object refs in the Kubeflow shape",
        },
        "allow_rank_restart": {
            "type": "boolean",
            "default": False,
            "description": "Kubeflow shape: the site lets the backend rerun a rank in place",
        },
        "inventory": INVENTORY_SCHEMA,
        "capabilities": {
            "type": "object",
            "description": "site declarations overriding the shape's capability answers",
            "additionalProperties": False,
            "properties": {str(c): _DECLARATION for c in Capability},
        },
    },
}


@attrs.frozen
class Settings:
    """A checked configuration, ready for the backend's constructor."""

    shape: Shape = Shape.SLURM
    auto_run: bool = False
    seed: int = 0
    namespace: str = "default"
    allow_rank_restart: bool = False
    declared: Mapping[Capability, Support] = attrs.field(factory=dict)
    inventory: Inventory | None = None


def parse_config(config: Mapping[str, Any]) -> Settings:
    """Check ``config`` against :data:`CONFIG_SCHEMA` and build :class:`Settings`.

    Raises:
        ValidationError: every problem at once, each naming its key.
    """
    validate_config(config, CONFIG_SCHEMA, subject="memory adapter configuration")
    declared: dict[Capability, Support] = {}
    for key, value in dict(config.get("capabilities", {})).items():
        if isinstance(value, str):
            answer, detail = Tristate(value), "site declaration"
        else:
            answer, detail = Tristate(value["answer"]), value.get("detail", "site declaration")
        declared[Capability(key)] = Support(answer, detail=detail)
    return Settings(
        shape=Shape(config.get("shape", "slurm")),
        auto_run=bool(config.get("auto_run", False)),
        seed=int(config.get("seed", 0)),
        namespace=str(config.get("namespace", "default")),
        allow_rank_restart=bool(config.get("allow_rank_restart", False)),
        declared=declared,
        inventory=_inventory(config.get("inventory")),
    )


def _inventory(data: Mapping[str, Any] | None) -> Inventory | None:
    if data is None:
        return None
    groups = data.get("groups")
    return Inventory(
        groups=None if groups is None else tuple(NodeGroup(**g) for g in groups),
        queues=None if "queues" not in data else tuple(data["queues"]),
        default_queue=data.get("default_queue"),
        detail="declared in the memory adapter's configuration",
    )
