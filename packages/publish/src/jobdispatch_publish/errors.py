"""Errors of the checkpoint helper, each tied to the exit code the helper reports.

A job's entrypoint script branches on the helper's exit code (resume, start fresh, or fail the
execution with a reason), so every error a caller can act on has a code of its own and a message
that names what is wrong: the variable, the flag, the root or the step. Secrets are never part of a
message; the credential sources make sure of that before raising.

The codes are the core's table (:mod:`jobdispatch.exitcodes`), shared with ``jobdispatch``: a
reason both commands have (bad input, not found, refused, unreachable, unauthorized, a lost
race, damaged stored data) has the same code in both. Only the helper's own errors and the file
system's failures are mapped here.
"""

from __future__ import annotations

import errno

from jobdispatch.errors import (
    Conflict,
    DispatchError,
    Invalid,
    NotFound,
    Rejected,
    Unauthorized,
)
from jobdispatch.exitcodes import ExitCode, code_for

__all__ = [
    "AlreadyPublished",
    "BadStep",
    "Corrupt",
    "DamagedEntry",
    "ExitCode",
    "MissingCredentials",
    "MissingExtra",
    "NothingPublished",
    "ProgressUnreadable",
    "RootUnavailable",
    "SaveChanged",
    "StoreRefused",
    "can_heal",
    "exit_code_for",
]


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


class RootUnavailable(DispatchError):
    """The checkpoint root itself is missing or unreadable: a typo, or a shared file system that
    is not mounted on this node. Never taken for "nothing published yet", which would restart
    training from step 0 without a word."""

    prefix = "checkpoint root"


class BadStep(Invalid, ValueError):
    """A step that is not a whole number from 0 to 10^18 - 1 (negative, fractional, not a
    number). Invalid input, exit 3; also a :class:`ValueError`, as it was before it had a class
    of its own."""


class ProgressUnreadable(DispatchError):
    """The progress of a checkpoint root could not be listed, so nothing is known of it.

    A supervisor that gets this is *blind* for that root and must say so, never take the silence
    for "no progress" (which would declare every job stalled) nor for progress. ``root`` is the
    root as given, ``reason`` one word for what failed (``credentials``, ``unreachable``,
    ``root``, ``invalid``, ``failed``) and ``cause`` the error underneath. The message never holds
    a secret: it is built from the store's own messages, which never do.
    """

    prefix = "progress unreadable"

    def __init__(self, root: str, reason: str, cause: BaseException) -> None:
        super().__init__(f"{root}: {cause}")
        self.root = root
        self.reason = reason
        self.cause = cause


class SaveChanged(Invalid):
    """A save's files changed while it was being published. Training is still writing it, so a
    later attempt may succeed: the one :class:`Invalid` that ``watch`` retries."""


class MissingExtra(Invalid):
    """A feature needs an optional dependency that is not installed; the message names the extra
    (``jobdispatch-publish[s3]``) to install."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs the {module} package, which is not installed: "
            f"pip install 'jobdispatch-publish[{extra}]'"
        )
        self.extra = extra


class Corrupt(DispatchError):
    """A published checkpoint's data is missing or not what its publication entry recorded."""

    prefix = "corrupt"


class DamagedEntry(Corrupt):
    """A stored publication entry that does not parse: not JSON, a field missing or of the wrong
    kind. It is damage to what was published (no job spec or flag can cause it, and retrying
    reads the same bytes), so it is :class:`Corrupt` like damaged data, exit 8, never the
    "fix your input" of :class:`~jobdispatch.errors.Invalid`. ``key`` names the entry as the
    store describes it, ``problem`` what is wrong in it."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"publication entry {key} is damaged: {problem}")
        self.key = key
        self.problem = problem


#: The helper's own errors that are none of the core's kinds; the rest (NothingPublished is a
#: NotFound, AlreadyPublished a Conflict, StoreRefused a Rejected) take the core's codes.
_CODES: tuple[tuple[type[BaseException], ExitCode], ...] = (
    (Corrupt, ExitCode.UNREADABLE),
    (RootUnavailable, ExitCode.ROOT_UNAVAILABLE),
)


#: File system failures of a POSIX root, by what they mean for the caller.
_OS_CODES = {
    errno.EACCES: ExitCode.UNAUTHORIZED,
    errno.EPERM: ExitCode.UNAUTHORIZED,
    errno.ENOSPC: ExitCode.UNREACHABLE,
    errno.EDQUOT: ExitCode.UNREACHABLE,
    errno.EROFS: ExitCode.UNREACHABLE,
    errno.EIO: ExitCode.UNREACHABLE,
    errno.ESTALE: ExitCode.UNREACHABLE,
}


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code for an error; :attr:`ExitCode.FAILED` for anything unforeseen."""
    if isinstance(exc, ProgressUnreadable):
        return exit_code_for(exc.cause)
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    if isinstance(exc, DispatchError):
        return code_for(exc, otherwise=ExitCode.FAILED)
    if isinstance(exc, OSError) and exc.errno is not None:
        return _OS_CODES.get(exc.errno, ExitCode.FAILED)
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return ExitCode.FAILED


def can_heal(exc: BaseException) -> bool:
    """Whether trying the same thing again later may succeed without anyone changing anything.

    ``watch`` retries these (an unreachable store, a full disk, a save still being written) and
    gives up on the rest, such as a missing root or refused credentials, which would otherwise be
    retried forever while training goes on with nothing published.
    """
    return isinstance(exc, SaveChanged) or exit_code_for(exc) is ExitCode.UNREACHABLE
