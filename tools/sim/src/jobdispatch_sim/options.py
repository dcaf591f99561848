"""Every knob of one simulated run, derived from its seed alone.

Swarm testing (TigerBeetle's VOPR): instead of one fixed mix of faults, each seed draws its own
mix, with some faults switched off entirely and others turned up. A bug that needs "many lost
replies and no crashes" is found by the seeds that happen to draw that mix, where a fixed
average mix would dilute it. Everything is printed with the seed, so a failure report says
what world it happened in, and the seed alone rebuilds it.
"""

from __future__ import annotations

import random
from datetime import timedelta

import attrs


def _maybe(rng: random.Random, p_on: float, low: float, high: float) -> float:
    """A probability that is off (0) for some seeds and drawn from [low, high] for the rest."""
    return rng.uniform(low, high) if rng.random() < p_on else 0.0


@attrs.frozen(kw_only=True)
class SimOptions:
    """The world one seed builds. Probabilities are per opportunity (per step, per call)."""

    seed: int
    #: Jobs submitted over the safety phase, and how many supervisor processes run.
    jobs: int
    supervisors: int
    #: Steps of the safety phase (faults on), and the simulated time the liveness phase has:
    #: longer than the longest wait a policy may ask for (a shared checkpoint's 24 h hold for a
    #: person, which escalates when it runs out), so "still waiting" is never mistaken for stuck.
    safety_steps: int
    liveness_budget: timedelta
    #: Memory backend settings, per shape.
    auto_run_slurm: bool
    auto_run_kubeflow: bool
    kubeflow_share: float
    #: The workload: how often a job has a shared checkpoint, the manual unmatched policy,
    #: or an unsupervised plan; how large budgets get.
    p_shared_checkpoint: float
    p_manual_unmatched: float
    max_budget: int
    #: Weights of what happens next in a safety step.
    w_pass: float
    w_env: float
    w_operator: float
    w_time: float
    w_fault: float
    w_crash: float
    #: Store faults: an append refused before it applies, applied with its reply lost (the
    #: writer lives on), applied and the writer crashes, a read that fails, a power cut.
    p_store_unavailable: float
    p_store_reply_lost: float
    p_store_crash_after: float
    p_power_cut: float
    #: Crashes inside a step: before a backend call (its decision committed) and after it
    #: (its evidence not committed yet).
    p_crash_before_call: float
    p_crash_after_call: float
    #: A pause inside a step, during which other actors run (a GC pause, a slow network).
    p_pause: float
    #: While paused, time may pass beyond the pauser's lease, and another supervisor takes over.
    p_pause_steals_lease: float
    #: Supervisor clocks: each process's offset from the world's clock; jumps of one process.
    #: Bounded by what the core assumes: absence is judged by comparing a backend's timestamp
    #: with a supervisor's clock, so skew plus the longest lagging listing stays under the
    #: 60 s absence grace.
    max_skew: timedelta
    p_clock_backward: float
    #: Backend faults armed per fault step.
    p_lose_reply: float
    p_refuse_start: float
    p_drop_observation: float
    #: How long a find may keep missing a job's objects once it starts (a lagging listing);
    #: always shorter than the core's absence grace minus the largest clock skew.
    max_blind: timedelta
    p_delay_object: float
    p_unreachable: float
    p_requeue_bit: float
    #: A supervisor polls all its jobs with one find (the serve path) instead of one each.
    p_poll_all: float
    #: Escalation sinks that fail now and then.
    p_sink_fails: float
    #: Progress (spec 0001 D6, rows P1 to P5): the share of jobs that name a progress source
    #: and a stall rule; per step and per running run, the chance it hangs (marks nothing
    #: more); per step, the chance a checkpoint root goes blind or sees again; the share of
    #: those jobs whose rules charge only firings after which training did not advance.
    #: Drawn from a generator of their own (see ``derive``), so a seed without progress plays
    #: as it did before progress existed.
    p_progress: float = 0.0
    p_hang: float = 0.0
    p_progress_blind: float = 0.0
    p_no_advance: float = 0.0
    #: The share of supervised jobs with a pending deadline (``[pending]``, row P6), drawn from
    #: a generator of its own, so a seed without it plays as before it existed.
    p_pending: float = 0.0

    def without_faults(self) -> SimOptions:
        """The same world with every fault, crash, pause and person switched off: the cost of
        the workload itself, for the benchmark's baseline."""
        changes: dict[str, object] = {
            f.name: 0.0
            for f in attrs.fields(SimOptions)
            if f.name.startswith("p_")
            and f.name not in ("p_poll_all", "p_progress", "p_no_advance", "p_pending")
        }
        changes.update(w_fault=0.0, w_crash=0.0, w_operator=0.0, max_blind=timedelta(0))
        return attrs.evolve(self, **changes)  # type: ignore[arg-type]

    def describe(self) -> list[str]:
        """Every option as ``name=value``, in declaration order, for the report's header."""
        out = []
        for field in attrs.fields(SimOptions):
            value = getattr(self, field.name)
            if isinstance(value, float):
                text = f"{value:.3f}"
            elif isinstance(value, timedelta):
                text = f"{int(value.total_seconds())}s"
            else:
                text = str(value)
            out.append(f"{field.name}={text}")
        return out


def derive(seed: int) -> SimOptions:
    """The options of ``seed``. A separate generator from the run's, so adding an option does
    not shift every later random choice of the run itself."""
    rng = random.Random(f"options:{seed}")
    return SimOptions(
        seed=seed,
        jobs=rng.randint(1, 4),
        supervisors=rng.choice((1, 2, 2, 3)),
        safety_steps=rng.randint(120, 320),
        liveness_budget=timedelta(hours=26),
        auto_run_slurm=rng.random() < 0.5,
        auto_run_kubeflow=rng.random() < 0.5,
        kubeflow_share=rng.choice((0.0, 0.5, 1.0)),
        p_shared_checkpoint=rng.choice((0.0, 0.15)),
        p_manual_unmatched=rng.choice((0.0, 0.2)),
        max_budget=rng.randint(0, 3),
        w_pass=rng.uniform(3, 8),
        w_env=rng.uniform(1, 4),
        w_operator=_maybe(rng, 0.8, 0.1, 0.8),
        w_time=rng.uniform(0.5, 3),
        w_fault=_maybe(rng, 0.85, 0.2, 2.0),
        w_crash=_maybe(rng, 0.7, 0.05, 0.6),
        p_store_unavailable=_maybe(rng, 0.4, 0.01, 0.05),
        p_store_reply_lost=_maybe(rng, 0.4, 0.01, 0.06),
        p_store_crash_after=_maybe(rng, 0.5, 0.01, 0.08),
        p_power_cut=_maybe(rng, 0.2, 0.002, 0.01),
        p_crash_before_call=_maybe(rng, 0.6, 0.02, 0.15),
        p_crash_after_call=_maybe(rng, 0.6, 0.02, 0.15),
        p_pause=_maybe(rng, 0.6, 0.02, 0.15),
        p_pause_steals_lease=rng.uniform(0.0, 0.6),
        max_skew=timedelta(seconds=rng.choice((0, 0, 2, 10, 20))),
        p_clock_backward=_maybe(rng, 0.3, 0.05, 0.3),
        p_lose_reply=_maybe(rng, 0.6, 0.1, 0.5),
        p_refuse_start=_maybe(rng, 0.4, 0.05, 0.3),
        p_drop_observation=_maybe(rng, 0.5, 0.1, 0.5),
        p_delay_object=_maybe(rng, 0.5, 0.1, 0.5),
        p_unreachable=_maybe(rng, 0.3, 0.05, 0.2),
        p_requeue_bit=_maybe(rng, 0.3, 0.05, 0.2),
        p_poll_all=rng.choice((0.0, 0.3, 0.7)),
        p_sink_fails=_maybe(rng, 0.3, 0.1, 0.5),
        # Drawn last, so that adding it did not shift the draws before it.
        max_blind=timedelta(seconds=rng.choice((0, 10, 30))),
        **_progress(seed),
        p_pending=random.Random(f"pending:{seed}").choice((0.0, 0.0, 0.5, 1.0)),
    )


def _progress(seed: int) -> dict[str, float]:
    """The progress knobs, from their own generator: the draws above are those of a seed
    before progress existed, and so is everything a seed without progress plays."""
    rng = random.Random(f"progress:{seed}")
    share = rng.choice((0.0, 0.0, 0.5, 1.0))
    return {
        "p_progress": share,
        "p_hang": _maybe(rng, 0.8, 0.05, 0.3),
        "p_progress_blind": _maybe(rng, 0.5, 0.01, 0.06),
        "p_no_advance": rng.choice((0.0, 0.5, 1.0)),
    }
