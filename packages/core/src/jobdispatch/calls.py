"""The backend calls a step can ask for, as values: which method, and with what.

A step (``jobdispatch.steps``) never calls anything itself; it names its call with one of these
and an executor makes it. Keeping the call a value keeps ``next`` pure, lets a test or the
simulator see what a step would do without a backend, and puts the choice of backend method in
one place: the executor's map from these classes to the SPI (``jobdispatch_supervise.executor``).

Each class says, besides its arguments:

* ``method``: the backend method it is, as the docs name it;
* ``answers``: the exceptions that are the call's answer rather than a failure of the pass.
  A recorded call (hold, release, requeue, restore) and Start record any failure as their
  answer; an open refused past its deadline changes nothing and is only logged; a stop of what
  is gone already has done its job. Anything else a call raises ends the pass, and the next
  pass recomputes from the record.
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import attrs

from jobdispatch.errors import NotFound, Rejected
from jobdispatch.spi import ObjectRef
from jobdispatch.types import CallMeta, HoldMeta

__all__ = [
    "Call",
    "CeaseCall",
    "HoldCall",
    "OpenCall",
    "ReleaseCall",
    "RequeueCall",
    "RestoreCall",
    "StartCall",
    "StopCall",
]

_ANY_FAILURE: tuple[type[Exception], ...] = (Exception,)


@attrs.frozen(kw_only=True)
class StartCall:
    """``start(request)`` for attempt (submission, attempt); the executor builds the request
    (the gate closed, the native offer, the job's environment) from the record's header."""

    method: ClassVar[str] = "start(request)"
    answers: ClassVar[tuple[type[Exception], ...]] = _ANY_FAILURE
    submission: int
    attempt: int


@attrs.frozen(kw_only=True)
class _OnObject:
    """A call about one object; any failure is its answer unless the class says otherwise."""

    method: ClassVar[str]
    answers: ClassVar[tuple[type[Exception], ...]] = _ANY_FAILURE
    ref: ObjectRef


@attrs.frozen(kw_only=True)
class OpenCall(_OnObject):
    """``open(ref, meta)``, carrying the deadline its decision recorded; refused past it."""

    method: ClassVar[str] = "open(ref, meta)"
    answers: ClassVar[tuple[type[Exception], ...]] = (Rejected,)
    meta: CallMeta


@attrs.frozen(kw_only=True)
class StopCall(_OnObject):
    """``stop(ref, reason)``; NotFound (gone already) is success."""

    method: ClassVar[str] = "stop(ref, reason)"
    answers: ClassVar[tuple[type[Exception], ...]] = (NotFound,)
    reason: str


@attrs.frozen(kw_only=True)
class CeaseCall(_OnObject):
    """``ceased(ref)`` on a ``CessationSignal``; an adapter without one answers unknown."""

    method: ClassVar[str] = "ceased(ref)"
    answers: ClassVar[tuple[type[Exception], ...]] = ()


@attrs.frozen(kw_only=True)
class _ByInstance(_OnObject):
    """A call of the hold family: about one hold instance, by a deadline."""

    meta: HoldMeta


@attrs.frozen(kw_only=True)
class HoldCall(_ByInstance):
    """``hold(ref, meta)`` on a ``Holder``, by hold instance and deadline."""

    method: ClassVar[str] = "hold(ref, meta)"


@attrs.frozen(kw_only=True)
class ReleaseCall(_ByInstance):
    """``release(ref, meta)`` on a ``Holder``: lifts only the instance named."""

    method: ClassVar[str] = "release(ref, meta)"


@attrs.frozen(kw_only=True)
class _ByDeadline(_OnObject):
    """A call of the requeue family: it carries its recorded deadline, who asked and why."""

    meta: CallMeta


@attrs.frozen(kw_only=True)
class RequeueCall(_ByDeadline):
    """``requeue(ref, meta)`` on a ``Requeuer``: the same object runs again."""

    method: ClassVar[str] = "requeue(ref, meta)"


@attrs.frozen(kw_only=True)
class RestoreCall(_ByDeadline):
    """``restore_requeue_bit(ref, meta)`` on a ``Requeuer``."""

    method: ClassVar[str] = "restore_requeue_bit(ref, meta)"


#: Every call a step can ask for.
Call: TypeAlias = (
    StartCall | OpenCall | StopCall | HoldCall | ReleaseCall | RequeueCall | RestoreCall | CeaseCall
)
