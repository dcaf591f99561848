"""Errors of the checkpoint helper, each tied to the exit code the helper reports.

A job's entrypoint script branches on the helper's exit code (resume, start fresh, or fail the
execution with a reason), so every error a caller can act on has a code of its own and a message
that names what is wrong: the variable, the flag, the root or the step. Secrets are never part of a
message; the credential sources make sure of that before raising.
"""

from __future__ import annotations

import enum

from jobdispatch.errors import (
    Conflict,
    DispatchError,
    Invalid,
    NotFound,
    Rejected,
    Unauthorized,
    Unavailable,
    Unreachable,
)

__all__ = [
    "AlreadyPublished",
    "Corrupt",
    "ExitCode",
    "MissingCredentials",
    "NothingPublished",
    "StoreRefused",
    "exit_code_for",
]


class ExitCode(enum.IntEnum):
    """What the helper's exit status means. Documented in docs/specs/0006-checkpoints.md."""

    OK = 0
    FAILED = 1  # a bug or an error with no better code
    USAGE = 2  # the command line itself is wrong (argparse's own code)
    INVALID = 3  # a bad environment variable, root, flag value or configuration file
    CREDENTIALS = 4  # no credentials found, or the store refused them
    NOTHING = 5  # resolve --require found no published checkpoint
    CONFLICT = 6  # another execution published this step first
    REFUSED = 7  # probe: the store does not honour what isolation needs
    UNREACHABLE = 8  # the store could not be reached or is unavailable; retrying may help
    CORRUPT = 9  # a published checkpoint's data is missing or differs from its entry
    INTERRUPTED = 130  # stopped by SIGINT or SIGTERM before finishing


class MissingCredentials(Unauthorized):
    """No credential source in the configured list had credentials. The message lists each source
    and why it had none."""


class AlreadyPublished(Conflict):
    """The step is published already, by the execution named in the message."""

    def __init__(self, message: str, *, step: int, by: str) -> None:
        super().__init__(message)
        self.step = step
        self.by = by


class NothingPublished(NotFound):
    """The job has no published checkpoint (yet)."""


class StoreRefused(Rejected):
    """The store failed a check isolation rests on (conditional writes, signatures, listing)."""


class Corrupt(DispatchError):
    """A published checkpoint's data is missing or not what its publication entry recorded."""

    prefix = "corrupt"


_CODES: tuple[tuple[type[BaseException], ExitCode], ...] = (
    (AlreadyPublished, ExitCode.CONFLICT),
    (Conflict, ExitCode.CONFLICT),
    (NothingPublished, ExitCode.NOTHING),
    (StoreRefused, ExitCode.REFUSED),
    (Corrupt, ExitCode.CORRUPT),
    (Unauthorized, ExitCode.CREDENTIALS),
    (Unreachable, ExitCode.UNREACHABLE),
    (Unavailable, ExitCode.UNREACHABLE),
    (Invalid, ExitCode.INVALID),
    (NotFound, ExitCode.INVALID),
)


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code for an error; :attr:`ExitCode.FAILED` for anything unforeseen."""
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return ExitCode.FAILED
