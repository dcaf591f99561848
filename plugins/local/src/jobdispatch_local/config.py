"""The local adapter's configuration, declared once: each key with its schema, default and
meaning (:mod:`jobdispatch.kit.settings`), and :data:`CONFIG_SCHEMA` derived from it.

A cluster section in the CLI's config file (``[clusters.NAME] adapter = "local"``) holds these
keys; ``jobdispatch.new_backend`` validates them first, so an unknown or misspelt key is an error
naming it rather than a setting silently ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs
from jobdispatch.kit.settings import ConfigSection, json_schema, seconds_setting, setting
from jobdispatch.sizes import SIZE_PATTERN, parse_bytes, parse_mib
from jobdispatch.validate import MAX_MEMORY_PER_NODE_MIB

__all__ = ["CONFIG_SCHEMA", "Settings", "default_state_dir"]


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/jobdispatch/local``, or ``~/.local/state/jobdispatch/local``."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "jobdispatch" / "local"


def _memory_limit(value: int | str) -> int:
    """Bytes per node from a job file's size ('64G', or a bare number of MiB), at most 1 PiB."""
    if parse_mib(value) > MAX_MEMORY_PER_NODE_MIB:
        msg = f"must be at most 1 PiB, got {value!r}"
        raise ValueError(msg)
    return parse_bytes(value)


@attrs.frozen(kw_only=True)
class Settings(ConfigSection):
    """A checked configuration, ready for :class:`~jobdispatch_local.LocalBackend`."""

    subject: ClassVar[str] = "local adapter configuration"

    state_dir: Path = setting(
        schema={"type": "string", "minLength": 1},
        factory=default_state_dir,
        read=lambda path: Path(path).expanduser(),
        description="where objects, their execution records and output live "
        "(default: $XDG_STATE_HOME/jobdispatch/local)",
    )
    grace: float = seconds_setting(
        10.0,
        most=3600,
        zero=True,
        description="between SIGTERM and SIGKILL when the runner ends ranks "
        "(preemption, time limit, stop, requeue)",
    )
    memory_limit: int | None = setting(
        schema={
            "oneOf": [
                {"type": "integer", "minimum": 1, "maximum": MAX_MEMORY_PER_NODE_MIB},
                {"type": "string", "pattern": SIZE_PATTERN},
            ]
        },
        default=None,
        read=_memory_limit,
        description="memory per node, as a job file writes it ('64G', '64Gi', '512MB': "
        "binary units; a bare number is MiB), enforced with a cgroup where one is "
        "writable; a node over it is killed and ends out-of-memory",
    )
    cgroups: str = setting(
        schema={"type": "string", "enum": ["auto", "v2", "v1", "off"]},
        default="auto",
        description="which cgroup hierarchy enforces memory_limit; auto tries v2 then v1",
    )
    poll: float = seconds_setting(
        0.05, most=5, description="how often the runner looks at its ranks and its control file"
    )
    gpus: tuple[int, ...] = setting(
        schema={
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 4095},
            "uniqueItems": True,
        },
        default=(),
        description="the GPU device indices jobs may be given (CUDA_VISIBLE_DEVICES); "
        "none by default, and a job asking for GPUs is refused",
    )
    gpu_type: str | None = setting(
        schema={"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$"},
        default=None,
        description="the model of the declared GPUs, for jobs that name a gpu_type",
    )


#: The JSON Schema of the local adapter's configuration, derived from :class:`Settings`.
CONFIG_SCHEMA: Mapping[str, Any] = json_schema(Settings)
