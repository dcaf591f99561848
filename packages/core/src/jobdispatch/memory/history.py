"""What the memory backend did, as an append-only list of typed entries.

The simulator's invariant checkers and the tests read the history instead of the backend's
internals, so every change of an object is an entry here, stamped with the injected clock, in
the order it happened. Entries are frozen values: two runs with the same seed and clock produce
equal histories, which is what the determinism test compares.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TypeVar, overload

import attrs

from jobdispatch.spi import ObjectRef, parse_discovery_name
from jobdispatch.types import Actor, Cause, CauseKind, JobID, ObjectState

__all__ = [
    "Created",
    "Entry",
    "ExecutionEnded",
    "ExecutionStarted",
    "Held",
    "History",
    "LiveSpan",
    "NativeRerun",
    "ObjectEnded",
    "Opened",
    "Released",
    "RequeueBitSet",
    "Requeued",
    "StartRefused",
    "StartReplyLost",
    "Stopped",
]


@attrs.frozen(kw_only=True)
class Entry:
    """Something the backend did, at ``at`` (the injected clock), to the object ``ref``."""

    at: datetime
    ref: ObjectRef
    name: str

    @property
    def job(self) -> JobID | None:
        """The job the object belongs to, from its discovery name; None for a foreign name."""
        identity = parse_discovery_name(self.name)
        return identity[0] if identity else None


@attrs.frozen(kw_only=True)
class Created(Entry):
    """Start created the object, with its gate closed (``gated``) and the native rules it
    will enforce (rule index -> budget left)."""

    gated: bool = True
    native: tuple[tuple[int, int], ...] = ()


@attrs.frozen(kw_only=True)
class StartReplyLost(Entry):
    """Start created the object but its caller was told OutcomeUnknown."""


@attrs.frozen(kw_only=True)
class StartRefused(Entry):
    """Start was refused (``Rejected``) and created nothing; ``ref`` is empty."""

    reason: str = ""


@attrs.frozen(kw_only=True)
class Opened(Entry):
    """Open was called. ``lifted`` is False when the call had no effect (already open, ended).
    ``deadline`` is the one the call carried (None for a direct call without one), so a
    history shows whether a gate was lifted within the deadline its decision recorded."""

    lifted: bool
    deadline: datetime | None = None


@attrs.frozen(kw_only=True)
class ExecutionStarted(Entry):
    """Execution ``index`` of the object started on ``nodes``."""

    index: int
    nodes: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class ExecutionEnded(Entry):
    """Execution ``index`` ended with ``cause``."""

    index: int
    cause: Cause


@attrs.frozen(kw_only=True)
class NativeRerun(Entry):
    """The backend's own policy put the object back to run again: ``mode`` is ``requeue``
    (Slurm shape) or ``restart`` (Kubeflow shape); ``rule`` is the offered rule charged, or None
    when a requeue bit left set did it without a budget."""

    mode: str
    cause: CauseKind
    rule: int | None
    remaining: int | None


@attrs.frozen(kw_only=True)
class Held(Entry):
    """Hold instance ``instance`` now stands on the object (replacing ``replaced``, if any)."""

    instance: int
    replaced: int | None = None
    by: Actor | None = None


@attrs.frozen(kw_only=True)
class Released(Entry):
    """Release of ``instance`` was called; ``lifted`` says whether it lifted the standing hold."""

    instance: int
    lifted: bool
    by: Actor | None = None


@attrs.frozen(kw_only=True)
class Requeued(Entry):
    """A requeue call put the object back to pending from state ``was``, under the call's
    ``deadline``."""

    was: ObjectState
    by: Actor | None = None
    deadline: datetime | None = None


@attrs.frozen(kw_only=True)
class RequeueBitSet(Entry):
    """The requeue bit was forced to ``value`` (by the environment, or by a restore call)."""

    value: bool
    by: str = ""


@attrs.frozen(kw_only=True)
class Stopped(Entry):
    """Stop was called on an object that was ``was``; an already ended object is recorded too."""

    was: ObjectState
    reason: str = ""


@attrs.frozen(kw_only=True)
class ObjectEnded(Entry):
    """The object ended for good: it will not run again unless it is requeued."""


E = TypeVar("E", bound=Entry)


@attrs.frozen
class LiveSpan:
    """An interval in which an object was past its gate and not ended (``until`` None: still)."""

    ref: ObjectRef
    since: datetime
    until: datetime | None

    def overlaps(self, other: LiveSpan) -> bool:
        """Whether the two spans share an instant. An end at t and a start at t do not overlap:
        the backend ended one before it opened the other."""
        a_end = self.until
        b_end = other.until
        return (a_end is None or other.since < a_end) and (b_end is None or self.since < b_end)


class History(Sequence[Entry]):
    """The backend's append-only history, with the queries its checkers need."""

    def __init__(self) -> None:
        self._entries: list[Entry] = []

    def append(self, entry: Entry) -> None:
        """Add an entry; only the backend calls this, under its lock."""
        self._entries.append(entry)

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | Sequence[Entry]:
        return self._entries[index]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History):
            return self._entries == other._entries
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return f"History({len(self._entries)} entries)"

    def select(
        self, kind: type[E], *, ref: ObjectRef | None = None, job: JobID | None = None
    ) -> list[E]:
        """Entries of one type, optionally of one object or one job, in order."""
        return [
            e
            for e in self._entries
            if isinstance(e, kind)
            and (ref is None or e.ref == ref)
            and (job is None or e.job == job)
        ]

    def of(self, ref: ObjectRef) -> list[Entry]:
        """Every entry about one object, in order."""
        return [e for e in self._entries if e.ref == ref]

    def live_spans(self, job: JobID) -> list[LiveSpan]:
        """When each object of ``job`` was past its gate and not ended.

        A span opens when Open lifted the gate, or when a requeue brought back an ended object
        that had been opened, and closes when the object ended. This is what invariant 1 ("no
        two objects of one job past their gate and live at the same time") is checked on.
        """
        spans: list[LiveSpan] = []
        open_since: dict[ObjectRef, datetime] = {}
        opened: set[ObjectRef] = set()
        for e in self._entries:
            if e.job != job:
                continue
            if isinstance(e, Opened) and e.lifted:
                opened.add(e.ref)
                open_since.setdefault(e.ref, e.at)
            elif isinstance(e, Requeued) and e.was is ObjectState.ENDED and e.ref in opened:
                # A requeued object that was never opened is still gated: not live.
                open_since.setdefault(e.ref, e.at)
            elif isinstance(e, ObjectEnded) and e.ref in open_since:
                spans.append(LiveSpan(e.ref, open_since.pop(e.ref), e.at))
        spans.extend(LiveSpan(ref, since, None) for ref, since in open_since.items())
        return sorted(spans, key=lambda s: (s.since, s.ref.id))

    def overlapping_live(self, job: JobID) -> list[tuple[LiveSpan, LiveSpan]]:
        """Pairs of different objects of ``job`` that were live at the same time."""
        spans = self.live_spans(job)
        return [
            (a, b)
            for i, a in enumerate(spans)
            for b in spans[i + 1 :]
            if a.ref != b.ref and a.overlaps(b)
        ]

    def jobs(self) -> list[JobID]:
        """Every job the history mentions, in the order first seen."""
        seen: dict[JobID, None] = {}
        for e in self._entries:
            if e.job is not None:
                seen.setdefault(e.job)
        return list(seen)
