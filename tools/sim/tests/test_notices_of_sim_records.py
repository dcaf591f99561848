"""Notices read off the simulator's records, whatever history a seed plays (lost replies,
duplicates, holds, requeues, crashes, a supervisor's takeover): ids are unique within a record,
and reading a longer record never changes a notice read off a shorter one (a notice, once read,
keeps its id and its content: what lets every supervisor, at any revision, name it alike)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from jobdispatch.notices import notices
from jobdispatch.records import events as ev
from jobdispatch_sim.options import derive
from jobdispatch_sim.runner import quiet_logs
from jobdispatch_sim.world import World


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(min_value=0, max_value=10_000_000))
def test_notices_are_unique_and_a_prefix_reads_a_prefix(seed: int) -> None:
    quiet_logs()
    world = World(derive(seed))
    world.run()
    store = world.store.inner
    for job in store.list():
        view = store.read(job)
        found = notices(view)
        assert len({n.id for n in found}) == len(found), (seed, job)
        for cut in range(len(view.events) + 1):
            shorter = notices(ev.View(view.header, view.events[:cut]))
            assert found[: len(shorter)] == shorter, (seed, job, cut)
            assert all(n.revision <= cut for n in shorter)
