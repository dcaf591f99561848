"""Benchmark: a supervisor's poll time with notices going to a fast receiver, to a slow one, and
to no sink at all (the baseline), measured in one run.

Run standalone (``python packages/supervise/bench/bench_notices.py [--jobs N]``) or through
``nox -s bench``. For each case, one supervisor serves N jobs on the memory adapter and store
(a manual clock each poll advances by one second), every job asking for every notice kind: the
launch poll (every job started: N ``started`` notices queued), then 20 polls in which half the
jobs are preempted at the fifth (an ``ended``, a ``recovered`` and a ``budget-low`` each, and a
new start). The sink is a webhook on a loopback receiver that answers at once ("fast"), or only
after 2 s ("slow", under the sink's 10 s timeout: each lane is held by each request). Prints
each case's longest and median poll, and how many notices were sent by the window's end;
asserts nothing (a test never measures speed).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from datetime import timedelta

from jobdispatch import (
    Action,
    Actor,
    CauseKind,
    JobSpec,
    ManualClock,
    RecoveryPolicy,
    Rule,
    compose,
)
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.types import NoticeKind, Notify
from jobdispatch_supervise import Supervisor
from jobdispatch_supervise.http_sinks import WebhookSink
from jobdispatch_supervise.testing import Receiver

WINDOW = 20
PREEMPT_AT = 5
OPS = Actor.human("bench")


class _Stop(Exception):
    pass


def measure(jobs: int, delay: float | None) -> dict[str, float]:
    """Poll times (seconds) of one supervisor serving ``jobs`` jobs; ``delay``: the receiver's
    answer delay, None for no sink."""
    clock = ManualClock()
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock)
    store = MemoryRecords(clock=clock)
    cluster = compose(backend, store=store, clock=clock)
    spec = JobSpec(
        command=["train"],
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)]
        ),
        extensions=[Notify(events=list(NoticeKind))],
    )
    ids = [cluster.operator.submit(spec, by=OPS, supervised=True).job or "" for _ in range(jobs)]
    receiver = Receiver(delay=delay) if delay is not None else None
    sinks = [WebhookSink(receiver.url, name="hook", rate_per_minute=6000)] if receiver else []
    polls: list[float] = []
    mark = [time.perf_counter()]

    def sleep(seconds: float) -> None:
        polls.append(time.perf_counter() - mark[0])
        if len(polls) > WINDOW:
            raise _Stop
        if len(polls) == PREEMPT_AT:
            for job in ids[: jobs // 2]:
                status = cluster.observer.get(job)
                ref = status.submissions[-1].canonical
                if ref is not None:
                    backend.env.preempt(ref)
        clock.advance(timedelta(seconds=1))
        mark[0] = time.perf_counter()

    supervisor = Supervisor(backend, store, clock=clock, sleep=sleep, poll=1.0, sinks=sinks)
    with contextlib.suppress(_Stop):
        supervisor.serve()
    lane = supervisor.outbox.lanes[0] if supervisor.outbox.lanes else None
    sent = lane.stats.sent if lane else 0
    queued = supervisor.outbox.pending()
    for lane_ in supervisor.outbox.lanes:
        lane_.stop()
    if receiver is not None:
        receiver.close()
    return {
        "launch": polls[0],
        "longest": max(polls[1:]),
        "median": statistics.median(polls[1:]),
        "sent": float(sent),
        "queued": float(queued),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200, help="how many jobs (default 200)")
    parser.add_argument("--quick", action="store_true", help="50 jobs")
    args = parser.parse_args(argv)
    jobs = 50 if args.quick else args.jobs
    print(f"notices: {jobs} jobs, every notice kind asked for, {WINDOW} polls")
    print(f"{'case':<28}{'launch poll':>12}{'longest':>10}{'median':>10}{'sent':>7}{'queued':>8}")
    for name, delay in (
        ("no sink (baseline)", None),
        ("fast receiver", 0.0),
        ("slow receiver (2 s)", 2.0),
    ):
        got = measure(jobs, delay)
        print(
            f"{name:<28}{got['launch'] * 1000:>10.1f}ms{got['longest'] * 1000:>8.1f}ms"
            f"{got['median'] * 1000:>8.1f}ms{got['sent']:>7.0f}{got['queued']:>8.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
