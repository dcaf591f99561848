"""The one exception hierarchy of dispatch.

Every error a caller can act on is a :class:`DispatchError`; the subclass says what kind of
problem it is, so callers branch on the type and show the message. Messages name the field, the
object or the job they are about.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

__all__ = [
    "AlreadyRegistered",
    "Conflict",
    "DispatchError",
    "Invalid",
    "LeaseHeld",
    "LeaseLost",
    "NotFound",
    "OutcomeUnknown",
    "Problem",
    "ReadOnly",
    "Rejected",
    "RevisionMoved",
    "Unauthorized",
    "Unavailable",
    "Unreachable",
    "Unreadable",
    "Unsupported",
    "ValidationError",
]


class DispatchError(Exception):
    """The base of every error dispatch raises on purpose."""

    #: The word the message starts with, so a printed error says what kind it is.
    prefix = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.prefix}: {self.message}"


class NotFound(DispatchError):
    """The job, object, adapter or plugin named does not exist."""

    prefix = "not found"


class Unsupported(DispatchError):
    """The cluster does not support what was asked (its capability answered no)."""

    prefix = "unsupported"


class Invalid(DispatchError):
    """The input cannot be right: a spec, a configuration or a record that does not parse."""

    prefix = "invalid"


class Unreadable(Invalid):
    """Stored data this version cannot read: a record or a store file that is damaged (a
    checksum that does not match, a truncated file, bytes that do not decode) or that a newer
    version wrote.

    It is an :class:`Invalid` (the data cannot be right for this reader), told apart so that a
    caller can report the one record and go on with the others: ``job`` names the record
    (``None`` when a whole store file is damaged), ``revision`` the value (0 for the header,
    ``None`` when not one value), ``path`` the file when one is known. Nothing is ever skipped
    or repaired silently: a record folded without one of its events would be another history.
    """

    prefix = "unreadable"

    def __init__(
        self,
        message: str,
        *,
        job: str | None = None,
        revision: int | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.job = job
        self.revision = revision
        self.path = path


@attrs.frozen
class Problem:
    """One thing wrong with an input: where (a field path such as ``recovery.rules[1].on[0]``)
    and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ValidationError(Invalid):
    """Every problem found in one input at once, each naming its field path.

    Validation never stops at the first problem: a user fixing a job file wants the whole list.
    """

    def __init__(self, problems: Iterable[Problem], *, subject: str = "") -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.subject = subject
        lead = f"{subject}: " if subject else ""
        if len(self.problems) == 1:
            text = f"{lead}{self.problems[0]}"
        else:
            text = f"{lead}{len(self.problems)} problems: " + "; ".join(map(str, self.problems))
        super().__init__(text)

    @property
    def paths(self) -> Sequence[str]:
        """The field paths of every problem, in the order found."""
        return [p.path for p in self.problems]


class Rejected(DispatchError):
    """The request is well-formed but refused: the plan cannot be made as asked."""

    prefix = "rejected"


class Unauthorized(DispatchError):
    """The backend refused the credentials."""

    prefix = "unauthorized"


class Unreachable(DispatchError):
    """The backend could not be reached; nothing is known of what it would have said."""

    prefix = "unreachable"


class ReadOnly(DispatchError):
    """A write was asked of a cluster opened read-only, or of one with no record store."""

    prefix = "read-only"


class Unavailable(DispatchError):
    """The service is there but cannot answer now; trying again later may succeed."""

    prefix = "unavailable"


class OutcomeUnknown(DispatchError):
    """A call may or may not have taken effect (a lost reply). Callers must find out, not retry
    blindly."""

    prefix = "outcome unknown"


class AlreadyRegistered(DispatchError):
    """A plugin registered a name that is taken; the first registration stays."""

    prefix = "already registered"


class Conflict(DispatchError):
    """A conditional commit lost: the record moved past the expected revision, or the writer's
    ownership lease is no longer current. Re-read and recompute."""

    prefix = "conflict"


class RevisionMoved(Conflict):
    """An append expected a revision the record is no longer at: another writer committed
    first. The caller re-reads and recomputes; its lease (if any) is still good."""


class LeaseLost(Conflict):
    """A write needed the job's current lease and the writer's is not it: expired, taken by
    another holder, released, for another job, or not given at all. The writer no longer owns
    the job and must stop acting for it until it acquires a new lease."""


class LeaseHeld(Conflict):
    """``acquire`` was refused because another holder's lease on the job is unexpired."""
