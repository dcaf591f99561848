"""The memory adapter's configuration, declared once (:mod:`jobdispatch.kit.settings`): each
key with its schema, default and meaning, and :data:`CONFIG_SCHEMA` derived from them.

Every object in the schema refuses additional properties, so a misspelt key is an error that
names it instead of a setting silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from jobdispatch.kit.settings import ConfigSection, json_schema, setting
from jobdispatch.memory.shape import Shape
from jobdispatch.types import Capability, Inventory, NodeGroup, Support, Tristate

__all__ = ["CONFIG_SCHEMA", "Settings"]

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


def _declarations(config: Mapping[str, Any]) -> Mapping[Capability, Support]:
    """The site's answers: ``"no"``, or ``{answer = "no", detail = "why"}``."""
    declared: dict[Capability, Support] = {}
    for key, value in config.items():
        if isinstance(value, str):
            answer, detail = Tristate(value), "site declaration"
        else:
            answer, detail = Tristate(value["answer"]), value.get("detail", "site declaration")
        declared[Capability(key)] = Support(answer, detail=detail)
    return declared


def _inventory(data: Mapping[str, Any]) -> Inventory:
    groups = data.get("groups")
    return Inventory(
        groups=None if groups is None else tuple(NodeGroup(**g) for g in groups),
        queues=None if "queues" not in data else tuple(data["queues"]),
        default_queue=data.get("default_queue"),
        detail="declared in the memory adapter's configuration",
    )


@attrs.frozen(kw_only=True)
class Settings(ConfigSection):
    """A checked configuration, ready for the backend's constructor."""

    subject: ClassVar[str] = "memory adapter configuration"

    shape: Shape = setting(
        schema={"type": "string", "enum": [str(s) for s in Shape]},
        default=Shape.SLURM,
        read=Shape,
        description="which scheduler the model behaves like",
    )
    auto_run: bool = setting(
        schema={"type": "boolean"},
        default=False,
        description="an opened object starts running at once, without env.run",
    )
    seed: int = setting(
        schema={"type": "integer", "minimum": -(1 << 63), "maximum": (1 << 63) - 1},
        default=0,
        description="seeds the choice of the node lose_node takes when none is named",
    )
    namespace: str = setting(
        schema={"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        default="default",
        description="the namespace of object refs in the Kubeflow shape",
    )
    allow_rank_restart: bool = setting(
        schema={"type": "boolean"},
        default=False,
        description="Kubeflow shape: the site lets the backend rerun a rank in place",
    )
    declared: Mapping[Capability, Support] = setting(
        key="capabilities",
        schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {str(c): _DECLARATION for c in Capability},
        },
        factory=dict,
        read=_declarations,
        description="site declarations overriding the shape's capability answers",
    )
    inventory: Inventory | None = setting(
        schema=INVENTORY_SCHEMA,
        default=None,
        read=_inventory,
        description="the nodes and queues the plan's resource check sees",
    )


#: The JSON Schema of the memory adapter's configuration, derived from :class:`Settings`.
CONFIG_SCHEMA: Mapping[str, Any] = json_schema(Settings)
