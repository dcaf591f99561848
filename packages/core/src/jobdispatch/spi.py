"""The adapter SPI: what a scheduler adapter implements, and the values that cross it.

An adapter manages backend *objects* and their *executions*; it knows nothing of jobs' records,
plans or recovery. Everything is synchronous: the supervisor calls adapters from its own loop.
Optional abilities are separate runtime-checkable protocols found with ``isinstance``, so an
adapter implements exactly what its cluster can do and a host can ask before relying on it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import IO, Protocol, runtime_checkable

import attrs

from jobdispatch.errors import Invalid
from jobdispatch.timing import ABSENCE_REFRESH
from jobdispatch.types import (
    CallMeta,
    Capability,
    Cause,
    HoldMeta,
    Inventory,
    JobID,
    JobSpec,
    ObjectState,
    RecoveryPolicy,
    Rule,
    RuleSupport,
    Support,
    Tristate,
)
from jobdispatch.validate import MAX_DURATION

__all__ = [
    "DEFAULT_PACING",
    "MAX_POLL_FLOOR",
    "MAX_POLL_INTERVAL",
    "Backend",
    "CessationEvidence",
    "CessationSignal",
    "ConcurrentCalls",
    "Discovery",
    "ExecutionObs",
    "Growth",
    "Holder",
    "IdentityWeakener",
    "InventoryReporter",
    "MultiFinder",
    "NativeOffer",
    "NativePolicyCompiler",
    "ObjectObs",
    "ObjectRef",
    "OutputGrowthReader",
    "OutputReader",
    "Paced",
    "Pacing",
    "Requeuer",
    "ResourceTable",
    "StartRequest",
    "StopReport",
    "SubmissionPreview",
    "Watcher",
    "call_concurrency",
    "discovery_name",
    "pacing_of",
    "parse_discovery_name",
]

_NAME = re.compile(r"^jd-(?P<job>[a-z0-9]+)-(?P<n>[0-9]+)-(?P<k>[0-9]+)$")


def discovery_name(job: JobID, submission: int, attempt: int) -> str:
    """The name every object of (job, submission, attempt) is created under.

    It is valid as a Slurm job name and as a Kubernetes object name (lower case, digits and
    dashes), and :func:`parse_discovery_name` reads it back, so ``find`` can discover objects
    whose Start reply was lost.
    """
    return f"jd-{job}-{submission}-{attempt}"


@functools.lru_cache(maxsize=4096)
def parse_discovery_name(name: str) -> tuple[JobID, int, int] | None:
    """(job, submission, attempt) of a discovery name, or ``None`` for a foreign name.

    Memoized (a pure function of the string, answered with an immutable tuple): every Find
    asks it of every object it shows, and the memory adapter of every object it keeps.
    """
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    return m["job"], int(m["n"]), int(m["k"])


@attrs.frozen
class ObjectRef:
    """A backend object's identity as the backend knows it (a Slurm job id, a TrainJob's
    namespace/name)."""

    id: str

    def __str__(self) -> str:
        return self.id


@attrs.frozen
class NativeOffer:
    """The rules an adapter will have the backend enforce itself, with their remaining budgets,
    and the settings that make it so (for display and for the record)."""

    rules: tuple[int, ...] = ()
    remaining: Mapping[int, int] = attrs.field(factory=dict, hash=False)
    settings: Mapping[str, str] = attrs.field(factory=dict, hash=False)


@attrs.frozen(kw_only=True)
class StartRequest:
    """What Start creates: one object, gated, under its discovery name."""

    job: JobID
    submission: int
    attempt: int
    spec: JobSpec
    native: NativeOffer = attrs.field(factory=NativeOffer)
    env: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    #: Nodes the object must not be placed on: suspects recorded with the submission's
    #: authorization (``jobdispatch.suspects``). An adapter that cannot keep a job off nodes
    #: says so in its capabilities and ignores them.
    exclude: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The discovery name the object must carry."""
        return discovery_name(self.job, self.submission, self.attempt)


@attrs.frozen(kw_only=True)
class ExecutionObs:
    """One run of an object. An object that the backend reruns in place (Slurm requeue, a JobSet
    restart) has several, told apart by ``index``."""

    index: int
    state: ObjectState
    cause: Cause | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    nodes: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class ObjectObs:
    """What the backend shows of one object now."""

    ref: ObjectRef
    name: str
    state: ObjectState
    executions: tuple[ExecutionObs, ...] = ()
    #: The backend hold instance standing on the object, if one does.
    hold_instance: int | None = None
    #: Whether the backend would rerun the object by itself (Slurm's requeue bit); None: unknown.
    requeue_bit: bool | None = None
    #: Nodes the backend reports lost under a running object.
    lost_nodes: tuple[str, ...] = ()
    detail: str = ""

    @property
    def identity(self) -> tuple[JobID, int, int] | None:
        """(job, submission, attempt) from the discovery name, or None for a foreign object."""
        return parse_discovery_name(self.name)

    @property
    def latest(self) -> ExecutionObs | None:
        """The execution with the highest index, if any ran."""
        return max(self.executions, key=lambda e: e.index, default=None)


@attrs.frozen(kw_only=True)
class Discovery:
    """Every object of one job the backend shows, from one query at ``at``.

    ``complete`` is False when the backend could not tell everything (an accounting database
    that did not answer, say): absence from an incomplete discovery proves nothing.
    """

    job: JobID
    objects: tuple[ObjectObs, ...] = ()
    at: datetime | None = None
    complete: bool = True

    def get(self, ref: ObjectRef) -> ObjectObs | None:
        """The observation of ``ref``, if the backend showed it."""
        for obs in self.objects:
            if obs.ref == ref:
                return obs
        return None


@attrs.frozen(kw_only=True)
class StopReport:
    """What stopping every object of a job did: stopped, still live, and nodes whose processes
    may live on because they were down or not answering."""

    stopped: tuple[ObjectRef, ...] = ()
    live: tuple[ObjectRef, ...] = ()
    unproven_nodes: tuple[str, ...] = ()
    detail: str = ""


@attrs.frozen(kw_only=True)
class CessationEvidence:
    """A site's own answer to "are this object's processes gone?"."""

    ceased: Tristate
    detail: str = ""
    at: datetime | None = None


#: The longest poll floor there may be: a continuing absence must be recorded at least this often
#: (spec 0001 D7), and a supervisor never looks at the scheduler more often than its floor.
MAX_POLL_FLOOR = ABSENCE_REFRESH.total_seconds()
#: The longest poll interval: the core's longest duration (a supervisor still wakes at every
#: step's wake time, however long its interval).
MAX_POLL_INTERVAL = MAX_DURATION.total_seconds()


def _seconds(what: str, value: object, most: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{what} must be a number of seconds, got {value!r}"
        raise Invalid(msg)
    got = float(value)
    if not math.isfinite(got) or not 0 < got <= most:
        msg = f"{what} must be a positive number of seconds, at most {most:g}, got {value!r}"
        raise Invalid(msg)
    return got


@attrs.frozen(kw_only=True)
class Pacing:
    """How often a supervisor may ask this adapter's scheduler what its objects are doing.

    Every poll costs the scheduler something (on Slurm, an ``squeue`` and an ``sacct``, each an
    RPC to the controller or the accounting database, shared with every other user), so the
    adapter says how often is polite, and a site may be stricter:

    * ``interval``: the time between two polls when no step is due sooner (Slurm 30 s);
    * ``floor``: the least time between two polls, whatever is due and whatever woke the
      supervisor; a site may raise it, never lower it (:meth:`for_site`). At most
      ``MAX_POLL_FLOOR`` (10 s), so a continuing absence is still recorded as often as the
      protocol needs;
    * ``jitter``: the fraction of the interval a poll may come early by, drawn afresh each
      time, so supervisors started together do not poll in step;
    * ``watch``: whether following the adapter's :class:`Watcher` wakes a supervisor early
      (its watch waits for news); False where a watch only replays what happened.

    Invalid names the field for a value out of range.
    """

    interval: float
    floor: float
    jitter: float = 0.2
    watch: bool = False

    def __attrs_post_init__(self) -> None:
        _seconds("a poll floor", self.floor, MAX_POLL_FLOOR)
        _seconds("a poll interval", self.interval, MAX_POLL_INTERVAL)
        if self.interval < self.floor:
            msg = f"a poll interval ({self.interval:g} s) is below its floor ({self.floor:g} s)"
            raise Invalid(msg)
        if not (isinstance(self.jitter, int | float) and 0 <= self.jitter < 1):
            msg = f"a poll jitter is a fraction in [0, 1), got {self.jitter!r}"
            raise Invalid(msg)

    def for_site(self, *, interval: object = None, floor: object = None) -> Pacing:
        """This pacing with a site's (or a caller's) interval and floor: the floor may only be
        raised, and the interval may not be below the floor.

        Invalid, naming the interval or the floor, for a value this adapter must not be
        polled at."""
        new_floor = self.floor
        if floor is not None:
            new_floor = _seconds("a poll floor", floor, MAX_POLL_FLOOR)
            if new_floor < self.floor:
                msg = (
                    f"a poll floor of {new_floor:g} s is below the adapter's floor of "
                    f"{self.floor:g} s: a site may raise the floor, never lower it"
                )
                raise Invalid(msg)
        new_interval = max(self.interval, new_floor)
        if interval is not None:
            new_interval = _seconds("a poll interval", interval, MAX_POLL_INTERVAL)
            if new_interval < new_floor:
                msg = (
                    f"a poll interval of {new_interval:g} s is below the poll floor of "
                    f"{new_floor:g} s (the adapter's, or the one a site raised it to)"
                )
                raise Invalid(msg)
        return attrs.evolve(self, interval=new_interval, floor=new_floor)

    def delay(self, draw: float, until: float | None = None) -> float:
        """How long to sleep before the next poll: the interval, early by up to ``jitter`` of
        it as ``draw`` (a number in [0, 1), from the caller's randomness) says, or sooner when
        a step is due in ``until`` seconds, and never less than the floor. Pure, so a
        supervisor driven by a simulator's random source polls on the same schedule each run.
        """
        wait = self.interval * (1.0 - self.jitter * min(max(draw, 0.0), 1.0))
        if until is not None:
            wait = min(wait, until)
        return max(self.floor, wait)


#: The pacing of an adapter that declares none (one written for adapter SPI 1.0): what every
#: supervisor did before adapters could say, a poll every half second.
DEFAULT_PACING = Pacing(interval=0.5, floor=0.01)


@runtime_checkable
class Backend(Protocol):
    """What every adapter implements. Every method may raise :class:`~jobdispatch.Unreachable`
    or :class:`~jobdispatch.Unauthorized`; see docs/specs/0003-adapter.md for each contract."""

    #: The adapter's registered name (``slurm``, ``memory``...).
    name: str

    def capabilities(self, spec: JobSpec | None = None) -> Mapping[Capability, Support]:
        """What this cluster supports, for this spec when one is given."""
        ...

    def rules(self, spec: JobSpec, policy: RecoveryPolicy) -> Sequence[RuleSupport]:
        """One answer per rule of ``policy``, in its order."""
        ...

    def start(self, request: StartRequest) -> ObjectRef:
        """Create the object with its gate closed; OutcomeUnknown when it cannot tell."""
        ...

    def open(self, ref: ObjectRef, meta: CallMeta | None = None) -> None:
        """Lift the object's gate. Idempotent: an object past its gate is success, and an
        object a stop reached while gated never opens. Rejected past ``meta.deadline`` (the
        deadline the supervisor recorded with its decision); ``None`` (a direct call) has none.
        """
        ...

    def find(self, job: JobID) -> Discovery:
        """Every object of the job, found by discovery name."""
        ...

    def inspect(self, ref: ObjectRef) -> ObjectObs:
        """One object; NotFound when the backend no longer knows it."""
        ...

    def stop(self, ref: ObjectRef, reason: str) -> None:
        """Stop this one object. Idempotent: an object already gone is success."""
        ...

    def close(self) -> None:
        """Release connections and caches."""
        ...


@runtime_checkable
class Holder(Protocol):
    """Places and releases backend holds, by hold instance."""

    def hold(self, ref: ObjectRef, meta: HoldMeta) -> None: ...

    def release(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Release only the instance ``meta`` names; a different standing instance stays."""
        ...


@runtime_checkable
class Requeuer(Protocol):
    """Re-runs the same object on request, under a recorded deadline."""

    def requeue(self, ref: ObjectRef, meta: CallMeta) -> None: ...

    def restore_requeue_bit(self, ref: ObjectRef, meta: CallMeta) -> None:
        """Clear a requeue bit left set outside ``requeue`` (a crash between steps, an operator)."""
        ...


@runtime_checkable
class NativePolicyCompiler(Protocol):
    """Turns the rules a backend enforces natively into the settings that make it so."""

    def compile(
        self, spec: JobSpec, rules: Mapping[int, Rule], remaining: Mapping[int, int]
    ) -> NativeOffer: ...


@runtime_checkable
class Watcher(Protocol):
    """Streams observations as they happen, for evidence a poll would lose."""

    def watch(self, job: JobID) -> Iterator[ObjectObs]: ...


@runtime_checkable
class MultiFinder(Protocol):
    """Finds the objects of many jobs in one backend query."""

    def find_many(
        self, jobs: Sequence[JobID], states: Sequence[ObjectState] = ()
    ) -> Mapping[JobID, Discovery]: ...


@runtime_checkable
class ConcurrentCalls(Protocol):
    """An adapter whose calls (start, open, stop, the hold and requeue families, ceased) may be
    made from several threads at once, up to ``call_concurrency`` of them.

    A supervisor with many jobs makes one round's calls concurrently only with an adapter that
    says so: an adapter that does not declare it (a client that is not thread-safe, a scheduler
    that must not see parallel submissions) gets its calls one at a time."""

    #: How many calls may be in flight at once; at least 1.
    call_concurrency: int


def call_concurrency(backend: object) -> int:
    """How many calls ``backend`` takes at once: its declared ``call_concurrency``, 1 when it
    declares none. Invalid for a declaration that is not a positive integer, naming the
    adapter, so a wrong declaration fails when the supervisor is made rather than in a round."""
    if not isinstance(backend, ConcurrentCalls):
        return 1
    value = backend.call_concurrency
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        name = getattr(backend, "name", type(backend).__name__)
        msg = f"adapter {name!r} declares call_concurrency {value!r}; it must be an integer >= 1"
        raise Invalid(msg)
    return value


@runtime_checkable
class CessationSignal(Protocol):
    """Asks the site's own signal whether an object's processes are gone."""

    def ceased(self, ref: ObjectRef) -> CessationEvidence: ...


@runtime_checkable
class IdentityWeakener(Protocol):
    """An adapter that may let the backend rerun a rank under the same execution identity."""

    def identity_weakened(self, spec: JobSpec) -> str:
        """Why ``spec``'s execution identity would be weakened, or "" when it would not."""
        ...


@runtime_checkable
class OutputReader(Protocol):
    """Reads an object's output where the cluster keeps it."""

    def output(
        self, ref: ObjectRef, *, stream: str = "stdout", follow: bool = False, rank: int = 0
    ) -> IO[bytes]:
        """The stream's bytes; with ``follow``, a stream that waits for more until the object
        ends."""
        ...


@attrs.frozen
class Growth:
    """What an adapter sees of one object's output: its size in bytes over every file it
    writes (all ranks, both streams) and the newest modification time of those files."""

    size: int
    at: datetime


@runtime_checkable
class OutputGrowthReader(Protocol):
    """Sees whether running objects' output grows (capability ``output-growth``): a liveness
    signal for jobs that mark no progress of their own.

    ``output_growth(refs)`` answers, in one batched look (the files' sizes and times, never
    their bytes), the :class:`Growth` of each object of ``refs`` it found output of; an object
    with no output yet is left out. It raises (Unreachable, any error) when it cannot look,
    and the supervisor then reads the jobs as blind, never as stalled. The supervisor calls it
    at most once per poll for all the jobs it needs."""

    def output_growth(self, refs: Sequence[ObjectRef]) -> Mapping[ObjectRef, Growth]: ...


@runtime_checkable
class InventoryReporter(Protocol):
    """Says what the cluster has to place jobs on (queues, nodes, their GPUs and memory), so the
    plan can refuse a spec no node could satisfy before anything is created."""

    def inventory(self) -> Inventory: ...


@runtime_checkable
class ResourceTable(Protocol):
    """Reads an adapter-specific resource table (``[resources.slurm]``).

    ``resource_table`` names the table and ``resource_schema`` is its JSON Schema, an allow-list
    with ``additionalProperties: false``, so a site setting is a typed field, never a free-form
    scheduler flag. The plan checks the table against the schema before anything is created.
    """

    @property
    def resource_table(self) -> str: ...

    @property
    def resource_schema(self) -> Mapping[str, object]: ...


@runtime_checkable
class SubmissionPreview(Protocol):
    """Shows exactly what ``start`` would create for a request, without creating anything:
    the batch script with its directives, the runner's command lines, the manifest.

    The conformance suite holds it to that: what it returns for a request equals what the
    adapter's driver reads back of the object ``start`` created for the same request.
    """

    def preview(self, request: StartRequest) -> str: ...


@runtime_checkable
class Paced(Protocol):
    """Says how often its scheduler may be polled (adapter SPI 1.1). Without it, a supervisor
    uses :data:`DEFAULT_PACING`."""

    @property
    def pacing(self) -> Pacing: ...


def pacing_of(backend: object) -> Pacing:
    """The adapter's declared pacing, or :data:`DEFAULT_PACING` for one that declares none."""
    if isinstance(backend, Paced):
        declared = backend.pacing
        if isinstance(declared, Pacing):
            return declared
        name = getattr(backend, "name", type(backend).__name__)
        msg = f"adapter {name!r} declares a pacing that is not a Pacing: {declared!r}"
        raise Invalid(msg)
    return DEFAULT_PACING


def find_all(
    backend: Backend, jobs: Sequence[JobID], states: Sequence[ObjectState] = ()
) -> dict[JobID, Discovery]:
    """A Discovery for every job: one query when the backend is a MultiFinder, else one per job."""
    if isinstance(backend, MultiFinder):
        found = backend.find_many(jobs, states)
        return {job: found.get(job, Discovery(job=job)) for job in jobs}
    result: dict[JobID, Discovery] = {}
    wanted = set(states)
    for job in jobs:
        d = backend.find(job)
        if wanted:
            d = attrs.evolve(d, objects=tuple(o for o in d.objects if o.state in wanted))
        result[job] = d
    return result
