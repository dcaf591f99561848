"""The Slurm adapter's configuration: what a site may set, and nothing else.

The schema is an allow-list. Nothing is passed through to ssh as free-form options, and
nothing becomes an sbatch option unless it is named here and checked against a pattern, so a
configuration can neither weaken host-key checking by accident nor smuggle an option into
every job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from jobdispatch.config import validate_config
from jobdispatch.types import Capability, Source, Support, Tristate

__all__ = ["CONFIG_SCHEMA", "Settings", "SshSettings"]

_WORD = {"type": "string", "pattern": r"^[A-Za-z0-9_.+-]{1,128}$"}
_PATH = {"type": "string", "minLength": 1, "pattern": r"^[^\x00\n]+$"}
#: A host or user name for ssh: never starting with "-" (it would read as an option).
_SSH_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9_.%+][A-Za-z0-9_.%+@:-]{0,254}$"}

CONFIG_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "transport": {"enum": ["local", "ssh"], "description": "where commands run"},
        "ssh": {
            "type": "object",
            "description": "the login node, reached with the system's OpenSSH client",
            "properties": {
                "host": {
                    **_SSH_NAME,
                    "description": "a host name, or a Host alias of the ssh_config file",
                },
                "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                "user": {**_SSH_NAME, "description": "default: as ssh_config says"},
                "key_file": _PATH,
                "known_hosts": _PATH,
                "accept_unknown_hosts": {
                    "type": "boolean",
                    "description": "accept a host key missing from known_hosts, unsaved",
                },
                "connect_timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
                "config_file": {**_PATH, "description": "ssh -F; default ~/.ssh/config"},
                "jump": {
                    "type": "string",
                    "pattern": r"^[A-Za-z0-9_.%+@\[\]:][A-Za-z0-9_.%+@\[\]:,-]{0,511}$",
                    "description": "ProxyJump: [user@]host[:port][,...]",
                },
                "control_path": {
                    **_PATH,
                    "description": "a ControlMaster socket the site opens (with MFA, say)",
                },
                "control_persist": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": 86400,
                    "description": "seconds the shared connection outlives its last command",
                },
            },
            "required": ["host"],
            "additionalProperties": False,
        },
        "bin_dir": _PATH,
        "slurm_conf": _PATH,
        "command_timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
        "user": {"type": "string", "pattern": r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}$"},
        "partition": _WORD,
        "account": _WORD,
        "qos": _WORD,
        "mem_per_cpu": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1 << 30,
            "description": "MB per CPU",
        },
        "signal": {
            "type": "string",
            "pattern": r"^([RB]:)?[A-Z0-9]{1,10}(@[0-9]{1,5})?$",
            "description": "sbatch --signal, the pre-termination signal (e.g. B:USR1@60)",
        },
        "output_dir": _PATH,
        "history_days": {"type": "number", "exclusiveMinimum": 0, "maximum": 3650},
        "probe_ttl": {"type": "number", "minimum": 0, "maximum": 86400},
        "capabilities": {
            "type": "object",
            "properties": {c.value: {"enum": ["yes", "no", "unknown"]} for c in Capability},
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}


@attrs.frozen
class SshSettings:
    """``ssh.*``: what is not set here comes from the ssh_config file, as for ``ssh HOST``."""

    host: str
    user: str | None = None
    port: int | None = None
    key_file: str | None = None
    known_hosts: str | None = None
    accept_unknown_hosts: bool = False
    connect_timeout: float = 10.0
    config_file: str | None = None
    jump: str | None = None
    control_path: str | None = None
    control_persist: float = 60.0


@attrs.frozen(kw_only=True)
class Settings:
    """The validated configuration."""

    transport: str = "local"
    ssh: SshSettings | None = None
    bin_dir: str | None = None
    slurm_conf: str | None = None
    command_timeout: float = 30.0
    user: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    mem_per_cpu: int | None = None
    signal: str | None = None
    output_dir: str | None = None
    history_days: float = 14.0
    probe_ttl: float = 600.0
    declared: Mapping[Capability, Support] = attrs.field(factory=dict)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        """Validate ``config`` (unknown keys are refused at every level) and read it."""
        validate_config(config, CONFIG_SCHEMA, subject="slurm adapter configuration")
        data = dict(config)
        ssh = data.pop("ssh", None)
        declared = {
            Capability(k): Support(Tristate(v), Source.DECLARED, "declared by the site")
            for k, v in (data.pop("capabilities", None) or {}).items()
        }
        if data.get("transport") == "ssh" and ssh is None:
            from jobdispatch.errors import Problem, ValidationError

            raise ValidationError(
                [Problem("ssh", "transport ssh needs an ssh section (at least host)")],
                subject="slurm adapter configuration",
            )
        return cls(
            ssh=SshSettings(**ssh) if ssh is not None else None,
            declared=declared,
            **data,
        )
