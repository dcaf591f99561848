"""The configuration is an allow-list: unknown keys are refused at every level, and the
registered adapter builds from it."""

from __future__ import annotations

from typing import Any

import pytest
from jobdispatch.errors import ValidationError
from jobdispatch.plugins import load
from jobdispatch.types import Capability, Tristate
from jobdispatch_slurm.config import Settings


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"nope": 1}, "nope"),
        (
            {"transport": "ssh", "ssh": {"host": "h", "user": "u", "look_for_keys": True}},
            "ssh.look_for_keys",
        ),
        ({"capabilities": {"teleport": "yes"}}, "capabilities.teleport"),
        ({"signal": "USR1; rm -rf /"}, "signal"),
        ({"partition": "a b"}, "partition"),
        ({"transport": "ssh"}, "ssh"),
        # Nothing can be read by ssh as an option, nor passed to it free-form.
        ({"transport": "ssh", "ssh": {"host": "-oProxyCommand=x"}}, "ssh.host"),
        ({"transport": "ssh", "ssh": {"host": "h", "user": "-l"}}, "ssh.user"),
        ({"transport": "ssh", "ssh": {"host": "h", "jump": "-oProxyCommand=x"}}, "ssh.jump"),
        ({"transport": "ssh", "ssh": {"host": "h", "jump": "a b"}}, "ssh.jump"),
        ({"transport": "ssh", "ssh": {"host": "h", "options": {"X": "y"}}}, "ssh.options"),
    ],
)
def test_unknown_or_unsafe_settings_are_refused(config: dict[str, Any], path: str) -> None:
    with pytest.raises(ValidationError) as err:
        Settings.from_config(config)
    assert path in err.value.paths


def test_declarations_override_probes() -> None:
    s = Settings.from_config({"capabilities": {"container-image": "yes", "hold": "no"}})
    assert s.declared[Capability.CONTAINER_IMAGE].answer is Tristate.YES
    assert str(s.declared[Capability.HOLD].source) == "declared"


def test_registered_through_the_entry_point() -> None:
    entry = load().registry("adapter").get("slurm")
    backend = entry.factory({"transport": "local", "user": "someone"}, None)
    assert backend.name == "slurm"
    assert backend.user() == "someone"


def test_an_alias_alone_is_enough_for_ssh() -> None:
    s = Settings.from_config(
        {"transport": "ssh", "ssh": {"host": "hpc-login", "jump": "alice@bastion:2200"}}
    )
    assert s.ssh is not None
    assert (s.ssh.host, s.ssh.user, s.ssh.port, s.ssh.jump) == (
        "hpc-login",
        None,
        None,
        "alice@bastion:2200",
    )
