"""Deliberately broken memory adapters: each one must fail the check that guards what it broke,
while the unbroken adapter passes that same check. A suite that passes a broken adapter proves
nothing, so this is the suite's own test."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
from jobdispatch import (
    CallMeta,
    CauseKind,
    Discovery,
    HoldMeta,
    JobID,
    ManualClock,
    ObjectObs,
    ObjectRef,
    ObjectState,
    Provenance,
    StartRequest,
)
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.memory.objects import MemObject
from jobdispatch_conformance.adapter import CheckFailed, Harness, Timeouts, checks
from jobdispatch_conformance.adapter.memory import MemoryDriver

NEVER = datetime.max.replace(tzinfo=UTC)


class OpensOnStart(MemoryBackend):
    """Creates objects with their gate already lifted."""

    def start(self, request: StartRequest) -> ObjectRef:
        ref = super().start(request)
        self.open(ref)
        return ref


class StopKillsSibling(MemoryBackend):
    """Stopping one object also stops the other live objects of its job."""

    def stop(self, ref: ObjectRef, reason: str) -> None:
        super().stop(ref, reason)
        obs = self.inspect(ref)
        if obs.identity is not None:
            for other in self.find(obs.identity[0]).objects:
                if other.ref != ref and other.state is not ObjectState.ENDED:
                    super().stop(other.ref, reason)


class OomAsNonZeroExit(MemoryBackend):
    """Reports an OOM kill as a plain non-zero exit of the application."""

    def _observe(self, obj: MemObject) -> ObjectObs:
        obs = super()._observe(obj)
        runs = tuple(
            attrs.evolve(
                e,
                cause=attrs.evolve(
                    e.cause, kind=CauseKind.NON_ZERO_EXIT, provenance=Provenance.APPLICATION
                ),
            )
            if e.cause is not None and e.cause.kind is CauseKind.OUT_OF_MEMORY
            else e
            for e in obs.executions
        )
        return attrs.evolve(obs, executions=runs)


def _recast(obs: ObjectObs, change: Callable[[Any], Any]) -> ObjectObs:
    """The observation with each execution's cause passed through ``change``."""
    runs = tuple(
        attrs.evolve(e, cause=change(e.cause)) if e.cause is not None else e for e in obs.executions
    )
    return attrs.evolve(obs, executions=runs)


class ExecCodesAsLaunchFailed(MemoryBackend):
    """Tells launch failures by exit status alone: an application's 126 or 127 is launch-failed."""

    def _observe(self, obj: MemObject) -> ObjectObs:
        return _recast(
            super()._observe(obj),
            lambda c: (
                attrs.evolve(c, kind=CauseKind.LAUNCH_FAILED, provenance=Provenance.SCHEDULER)
                if c.exit_code in (126, 127)
                else c
            ),
        )


class LaunchFailedAsExit127(MemoryBackend):
    """Reports a program that could not start as the application's exit 127 (Slurm's old way)."""

    def _observe(self, obj: MemObject) -> ObjectObs:
        return _recast(
            super()._observe(obj),
            lambda c: (
                attrs.evolve(
                    c,
                    kind=CauseKind.NON_ZERO_EXIT,
                    provenance=Provenance.APPLICATION,
                    exit_code=127,
                )
                if c.kind is CauseKind.LAUNCH_FAILED
                else c
            ),
        )


class FindMissesLostReplies(MemoryBackend):
    """Find shows only the objects whose Start reply arrived."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.replied: set[ObjectRef] = set()

    def start(self, request: StartRequest) -> ObjectRef:
        ref = super().start(request)
        self.replied.add(ref)
        return ref

    def find(self, job: JobID) -> Discovery:
        found = super().find(job)
        return attrs.evolve(found, objects=tuple(o for o in found.objects if o.ref in self.replied))


class ReleaseLiftsEveryHold(MemoryBackend):
    """Release lifts whatever hold stands, whichever instance it names."""

    def release(self, ref: ObjectRef, meta: HoldMeta) -> None:
        standing = self.inspect(ref).hold_instance
        if standing is not None:
            meta = attrs.evolve(meta, instance=standing)
        super().release(ref, meta)


class RequeueForgetsIndex(MemoryBackend):
    """Every execution of an object shows as execution 0."""

    def _observe(self, obj: MemObject) -> ObjectObs:
        obs = super()._observe(obj)
        return attrs.evolve(obs, executions=tuple(attrs.evolve(e, index=0) for e in obs.executions))


class OpenNotIdempotent(MemoryBackend):
    """A second open of an object fails."""

    def open(self, ref: ObjectRef, meta: CallMeta | None = None) -> None:
        if self.inspect(ref).state is not ObjectState.GATED:
            msg = f"{ref} is open already"
            raise RuntimeError(msg)
        super().open(ref, meta)


class OpenIgnoresDeadline(MemoryBackend):
    """Opens land however late they are."""

    def open(self, ref: ObjectRef, meta: CallMeta | None = None) -> None:
        super().open(ref, None)


class HoldIgnoresDeadline(MemoryBackend):
    """Holds and releases land however late they are."""

    def hold(self, ref: ObjectRef, meta: HoldMeta) -> None:
        super().hold(ref, attrs.evolve(meta, deadline=NEVER))

    def release(self, ref: ObjectRef, meta: HoldMeta) -> None:
        super().release(ref, attrs.evolve(meta, deadline=NEVER))


class ClaimsRequeueBitItCannotShow(MemoryBackend):
    """Never shows the requeue bit, whatever it is."""

    def _observe(self, obj: MemObject) -> ObjectObs:
        return attrs.evolve(super()._observe(obj), requeue_bit=None)


Check = Callable[[Harness], None]
#: The memory scheduler moves only when driven, so what has not happened in 0.2 s never will.
QUICK = Timeouts(settle=0.2, poll=0.0005, quiet=0.0)

MUTANTS: list[tuple[type[MemoryBackend], Check, tuple[Shape, ...]]] = [
    (OpensOnStart, checks.start_creates_a_gated_object, (Shape.SLURM, Shape.KUBEFLOW)),
    (StopKillsSibling, checks.stop_affects_one_object_only, (Shape.SLURM, Shape.KUBEFLOW)),
    (OomAsNonZeroExit, lambda h: checks.ending(h, "oom"), (Shape.SLURM, Shape.KUBEFLOW)),
    (
        ExecCodesAsLaunchFailed,
        lambda h: checks.application_exit_code_is_its_own(h, 127),
        (Shape.SLURM, Shape.KUBEFLOW),
    ),
    (
        LaunchFailedAsExit127,
        checks.program_that_cannot_start_is_launch_failed,
        (Shape.SLURM, Shape.KUBEFLOW),
    ),
    (FindMissesLostReplies, checks.find_includes_lost_replies, (Shape.SLURM, Shape.KUBEFLOW)),
    (ReleaseLiftsEveryHold, checks.holds_by_instance, (Shape.SLURM, Shape.KUBEFLOW)),
    (RequeueForgetsIndex, checks.requeue_reruns_as_a_new_execution, (Shape.SLURM,)),
    (
        RequeueForgetsIndex,
        checks.native_rerun_tells_executions_apart,
        (Shape.SLURM, Shape.KUBEFLOW),
    ),
    (OpenNotIdempotent, checks.open_lifts_the_gate_and_is_idempotent, (Shape.SLURM,)),
    (HoldIgnoresDeadline, checks.hold_refuses_past_deadline, (Shape.SLURM, Shape.KUBEFLOW)),
    (OpenIgnoresDeadline, checks.open_refuses_past_deadline, (Shape.SLURM, Shape.KUBEFLOW)),
    (ClaimsRequeueBitItCannotShow, checks.requeue_bit_is_restored, (Shape.SLURM,)),
]

CASES = [
    pytest.param(
        mutant, check, shape, id=f"{mutant.__name__}-{getattr(check, '__name__', 'oom')}-{shape}"
    )
    for mutant, check, shapes in MUTANTS
    for shape in shapes
]


def harness_for(kind: type[MemoryBackend], shape: Shape) -> Iterator[Harness]:
    clock = ManualClock()
    backend = kind(shape, clock=clock)
    harness = Harness(backend, MemoryDriver(backend, clock), QUICK)
    try:
        yield harness
    finally:
        harness.cleanup()


@pytest.mark.parametrize(("mutant", "check", "shape"), CASES)
def test_the_check_catches_the_mutant(
    mutant: type[MemoryBackend], check: Check, shape: Shape
) -> None:
    for harness in harness_for(MemoryBackend, shape):
        check(harness)  # the sound adapter passes
    for harness in harness_for(mutant, shape):
        with pytest.raises((CheckFailed, RuntimeError)):
            check(harness)


def test_at_least_six_distinct_mutants() -> None:
    assert len({m for m, _, _ in MUTANTS}) >= 6


def test_the_whole_suite_fails_on_a_mutant(tmp_path: Path) -> None:
    """Run as an adapter's CI would: a test class subclassing the suite, under pytest."""
    source = textwrap.dedent(inspect.getsource(ReleaseLiftsEveryHold))
    (tmp_path / "test_mutant.py").write_text(
        textwrap.dedent(
            """
            from __future__ import annotations
            import attrs
            from jobdispatch import HoldMeta, ObjectRef
            from jobdispatch.memory import MemoryBackend
            from jobdispatch_conformance.adapter import AdapterSuite
            from jobdispatch_conformance.adapter.memory import MemoryFixtures
            """
        )
        + source
        + textwrap.dedent(
            """

            class TestMutant(MemoryFixtures, AdapterSuite):
                config = {"shape": "slurm"}

                def make(self, config, clock):
                    return ReleaseLiftsEveryHold(clock=clock)
            """
        )
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1, result.stdout
    assert "test_holds_by_instance" in failed[0]
