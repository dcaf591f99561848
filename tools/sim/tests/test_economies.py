"""The simulator's economies change what it costs, never what it computes.

The fold checker follows each record with a ``Replay`` instead of folding it whole after every
step, the executor extends its previous fold of a record by the events added since,
and the memory store hands out one View per revision. Each is checked here against the plain
computation it replaces, on records the simulator wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
import pytest
from jobdispatch.errors import Invalid
from jobdispatch.job import Job, Replay, fold
from jobdispatch.records.events import View
from jobdispatch_sim.options import derive
from jobdispatch_sim.runner import quiet_logs
from jobdispatch_sim.world import World

NOW = datetime(2026, 1, 2, tzinfo=UTC)


def _records(seeds: range) -> list[View]:
    quiet_logs()
    views: list[View] = []
    for seed in seeds:
        world = World(derive(seed))
        assert not world.run()
        views.extend(world.read(job) for job in world.jobs)
    return views


def _folded(view: View) -> Job | str:
    try:
        return fold(view, NOW)
    except Invalid as exc:
        return str(exc)


def _replayed(replay: Replay, view: View) -> object:
    try:
        return replay.extend(view, NOW)
    except Invalid as exc:
        return str(exc)


def test_a_replay_answers_as_fold_on_every_revision_of_every_record() -> None:
    for view in _records(range(12)):
        replay = Replay()
        for revision in range(len(view.events) + 1):
            prefix = View(view.header, view.events[:revision])
            assert _replayed(replay, prefix) == _folded(prefix)


def test_a_replay_refolds_a_record_that_is_not_an_extension() -> None:
    views = [v for v in _records(range(6)) if len(v.events) >= 4]
    first, other = views[0], views[1]
    replay = Replay()
    replay.extend(first, NOW)
    shorter = View(first.header, first.events[:2])
    assert replay.extend(shorter, NOW) == fold(shorter, NOW)
    swapped = View(first.header, (first.events[1], *first.events[1:]))
    assert _replayed(replay, swapped) == _folded(swapped)
    assert replay.extend(other, NOW) == fold(other, NOW)
    assert replay.extend(first, NOW) == fold(first, NOW)


def test_a_replay_that_raised_raises_again_as_fold_does() -> None:
    view = next(v for v in _records(range(6)) if len(v.events) >= 3)
    broken = View(view.header, (*view.events, view.events[0]))  # authorized twice
    replay = Replay()
    replay.extend(View(view.header, view.events), NOW)
    with pytest.raises(Invalid) as first:
        replay.extend(broken, NOW)
    with pytest.raises(Invalid) as again:
        replay.extend(broken, NOW)
    with pytest.raises(Invalid) as plain:
        fold(broken, NOW)
    assert str(first.value) == str(again.value) == str(plain.value)


def test_the_memory_store_hands_out_one_view_per_revision() -> None:
    world = World(derive(3))
    assert not world.run()
    job = world.jobs[0]
    store = world.store.inner
    assert store.read(job) is store.read(job)


def test_the_executor_folds_each_pass_as_fold_would() -> None:
    world = World(derive(3))
    assert not world.run()
    executor = next(iter(world.procs[0].executors.values()))
    for job in world.jobs:
        view = world.read(job)
        for revision in range(len(view.events) + 1):
            prefix = View(view.header, view.events[:revision])
            assert executor._fold(prefix, NOW) == fold(prefix, NOW)
        copy = View(view.header, tuple(list(view.events)))  # equal, not the same tuple
        assert executor._fold(copy, NOW) == fold(view, NOW)
        shorter = View(view.header, view.events[:-1])  # not an extension: folded anew
        assert executor._fold(shorter, NOW) == fold(shorter, NOW)
        assert executor._fold(view, NOW) == fold(view, NOW)


def test_the_executor_keeps_the_folds_of_a_bounded_number_of_jobs() -> None:
    from jobdispatch_supervise import executor as executor_mod

    view = _records(range(1))[0]
    world = World(derive(3))
    executor = next(iter(world.procs[0].executors.values()))
    kept = executor_mod.FOLDS_KEPT
    for k in range(kept + 3):
        header = attrs.evolve(view.header, job=f"job{k}")
        executor._fold(View(header, view.events), NOW)
    assert len(executor._replays) == kept
    assert "job0" not in executor._replays
    assert f"job{kept + 2}" in executor._replays
