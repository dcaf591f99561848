"""A supervisor driven through scripted runs over the memory backend and a real LMDB store.

The supervisor runs in the test's thread with a ManualClock; its ``sleep`` is ``tick``, which
advances the clock and plays the cluster's part (preempt, complete) when its conditions hold.
The store is a real LMDB store, since the endpoint surveys the stores that can be surveyed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs
import jobdispatch
from jobdispatch import Actor, JobSpec, ManualClock, ObjectState, Status
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.types import Action, CauseKind, RecoveryPolicy, Rule
from jobdispatch_records_lmdb import LmdbRecords
from jobdispatch_supervise import Supervisor
from prometheus_client.core import Metric

ME = Actor.human("ops")


@attrs.define
class Event:
    when: Callable[[Status], bool]
    do: Callable[[Status], None]
    done: bool = False


@attrs.define
class Scenario:
    path: Path
    clock: ManualClock = attrs.Factory(ManualClock)
    backend: MemoryBackend = attrs.field(init=False)
    store: LmdbRecords = attrs.field(init=False)
    cluster: jobdispatch.Cluster = attrs.field(init=False)
    events: list[Event] = attrs.Factory(list)
    ticks: int = 0

    def __attrs_post_init__(self) -> None:
        self.backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=self.clock)
        self.store = LmdbRecords(str(self.path), clock=self.clock)
        self.cluster = jobdispatch.compose(self.backend, store=self.store, clock=self.clock)

    def submit(self, *rules: Rule, name: str = "train") -> str:
        spec = JobSpec(command=["train"], name=name, recovery=RecoveryPolicy(rules))
        plan = self.cluster.operator.submit(spec, by=ME, supervised=True)
        assert plan.job is not None
        return plan.job

    def preempt_runs(self, job: str, runs: Iterable[int]) -> None:
        """Preempt submission ``n``'s object for each ``n`` in ``runs`` once it runs."""
        for n in runs:
            self.events.append(Event(self.running(job, n), self._preempting(n)))

    def _preempting(self, n: int) -> Callable[[Status], None]:
        return lambda s: self.backend.env.preempt(_ref(s, n))

    def complete_run(self, job: str, n: int) -> None:
        self.events.append(
            Event(self.running(job, n), lambda s: self.backend.env.complete(_ref(s, n)))
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


PREEMPT_RESUBMIT = Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)


def samples(metrics: Iterable[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``metrics`` by (name, sorted labels), as a scrape would show them."""
    out = {}
    for family in metrics:
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def by_name(found: dict[Any, float], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one series name, by labels (without ``cluster``)."""
    return {
        tuple(kv for kv in labels if kv[0] != "cluster"): value
        for (n, labels), value in found.items()
        if n == name
    }
