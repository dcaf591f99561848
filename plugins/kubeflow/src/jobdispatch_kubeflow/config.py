"""The Kubeflow adapter's configuration: what a site may set, and nothing else.

An allow-list checked by JSON Schema (unknown keys are refused at every level). Nothing is
passed through to the kubernetes client as free-form keyword arguments: a configuration names a
kubeconfig and its context, or asks for the in-cluster service account, and may name a token
file that is read on every request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from jobdispatch.config import validate_config
from jobdispatch.errors import Problem, ValidationError
from jobdispatch.types import Capability, Source, Support, Tristate

__all__ = ["CONFIG_SCHEMA", "Kueue", "Runtime", "Settings"]

_PATH = {"type": "string", "minLength": 1, "pattern": r"^[^\x00\n]+$"}
_DNS = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}

CONFIG_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "kubeconfig": dict(_PATH, description="path of a kubeconfig file"),
        "context": {"type": "string", "minLength": 1, "description": "its context"},
        "in_cluster": {
            "type": "boolean",
            "description": "use the pod's service account instead of a kubeconfig",
        },
        "namespace": dict(_DNS, description="where TrainJobs are created and found"),
        "token_file": dict(
            _PATH, description="bearer token file, read on every request (rotation-safe)"
        ),
        "runtime": {
            "type": "object",
            "properties": {
                "name": _DNS,
                "kind": {"enum": ["ClusterTrainingRuntime", "TrainingRuntime"]},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        "image": {"type": "string", "minLength": 1, "description": "image when a spec has none"},
        "request_timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
        "probe_ttl": {"type": "number", "minimum": 0, "maximum": 86400},
        "allow_rank_restart": {
            "type": "boolean",
            "description": "the site accepts ranks rerun in place (the runtime's Job retries)",
        },
        "kueue": {
            "type": "object",
            "description": "submit through Kueue (spec 0012): the LocalQueue, and optionally "
            "the WorkloadPriorityClass, of every TrainJob; admission is gated by "
            "jobdispatch-kueue-admission",
            "properties": {"queue": _DNS, "priority_class": _DNS},
            "required": ["queue"],
            "additionalProperties": False,
        },
        "capabilities": {
            "type": "object",
            "properties": {c.value: {"enum": ["yes", "no", "unknown"]} for c in Capability},
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}


@attrs.frozen
class Runtime:
    """The training runtime every TrainJob refers to."""

    name: str = "torch-distributed"
    kind: str = "ClusterTrainingRuntime"


@attrs.frozen
class Kueue:
    """Kueue mode: every TrainJob goes to this LocalQueue (with this priority class)."""

    queue: str
    priority_class: str | None = None


@attrs.frozen(kw_only=True)
class Settings:
    """The validated configuration."""

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    namespace: str = "default"
    token_file: str | None = None
    runtime: Runtime = attrs.field(factory=Runtime)
    image: str = "busybox:stable"
    request_timeout: float = 30.0
    probe_ttl: float = 300.0
    allow_rank_restart: bool = False
    kueue: Kueue | None = None
    declared: Mapping[Capability, Support] = attrs.field(factory=dict)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        """Validate ``config`` (unknown keys refused at every level) and read it."""
        subject = "kubeflow adapter configuration"
        validate_config(config, CONFIG_SCHEMA, subject=subject)
        data = dict(config)
        if data.get("in_cluster") and ("kubeconfig" in data or "context" in data):
            raise ValidationError(
                [Problem("in_cluster", "in_cluster excludes kubeconfig and context")],
                subject=subject,
            )
        declared = {
            Capability(k): Support(Tristate(v), Source.DECLARED, "declared by the site")
            for k, v in (data.pop("capabilities", None) or {}).items()
        }
        runtime = Runtime(**data.pop("runtime")) if "runtime" in data else Runtime()
        kueue = Kueue(**data.pop("kueue")) if "kueue" in data else None
        return cls(declared=declared, runtime=runtime, kueue=kueue, **data)
