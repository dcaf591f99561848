"""Checks of what the backend shows: find, inspect, find_many, watch."""

from __future__ import annotations

from collections.abc import Callable

from jobdispatch.errors import NotFound
from jobdispatch.spi import Discovery, MultiFinder, Watcher
from jobdispatch.types import ObjectState

from jobdispatch_conformance.adapter.harness import CheckFailed, Harness, expect

__all__ = [
    "find_includes_lost_replies",
    "find_many_agrees_with_find",
    "find_returns_every_object_of_the_job",
    "inspect_agrees_with_find",
    "inspect_unknown_is_not_found",
    "watch_shows_the_job",
]


def _summary(d: Discovery) -> set[tuple[str, str, ObjectState]]:
    return {(o.ref.id, o.name, o.state) for o in d.objects}


def _objects(d: Discovery) -> set[tuple[str, str]]:
    return {(o.ref.id, o.name) for o in d.objects}


def _agreeing(finder: MultiFinder, h: Harness, job: str) -> Callable[[], bool]:
    """Whether find_many and find, asked now, show the job's objects in the same states."""

    def agree() -> bool:
        return _summary(finder.find_many([job])[job]) == _summary(h.backend.find(job))

    return agree


def find_returns_every_object_of_the_job(h: Harness) -> None:
    """Find returns every object of the job, by discovery name, and none of another job."""
    job, other = h.new_job(), h.new_job()
    refs = {h.start(h.request(job, submission=n, attempt=k)) for n, k in ((1, 1), (1, 2), (2, 1))}
    h.start(h.request(other))
    found = h.backend.find(job)
    expect(found.job == job, f"find({job}) answered for job {found.job}")
    shown = {o.ref for o in found.objects}
    expect(
        shown == refs,
        f"find({job}) must show {sorted(map(str, refs))}; shows {sorted(map(str, shown))}",
    )
    strays = [o.name for o in found.objects if o.identity is None or o.identity[0] != job]
    expect(not strays, f"find({job}) shows objects of other jobs: {strays}")


def find_includes_lost_replies(h: Harness) -> None:
    """An object whose Start reply was lost is found by its discovery name."""
    request = h.request()
    h.start_lost(request)
    obs = h.wait_until(
        lambda: next(
            (o for o in h.backend.find(request.job).objects if o.name == request.name), None
        ),
        f"find({request.job}) showing {request.name} after a lost Start reply",
    )
    h.refs.append(obs.ref)
    expect(obs.state is ObjectState.GATED, f"the object of a lost reply must be gated: {obs.state}")


def inspect_agrees_with_find(h: Harness) -> None:
    """Inspect shows the object as find does."""
    request = h.request()
    ref = h.start(request)
    found = h.backend.find(request.job).get(ref)
    expect(found is not None, f"find({request.job}) does not show {ref}")
    obs = h.inspect(ref)
    assert found is not None
    expect(
        (obs.ref, obs.name, obs.state) == (found.ref, found.name, found.state),
        f"inspect shows {obs.name} {obs.state}; find shows {found.name} {found.state}",
    )


def inspect_unknown_is_not_found(h: Harness) -> None:
    """Inspecting a ref the backend never issued raises NotFound."""
    ref = h.driver.unknown_ref()
    try:
        obs = h.inspect(ref)
    except NotFound:
        return
    raise CheckFailed(f"inspect({ref}) of an unknown object must raise NotFound; it showed {obs}")


def find_many_agrees_with_find(h: Harness) -> None:
    """find_many answers every job asked, as find would, and filters by state."""
    finder = h.backend
    if not isinstance(finder, MultiFinder):
        h.skip("the adapter does not implement MultiFinder")
    a, b, empty = h.new_job(), h.new_job(), h.new_job()
    opened = h.start(h.request(a, attempt=1))
    h.start(h.request(a, attempt=2))
    h.start(h.request(b))
    h.backend.open(opened)
    h.wait(opened, lambda o: o.state is not ObjectState.GATED, "past its gate")
    many = finder.find_many([a, b, empty])
    for job in (a, b, empty):
        expect(job in many, f"find_many did not answer for {job}")
        one = h.backend.find(job)
        expect(
            _objects(many[job]) == _objects(one),
            f"find_many and find show different objects of {job}: "
            f"{sorted(_objects(many[job]))} vs {sorted(_objects(one))}",
        )
        # The two reads are moments apart on a live scheduler, where the opened object may
        # move (pending to running) in between: their states must agree once it holds still.
        h.wait_until(
            _agreeing(finder, h, job),
            f"find_many and find agreeing on the states of {job}'s objects",
        )
    gated = finder.find_many([a, b], [ObjectState.GATED])
    states = {o.state for d in gated.values() for o in d.objects}
    expect(states <= {ObjectState.GATED}, f"find_many(states=[gated]) showed {states}")
    expect(
        len(gated[a].objects) == 1 and len(gated[b].objects) == 1,
        "find_many(states=[gated]) must show the one gated object of each job",
    )


def watch_shows_the_job(h: Harness) -> None:
    """A watch of a job yields observations of that job's objects only, including its changes."""
    watcher = h.backend
    if not isinstance(watcher, Watcher):
        h.skip("the adapter does not implement Watcher")
    job, other = h.new_job(), h.new_job()
    ref = h.start(h.request(job))
    h.start(h.request(other))
    seen = []
    for obs in watcher.watch(job):
        seen.append(obs)
        if obs.ref == ref:
            break
    expect(seen and seen[-1].ref == ref, f"watch({job}) never showed {ref}")
    strays = [o.name for o in seen if o.identity is None or o.identity[0] != job]
    expect(not strays, f"watch({job}) showed objects of other jobs: {strays}")
