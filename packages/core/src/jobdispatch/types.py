"""The value types of dispatch: states, causes, actors, recovery policy, capabilities, plans.

Every type is a frozen, slotted attrs class or a string enum whose ``str()`` is its kebab-case
word, so printing a cause reads ``node-lost``, not ``CauseKind.NODE_LOST``. They carry no
behaviour beyond small derived facts; the job level (``fold``, ``project``, ``next``) lives in
its own modules.
"""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeAlias

import attrs

from jobdispatch.errors import Invalid

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
    #: Waiting for capacity the cluster lacks now: the cluster's state, which may change.
    NO_CAPACITY = "no-capacity"
    #: A request the cluster can never satisfy (more per node than any node has, a selector no
    #: node matches, more than its queue may ever admit): the job file's mistake.
    NEVER_FITS = "never-fits"
    HELD = "held"
    RELEASED = "released"
    REQUEUED = "requeued"
    CANCELLED = "cancelled"
    DUPLICATE = "duplicate"
    #: The supervisor stopped a run that made no progress for its job's stall rule's time.
    STALLED = "stalled"
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
    CauseKind.NEVER_FITS,
    CauseKind.REQUEUED,
    CauseKind.STALLED,
    CauseKind.UNKNOWN,
)

#: The causes a pending deadline may end a job with: waiting for capacity (the cluster's
#: state), or a request the cluster can never satisfy (the job file's mistake).
PENDING_CAUSES: tuple[CauseKind, ...] = (CauseKind.NO_CAPACITY, CauseKind.NEVER_FITS)


class Provenance(_Word):
    """Who a cause comes from: the scheduler, the application, or an actor."""

    NONE = "none"
    SCHEDULER = "scheduler"
    APPLICATION = "application"
    ACTOR = "actor"
    #: The supervisor's own judgement from evidence it read (a stall), not a person's act.
    SUPERVISOR = "supervisor"


class ActorKind(_Word):
    """What kind of actor did something."""

    HUMAN = "human"
    SUPERVISOR = "supervisor"
    ADAPTER = "adapter"


#: The longest actor id: a person's name or a supervisor's ``host:pid:token``, never a text.
MAX_ACTOR_ID = 512
#: Characters that would break the one line an actor is shown on (``human:ops``), beside the
#: control characters: line and paragraph separators.
_LINE_BREAKS = frozenset("\u2028\u2029")


def actor_id_problem(value: object) -> str | None:
    """Why ``value`` cannot name an actor, or None when it can: an actor id is non-blank text
    of at most MAX_ACTOR_ID characters, printable on one line and encodable as UTF-8 (so the
    record, the logs and a terminal all show the same name)."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value.strip():
        return "must not be empty or blank"
    if len(value) > MAX_ACTOR_ID:
        return f"must be at most {MAX_ACTOR_ID} characters, got {len(value)}"
    for c in value:
        if unicodedata.category(c) == "Cs":
            return "must be UTF-8 text (it holds bytes that are not)"
        if unicodedata.category(c) == "Cc" or c in _LINE_BREAKS:
            return f"must be printable on one line, without control characters such as {c!r}"
    return None


def _check_actor_id(_actor: object, _field: object, value: str) -> None:
    why = actor_id_problem(value)
    if why is not None:
        msg = f"an actor's id {why}: {value!r}"
        raise Invalid(msg)


@attrs.frozen
class Actor:
    """Who did something. Every operator action names its actor, and the record keeps it.

    The id is checked here (:func:`actor_id_problem`), since the command line is one way in
    among several: an empty name or one with a newline would be recorded for good. Records
    written before the check are read as they are (see :meth:`recorded`)."""

    kind: ActorKind
    id: str = attrs.field(validator=_check_actor_id)

    @classmethod
    def recorded(cls, kind: ActorKind, id: str) -> Actor:
        """An actor as a record holds it, unchecked: what was committed is history, and a
        record that an older version wrote with an id the check now refuses must still read."""
        actor = object.__new__(cls)
        object.__setattr__(actor, "kind", kind)
        object.__setattr__(actor, "id", id)
        return actor

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


class Charge(_Word):
    """Which firings of a rule its budget pays for.

    ``every`` firing (the default), or only those after which training did ``no-advance``: the
    newest checkpoint the record shows is no newer than at the rule's previous firing, so a job
    preempted many times that advances every time never spends its budget, and one that crashes
    twice at the same step does (docs/explanation/progress-and-stalls.md)."""

    EVERY = "every"
    NO_ADVANCE = "no-advance"


@attrs.frozen
class Rule:
    """One recovery rule: on any of these causes, take this action, at most ``budget`` times.

    ``for_`` is the duration of a ``hold``; other actions leave it unset. ``charge`` says which
    firings the budget pays for (:class:`Charge`).
    """

    on: tuple[CauseKind, ...] = attrs.field(converter=_kinds)
    action: Action
    budget: int = 0
    for_: timedelta | None = None
    charge: Charge = Charge.EVERY


@attrs.frozen
class RecoveryPolicy:
    """The rules a job is recovered by, tried in order: the first whose causes match and whose
    budget remains fires."""

    rules: tuple[Rule, ...] = attrs.field(default=(), converter=_rules)
    #: How long nodes shared by two consecutive ``node-lost`` or ``stalled`` runs are kept out
    #: of the job's next submissions (None: never; ``jobdispatch.suspects``).
    exclude_suspects_for: timedelta | None = None


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
    #: The supervisor can see whether a running object's output grows (its files' sizes and
    #: modification times, batched): a progress source for a stall rule (spec 0004, "Progress").
    OUTPUT_GROWTH = "output-growth"
    GPUS = "gpus"
    MEMORY_LIMIT = "memory-limit"
    CPUS_PER_PROC = "cpus-per-proc"
    QUEUES = "queues"
    ACCOUNTS = "accounts"
    NODE_CONSTRAINTS = "node-constraints"
    EXCLUSIVE_NODES = "exclusive-nodes"


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

    @property
    def waiting(self) -> bool:
        """Neither running nor ended: gated, pending or held, what a hold may be placed on."""
        return self in (ObjectState.GATED, ObjectState.PENDING, ObjectState.HELD)


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


class NoticeKind(_Word):
    """A kind of lifecycle notice a job may ask for (``jobdispatch.notices``); ``stalled`` and
    ``resumed`` derive from the progress evidence of a job with a ``[progress]`` root."""

    STARTED = "started"
    ENDED = "ended"
    RECOVERED = "recovered"
    BUDGET_LOW = "budget-low"
    ESCALATED = "escalated"
    SETTLED = "settled"
    STALLED = "stalled"
    RESUMED = "resumed"


def _notice_kinds(value: Iterable[NoticeKind | str]) -> tuple[NoticeKind, ...]:
    return tuple(v if isinstance(v, NoticeKind) else NoticeKind(v) for v in value)


@attrs.frozen
class Notify:
    """The lifecycle notices a job asks for (``events``), and the configured sinks they go to
    (``sinks``; empty: every sink of the supervisor). Recorded with the job, so every
    supervisor, on any host, sends the same notices for it."""

    events: tuple[NoticeKind, ...] = attrs.field(default=(), converter=_notice_kinds)
    sinks: tuple[str, ...] = attrs.field(default=(), converter=tuple)


#: The extension types a spec may carry, by the tag their encoding uses.
EXTENSIONS: Mapping[str, type] = {"shared-checkpoint": SharedCheckpoint, "notify": Notify}
Extension: TypeAlias = SharedCheckpoint | Notify


class StallMode(_Word):
    """What a stall rule does with its verdict: stop the run, or only record what it would do."""

    ENFORCE = "enforce"
    OBSERVE = "observe"


@attrs.frozen(kw_only=True)
class ProgressSource:
    """Where a job's progress can be read: the checkpoint root its helper publishes to and
    marks progress under (``[progress]`` in the job file).

    ``record_every`` bounds how often progress enters the record as evidence: at most one
    event per job in each ``record_every`` window of its own (the windows are phased by the
    job's id, so many jobs do not all record in the same poll; sooner only when a run has
    ended, so a budget's charge reads the newest checkpoint), however often the job marks a
    step."""

    root: str
    record_every: timedelta = timedelta(minutes=5)


@attrs.frozen(kw_only=True)
class StallRule:
    """When a running job counts as hung (``[stall]`` in the job file).

    A run is stalled once ``after`` has passed since its newest progress, or, before its first
    progress, once ``startup_grace`` has passed since it started (None: ``after`` again). In
    ``observe`` mode the verdict is recorded and nothing is stopped. While the progress source
    cannot be read, nothing is ever declared (fail closed); past ``blind_after`` a person is
    told."""

    after: timedelta
    startup_grace: timedelta | None = None
    mode: StallMode = StallMode.ENFORCE
    blind_after: timedelta = timedelta(minutes=30)

    @property
    def grace(self) -> timedelta:
        """How long a run may go before its first progress."""
        return self.after if self.startup_grace is None else self.startup_grace


@attrs.frozen(kw_only=True)
class PendingRule:
    """How long a submission may wait pending before it counts as an ending (``[pending]`` in
    the job file): from the decision to open its object until its first run starts, at most
    ``after``; then the supervisor stops the object and its ending has cause ``cause``
    (``no-capacity`` or ``never-fits``, provenance supervisor), so the rules on that cause
    fail, hold or escalate it as for any ending. Time held does not count: a held job is not
    pending, and its release opens the object again."""

    after: timedelta
    cause: CauseKind = CauseKind.NO_CAPACITY


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        # A bare string would otherwise become a tuple of characters.
        return (value,)
    return tuple(value)


def _env(value: Mapping[str, str] | None) -> dict[str, str]:
    return dict(value or {})


def _extensions(value: Iterable[Extension]) -> tuple[Extension, ...]:
    return tuple(value)


#: A value an adapter's own resource table may hold (``[resources.slurm]``): scalars and lists of
#: strings only, so a table is data the adapter checks against its allow-list, never a flag.
AdapterValue: TypeAlias = str | int | bool | tuple[str, ...]


def _adapter_tables(
    value: Mapping[str, Mapping[str, Any]] | None,
) -> dict[str, dict[str, AdapterValue]]:
    out: dict[str, dict[str, AdapterValue]] = {}
    for name, table in (value or {}).items():
        out[name] = {
            k: tuple(v) if isinstance(v, list | tuple) else v for k, v in dict(table).items()
        }
    return out


@attrs.frozen(kw_only=True)
class Resources:
    """What each node of a job needs, and where the job may be placed.

    Portable fields mean the same on every adapter that answers their capability ``yes``; an
    adapter that cannot honour one answers ``no`` and the plan refuses the spec, because a GPU
    job silently run without GPUs is worse than no job. ``adapter`` holds each adapter's own
    table (``[resources.slurm]``), checked by that adapter against its allow-list when it plans
    the job; the tables of other adapters travel with the spec unread, so one job file can name
    settings for every cluster it may run on.
    """

    #: Accelerators per node; 0 asks for none.
    gpus_per_node: int = 0
    #: The accelerator model (``a100``), or None for any.
    gpu_type: str | None = None
    #: CPUs for each process (rank); None leaves it to the scheduler.
    cpus_per_proc: int | None = None
    #: Memory per node in MiB; None leaves it to the scheduler.
    memory_per_node_mib: int | None = None
    #: Where the job waits: a Slurm partition, a Kueue LocalQueue.
    queue: str | None = None
    account: str | None = None
    qos: str | None = None
    #: Node features (Slurm) or labels (Kubernetes, ``key=value``) every node must have.
    constraints: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    #: The job's nodes run nothing else.
    exclusive: bool = False
    adapter: dict[str, dict[str, AdapterValue]] = attrs.field(
        factory=dict, converter=_adapter_tables, hash=False
    )

    @property
    def empty(self) -> bool:
        """Nothing asked: the scheduler's defaults apply."""
        return self == NO_RESOURCES


#: The resources of a spec that asks for none.
NO_RESOURCES = Resources()


@attrs.frozen
class NodeGroup:
    """Nodes of one kind, as a cluster reports or a site declares them; None is "not said"."""

    count: int
    cpus: int | None = None
    memory_mib: int | None = None
    gpus: int = 0
    gpu_type: str | None = None
    features: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    queues: tuple[str, ...] = attrs.field(default=(), converter=_strings)


@attrs.frozen
class Inventory:
    """What a cluster has to place jobs on, for the plan to check a spec against.

    ``None`` means the cluster did not say, and nothing is refused on its account.
    """

    source: Source = Source.DECLARED
    groups: tuple[NodeGroup, ...] | None = None
    queues: tuple[str, ...] | None = None
    default_queue: str | None = None
    detail: str = ""


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
    resources: Resources = NO_RESOURCES
    extensions: tuple[Extension, ...] = attrs.field(default=(), converter=_extensions)
    recovery: RecoveryPolicy = attrs.field(factory=RecoveryPolicy)
    #: Where the job's progress is read (None: nowhere, and then it can never stall).
    progress: ProgressSource | None = None
    #: When a run counts as hung; only a job with a progress source can stall.
    stall: StallRule | None = None
    #: How long a submission may wait pending before it counts as an ending (None: for ever).
    pending: PendingRule | None = None

    @property
    def checkpoint(self) -> CheckpointMode:
        """Shared when a :class:`SharedCheckpoint` extension is declared, else isolated."""
        shared = any(isinstance(e, SharedCheckpoint) for e in self.extensions)
        return CheckpointMode.SHARED if shared else CheckpointMode.ISOLATED

    @property
    def notify(self) -> Notify:
        """The lifecycle notices the job asked for (none unless a :class:`Notify` is declared)."""
        for e in self.extensions:
            if isinstance(e, Notify):
                return e
        return Notify()


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
    #: Of ``firings``, how many its budget paid for (all of them unless the rule charges
    #: ``no-advance``); shown by status, never recorded.
    charged: int = 0


@attrs.frozen
class StallAssignment:
    """The plan's answer for a stall rule: who enforces it, where progress is read (the
    checkpoint root; the object's output growth, where the cluster can see it), and what a
    person should know (an observe-only rule, a job that cannot stall)."""

    rule: StallRule
    enforcer: Enforcer
    root: str = ""
    note: str = ""
    #: Whether the growth of the running object's output counts as progress: the cluster
    #: answers yes for ``output-growth`` (written in a record only when true).
    output_growth: bool = False

    @property
    def sources(self) -> tuple[str, ...]:
        """The progress sources the supervisor reads, as a person names them."""
        named = (f"checkpoint root {self.root}",) if self.root else ()
        return (*named, "output growth") if self.output_growth else named


@attrs.frozen
class PendingAssignment:
    """What a plan does with the spec's pending deadline: who stops a submission pending past
    it, and which rule of the plan then acts on the ending's cause.

    Derived, never recorded (:func:`jobdispatch.plan.pending_assignment`): the deadline is the
    recorded spec's and the rules the recorded plan's, so a record keeps its format and an old
    one shows the same."""

    rule: PendingRule
    enforcer: Enforcer
    #: The plan's rule that acts on the ending (the first whose ``on`` names the deadline's
    #: cause, as for any ending); None when none does, and the ending fails the job.
    acting: RuleAssignment | None = None


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
    #: The stall rule's enforcement, when the spec has one.
    stall: StallAssignment | None = None
