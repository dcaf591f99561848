"""Who is writing: the job, the submission and the execution, as the adapters set them.

The adapters export ``JOBDISPATCH_JOB``, ``JOBDISPATCH_SUBMISSION`` and ``JOBDISPATCH_EXECUTION``
into every job container; command-line flags override them. Each value becomes a path segment of
the checkpoint root, so it is checked here, once, and refused with the variable's name when it
could escape its folder or collide with another job's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs
from jobdispatch.errors import Problem, ValidationError

__all__ = ["ENV_EXECUTION", "ENV_JOB", "ENV_SUBMISSION", "Identity", "identity_from", "job_from"]

ENV_JOB = "JOBDISPATCH_JOB"
ENV_SUBMISSION = "JOBDISPATCH_SUBMISSION"
ENV_EXECUTION = "JOBDISPATCH_EXECUTION"

# A path segment that cannot be "." or "..", holds no separator, and sorts the same everywhere.
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@attrs.frozen
class Identity:
    """One execution of one submission of one job: the directory it alone writes under."""

    job: str
    submission: int
    execution: str

    def __str__(self) -> str:
        return f"job {self.job} submission {self.submission} execution {self.execution}"


def _segment(where: str, value: str, problems: list[Problem]) -> str:
    if not _SEGMENT.fullmatch(value):
        problems.append(
            Problem(
                where,
                f"{value!r} is not a valid name: use 1 to 128 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit",
            )
        )
    return value


def _pick(flag: str | None, env: Mapping[str, str], var: str) -> tuple[str, str] | None:
    """The value and where it came from (the flag wins over the variable)."""
    if flag is not None:
        return flag, f"--{var.removeprefix('JOBDISPATCH_').lower()}"
    if var in env:
        return env[var], var
    return None


def job_from(env: Mapping[str, str], flag: str | None = None) -> str:
    """The job id alone, which is all that resolve and prune need."""
    problems: list[Problem] = []
    picked = _pick(flag, env, ENV_JOB)
    if picked is None:
        raise ValidationError([Problem(ENV_JOB, "not set (or pass --job)")])
    job = _segment(picked[1], picked[0], problems)
    if problems:
        raise ValidationError(problems)
    return job


def identity_from(
    env: Mapping[str, str],
    *,
    job: str | None = None,
    submission: str | int | None = None,
    execution: str | None = None,
) -> Identity:
    """The full identity a publisher needs; every missing or bad value is reported at once."""
    problems: list[Problem] = []
    values: dict[str, str] = {}
    for var, flag in (
        (ENV_JOB, job),
        (ENV_SUBMISSION, None if submission is None else str(submission)),
        (ENV_EXECUTION, execution),
    ):
        picked = _pick(flag, env, var)
        if picked is None:
            flag_name = "--" + var.removeprefix("JOBDISPATCH_").lower()
            problems.append(Problem(var, f"not set (or pass {flag_name})"))
            continue
        value, where = picked
        if var == ENV_SUBMISSION:
            if not re.fullmatch(r"[0-9]{1,9}", value.strip()) or int(value) < 1:
                problems.append(Problem(where, f"{value!r} is not a submission number (1, 2, ...)"))
                continue
            values[var] = value.strip()
        else:
            values[var] = _segment(where, value, problems)
    if problems:
        raise ValidationError(problems)
    return Identity(values[ENV_JOB], int(values[ENV_SUBMISSION]), values[ENV_EXECUTION])
