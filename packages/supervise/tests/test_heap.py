"""The heap keeper: frozen between polls, fully collected every ``collect_every``, handed
back when serving ends (jobdispatch_supervise.heap)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from datetime import timedelta

import pytest
from jobdispatch import Actor, JobSpec, ManualClock, compose
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records.memory import MemoryRecords
from jobdispatch_supervise import Supervisor
from jobdispatch_supervise.heap import HeapKeeper


class _Node:
    """Half of a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_cyclic_garbage_frozen_between_polls_waits_for_the_full_collection() -> None:
    clock = ManualClock()
    keeper = HeapKeeper(clock, collect_every=timedelta(minutes=10))
    keeper.between_polls()  # the first call collects, then freezes
    assert keeper.last_collection is not None
    assert gc.get_freeze_count() > 0

    garbage = _cycle()
    keeper.between_polls()  # not due: frozen with the rest
    gc.collect()
    assert garbage() is not None, "a frozen cycle is skipped by ordinary collections"

    clock.advance(timedelta(minutes=10))
    keeper.between_polls()
    assert garbage() is None, "the due full collection frees the frozen cycle"
    assert gc.get_freeze_count() > 0, "and freezes what is alive again"


def test_a_disabled_keeper_leaves_the_collector_alone() -> None:
    keeper = HeapKeeper(ManualClock(), enabled=False)
    garbage = _cycle()
    keeper.between_polls()
    assert gc.get_freeze_count() == 0
    assert keeper.last_collection is None
    gc.collect()
    assert garbage() is None


@pytest.mark.parametrize("freeze", [True, False])
def test_serve_freezes_between_polls_and_unfreezes_when_it_ends(freeze: bool) -> None:
    clock = ManualClock()
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock)
    store = MemoryRecords(clock)
    cluster = compose(backend, store=store, clock=clock)
    cluster.operator.submit(JobSpec(command=["train"]), by=Actor.human("t"), supervised=True)
    frozen_while_serving: list[int] = []

    def sleep(_: float) -> None:
        frozen_while_serving.append(gc.get_freeze_count())
        if len(frozen_while_serving) == 3:
            supervisor.stop()
        clock.advance(timedelta(seconds=1))

    supervisor = Supervisor(backend, store, clock=clock, sleep=sleep, poll=1.0, freeze_heap=freeze)
    supervisor.serve()
    assert len(frozen_while_serving) == 3
    if freeze:
        assert all(n > 0 for n in frozen_while_serving)
    else:
        assert frozen_while_serving == [0, 0, 0]
    assert gc.get_freeze_count() == 0, "serve hands the heap back to the collector"
