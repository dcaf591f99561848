"""The simulator's store gives a batch one commit's faults, whatever its size."""

from __future__ import annotations

from typing import Any

import pytest
from jobdispatch.records import events as ev
from jobdispatch.records.store import AppendRequest
from jobdispatch.testing import PERSON, T0, Story
from jobdispatch_sim.options import derive
from jobdispatch_sim.world import World


def test_a_batch_is_one_moment_where_its_writer_may_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash or pause point per part would make a batch of a thousand jobs a thousand times
    likelier to fail than the one commit it is; the store offers one per batch."""
    world = World(derive(3))
    store = world.store
    jobs = [f"batch-{i}" for i in range(5)]
    for job in jobs:
        store.inner.create(Story(job_id=job).header)
    points: list[tuple[str, str, Any]] = []
    monkeypatch.setattr(world, "point", lambda *args: points.append(args))
    note = ev.CallAnswered(at=T0, by=PERSON, call=1, ok=True)
    requests = [AppendRequest(job=job, events=(note, note), expect_revision=0) for job in jobs]
    assert store.append_many(requests) == (2,) * len(jobs)
    assert len(points) == 1
    where, job, events = points[0]
    assert (where, job, len(events)) == ("store.before", jobs[0], 2 * len(jobs))
    assert store.append_many([]) == ()
    assert len(points) == 1
