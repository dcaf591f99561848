"""The tutorial prints exactly what its docstring says, on both memory shapes, and its outcome
survives a supervisor restarted between every pair of steps."""

from __future__ import annotations

import runpy
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from jobdispatch import Action, CauseKind, JobSpec, RecoveryPolicy, Rule, State
from jobdispatch.memory import Shape
from jobdispatch.steps import Wait
from jobdispatch.testing import expected_output
from jobdispatch_supervise import Supervisor

from .conftest import Scenario

ROOT = Path(__file__).resolve().parents[3]
TUTORIAL = ROOT / "examples" / "tutorial.py"


def expected() -> str:
    return expected_output(TUTORIAL)


def test_the_tutorial_prints_exactly_its_expected_output() -> None:
    out = subprocess.run(
        [sys.executable, str(TUTORIAL)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out == expected()


def test_the_repository_tutorial_is_the_design_tutorial() -> None:
    design = ROOT.parent / "shared" / "design" / "tutorial.py"
    if not design.exists():
        pytest.skip("no shared/design beside this checkout")
    assert TUTORIAL.read_text() == design.read_text()


def test_the_tutorial_on_the_kubeflow_shape(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import jobdispatch.memory as memory

    class Kubeflow(memory.MemoryBackend):
        def __init__(self, *, shape: Shape, **kw: Any) -> None:
            super().__init__(shape=Shape.KUBEFLOW, **kw)

    monkeypatch.setattr(memory, "MemoryBackend", Kubeflow)
    runpy.run_path(str(TUTORIAL), run_name="__main__")
    assert capsys.readouterr().out == expected()


def test_a_supervisor_restarted_between_every_pair_of_steps_reaches_the_same_outcome() -> None:
    sc = Scenario(shape=Shape.SLURM)
    spec = JobSpec(
        name="finetune",
        command=["torchrun", "train.py"],
        nodes=2,
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)]
        ),
    )
    sc.submit(spec)
    sc.on(sc.running(1), lambda s: sc.backend.env.preempt(sc.canonical(s, 1)))
    sc.on(sc.running(2), lambda s: sc.backend.env.complete(sc.canonical(s, 2)))
    ttl = timedelta(seconds=5)
    executed = 0
    for generation in range(200):
        # A new supervisor process: it must wait out the dead one's lease, then does one step
        # and dies without releasing anything.
        sup = Supervisor(
            sc.backend,
            sc.store,
            clock=sc.clock,
            sleep=sc.tick,
            lease_ttl=ttl,
            holder=f"gen{generation}",
        )
        lease = sup.ownership.own(sc.job)
        while lease is None:
            sc.tick(1.0)
            lease = sup.ownership.own(sc.job)
        result = sup.executor.run_pass(sc.job, lease)
        if result.settled:
            break
        if result.step is not None and isinstance(result.step, Wait):
            sc.tick(1.0)
        else:
            executed += 1
    status = sc.status()
    assert status.settled and executed > 10
    assert (status.state, status.cause.kind) == (State.SUCCEEDED, CauseKind.NONE)
    assert [(t.from_, t.to, t.submission) for t in status.history] == [
        (State.PENDING, State.RECOVERING, 2),
        (State.RECOVERING, State.SUCCEEDED, 2),
    ]
    assert status.plan is not None and status.plan.rules[0].firings == 1
    assert not sc.live_overlaps()
