"""Escalation sinks (the command sink runs a program with the escalation as JSON on stdin) and
serve's one backend query per poll for every job it supervises."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from jobdispatch import (
    Action,
    Actor,
    CauseKind,
    Invalid,
    JobSpec,
    ObjectState,
    OutcomeUnknown,
    RecoveryPolicy,
    Rule,
    State,
    compose,
)
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.notices import delivered, notices
from jobdispatch.plugins import load
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.spi import Discovery, ObjectRef, StartRequest
from jobdispatch.testing import eventually, job_of
from jobdispatch.types import NoticeKind
from jobdispatch_supervise import CommandSink, EscalationMessage, Supervisor

from .conftest import Scenario, serving, slurm_jobs, wait_all_running


def test_the_command_sink_gives_the_program_the_escalation_as_json(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    script = f"import sys, pathlib; pathlib.Path({str(out)!r}).write_text(sys.stdin.read())"
    sink = CommandSink([sys.executable, "-c", script])
    message = EscalationMessage(
        job="j1", name="train", id="budget:0", detail="spent", at=Scenario().clock()
    )
    sink.deliver(message)
    got = json.loads(out.read_text())
    assert got == {
        "job": "j1",
        "name": "train",
        "id": "budget:0",
        "detail": "spent",
        "at": message.at.isoformat(),
    }


def test_a_failing_command_is_a_failed_delivery_tried_again() -> None:
    sink = CommandSink([sys.executable, "-c", "import sys; sys.stderr.write('no'); sys.exit(3)"])
    with pytest.raises(RuntimeError, match="exited 3: no"):
        sink.deliver(EscalationMessage(job="j", name="", id="x", detail="", at=Scenario().clock()))


def test_the_sinks_are_plugins() -> None:
    registry = load().registry("escalation-sink")
    assert {"log", "command"} <= set(registry.names())
    sink = registry.get("command").factory({"argv": ["true"]})
    assert sink.name == "command"


def test_an_escalation_is_delivered_once_per_sink_across_restarts() -> None:
    sc = Scenario(shape=Shape.SLURM)
    calls: list[tuple[str, str]] = []

    class Flaky:
        def __init__(self, name: str, fail_first: bool) -> None:
            self.name = name
            self.fail = fail_first

        def deliver(self, message: EscalationMessage) -> None:
            if self.fail:
                self.fail = False
                raise OSError("mail server down")
            calls.append((self.name, message.id))

    sc.sinks.extend([Flaky("mail", fail_first=True), Flaky("pager", fail_first=False)])
    sc.submit(
        JobSpec(
            command=["x"],
            recovery=RecoveryPolicy(
                rules=[Rule(on=[CauseKind.TIME_LIMIT], action=Action.ESCALATE)]
            ),
        )
    )
    sc.on(sc.running(1), lambda s: sc.backend.env.time_out(sc.canonical(s, 1)))
    status = sc.run()
    assert status.state is State.FAILED
    esc = status.escalations[0]
    assert sorted(calls) == [("mail", str(esc.id)), ("pager", str(esc.id))]
    assert esc.delivered == ("mail", "pager")
    for generation in range(3):  # later supervisors of the same record deliver nothing again
        sup = sc.supervisor(holder=f"later{generation}")
        lease = sc.store.acquire(sc.job, f"later{generation}", timedelta(seconds=5))
        sup.executor.run_pass(sc.job, lease)
        sc.store.release(lease)
    assert len(calls) == 2


def test_serve_asks_the_backend_once_per_poll_for_all_its_jobs() -> None:
    backend, store, cluster, jobs = slurm_jobs(5)
    sup = Supervisor(backend, store, poll=0.05)
    with serving(sup):
        wait_all_running(cluster, jobs)
        before = dict(backend.env.calls)
        # Three polls with nothing to do, however long this machine takes to make them.
        eventually(
            lambda: backend.env.calls.get("find_many", 0) - before.get("find_many", 0),
            "three quiet polls",
            holds=lambda polls: polls >= 3,
        )
        after = dict(backend.env.calls)
    polls = after.get("find_many", 0) - before.get("find_many", 0)
    singles = after.get("find", 0) - before.get("find", 0)
    assert polls >= 3
    assert singles == 0, "a quiet poll must not look at jobs one by one"


class Hiding(MemoryBackend):
    """The memory adapter with objects that stay out of Find until shown: a scheduler whose
    listing lags far behind its submissions."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.hidden: set[str] = set()

    def find(self, job: str) -> Discovery:
        d = super().find(job)
        return attrs.evolve(d, objects=tuple(o for o in d.objects if o.ref.id not in self.hidden))

    def find_many(
        self, jobs: Sequence[str], states: Sequence[ObjectState] = ()
    ) -> Mapping[str, Discovery]:
        return {j: self.find(j) for j in jobs}

    def start(self, request: StartRequest) -> ObjectRef:
        ref = super().start(request)
        self.hidden.add(ref.id)
        raise OutcomeUnknown("the reply was lost")


def test_serve_sweeps_a_late_object_of_a_settled_job_under_the_residual_policy() -> None:
    backend = Hiding(shape=Shape.SLURM, auto_run=True)
    store = MemoryRecords()
    cluster = compose(backend, store=store)
    job = job_of(
        cluster.operator.submit(
            JobSpec(command=["x"]), by=Actor.human("ops"), supervised=True, submit_retries=0
        )
    )
    sup = Supervisor(backend, store, poll=0.02, sweep_every=timedelta(0))
    with serving(sup):
        eventually(lambda: backend.hidden, "an attempt whose object is not listed")
        # One attempt, its reply lost and its object not listed: the person cancels; the job
        # settles with the attempt unresolved (the residual policy does not wait for it).
        cluster.operator.cancel(job, by=Actor.human("ops"))
        eventually(lambda: cluster.observer.get(job), "settled", holds=lambda s: s.settled)
        late = backend.env.objects_of(job)[0]
        backend.hidden.clear()  # the late object shows up: the sweep stops it, never opening it
        eventually(
            lambda: backend.env.state(late).value, "the late object ended", holds="ended".__eq__
        )
    assert backend.env.state(late).value == "ended"
    from jobdispatch.memory.history import Opened

    assert not [e for e in backend.env.history.select(Opened, job=job) if e.lifted]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"poll": float("nan")}, "poll"),
        ({"poll": float("inf")}, "poll"),
        ({"poll": 0.0}, "poll"),
        ({"poll": 1e300}, "poll"),
        ({"poll_floor": 11.0}, "poll floor must be a positive number of seconds, at most 10"),
        ({"watch_limit": -1}, "watch_limit must be a count"),
        ({"lease_ttl": timedelta(0)}, "lease ttl"),
        ({"lease_ttl": timedelta(days=999_999_999)}, "lease ttl"),
    ],
)
def test_a_supervisor_that_cannot_work_is_refused_when_made(
    options: dict[str, Any], words: str
) -> None:
    # A NaN poll made every wait return at once (a busy loop), and a ttl of 0 was only refused
    # by the store once a job needed a lease; both are refused before anything is served.
    with pytest.raises(Invalid, match=words):
        Supervisor(MemoryBackend(), MemoryRecords(), **options)


class Recording:
    """A notice sink that keeps what it was sent."""

    name = "hook"
    events = frozenset({NoticeKind.SETTLED})
    rate_per_minute = 6000.0
    cooldown = 0.0

    def __init__(self) -> None:
        self.got: list[str] = []

    def send(self, message: Any) -> None:
        self.got.append(message.notice.key)

    def deliver(self, message: EscalationMessage) -> None:
        self.got.append(message.id)


def test_a_settled_jobs_notice_goes_once_the_lease_of_its_dead_supervisor_lapses() -> None:
    """A supervisor SIGKILLed just after its job settled leaves the settled notice owed, and
    its lease standing for a while. The sweep that finds the job is refused the lease; the
    notice must go as soon as the lease lapses, not a whole ``sweep_every`` later (which a
    supervisor killed test saw as a five-minute stall)."""
    backend = MemoryBackend(auto_run=True)
    store = MemoryRecords()
    cluster = compose(backend, store=store)
    job = job_of(
        cluster.operator.submit(
            JobSpec(command=["x"]), by=Actor.human("ops"), supervised=True, submit_retries=0
        )
    )
    with serving(Supervisor(backend, store, poll=0.02)):  # no sinks: the notice stays owed
        eventually(lambda: backend.env.objects_of(job), "the job's object")
        backend.env.complete(backend.env.objects_of(job)[0])
        eventually(lambda: cluster.observer.get(job), "settled", holds=lambda s: s.settled)
    # The dead supervisor's lease, still standing when the next one first sweeps.
    [held] = store.acquire_many([job], "ghost:1:dead", timedelta(seconds=1))
    assert not isinstance(held, Exception), held
    sink = Recording()
    later = Supervisor(
        backend,
        store,
        poll=0.02,
        sinks=[sink],
        sweep_every=timedelta(hours=1),
        lease_ttl=timedelta(seconds=2),
    )
    with serving(later):
        eventually(lambda: sink.got, "the settled notice delivered", within=60)
    assert len(sink.got) == 1, sink.got
    assert (notices(store.read(job))[-1].id, "hook") in delivered(store.read(job))
