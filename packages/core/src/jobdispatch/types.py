"""The value types of dispatch: states, causes, actors, recovery policy, capabilities, plans.

Every type is a frozen, slotted attrs class or a string enum whose ``str()`` is its kebab-case
word, so printing a cause reads ``node-lost``, not ``CauseKind.NODE_LOST``. They carry no
behaviour beyond small derived facts; the job level (``fold``, ``project``, ``next``) lives in
its own modules.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TypeAlias

import attrs

#: A job's identity: a short random string, stable for the job's whole life.
JobID: TypeAlias = str


class _Word(enum.StrEnum):
    """A string enum that prints as its kebab-case word."""

    def __str__(self) -> str:
        # The member's value, read from its slot rather than through Enum's ``value`` property
        # (several times cheaper; every cause, state and actor prints through here).
        value: str = self._value_
        return value

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class State(_Word):
    """A job's coarse state. ``succeeded``, ``failed`` and ``cancelled`` are terminal.

    ``running`` and ``ended`` are never committed: they are what the backend shows of the
    latest canonical object, the second between the end of its run and the supervisor's
    commit of what follows (an outcome or a recovery). See :attr:`Status.committed`.
    """

    PENDING = "pending"
    HELD = "held"
    RUNNING = "running"
    ENDED = "ended"
    RECOVERING = "recovering"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        """Whether a committed outcome in this state is final."""
        return self in _TERMINAL


_TERMINAL = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED})


class CauseKind(_Word):
    """Why something happened: the typed half of every outcome, never collapsed to "failed"."""

    NONE = "none"
    PREEMPTED = "preempted"
    NODE_LOST = "node-lost"
    OUT_OF_MEMORY = "out-of-memory"
    TIME_LIMIT = "time-limit"
    NON_ZERO_EXIT = "non-zero-exit"
    LAUNCH_FAILED = "launch-failed"
    NO_CAPACITY = "no-capacity"
    HELD = "held"
    RELEASED = "released"
    REQUEUED = "requeued"
    CANCELLED = "cancelled"
    DUPLICATE = "duplicate"
    UNKNOWN = "unknown"

    @property
    def recoverable(self) -> bool:
        """Whether a recovery rule may name this cause."""
        return self in RECOVERABLE


#: The causes a recovery rule may cover, in the canonical order a plan lists them.
RECOVERABLE: tuple[CauseKind, ...] = (
    CauseKind.PREEMPTED,
    CauseKind.NODE_LOST,
    CauseKind.OUT_OF_MEMORY,
    CauseKind.TIME_LIMIT,
    CauseKind.NON_ZERO_EXIT,
    CauseKind.LAUNCH_FAILED,
    CauseKind.NO_CAPACITY,
    CauseKind.REQUEUED,
    CauseKind.UNKNOWN,
)


class Provenance(_Word):
    """Who a cause comes from: the scheduler, the application, or an actor."""

    NONE = "none"
    SCHEDULER = "scheduler"
    APPLICATION = "application"
    ACTOR = "actor"


class ActorKind(_Word):
    """What kind of actor did something."""

    HUMAN = "human"
    SUPERVISOR = "supervisor"
    ADAPTER = "adapter"


@attrs.frozen
class Actor:
    """Who did something. Every operator action names its actor, and the record keeps it."""

    kind: ActorKind
    id: str

    @classmethod
    def human(cls, id: str) -> Actor:
        """A person, by a name the site recognises."""
        return cls(ActorKind.HUMAN, id)

    @classmethod
    def supervisor(cls, id: str) -> Actor:
        """A supervisor process, by its holder id."""
        return cls(ActorKind.SUPERVISOR, id)

    @classmethod
    def adapter(cls, id: str) -> Actor:
        """An adapter acting on its own (a backend's native policy, say)."""
        return cls(ActorKind.ADAPTER, id)

    def __str__(self) -> str:
        return f"{self.kind._value_}:{self.id}"  # the kind's word, without a call to its __str__


@attrs.frozen
class Cause:
    """Why an execution or a job ended the way it did."""

    kind: CauseKind = CauseKind.NONE
    provenance: Provenance = Provenance.NONE
    detail: str = ""
    exit_code: int | None = None
    signal: int | None = None
    actor: Actor | None = None

    def __str__(self) -> str:
        parts = [str(self.kind)]
        if self.exit_code is not None:
            parts.append(f"exit {self.exit_code}")
        if self.signal is not None:
            parts.append(f"signal {self.signal}")
        if self.detail:
            parts.append(self.detail)
        return ", ".join(parts)


NO_CAUSE = Cause()


class Action(_Word):
    """What a recovery rule does when one of its causes ends an execution."""

    RESUBMIT = "resubmit"
    RESTART = "restart"
    REQUEUE = "requeue"
    HOLD = "hold"
    ESCALATE = "escalate"


def _kinds(value: Iterable[CauseKind | str]) -> tuple[CauseKind, ...]:
    return tuple(v if isinstance(v, CauseKind) else CauseKind(v) for v in value)


def _rules(value: Iterable[Rule]) -> tuple[Rule, ...]:
    return tuple(value)


@attrs.frozen
class Rule:
    """One recovery rule: on any of these causes, take this action, at most ``budget`` times.

    ``for_`` is the duration of a ``hold``; other actions leave it unset.
    """

    on: tuple[CauseKind, ...] = attrs.field(converter=_kinds)
    action: Action
    budget: int = 0
    for_: timedelta | None = None


@attrs.frozen
class RecoveryPolicy:
    """The rules a job is recovered by, tried in order: the first whose causes match and whose
    budget remains fires."""

    rules: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)


class Enforcer(_Word):
    """Who carries out a rule."""

    BACKEND = "backend"
    SUPERVISOR = "supervisor"
    NOBODY = "nobody"


class CheckpointMode(_Word):
    """How executions share checkpoints: isolated (each its own directory) or shared."""

    ISOLATED = "isolated"
    SHARED = "shared"


class UnmatchedPolicy(_Word):
    """What an attempt whose outcome stayed unknown does to settlement."""

    RESIDUAL = "residual"
    MANUAL = "manual"


class Tristate(_Word):
    """An answer that may honestly be unknown."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


class Source(_Word):
    """Where a capability answer comes from."""

    DECLARED = "declared"
    PROBED = "probed"
    CATALOGUE = "catalogue"


@attrs.frozen
class Support:
    """A capability answer for one cluster: yes, no or unknown, with where it came from."""

    answer: Tristate
    source: Source = Source.DECLARED
    detail: str = ""

    @classmethod
    def yes(cls, source: Source = Source.DECLARED, detail: str = "") -> Support:
        return cls(Tristate.YES, source, detail)

    @classmethod
    def no(cls, source: Source = Source.DECLARED, detail: str = "") -> Support:
        return cls(Tristate.NO, source, detail)

    @classmethod
    def unknown(cls, source: Source = Source.DECLARED, detail: str = "") -> Support:
        return cls(Tristate.UNKNOWN, source, detail)

    def __str__(self) -> str:
        tail = f" ({self.detail})" if self.detail else ""
        return f"{self.answer} [{self.source}]{tail}"


class Capability(_Word):
    """What a cluster may or may not support, asked per cluster and per spec."""

    CONTAINER_IMAGE = "container-image"
    NATIVE_REQUEUE = "native-requeue"
    NATIVE_RESTART = "native-restart"
    HOLD = "hold"
    PRE_TERMINATION_SIGNAL = "pre-termination-signal"
    ACCOUNTING_HISTORY = "accounting-history"
    ATTEMPT_INJECTION = "attempt-injection"
    READMISSION_GATE = "readmission-gate"
    WORKING_DIRECTORY = "working-directory"
    PROCS_PER_NODE = "procs-per-node"
    OUTPUT_PATH = "output-path"
    OUTPUT_READ = "output-read"
    OUTPUT_FOLLOW = "output-follow"
    OUTPUT_RETAINED = "output-retained"


class ObjectState(_Word):
    """What a backend shows of one object."""

    GATED = "gated"
    PENDING = "pending"
    HELD = "held"
    RUNNING = "running"
    ENDED = "ended"

    @property
    def live(self) -> bool:
        """Past its gate and not ended: the object may run or is running."""
        return self in (ObjectState.PENDING, ObjectState.HELD, ObjectState.RUNNING)


class CleanupState(_Word):
    """Whether a stopped job's objects are gone yet."""

    CLEAR = "clear"
    PENDING = "pending"
    BLOCKED = "blocked"


class Level(_Word):
    """How much a status knows: the job level (with a record) or the object only."""

    JOB = "job"
    OBJECT_ONLY = "object-only"


class HoldKind(_Word):
    """Who a hold is for: an operator's hold, or a recovery rule's hold for a person."""

    OPERATOR = "operator"
    RECOVERY = "recovery"


@attrs.frozen
class Hold:
    """A hold in force: who placed it, why, and until when (``None``: until released)."""

    kind: HoldKind
    by: Actor
    reason: str = ""
    until: datetime | None = None


@attrs.frozen
class HoldMeta:
    """What a backend hold or release call carries: the hold instance it is about, and the
    deadline by which the call must have landed."""

    instance: int
    deadline: datetime
    by: Actor | None = None
    reason: str = ""
    until: datetime | None = None


@attrs.frozen
class CallMeta:
    """What a requeue or restore call carries: its recorded deadline, who asked and why."""

    deadline: datetime
    by: Actor | None = None
    reason: str = ""


# ---------------------------------------------------------------------------- the job spec


@attrs.frozen
class SharedCheckpoint:
    """Declares that every execution reads and writes one checkpoint directory.

    A zombie execution could still be writing it, so recovery cannot be automatic: every rule
    becomes a 24 h hold for a person.
    """


#: The extension types a spec may carry, by the tag their encoding uses.
EXTENSIONS: Mapping[str, type] = {"shared-checkpoint": SharedCheckpoint}
Extension: TypeAlias = SharedCheckpoint


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        # A bare string would otherwise become a tuple of characters.
        return (value,)
    return tuple(value)


def _env(value: Mapping[str, str] | None) -> dict[str, str]:
    return dict(value or {})


def _extensions(value: Iterable[Extension]) -> tuple[Extension, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class JobSpec:
    """What to run and how to recover it. ``jobdispatch.validate`` checks it before use."""

    command: tuple[str, ...] = attrs.field(converter=_strings)
    name: str = ""
    nodes: int = 1
    procs_per_node: int = 1
    image: str | None = None
    working_dir: str | None = None
    env: dict[str, str] = attrs.field(factory=dict, converter=_env, hash=False)
    time_limit: timedelta | None = None
    output: str | None = None
    extensions: tuple[Extension, ...] = attrs.field(default=(), converter=_extensions)
    recovery: RecoveryPolicy = attrs.field(factory=RecoveryPolicy)

    @property
    def checkpoint(self) -> CheckpointMode:
        """Shared when a :class:`SharedCheckpoint` extension is declared, else isolated."""
        shared = any(isinstance(e, SharedCheckpoint) for e in self.extensions)
        return CheckpointMode.SHARED if shared else CheckpointMode.ISOLATED


# ---------------------------------------------------------------------------- the plan


@attrs.frozen
class RuleSupport:
    """A backend's answer for one rule: would it enforce the rule natively, and can it perform
    the rule's action when a supervisor asks."""

    native: Support
    perform: Support


@attrs.frozen
class RuleAssignment:
    """One rule of a plan: as asked, as it will be enforced, and by whom."""

    index: int
    rule: Rule
    effective: Rule
    enforcer: Enforcer
    support: RuleSupport
    firings: int = 0
    accepted: str = ""


@attrs.frozen
class Plan:
    """Submit's decision, recorded with the job before anything is created."""

    job: JobID | None
    rules: tuple[RuleAssignment, ...]
    uncovered: tuple[CauseKind, ...]
    checkpoint: CheckpointMode
    unmatched: UnmatchedPolicy
    capabilities: Mapping[Capability, Support] = attrs.field(factory=dict, hash=False)
    identity_weakened: str = ""
    supervised: bool = False
