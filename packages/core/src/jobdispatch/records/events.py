"""The job record's header and events: everything the job level knows comes from folding them.

Events come in three classes, which the store treats differently:

* **controls** are a person's intents (hold, release, cancel, resubmit, requeue, give up,
  abandon). They are committed conditionally on the revision only: anyone allowed to operate
  the job may write them.
* **decisions** are a supervisor's commitments (authorize a submission, record an attempt,
  choose the canonical object, open it, stop it, decide an outcome...). They carry the owner's
  fencing token: a store refuses a decision unless the writer holds the job's current lease.
* **evidence** is what a backend showed or answered (an observation, a Start reply, a call's
  result, a delivery). It is committed conditionally on the revision, without a token, because
  recording a fact never needs ownership.

An event's revision is its position in the record, counted from 1; the header is revision 0.
docs/specs/0002-record.md describes every type and its fields.
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta
from typing import ClassVar, TypeAlias, get_args

import attrs

from jobdispatch.spi import CessationEvidence, ObjectObs, ObjectRef
from jobdispatch.triggers import EscalationId, Trigger
from jobdispatch.types import (
    Actor,
    Cause,
    Hold,
    JobID,
    JobSpec,
    Plan,
    State,
    UnmatchedPolicy,
)

#: The encoding's schema version. A record written by a newer version is refused, never guessed.
SCHEMA_VERSION = 1


class EventClass(enum.Enum):
    """How the store treats an event (see the module docstring)."""

    CONTROL = "control"
    DECISION = "decision"
    EVIDENCE = "evidence"


@attrs.frozen(kw_only=True)
class Options:
    """The per-job settings every actor must use alike, so they live in the header."""

    supervised: bool = False
    submit_retries: int = 2
    unresolved_age: timedelta = timedelta(minutes=10)
    cleanup_deadline: timedelta = timedelta(minutes=30)
    unmatched: UnmatchedPolicy = UnmatchedPolicy.RESIDUAL


@attrs.frozen(kw_only=True)
class Header:
    """Revision 0 of a record: what the job is, as submitted."""

    job: JobID
    spec: JobSpec
    plan: Plan
    options: Options = attrs.field(factory=Options)
    idempotency_key: str = ""
    supersedes: JobID = ""
    created_by: Actor
    created_at: datetime
    schema: int = SCHEMA_VERSION


@attrs.frozen(kw_only=True)
class Event:
    """What every event carries: when, who, and (decisions only) the owner's fencing token."""

    kind: ClassVar[str] = ""
    cls: ClassVar[EventClass] = EventClass.EVIDENCE

    at: datetime
    by: Actor
    token: int | None = None

    @property
    def decision(self) -> bool:
        """Whether committing this event needs the job's current lease."""
        return self.cls is EventClass.DECISION


@attrs.frozen(kw_only=True)
class _Control(Event):
    """A person's request: committed by the CLI or the API without a lease."""

    cls: ClassVar[EventClass] = EventClass.CONTROL


@attrs.frozen(kw_only=True)
class _Decision(Event):
    """What the supervisor decided: committed only under the job's current lease."""

    cls: ClassVar[EventClass] = EventClass.DECISION


# ------------------------------------------------------------------------------ controls


@attrs.frozen(kw_only=True)
class HoldRequested(_Control):
    """A person holds the job: nothing new is opened until released (or ``until``)."""

    kind: ClassVar[str] = "hold-requested"
    reason: str = ""
    until: datetime | None = None


@attrs.frozen(kw_only=True)
class ReleaseRequested(_Control):
    """A person releases the hold in force."""

    kind: ClassVar[str] = "release-requested"
    reason: str = ""


@attrs.frozen(kw_only=True)
class CancelRequested(_Control):
    """A person cancels the job. Its commit is the outcome: ``cancelled``, final."""

    kind: ClassVar[str] = "cancel-requested"
    reason: str = ""
    superseded_by: JobID = ""


@attrs.frozen(kw_only=True)
class ResubmitRequested(_Control):
    """A person asks for a new submission of the same job."""

    kind: ClassVar[str] = "resubmit-requested"
    reason: str = ""


@attrs.frozen(kw_only=True)
class RequeueRequested(_Control):
    """A person asks the scheduler to rerun the canonical object in place."""

    kind: ClassVar[str] = "requeue-requested"
    reason: str = ""


@attrs.frozen(kw_only=True)
class GiveUpRequested(_Control):
    """A person stops recovery: the job fails with the cause of its last execution."""

    kind: ClassVar[str] = "give-up-requested"
    reason: str = ""


@attrs.frozen(kw_only=True)
class AbandonRequested(_Control):
    """A person closes an attempt whose outcome stayed unknown (the manual policy)."""

    kind: ClassVar[str] = "abandon-requested"
    submission: int
    attempt: int
    reason: str = ""


# ------------------------------------------------------------------------------ evidence


@attrs.frozen(kw_only=True)
class Observed(Event):
    """What the backend showed of one object, committed when it differs from the last record."""

    kind: ClassVar[str] = "observed"
    obs: ObjectObs


@attrs.frozen(kw_only=True)
class Absent(Event):
    """A complete Find at ``find_at`` did not show an object the record knows."""

    kind: ClassVar[str] = "absent"
    ref: ObjectRef
    find_at: datetime


class Reply(enum.Enum):
    """What a Start call answered."""

    CREATED = "created"
    UNKNOWN = "unknown"
    REFUSED = "refused"


@attrs.frozen(kw_only=True)
class AttemptReplied(Event):
    """The reply to attempt ``attempt`` of submission ``submission``."""

    kind: ClassVar[str] = "attempt-replied"
    submission: int
    attempt: int
    reply: Reply
    ref: ObjectRef | None = None
    detail: str = ""


class CallOp(enum.Enum):
    """The backend calls that carry a recorded deadline."""

    HOLD = "hold"
    RELEASE = "release"
    REQUEUE = "requeue"
    RESTORE = "restore"


@attrs.frozen(kw_only=True)
class CallAnswered(Event):
    """The result of a call recorded by :class:`CallIssued` at revision ``call``."""

    kind: ClassVar[str] = "call-answered"
    call: int
    ok: bool
    detail: str = ""


@attrs.frozen(kw_only=True)
class CessationAnswered(Event):
    """The site's cessation signal about an object."""

    kind: ClassVar[str] = "cessation-answered"
    ref: ObjectRef
    evidence: CessationEvidence


class Origin(enum.Enum):
    """Where a progress reading came from: a checkpoint the helper published (a step the job
    can resume from), a mark (``jobdispatch-publish progress``: the job is alive at a step,
    nothing more), or the growth of the running object's output as its adapter sees it (the
    job is alive; its "step" is then the output's size in bytes, its time the files' newest
    modification)."""

    PUBLICATION = "publication"
    MARK = "mark"
    OUTPUT = "output"


@attrs.frozen(kw_only=True)
class ProgressSeen(Event):
    """The job's progress advanced: its newest step (from a publication or a mark), the time
    the job gave it (``marked_at``), and the submission and execution that made it.

    Committed only when the step advanced past the record's newest, and at most once in each
    of the job's ``progress.record_every`` windows, phased by its id
    (:func:`jobdispatch.progress.window`; sooner when a run has ended: a budget's charge then
    reads the newest checkpoint), so a record does not grow by an event per training step."""

    kind: ClassVar[str] = "progress-seen"
    step: int
    marked_at: datetime
    submission: int
    execution: str = ""
    origin: Origin = Origin.MARK


@attrs.frozen(kw_only=True)
class ResumedFrom(Event):
    """Execution ``execution`` of submission ``submission`` resumed from the checkpoint of step
    ``step`` (the helper's ``resolve`` wrote a "resumed" entry naming it at ``resumed_at``)."""

    kind: ClassVar[str] = "resumed-from"
    submission: int
    execution: str
    step: int
    resumed_at: datetime


@attrs.frozen(kw_only=True)
class ProgressBlind(Event):
    """The job's progress could not be read (its checkpoint root, the store or its credentials
    unavailable). From now until :class:`ProgressSighted`, no stall is declared."""

    kind: ClassVar[str] = "progress-blind"
    detail: str = ""


@attrs.frozen(kw_only=True)
class ProgressSighted(Event):
    """The job's progress can be read again after a :class:`ProgressBlind`."""

    kind: ClassVar[str] = "progress-sighted"


@attrs.frozen(kw_only=True)
class EscalationDelivered(Event):
    """An escalation reached a sink; each sink gets each escalation once."""

    kind: ClassVar[str] = "escalation-delivered"
    escalation: EscalationId
    sink: str


@attrs.frozen(kw_only=True)
class NoticeDelivered(Event):
    """A lifecycle notice (``jobdispatch.notices``) reached a sink. ``notice`` is the notice's
    id, derived from the record (its kind and the revision that caused it), so every supervisor
    names the same notice alike; a sink with one recorded is not sent it again."""

    kind: ClassVar[str] = "notice-delivered"
    notice: str
    sink: str


# ------------------------------------------------------------------------------ decisions


@attrs.frozen(kw_only=True)
class SubmissionAuthorized(_Decision):
    """Submission ``n`` may be tried. ``rule`` is the rule it is charged to (``None`` for the
    first submission and a person's resubmit); ``trigger`` identifies what caused it, and one
    trigger authorizes at most one submission."""

    kind: ClassVar[str] = "submission-authorized"
    n: int
    trigger: Trigger
    rule: int | None = None
    cause: Cause | None = None
    #: Whether the rule's budget pays for this firing, said only by a rule that charges
    #: ``no-advance`` (None: every firing of the rule is charged).
    charged: bool | None = None
    #: Suspect nodes every attempt of this submission keeps off, and until when they are
    #: suspect (``jobdispatch.suspects``); empty when none are.
    exclude: tuple[str, ...] = ()
    exclude_until: datetime | None = None


@attrs.frozen(kw_only=True)
class AttemptStarted(_Decision):
    """Attempt ``attempt`` of submission ``submission`` is about to call Start (numbered first,
    so a crash leaves a record of the attempt whose reply is missing)."""

    kind: ClassVar[str] = "attempt-started"
    submission: int
    attempt: int


@attrs.frozen(kw_only=True)
class CanonicalChosen(_Decision):
    """``ref`` is submission ``submission``'s one object allowed to run."""

    kind: ClassVar[str] = "canonical-chosen"
    submission: int
    ref: ObjectRef
    attempt: int


@attrs.frozen(kw_only=True)
class OpenDecided(_Decision):
    """The canonical object's gate is to be lifted, by a call that must land by ``deadline``.

    The deadline is what bounds an open decided before a cancel (or by a supervisor that has
    since lost its lease) and carried out after it: the adapter refuses the call past it
    (docs/specs/0001-contract.md, D8). ``None`` only in records written before opens carried
    one.
    """

    kind: ClassVar[str] = "open-decided"
    submission: int
    ref: ObjectRef
    deadline: datetime | None = None


@attrs.frozen(kw_only=True)
class Retired(_Decision):
    """A gated object that is not canonical: it never runs, its cause is ``duplicate``."""

    kind: ClassVar[str] = "retired"
    ref: ObjectRef
    submission: int
    attempt: int


@attrs.frozen(kw_only=True)
class StopDecided(_Decision):
    """An object is to be stopped (cancel, give up, a newer submission, a retired duplicate)."""

    kind: ClassVar[str] = "stop-decided"
    ref: ObjectRef
    reason: str = ""


@attrs.frozen(kw_only=True)
class StallDeclared(_Decision):
    """Run ``execution`` of object ``ref`` made no progress for its job's stall rule's time:
    ``cause`` (``stalled``, provenance supervisor) names the signal and the last progress seen.

    ``enforced``: the run is to be stopped, and this commits with the :class:`StopDecided`
    before any stop call, so when the run ends its cause is ``stalled``, never ``cancelled``.
    Not enforced: the stall rule only observes, and this is its verdict, recorded once per run.
    """

    kind: ClassVar[str] = "stall-declared"
    ref: ObjectRef
    execution: int
    cause: Cause
    enforced: bool = True


@attrs.frozen(kw_only=True)
class PendingExpired(_Decision):
    """Object ``ref`` stayed pending past its job's pending deadline (``[pending] after``) since
    it was opened: ``cause`` (the deadline's cause, ``no-capacity`` or ``never-fits``,
    provenance supervisor) names how long and what the backend last said of the wait.

    It commits with the :class:`StopDecided` before any stop call, so when the object ends its
    cause is this one, never ``cancelled``."""

    kind: ClassVar[str] = "pending-expired"
    ref: ObjectRef
    cause: Cause


@attrs.frozen(kw_only=True)
class VerifiedStopped(_Decision):
    """The object is judged gone from its absence in complete Finds, the last at ``find_at``."""

    kind: ClassVar[str] = "verified-stopped"
    ref: ObjectRef
    find_at: datetime


@attrs.frozen(kw_only=True)
class RecoveryDecided(_Decision):
    """A rule fired on the end of an execution, with an action the supervisor performs on the
    same object (requeue) or by holding for a person (hold). Charged to the rule's budget."""

    kind: ClassVar[str] = "recovery-decided"
    rule: int
    trigger: Trigger
    cause: Cause
    ref: ObjectRef | None = None
    submission: int = 0
    #: As :attr:`SubmissionAuthorized.charged`.
    charged: bool | None = None


@attrs.frozen(kw_only=True)
class HoldPlaced(_Decision):
    """Hold instance ``instance`` stands: an operator's hold (after a request) or a recovery
    rule's hold for a person."""

    kind: ClassVar[str] = "hold-placed"
    instance: int
    hold: Hold
    submission: int = 0
    cause: Cause | None = None


@attrs.frozen(kw_only=True)
class HoldLifted(_Decision):
    """Hold instance ``instance`` no longer stands (released by a person, expired, or lifted by a
    cessation answer)."""

    kind: ClassVar[str] = "hold-lifted"
    instance: int
    reason: str = ""
    resume: bool = False


@attrs.frozen(kw_only=True)
class CallIssued(_Decision):
    """A hold-family, requeue or restore call about to be made, with the deadline past which the
    adapter must refuse to act on it."""

    kind: ClassVar[str] = "call-issued"
    op: CallOp
    ref: ObjectRef
    deadline: datetime
    instance: int = 0


@attrs.frozen(kw_only=True)
class OutcomeDecided(_Decision):
    """The job's terminal state and its cause. Final: nothing ever replaces it."""

    kind: ClassVar[str] = "outcome-decided"
    state: State
    cause: Cause


@attrs.frozen(kw_only=True)
class Escalated(_Decision):
    """A person must know. ``id`` derives from the cause, so each escalation is committed once."""

    kind: ClassVar[str] = "escalated"
    id: EscalationId
    detail: str


@attrs.frozen(kw_only=True)
class Settled(_Decision):
    """The job needs nothing more: an outcome stands and clean-up is done."""

    kind: ClassVar[str] = "settled"


AnyEvent: TypeAlias = (
    HoldRequested
    | ReleaseRequested
    | CancelRequested
    | ResubmitRequested
    | RequeueRequested
    | GiveUpRequested
    | AbandonRequested
    | Observed
    | Absent
    | AttemptReplied
    | CallAnswered
    | CessationAnswered
    | EscalationDelivered
    | ProgressSeen
    | ResumedFrom
    | ProgressBlind
    | ProgressSighted
    | NoticeDelivered
    | SubmissionAuthorized
    | AttemptStarted
    | CanonicalChosen
    | OpenDecided
    | Retired
    | StopDecided
    | StallDeclared
    | PendingExpired
    | VerifiedStopped
    | RecoveryDecided
    | HoldPlaced
    | HoldLifted
    | CallIssued
    | OutcomeDecided
    | Escalated
    | Settled
)

#: Every event type by the tag its encoding carries: the members of AnyEvent, listed once there.
EVENT_TYPES: dict[str, type[Event]] = {t.kind: t for t in get_args(AnyEvent)}


@attrs.frozen
class View:
    """A record as read: its header, its events in order, and its revision (the event count)."""

    header: Header
    events: tuple[AnyEvent, ...]

    @property
    def revision(self) -> int:
        return len(self.events)

    @property
    def job(self) -> JobID:
        return self.header.job
