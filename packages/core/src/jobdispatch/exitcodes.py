"""The one table of exit codes shared by dispatch's commands, so a script can branch on them.

``jobdispatch`` (the command line) and ``jobdispatch-publish`` (the checkpoint helper run inside
job containers) end for many of the same reasons: bad input, something not found, a refusal, an
unreachable or unauthorized service, a lost race, damaged stored data. Each such reason has one
code here, whichever command reports it; a reason only one command has gets a code no other
reason uses. The documentation's errors reference lists the same table, and a repository test
holds the two and both commands' ``--help`` to it.

This module imports nothing but the standard library: ``jobdispatch --help`` renders its exit
codes from here without loading the rest of the core. :func:`code_for` imports the errors only
when it is called.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["COMMANDS", "MEANINGS", "ExitCode", "Meaning", "code_for", "codes_of", "summary"]

#: The commands that exit with these codes.
COMMANDS = ("jobdispatch", "jobdispatch-publish")


@enum.unique
class ExitCode(enum.IntEnum):
    """What a command's exit status means (:data:`MEANINGS` says it in words)."""

    OK = 0
    FAILED = 1
    USAGE = 2
    NOT_FOUND = 3
    REFUSED = 4
    UNREACHABLE = 5
    UNAUTHORIZED = 6
    CONFLICT = 7
    UNREADABLE = 8
    ROOT_UNAVAILABLE = 10
    INTERRUPTED = 130


class Meaning(NamedTuple):
    """A code's meaning in a few words, and the commands that use it."""

    words: str
    commands: tuple[str, ...] = COMMANDS


MEANINGS: dict[ExitCode, Meaning] = {
    ExitCode.OK: Meaning("done"),
    ExitCode.FAILED: Meaning("failed: run's job failed or was cancelled; the helper's own error"),
    ExitCode.USAGE: Meaning("bad usage or input: an option, a file, a variable or a value"),
    ExitCode.NOT_FOUND: Meaning("not found (the helper: nothing published, with --require)"),
    ExitCode.REFUSED: Meaning("refused: unsupported, rejected, read-only, or failed the probe"),
    ExitCode.UNREACHABLE: Meaning("unreachable or unavailable, or a full disk; try again"),
    ExitCode.UNAUTHORIZED: Meaning("unauthorized: credentials or permissions missing or refused"),
    ExitCode.CONFLICT: Meaning("conflict: the record moved, or the step was published first"),
    ExitCode.UNREADABLE: Meaning("unreadable: stored data damaged, or from a newer version"),
    ExitCode.ROOT_UNAVAILABLE: Meaning(
        "the checkpoint root is missing or unreadable", ("jobdispatch-publish",)
    ),
    ExitCode.INTERRUPTED: Meaning("interrupted (run: the job goes on, unsupervised)"),
}


def codes_of(command: str) -> list[ExitCode]:
    """The codes ``command`` (one of :data:`COMMANDS`) can exit with, in order."""
    if command not in COMMANDS:
        msg = f"no exit codes for {command!r}: the commands are {', '.join(COMMANDS)}"
        raise ValueError(msg)
    return [code for code, meaning in MEANINGS.items() if command in meaning.commands]


def summary(command: str) -> str:
    """``command``'s codes as one line each, ``N  meaning``, for its ``--help``."""
    return "\n".join(f"{int(code):>3}  {MEANINGS[code].words}" for code in codes_of(command))


def code_for(exc: BaseException, otherwise: ExitCode) -> ExitCode:
    """The code of one of the core's errors, by its kind; ``otherwise`` for anything else, which
    each command decides for itself (``jobdispatch``: bad input; the helper: a failure)."""
    from jobdispatch import errors

    # First match wins: Unreadable is an Invalid, but about stored data, not the input.
    by_kind: tuple[tuple[tuple[type[errors.DispatchError], ...], ExitCode], ...] = (
        ((errors.NotFound,), ExitCode.NOT_FOUND),
        ((errors.Unreadable,), ExitCode.UNREADABLE),
        ((errors.Invalid,), ExitCode.USAGE),
        (
            (errors.Unsupported, errors.Rejected, errors.ReadOnly, errors.AlreadyRegistered),
            ExitCode.REFUSED,
        ),
        ((errors.Unreachable, errors.Unavailable, errors.OutcomeUnknown), ExitCode.UNREACHABLE),
        ((errors.Unauthorized,), ExitCode.UNAUTHORIZED),
        ((errors.Conflict,), ExitCode.CONFLICT),
    )
    return next((code for kinds, code in by_kind if isinstance(exc, kinds)), otherwise)
