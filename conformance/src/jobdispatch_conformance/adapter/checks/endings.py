"""Checks that every ending the driver can cause is reported with the right typed cause.

This is promise 1 ("never collapsed to failed") at the adapter's edge: if the adapter reports an
OOM as a non-zero exit, no policy above it can tell them apart.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from jobdispatch.spi import ObjectRef
from jobdispatch.types import CauseKind, ObjectState, Provenance

from jobdispatch_conformance.adapter.driver import Driver
from jobdispatch_conformance.adapter.harness import Harness, expect

__all__ = [
    "ENDINGS",
    "EXEC_CODES",
    "Ending",
    "application_exit_code_is_its_own",
    "ending",
    "program_that_cannot_start_is_launch_failed",
]

#: The exit code ``fail`` asks for: not 1, so an adapter that always reports 1 is caught.
FAIL_CODE = 3
#: What a shell exits with when it cannot start a program (126: not executable, 127: not
#: found); an application may exit with them too, and then they are its own.
EXEC_CODES = (126, 127)


@attrs.frozen
class Ending:
    """One way an execution can end, and the cause the adapter must report for it."""

    operation: str
    drive: Callable[[Driver, ObjectRef], None]
    kind: CauseKind
    provenances: frozenset[Provenance]
    exit_code: int | str | None = "any"


ENDINGS: dict[str, Ending] = {
    e.operation: e
    for e in (
        Ending(
            "preempt",
            lambda d, r: d.preempt(r),
            CauseKind.PREEMPTED,
            frozenset({Provenance.SCHEDULER}),
        ),
        Ending(
            "lose_node",
            lambda d, r: d.lose_node(r),
            CauseKind.NODE_LOST,
            frozenset({Provenance.SCHEDULER}),
        ),
        Ending(
            "time_out",
            lambda d, r: d.time_out(r),
            CauseKind.TIME_LIMIT,
            frozenset({Provenance.SCHEDULER}),
        ),
        Ending(
            # The job's own memory use ended it; the limit only enforced it (spec 0003).
            "oom",
            lambda d, r: d.oom(r),
            CauseKind.OUT_OF_MEMORY,
            frozenset({Provenance.APPLICATION}),
        ),
        Ending(
            "fail",
            lambda d, r: d.fail(r, FAIL_CODE),
            CauseKind.NON_ZERO_EXIT,
            frozenset({Provenance.APPLICATION}),
            FAIL_CODE,
        ),
        Ending(
            "complete",
            lambda d, r: d.complete(r),
            CauseKind.NONE,
            frozenset({Provenance.NONE, Provenance.APPLICATION}),
            0,
        ),
        Ending(
            "launch_fail",
            lambda d, r: d.launch_fail(r),
            CauseKind.LAUNCH_FAILED,
            frozenset({Provenance.SCHEDULER}),
        ),
    )
}


def ending(h: Harness, operation: str) -> None:
    """Drive ``operation`` on a running object with no native policy offered: its execution
    ends with the cause kind, provenance and exit code the contract names, and the object
    ends (nothing was offered to rerun it)."""
    spec = ENDINGS[operation]
    h.need(operation)
    with h.driving():
        started = h.driver.ending_spec(operation)
    ref = h.running(h.request(spec=started))
    with h.driving():
        spec.drive(h.driver, ref)
    obs = h.ended_execution(ref, 0)
    first = next((e for e in obs.executions if e.index == 0), None)
    expect(
        first is not None and first.cause is not None,
        f"after {operation}, execution 0 of {ref} has no cause: {obs.executions}",
    )
    assert first is not None
    assert first.cause is not None
    cause = first.cause
    expect(
        cause.kind is spec.kind,
        f"{operation} must end the execution with cause {spec.kind}; got {cause.kind}",
    )
    expect(
        cause.provenance in spec.provenances,
        f"{operation}: provenance must be one of {sorted(map(str, spec.provenances))}; "
        f"got {cause.provenance}",
    )
    if spec.exit_code != "any":
        expect(
            cause.exit_code == spec.exit_code,
            f"{operation}: exit code must be {spec.exit_code}; got {cause.exit_code}",
        )
    expect(first.ended_at is not None, f"{operation}: execution 0 has no end time")
    h.wait(ref, lambda o: o.state is ObjectState.ENDED, "ended", nudge=False)


def program_that_cannot_start_is_launch_failed(h: Harness) -> None:
    """A spec whose program the nodes do not have ends its execution ``launch-failed``
    (scheduler): the launch failed, whatever status a shell would have given for it (issue 14:
    Slurm once reported such a run as the application's exit 127)."""
    h.need("missing_program")
    with h.driving():
        spec = h.driver.missing_program()
    ref = h.start(h.request(spec=spec))
    h.backend.open(ref)
    obs = h.wait(
        ref,
        lambda o: any(e.ended_at is not None for e in o.executions) or o.state is ObjectState.ENDED,
        "done with its launch",
    )
    done = [e for e in obs.executions if e.ended_at is not None]
    expect(done, f"{ref} ended without reporting the execution whose launch failed: {obs}")
    cause = done[0].cause
    expect(
        cause is not None and cause.kind is CauseKind.LAUNCH_FAILED,
        f"a program that does not exist must end the execution launch-failed; got {cause}",
    )
    assert cause is not None
    expect(
        cause.provenance is Provenance.SCHEDULER,
        f"a launch that failed is the scheduler's to report; got provenance {cause.provenance}",
    )


def application_exit_code_is_its_own(h: Harness, code: int) -> None:
    """An application that exits 126 or 127 by itself ends ``non-zero-exit`` with that code:
    an adapter that tells launch failures by exit status alone is caught here."""
    h.need("fail")
    ref = h.running()
    with h.driving():
        h.driver.fail(ref, code)
    obs = h.ended_execution(ref, 0)
    first = next((e for e in obs.executions if e.index == 0), None)
    cause = first.cause if first is not None else None
    expect(
        cause is not None
        and (cause.kind, cause.provenance, cause.exit_code)
        == (CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, code),
        f"an application's own exit {code} must be non-zero-exit (application) with exit code "
        f"{code}; got {cause}",
    )
