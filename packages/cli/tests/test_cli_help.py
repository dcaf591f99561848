"""The help a person reads (issue 33, item 5): every option says what it is for, durations
show as DURATION rather than TEXT, and counts agree with their nouns."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from jobdispatch_cli.commands.running import _duration, _positive_duration
from jobdispatch_cli.main import cli

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)


def _commands(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, f"{path} {name}")


_OPTIONS = [
    pytest.param(command, option, id=f"{path} {option.opts[-1]}")
    for path, command in _commands(cli, "jobdispatch")
    for option in command.params
    if isinstance(option, click.Option) and not option.hidden
]


@pytest.mark.parametrize(("command", "option"), _OPTIONS)
def test_every_option_says_what_it_is_for(command: click.Command, option: click.Option) -> None:
    # Its own words: click's "[default: 0]" alone describes nothing.
    assert option.help and option.help.strip(), f"{option.opts} has no description"


@pytest.mark.parametrize(("command", "option"), _OPTIONS)
def test_a_duration_is_shown_as_a_duration(command: click.Command, option: click.Option) -> None:
    record = option.get_help_record(click.Context(command))
    assert record is not None
    if option.callback in (_duration, _positive_duration):
        assert record[0].endswith(" DURATION"), record[0]


@pytest.mark.parametrize(
    ("args", "shown"),
    [(["hold", "--help"], "--for DURATION"), (["supervise", "--help"], "--lease-ttl DURATION")],
)
def test_the_help_shows_durations_by_name(invoke: Invoke, args: list[str], shown: str) -> None:
    ran = invoke(*args)
    assert ran.code == 0 and shown in ran.out and "TEXT" not in ran.out.split("--reason")[0]


def test_a_count_of_one_rule_is_singular(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "one.toml"
    path.write_text(
        'command = ["true"]\n[[recovery.rules]]\non = ["preempted"]\naction = "resubmit"\n'
    )
    ran = invoke("plan", str(path), "--accept-unenforced", "3")
    assert ran.code == 2
    assert "accepted rule 3 does not exist (the policy has 1 rule)" in ran.err, ran.err
