"""Benchmark: fold + project + next on records of 10 to 10,000 events.

Every supervisor pass and every status read folds the whole record, so this is the core's hot
path. The baseline, measured in the same run, is the least any fold must do: walk the same
events once and dispatch on their type. The ratio says what the job level costs beyond that,
and the per-event column whether the cost stays linear. The target (under 100 us at 100
events) is for the evidence shape; the control shape is printed as the measured worst case.

Run: ``python packages/core/bench/bench_job.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import timeit
from collections.abc import Callable
from datetime import timedelta

from jobdispatch import Action, CauseKind, ObjectRef, ObjectState, Rule
from jobdispatch.job import fold
from jobdispatch.records import events as ev
from jobdispatch.spi import Discovery
from jobdispatch.status import project
from jobdispatch.steps import next_steps
from jobdispatch.testing import Story, execution, observation


def evidence_record(size: int) -> Story:
    """A long-running job whose record is mostly evidence: its object observed as the backend
    reports nodes lost and found again (the commonest growth of a real record)."""
    story = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=3))
    story.launched(1, "o1")
    flip = 0
    while len(story.events) < size:
        flip += 1
        story.later(30)
        lost = ("node2",) if flip % 2 else ()
        story.observe(
            observation("job1", 1, 1, "o1", ObjectState.RUNNING, execution(0), lost_nodes=lost)
        )
    del story.events[size:]
    return story


def control_record(size: int) -> Story:
    """A job whose record grows by operator holds and releases, each called and observed: the
    costliest events to fold, since each is a committed transition."""
    story = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=3))
    story.launched(1, "o1", running=False)
    pending = observation("job1", 1, 1, "o1", ObjectState.PENDING)
    story.observe(pending)
    cycle = 0
    while len(story.events) < size:
        cycle += 1
        story.later(60)
        held = observation("job1", 1, 1, "o1", ObjectState.HELD, hold_instance=cycle)
        for event in (
            (ev.HoldRequested, {"reason": f"maintenance {cycle}"}),
            (
                ev.CallIssued,
                {
                    "op": ev.CallOp.HOLD,
                    "ref": ObjectRef("o1"),
                    "deadline": story.now + timedelta(seconds=30),
                    "instance": cycle,
                },
            ),
            (ev.Observed, {"obs": held}),
            (ev.ReleaseRequested, {}),
            (ev.Observed, {"obs": pending}),
        ):
            if len(story.events) >= size:
                break
            story.add(event[0], **event[1])
            if event[0] is ev.CallIssued and len(story.events) < size:
                story.add(ev.CallAnswered, call=len(story.events), ok=True)
    del story.events[size:]
    return story


def walk(view: ev.View) -> int:
    """The baseline: touch every event once, as any fold must."""
    seen = 0
    for event in view.events:
        seen += len(type(event).kind)
    return seen


def interleaved(
    measured: Callable[[], object], baseline: Callable[[], object], number: int, repeat: int
) -> tuple[float, float]:
    """The least time per call of each, over ``repeat`` rounds of ``number`` calls.

    The rounds alternate between the two, so a stretch of noise on a shared machine (another
    process, a frequency change) slows both alike instead of only one, and the minimum over
    many short rounds is the run least disturbed: the ratio stays meaningful.
    """
    measured_timer = timeit.Timer(measured)
    baseline_timer = timeit.Timer(baseline)
    best_measured = best_baseline = float("inf")
    for _ in range(repeat):
        best_measured = min(best_measured, measured_timer.timeit(number))
        best_baseline = min(best_baseline, baseline_timer.timeit(number))
    return best_measured / number, best_baseline / number


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    sizes = [10, 100, 1_000, 10_000]
    print(
        f"{'record':>9} {'events':>7} {'fold+project+next':>18} {'per event':>10} "
        f"{'baseline walk':>14} {'ratio':>7}"
    )
    for (shape, make), size in itertools.product(
        (("evidence", evidence_record), ("controls", control_record)), sizes
    ):
        story = make(size)
        view = story.view()
        now = story.now
        running = observation("job1", 1, 1, "o1", ObjectState.RUNNING, execution(0))
        discovery = Discovery(job="job1", objects=(running,), at=now)

        def job_level(view: ev.View = view, now=now, discovery=discovery) -> None:
            job = fold(view, now)
            project(job, discovery, now)
            next_steps(job, discovery, now)

        number = max(3, (20_000 if not args.quick else 2_000) // size)
        repeat = 15 if not args.quick else 9
        t, b = interleaved(job_level, lambda view=view: walk(view), number, repeat)
        print(
            f"{shape:>9} {size:>7} {t * 1e6:>15.1f} us {t * 1e6 / size:>7.2f} us "
            f"{b * 1e6:>11.1f} us {t / b:>6.1f}x"
        )
    # Spec 0001 D5: the 100 us target is for evidence-shaped records (how records grow); the
    # control-heavy shape is a measured worst case, printed with no target.
    print("target (evidence): under 100 us at 100 events, linear or better beyond")
    print("controls: the measured worst case (every event a committed transition); no target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
