"""Run one seed, or many, and report.

A report is built only from the seed's own run: its options, the violations, a trace of the
job's record events and backend calls, and the command that replays it. The trace is a pure
function of the seed (and the code), so a replay prints it byte for byte.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator

import attrs

from jobdispatch_sim import mutants
from jobdispatch_sim.checkers import Violation
from jobdispatch_sim.options import derive
from jobdispatch_sim.world import START, World


@attrs.frozen(kw_only=True)
class Result:
    """What one seed's run produced."""

    seed: int
    mutant: str | None
    violations: tuple[Violation, ...]
    coverage: Counter[str]
    options: tuple[str, ...]
    jobs: int
    settled: int
    steps: int
    timeline: int
    trace: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.violations

    def replay(self) -> str:
        tail = f" --mutant {self.mutant}" if self.mutant else ""
        return f"nox -s sim -- --seed {self.seed}{tail}"

    def report(self) -> str:
        lines = [f"SEED={self.seed}" + (f" MUTANT={self.mutant}" if self.mutant else "")]
        lines.append("options: " + " ".join(self.options))
        if self.ok:
            lines.append(
                f"passed: {self.jobs} jobs, {self.settled} settled, {self.steps} safety steps, "
                f"{self.timeline} timeline items"
            )
        for v in self.violations[:3]:
            lines.append(f"VIOLATION: {v}")
        if self.trace:
            lines.append("trace:")
            lines.extend("  " + t for t in self.trace)
        if not self.ok:
            lines.append(f"replay: {self.replay()}")
        return "\n".join(lines)


def quiet_logs() -> None:
    """The supervisor logs failed deliveries and retries; in a sweep that is noise."""
    logging.getLogger("jobdispatch").setLevel(logging.CRITICAL)


def run_seed(seed: int, mutant: str | None = None, *, trace: bool = False) -> Result:
    """Run ``seed`` (under ``mutant``, when named) and return what happened."""
    quiet_logs()
    opts = derive(seed)
    with mutants.active(mutant):
        world = World(opts)
        violations = world.run()
    lines: tuple[str, ...] = ()
    if violations or trace:
        job = violations[0].job if violations else None
        lines = tuple(
            world.timeline.trace(START, job=job or None, last=80 if violations else 10_000)
        )
    return Result(
        seed=seed,
        mutant=mutant,
        violations=tuple(violations),
        coverage=world.coverage.counts,
        options=tuple(opts.describe()),
        jobs=len(world.jobs),
        settled=len(world.settled),
        steps=world.steps_done + 1,
        timeline=len(world.timeline),
        trace=lines,
    )


def _one(args: tuple[int, str | None]) -> Result:
    return run_seed(args[0], args[1])


def sweep(seeds: Iterable[int], mutant: str | None = None, *, workers: int = 1) -> Iterator[Result]:
    """Results of ``seeds`` in order, across ``workers`` processes when more than one."""
    work = [(s, mutant) for s in seeds]
    if workers <= 1:
        for item in work:
            yield _one(item)
        return
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        yield from pool.imap(_one, work, chunksize=8)
