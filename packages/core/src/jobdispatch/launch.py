"""What a Start asks of the backend, built in one place for the supervisor and the dry run.

The supervisor's Start and ``preview`` must hand the adapter the same request for the same job,
or the dry run would show something other than what a launch creates: the native offer (the
rules the plan gave the backend, with their budgets left) and the environment that names the
job and its submission are computed here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import attrs

from jobdispatch.errors import Unsupported
from jobdispatch.plan import make_plan
from jobdispatch.spi import (
    Backend,
    NativeOffer,
    NativePolicyCompiler,
    StartRequest,
    SubmissionPreview,
)
from jobdispatch.types import Enforcer, JobID, JobSpec, Plan, UnmatchedPolicy
from jobdispatch.validate import ENV_CHECKPOINT_ROOT

__all__ = [
    "ENV_JOB",
    "ENV_SUBMISSION",
    "DryRun",
    "execution_env",
    "native_offer",
    "preview",
    "start_request",
]

#: Environment every execution gets: which job it belongs to, and which submission it is.
ENV_JOB = "JOBDISPATCH_JOB"
ENV_SUBMISSION = "JOBDISPATCH_SUBMISSION"

#: The job id a dry run shows in names, since no job exists yet.
DRY_RUN_JOB = "dryrun"


def native_offer(
    backend: Backend, spec: JobSpec, plan: Plan, firings: Mapping[int, int]
) -> NativeOffer:
    """The rules the plan gave the backend, compiled by it with the budget each has left."""
    native = {a.index: a.effective for a in plan.rules if a.enforcer is Enforcer.BACKEND}
    if not native or not isinstance(backend, NativePolicyCompiler):
        return NativeOffer()
    remaining = {i: max(0, rule.budget - firings.get(i, 0)) for i, rule in native.items()}
    return backend.compile(spec, native, remaining)


def start_request(
    backend: Backend,
    job: JobID,
    spec: JobSpec,
    plan: Plan,
    *,
    submission: int,
    attempt: int,
    firings: Mapping[int, int] | None = None,
    exclude: tuple[str, ...] = (),
) -> StartRequest:
    """The request for one attempt of one submission of ``job``; ``exclude`` are the suspect
    nodes recorded with the submission's authorization."""
    return StartRequest(
        job=job,
        submission=submission,
        attempt=attempt,
        spec=spec,
        native=native_offer(backend, spec, plan, firings or {}),
        env=execution_env(job, spec, submission),
        exclude=exclude,
    )


def execution_env(job: JobID, spec: JobSpec, submission: int) -> dict[str, str]:
    """What every process of the submission is told of it: the job, the submission, and the
    checkpoint root its progress is read from (``[progress] root``), so the helper inside
    the job marks and publishes exactly where the supervisor lists."""
    env = {ENV_JOB: job, ENV_SUBMISSION: str(submission)}
    if spec.progress is not None:
        env[ENV_CHECKPOINT_ROOT] = spec.progress.root
    return env


@attrs.frozen
class DryRun:
    """A plan and what the backend would create for the job's first submission."""

    plan: Plan
    submission: str


def preview(
    backend: Backend,
    spec: JobSpec,
    *,
    supervised: bool = False,
    accept_unverified: Mapping[int, Enforcer] | None = None,
    accept_unenforced: Collection[int] = (),
    unmatched: UnmatchedPolicy = UnmatchedPolicy.RESIDUAL,
) -> DryRun:
    """Plan ``spec`` and show exactly what its first Start would create, creating nothing.

    Names carry the placeholder job id ``dryrun``; everything else is what the supervisor's
    Start would send. Raises what ``make_plan`` raises, and Unsupported when the adapter has no
    dry run (``SubmissionPreview``).
    """
    plan = make_plan(
        backend,
        None,
        spec,
        supervised=supervised,
        accept_unverified=accept_unverified,
        accept_unenforced=accept_unenforced,
        unmatched=unmatched,
    )
    if not isinstance(backend, SubmissionPreview):
        msg = f"adapter {backend.name!r} cannot show what it would create (no preview)"
        raise Unsupported(msg)
    request = start_request(backend, DRY_RUN_JOB, spec, plan, submission=1, attempt=1)
    return DryRun(plan=plan, submission=backend.preview(request))
