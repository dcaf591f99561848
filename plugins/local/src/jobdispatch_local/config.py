"""The local adapter's configuration: its JSON Schema and the checked settings built from it.

A cluster section in the CLI's config file (``[clusters.NAME] adapter = "local"``) holds these
keys; ``jobdispatch.new_backend`` validates them first, so an unknown or misspelt key is an error
naming it rather than a setting silently ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.config import validate_config
from jobdispatch.errors import Problem, ValidationError
from jobdispatch.sizes import SIZE_PATTERN, parse_bytes, parse_mib
from jobdispatch.validate import MAX_MEMORY_PER_NODE_MIB

__all__ = ["CONFIG_SCHEMA", "Settings", "default_state_dir", "parse_config"]

#: The JSON Schema of the local adapter's configuration.
CONFIG_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "local adapter",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "state_dir": {
            "type": "string",
            "minLength": 1,
            "description": "where objects, their execution records and output live "
            "(default: $XDG_STATE_HOME/jobdispatch/local)",
        },
        "grace": {
            "type": "number",
            "minimum": 0,
            "maximum": 3600,
            "description": "seconds between SIGTERM and SIGKILL when the runner ends ranks "
            "(preemption, time limit, stop, requeue); default 10",
        },
        "memory_limit": {
            "oneOf": [
                {"type": "integer", "minimum": 1, "maximum": MAX_MEMORY_PER_NODE_MIB},
                {"type": "string", "pattern": SIZE_PATTERN},
            ],
            "description": "memory per node, as a job file writes it ('64G', '64Gi', '512MB': "
            "binary units; a bare number is MiB), enforced with a cgroup where one is "
            "writable; a node over it is killed and ends out-of-memory",
        },
        "cgroups": {
            "type": "string",
            "enum": ["auto", "v2", "v1", "off"],
            "description": "which cgroup hierarchy enforces memory_limit; auto tries v2 then v1",
        },
        "gpus": {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 4095},
            "uniqueItems": True,
            "description": "the GPU device indices jobs may be given (CUDA_VISIBLE_DEVICES); "
            "none by default, and a job asking for GPUs is refused",
        },
        "gpu_type": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$",
            "description": "the model of the declared GPUs, for jobs that name a gpu_type",
        },
        "poll": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 5,
            "description": "how often the runner looks at its ranks and its control file, "
            "in seconds; default 0.05",
        },
    },
}


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/jobdispatch/local``, or ``~/.local/state/jobdispatch/local``."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "jobdispatch" / "local"


@attrs.frozen
class Settings:
    """A checked configuration, ready for :class:`~jobdispatch_local.LocalBackend`."""

    state_dir: Path
    grace: float = 10.0
    memory_limit: int | None = None
    cgroups: str = "auto"
    poll: float = 0.05
    gpus: tuple[int, ...] = ()
    gpu_type: str | None = None


def parse_config(config: Mapping[str, Any]) -> Settings:
    """Check ``config`` against :data:`CONFIG_SCHEMA` and build :class:`Settings`.

    Raises:
        ValidationError: every problem at once, each naming its key.
    """
    validate_config(config, CONFIG_SCHEMA, subject="local adapter configuration")
    memory_limit = None
    if "memory_limit" in config:
        try:
            memory_limit = parse_bytes(config["memory_limit"])
            if parse_mib(config["memory_limit"]) > MAX_MEMORY_PER_NODE_MIB:
                raise ValueError(f"must be at most 1 PiB, got {config['memory_limit']!r}")
        except ValueError as exc:
            problem = Problem("memory_limit", str(exc))
            raise ValidationError([problem], subject="local adapter configuration") from None
    state_dir = config.get("state_dir")
    return Settings(
        state_dir=Path(state_dir).expanduser() if state_dir else default_state_dir(),
        grace=float(config.get("grace", 10.0)),
        memory_limit=memory_limit,
        cgroups=str(config.get("cgroups", "auto")),
        poll=float(config.get("poll", 0.05)),
        gpus=tuple(int(g) for g in config.get("gpus", ())),
        gpu_type=config.get("gpu_type"),
    )
