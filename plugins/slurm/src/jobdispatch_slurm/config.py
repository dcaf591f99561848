"""The Slurm adapter's configuration: what a site may set, and nothing else, each key declared
once with its schema, default and meaning (:mod:`jobdispatch.kit.settings`).

The schema is an allow-list. Nothing is passed through to ssh as free-form options, and
nothing becomes an sbatch option unless it is named here and checked against a pattern, so a
configuration can neither weaken host-key checking by accident nor smuggle an option into
every job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import attrs
from jobdispatch.errors import Problem
from jobdispatch.kit import settings as kit
from jobdispatch.types import Capability, Support

__all__ = ["CONFIG_SCHEMA", "Settings", "SshSettings"]

_WORD = {"type": "string", "pattern": r"^[A-Za-z0-9_.+-]{1,128}$"}


def _sbatch_default(description: str) -> Any:
    """An sbatch option's value when a job gives none: one word, never an option of its own."""
    return kit.setting(schema=_WORD, default=None, description=description)


#: A host or user name for ssh: never starting with "-" (it would read as an option).
_SSH_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9_.%+][A-Za-z0-9_.%+@:-]{0,254}$"}


@attrs.frozen
class SshSettings(kit.ConfigSection):
    """``ssh.*``: what is not set here comes from the ssh_config file, as for ``ssh HOST``."""

    subject: ClassVar[str] = "slurm adapter configuration, ssh"

    host: str = kit.setting(
        schema=_SSH_NAME, description="a host name, or a Host alias of the ssh_config file"
    )
    user: str | None = kit.setting(
        schema=_SSH_NAME, default=None, description="default: as ssh_config says"
    )
    port: int | None = kit.setting(
        schema={"type": "integer", "minimum": 1, "maximum": 65535},
        default=None,
        description="default: as ssh_config says",
    )
    key_file: str | None = kit.path_setting("the private key (ssh -i)")
    known_hosts: str | None = kit.path_setting("the known_hosts file host keys are checked in")
    accept_unknown_hosts: bool = kit.setting(
        schema={"type": "boolean"},
        default=False,
        description="accept a host key missing from known_hosts, unsaved",
    )
    connect_timeout: float = kit.seconds_setting(
        10.0, most=600, description="how long to wait for the connection"
    )
    config_file: str | None = kit.path_setting("ssh -F; default ~/.ssh/config")
    jump: str | None = kit.setting(
        schema={
            "type": "string",
            "pattern": r"^[A-Za-z0-9_.%+@\[\]:][A-Za-z0-9_.%+@\[\]:,-]{0,511}$",
        },
        default=None,
        description="ProxyJump: [user@]host[:port][,...]",
    )
    control_path: str | None = kit.path_setting(
        "a ControlMaster socket the site opens (with MFA, say)"
    )
    control_persist: float = kit.seconds_setting(
        60.0, most=86400, description="how long the shared connection outlives its last command"
    )


@attrs.frozen(kw_only=True)
class Settings(kit.ConfigSection):
    """The validated configuration."""

    subject: ClassVar[str] = "slurm adapter configuration"

    transport: str = kit.setting(
        schema={"enum": ["local", "ssh"]}, default="local", description="where commands run"
    )
    ssh: SshSettings | None = kit.section(
        SshSettings,
        default=None,
        description="the login node, reached with the system's OpenSSH client",
    )
    bin_dir: str | None = kit.path_setting("where sbatch, squeue, sacct and scontrol are")
    slurm_conf: str | None = kit.path_setting("SLURM_CONF for every command")
    command_timeout: float = kit.seconds_setting(
        30.0, most=600, description="how long one Slurm command may take"
    )
    user: str | None = kit.setting(
        schema={"type": "string", "pattern": r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}$"},
        default=None,
        description="whose jobs are found (default: the login's user)",
    )
    partition: str | None = _sbatch_default("sbatch --partition when a job names no queue")
    account: str | None = _sbatch_default("sbatch --account when a job names none")
    qos: str | None = _sbatch_default("sbatch --qos when a job names none")
    mem_per_cpu: int | None = kit.setting(
        schema={"type": "integer", "minimum": 1, "maximum": 1 << 30},
        default=None,
        description="MB per CPU",
    )
    signal: str | None = kit.setting(
        schema={"type": "string", "pattern": r"^([RB]:)?[A-Z0-9]{1,10}(@[0-9]{1,5})?$"},
        default=None,
        description="sbatch --signal, the pre-termination signal (e.g. B:USR1@60)",
    )
    output_dir: str | None = kit.path_setting(
        "where jobs' output files are written (default: ~/jobdispatch-output of "
        "the login the commands run as)"
    )
    history_days: float = kit.setting(
        schema={"type": "number", "exclusiveMinimum": 0, "maximum": 3650},
        default=14.0,
        description="how many days back sacct looks for a job's objects",
    )
    probe_ttl: float = kit.probe_ttl_setting(600.0)
    #: False: capabilities, rule support and the resource check come from the catalogue and
    #: ``declared`` alone, so a job file can be planned where the controller is out of reach.
    probe: bool = kit.probe_setting()
    declared: Mapping[Capability, Support] = kit.capabilities_setting()

    @classmethod
    def conflicts(cls, config: Mapping[str, Any]) -> Iterable[Problem]:
        if config.get("transport") == "ssh" and "ssh" not in config:
            yield Problem("ssh", "transport ssh needs an ssh section (at least host)")


#: The JSON Schema of the Slurm adapter's configuration, derived from :class:`Settings`.
CONFIG_SCHEMA: Mapping[str, Any] = kit.json_schema(Settings)
