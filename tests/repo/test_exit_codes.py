"""Both commands' exit codes come from the core's one table (``jobdispatch.exitcodes``): the codes
each command's ``--help`` prints, the table in docs/reference/errors.md, and what each command
exits with for the core's errors."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch import errors
from jobdispatch.exitcodes import COMMANDS, MEANINGS, ExitCode, code_for, codes_of, summary
from jobdispatch_cli.main import cli
from jobdispatch_publish.cli import _parser
from jobdispatch_publish.errors import exit_code_for
from repo_layout import DOCS

DASH = "—"


def _help(command: str) -> str:
    if command == "jobdispatch":
        return CliRunner().invoke(cli, ["--help"], prog_name=command, terminal_width=100).output
    return _parser().format_help()


def _doc_rows() -> dict[int, list[str]]:
    """The rows of errors.md's exit-code table: code to its cells after the code."""
    text = (DOCS / "reference" / "errors.md").read_text(encoding="utf-8")
    section = text.split("## Exit codes of the commands", 1)[1]
    header = "| code | meaning | " + " | ".join(f"`{c}`" for c in COMMANDS) + " |"
    assert header in section, f"errors.md's exit-code table must have the columns {header}"
    table = section.split(header, 1)[1].split("\n\n", 1)[0]
    rows: dict[int, list[str]] = {}
    for line in table.strip().splitlines()[1:]:  # past the |---| line
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert re.fullmatch(r"\d+", cells[0]), f"errors.md: {line!r} does not start with a code"
        rows[int(cells[0])] = cells[1:]
    return rows


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_s_help_lists_exactly_its_codes_from_the_table(command: str) -> None:
    shown = [line.strip() for line in _help(command).splitlines()]
    listed = [line for line in shown if re.match(r"\d+  ", line)]
    assert listed == [line.strip() for line in summary(command).splitlines()], (
        f"{command} --help's exit codes differ from jobdispatch.exitcodes: copy "
        f"summary({command!r}) into its epilog"
    )


def test_the_errors_reference_is_the_table() -> None:
    rows = _doc_rows()
    assert sorted(rows) == sorted(int(c) for c in ExitCode), "errors.md lists other codes"
    for code, (meaning, *per_command) in rows.items():
        assert meaning == MEANINGS[ExitCode(code)].words, f"errors.md: code {code}'s meaning"
        for command, cell in zip(COMMANDS, per_command, strict=True):
            used = ExitCode(code) in codes_of(command)
            assert (cell != DASH) == used, f"errors.md: code {code} under {command} must be " + (
                "what it means there" if used else DASH
            )


def test_a_code_means_one_thing_so_no_number_is_reused() -> None:
    assert len({int(c) for c in ExitCode}) == len(ExitCode)
    assert set(MEANINGS) == set(ExitCode)
    # The helper once used 9 for damaged data; it stays unused, so an old script never reads a
    # new meaning into it.
    assert 9 not in {int(c) for c in ExitCode}


#: Every error kind of the core, as the commands can meet it.
CORE_ERRORS = sorted(
    (
        kind
        for kind in vars(errors).values()
        if isinstance(kind, type) and issubclass(kind, errors.DispatchError)
    ),
    key=lambda kind: kind.__name__,
)


@given(st.sampled_from(CORE_ERRORS))
def test_the_helper_exits_with_the_table_s_code_for_every_core_error(
    kind: type[errors.DispatchError],
) -> None:
    exc = kind.__new__(kind)  # the kind is what decides, not the message
    assert exit_code_for(exc) == code_for(exc, otherwise=ExitCode.FAILED)


def test_only_the_helper_has_a_code_of_its_own_and_other_commands_have_none() -> None:
    both = set(codes_of("jobdispatch")) & set(codes_of("jobdispatch-publish"))
    assert set(ExitCode) - both == {ExitCode.ROOT_UNAVAILABLE}
    assert ExitCode.ROOT_UNAVAILABLE in codes_of("jobdispatch-publish")
    with pytest.raises(ValueError, match="no exit codes for 'torchx'"):
        codes_of("torchx")
