"""Goodput replayed over simulator runs: the figures the record gives match what the simulated
scheduler knows it did (when each run started and ended, and why), and the parts of every job
add up exactly, whatever the faults did to the record."""

from __future__ import annotations

from datetime import timedelta

from jobdispatch.goodput import goodput, report
from jobdispatch.memory import history as h
from jobdispatch_sim.options import derive
from jobdispatch_sim.runner import quiet_logs
from jobdispatch_sim.world import World

_US = timedelta(microseconds=1)


def test_goodput_of_simulated_runs_equals_the_schedulers_ground_truth() -> None:
    checked = sum(_check_seed(seed) for seed in range(16))
    assert checked > 20  # the seeds do end runs the record saw, and each was compared


def _check_seed(seed: int) -> int:
    """Replay ``seed`` and compare every ended run the record saw; returns how many."""
    quiet_logs()
    world = World(derive(seed))
    assert not world.run()
    now = world.clock()
    truth: dict[tuple[str, int], h.Entry] = {}
    started: dict[tuple[str, int], h.ExecutionStarted] = {}
    for backend in world.backends.values():
        for entry in backend.inner.env.history:
            if isinstance(entry, h.ExecutionStarted):
                started[(entry.ref.id, entry.index)] = entry
            elif isinstance(entry, h.ExecutionEnded):
                truth[(entry.ref.id, entry.index)] = entry
    checked = 0
    views = [world.store.inner.read(job) for job in world.jobs]
    for view in views:
        g = goodput(view, now)
        assert sum(s.micros for s in g.shares) == g.total_micros
        assert g.total_micros == (g.until - g.created_at) // _US
        for run in g.runs:
            key = (run.ref, run.index)
            end = truth.get(key)
            if run.ended_at is None or not isinstance(end, h.ExecutionEnded):
                continue
            # The scheduler's own account of the run: when it started, ended, and why.
            assert run.started_at == started[key].at
            assert run.ended_at == end.at
            assert run.blame.cause is end.cause.kind
            lo, hi = max(run.started_at, g.created_at), min(run.ended_at, g.until)
            assert run.running_micros == max(0, (hi - lo) // _US)
            checked += 1
    # The window report over the whole run adds up to the jobs' own figures.
    whole = report((("sim", v) for v in views), now)
    assert whole.total.total.micros == sum(j.total_micros for _, j in whole.jobs)
    assert sum(c.running_micros for c in whole.clusters) == sum(
        r.running_micros for _, j in whole.jobs for r in j.runs
    )
    interrupted = sum(
        1
        for _, j in whole.jobs
        for r in j.runs
        if r.ended_at is not None and str(r.blame.cause) in ("preempted", "node-lost")
    )
    assert sum(c.interruptions for c in whole.clusters) == interrupted
    return checked
