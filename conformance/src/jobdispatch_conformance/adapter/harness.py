"""The harness a check runs in: one backend, its driver, the timeouts, and the bookkeeping that
makes a check on a real cluster safe to run (unique job ids, every object stopped afterwards).

Checks fail by raising :class:`CheckFailed` with a message that says what the contract wanted,
and skip through :meth:`Harness.skip` with the reason; both work with or without pytest running
the check, so the suite's own tests can call checks directly on broken adapters.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import NoReturn, TypeVar

import attrs
import pytest
from jobdispatch.errors import DispatchError, OutcomeUnknown, Rejected, Unsupported
from jobdispatch.spi import Backend, NativeOffer, ObjectObs, ObjectRef, StartRequest
from jobdispatch.types import Capability, JobID, JobSpec, ObjectState, Support, Tristate

from jobdispatch_conformance.adapter.driver import CannotDrive, Driver, Timeouts

__all__ = ["CheckFailed", "Harness", "expect", "expect_rejected_late", "required"]

T = TypeVar("T")
M = TypeVar("M")


class CheckFailed(AssertionError):
    """The adapter broke the contract; the message says which clause and what was seen."""


def expect(condition: object, message: str) -> None:
    """Fail the check with ``message`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(message)


def expect_rejected_late(
    calls: Iterable[Callable[[ObjectRef, M], object]], ref: ObjectRef, late: M
) -> None:
    """Fail the check unless each of ``calls`` refuses ``ref`` with Rejected under ``late``, a
    call's meta whose recorded deadline has passed (spec 0003: a late call changes nothing)."""
    for call in calls:
        try:
            call(ref, late)
        except Rejected:
            continue
        raise CheckFailed(f"{call.__name__} past its deadline must raise Rejected")


def required(value: T | None, message: str) -> T:
    """``value``; fail the check with ``message`` when it is None (an adapter that answers yes
    for a capability without implementing the call it promises)."""
    if value is None:
        raise CheckFailed(message)
    return value


@attrs.define
class Harness:
    """Everything one check needs. Build one per check; call :meth:`cleanup` afterwards."""

    backend: Backend
    driver: Driver
    timeouts: Timeouts
    #: Where notes for the report go (an unknown capability exercised, say).
    note: Callable[[str, str], None] = lambda key, value: None
    jobs: list[JobID] = attrs.field(factory=list)
    refs: list[ObjectRef] = attrs.field(factory=list)
    _capabilities: dict[Capability, Support] | None = None

    # ------------------------------------------------------------------ outcomes

    def skip(self, reason: str) -> NoReturn:
        pytest.skip(reason)

    @contextmanager
    def driving(self) -> Iterator[None]:
        """Turn the driver's CannotDrive into a skip naming the operation."""
        try:
            yield
        except CannotDrive as exc:
            self.skip(str(exc))

    def need(self, *operations: str) -> None:
        """Skip unless the driver implements every operation named."""
        missing = [op for op in operations if not self.driver.can(op)]
        if missing:
            self.skip(f"the driver cannot {', '.join(missing)}")

    def capability(self, cap: Capability) -> Tristate:
        """The cluster's answer for ``cap`` (asked once per harness)."""
        if self._capabilities is None:
            self._capabilities = dict(self.backend.capabilities(self.driver.base_spec()))
        support = self._capabilities.get(cap)
        return Tristate.UNKNOWN if support is None else support.answer

    def gate(
        self,
        cap: Capability,
        works: Callable[[], None],
        refuse: Callable[[], object],
    ) -> None:
        """Hold the adapter to its answer for ``cap``.

        Yes: ``works`` must pass. No: ``refuse`` must raise Unsupported. Unknown: ``works`` is
        tried and whatever happens is tolerated, noted for the report, and a failure or a
        refusal turns into a skip saying so.
        """
        answer = self.capability(cap)
        if answer is Tristate.YES:
            works()
        elif answer is Tristate.NO:
            try:
                refuse()
            except Unsupported:
                return
            raise CheckFailed(f"{cap} is answered no, so this must raise Unsupported; it did not")
        else:
            try:
                works()
            except Unsupported as exc:
                self.note(f"capability.{cap}", "unknown: refused")
                self.skip(f"{cap} is answered unknown and the adapter refused: {exc}")
            except CheckFailed as exc:
                self.note(f"capability.{cap}", "unknown: did not work")
                self.skip(f"{cap} is answered unknown and did not work: {exc}")
            self.note(f"capability.{cap}", "unknown: worked")

    # ------------------------------------------------------------------ objects

    def new_job(self) -> JobID:
        """A job id no other run of the suite uses (the cluster may be shared)."""
        job = "cf" + uuid.uuid4().hex[:12]
        self.jobs.append(job)
        return job

    def request(
        self,
        job: JobID | None = None,
        *,
        submission: int = 1,
        attempt: int = 1,
        spec: JobSpec | None = None,
        native: NativeOffer | None = None,
    ) -> StartRequest:
        return StartRequest(
            job=job or self.new_job(),
            submission=submission,
            attempt=attempt,
            spec=spec or self.driver.base_spec(),
            native=native or NativeOffer(),
        )

    def start(self, request: StartRequest | None = None) -> ObjectRef:
        """Start an object (gated) and remember it for cleanup."""
        request = request or self.request()
        if request.job not in self.jobs:
            self.jobs.append(request.job)
        ref = self.backend.start(request)
        self.refs.append(ref)
        return ref

    def start_lost(self, request: StartRequest) -> None:
        """Start with the reply lost; OutcomeUnknown is what the contract wants."""
        self.need("lose_next_start_reply")
        if request.job not in self.jobs:
            self.jobs.append(request.job)
        with self.driving():
            self.driver.lose_next_start_reply()
        try:
            ref = self.backend.start(request)
        except OutcomeUnknown:
            return
        self.refs.append(ref)
        raise CheckFailed(
            f"start of {request.name} returned {ref} although its reply was lost: "
            "it must raise OutcomeUnknown"
        )

    def inspect(self, ref: ObjectRef) -> ObjectObs:
        return self.backend.inspect(ref)

    def wait(
        self,
        ref: ObjectRef,
        ok: Callable[[ObjectObs], bool],
        what: str,
        *,
        nudge: bool = True,
    ) -> ObjectObs:
        """Poll ``ref`` until ``ok`` holds, giving a pending object its chance to run on every
        look (``nudge``); fail after ``timeouts.settle`` saying what was awaited."""
        deadline = time.monotonic() + self.timeouts.settle
        while True:
            obs = self.backend.inspect(ref)
            if ok(obs):
                return obs
            if time.monotonic() >= deadline:
                raise CheckFailed(
                    f"object {ref} did not become {what} within {self.timeouts.settle}s; "
                    f"it is {obs.state} with executions {_runs(obs)}"
                )
            if nudge and obs.state is ObjectState.PENDING:
                self.driver.run(ref)
            time.sleep(self.timeouts.poll)

    def wait_until(self, ok: Callable[[], T | None], what: str) -> T:
        """Poll ``ok`` until it returns something; fail after ``timeouts.settle``."""
        deadline = time.monotonic() + self.timeouts.settle
        while True:
            value = ok()
            if value is not None and value is not False:
                return value
            if time.monotonic() >= deadline:
                raise CheckFailed(f"{what} did not happen within {self.timeouts.settle}s")
            time.sleep(self.timeouts.poll)

    def stays(self, ref: ObjectRef, ok: Callable[[ObjectObs], bool], what: str) -> ObjectObs:
        """Check that ``ok`` keeps holding for ``timeouts.quiet`` (at least one look),
        nudging the scheduler to run the object all the while."""
        deadline = time.monotonic() + self.timeouts.quiet
        while True:
            self.driver.run(ref)
            obs = self.backend.inspect(ref)
            expect(ok(obs), f"object {ref} must stay {what}; it is {obs.state}, {_runs(obs)}")
            if time.monotonic() >= deadline:
                return obs
            time.sleep(self.timeouts.poll)

    def running(self, request: StartRequest | None = None) -> ObjectRef:
        """Start, open and wait until the object's first execution runs."""
        ref = self.start(request)
        self.backend.open(ref)
        self.wait(ref, lambda o: o.state is ObjectState.RUNNING, "running")
        return ref

    def ended_execution(self, ref: ObjectRef, index: int) -> ObjectObs:
        """Wait until execution ``index`` of ``ref`` has ended."""
        return self.wait(
            ref,
            lambda o: (
                any(e.index == index and e.ended_at is not None for e in o.executions)
                or o.state is ObjectState.ENDED
            ),
            f"done with execution {index}",
            nudge=False,
        )

    def cleanup(self) -> None:
        """Stop every object this harness created or found under its jobs. Errors are ignored:
        cleanup must not hide the check's own outcome."""
        refs = list(self.refs)
        for job in self.jobs:
            with suppress(DispatchError):
                refs.extend(o.ref for o in self.backend.find(job).objects)
        for ref in dict.fromkeys(refs):
            with suppress(DispatchError):
                self.backend.stop(ref, "conformance suite cleanup")


def _runs(obs: ObjectObs) -> str:
    if not obs.executions:
        return "none"
    return ", ".join(f"#{e.index} {e.state} ({e.cause})" for e in obs.executions)
