"""A supervisor driven through scripted runs over the memory backend, for the tests of what
reads a store (the metrics endpoint, the dashboard).

The supervisor runs in the test's thread with a ManualClock; its ``sleep`` is ``tick``, which
advances the clock and plays the cluster's part (preempt, complete) when its conditions hold.
The store is the caller's (a real LMDB or PostgreSQL store: the readers survey stores).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import attrs
import jobdispatch
from jobdispatch import Actor, JobSpec, ManualClock, ObjectState, Status
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records.store import Records
from jobdispatch.types import Action, CauseKind, RecoveryPolicy, Rule

from jobdispatch_supervise.supervisor import Supervisor

__all__ = ["ME", "PREEMPT_RESUBMIT", "Scripted"]

ME = Actor.human("ops")
#: The rule the scripted runs recover preemptions by.
PREEMPT_RESUBMIT = Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)

S = TypeVar("S", bound=Records)


@attrs.define
class _Event:
    when: Callable[[Status], bool]
    do: Callable[[Status], None]
    done: bool = False


class Scripted(Generic[S]):
    """Jobs submitted to a memory backend, supervised to their end over ``store``, with the
    cluster's part (preemptions, completions) played when each run is running."""

    def __init__(self, store: S, clock: ManualClock) -> None:
        self.clock = clock
        self.store = store
        self.backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock)
        self.cluster = jobdispatch.compose(self.backend, store=store, clock=clock)
        self.events: list[_Event] = []
        self.ticks = 0

    def submit(self, *rules: Rule, name: str = "train") -> str:
        spec = JobSpec(command=["train"], name=name, recovery=RecoveryPolicy(rules))
        plan = self.cluster.operator.submit(spec, by=ME, supervised=True)
        assert plan.job is not None
        return plan.job

    def preempt_runs(self, job: str, runs: Iterable[int]) -> None:
        """Preempt submission ``n``'s object for each ``n`` in ``runs`` once it runs."""
        for n in runs:
            self.events.append(_Event(self.running(job, n), self._preempting(n)))

    def _preempting(self, n: int) -> Callable[[Status], None]:
        return lambda s: self.backend.env.preempt(_ref(s, n))

    def complete_run(self, job: str, n: int) -> None:
        self.events.append(
            _Event(self.running(job, n), lambda s: self.backend.env.complete(_ref(s, n)))
        )

    def running(self, job: str, n: int) -> Callable[[Status], bool]:
        def check(s: Status) -> bool:
            return (
                s.job == job
                and len(s.submissions) >= n
                and s.submissions[n - 1].state is ObjectState.RUNNING
            )

        return check

    def tick(self, seconds: float) -> None:
        self.ticks += 1
        if self.ticks > 5000:
            raise AssertionError("the scenario did not settle")
        self.clock.advance(max(seconds, 0.001))
        self.play()

    def play(self) -> None:
        for event in self.events:
            if event.done:
                continue
            for job in self.store.list():
                status = self.cluster.observer.get(job)
                if event.when(status):
                    event.done = True
                    event.do(status)
                    break

    def run(self, job: str) -> Status:
        Supervisor(self.backend, self.store, clock=self.clock, sleep=self.tick, poll=1.0).run(job)
        return self.cluster.observer.get(job)


def _ref(status: Status, n: int) -> Any:
    ref = status.submissions[n - 1].canonical
    assert ref is not None
    return ref
