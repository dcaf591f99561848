"""Checking a JobSpec before anything is planned or created.

``validate`` reports every problem at once, each with its field path (``command``,
``recovery.rules[1].on[0]``), because someone fixing a job file wants the whole list, not one
error per try. It checks what any scheduler would choke on; an adapter checks what only its own
scheduler would refuse when it answers ``capabilities``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import timedelta

from jobdispatch.errors import Problem, ValidationError
from jobdispatch.types import (
    PENDING_CAUSES,
    Action,
    CauseKind,
    Charge,
    JobSpec,
    PendingRule,
    ProgressSource,
    Resources,
    Rule,
    StallMode,
    StallRule,
)

__all__ = ["MAX_BUDGET", "MAX_DURATION", "problems", "validate"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Where the checkpoint helper publishes and marks progress: set for every process from the job
#: file's ``[progress] root`` (launch.start_request), so job and supervisor agree on it.
ENV_CHECKPOINT_ROOT = "JOBDISPATCH_CHECKPOINT_ROOT"
#: Environment names the adapters set for every process; a spec may not override them.
RESERVED_ENV = frozenset(
    {
        "JOBDISPATCH_JOB",
        "JOBDISPATCH_SUBMISSION",
        "JOBDISPATCH_EXECUTION",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "NODE_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
    }
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
#: Past this, a number of nodes or processes is a typo, not a job.
MAX_NODES = 100_000
MAX_PROCS_PER_NODE = 1_024
MAX_GPUS_PER_NODE = 1_024
MAX_CPUS_PER_PROC = 65_536
#: Past this many recoveries of one rule, a budget is a typo (``10**20``), not a policy: a
#: job preempted every ten minutes for two months stays inside it.
MAX_BUDGET = 10_000
#: 1 PiB per node, in MiB: past this it is a unit mistake.
MAX_MEMORY_PER_NODE_MIB = 1 << 30
#: A queue, account, QoS, GPU type or adapter name: a scheduler word, never an option.
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")
#: A node feature (Slurm) or label (Kubernetes ``key=value``, ``key`` with a DNS prefix).
_CONSTRAINT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+/=:-]{0,252}$")


def _count(out: list[Problem], field: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        out.append(Problem(field, f"must be a whole number, got {value!r}"))
    elif value < low:
        out.append(Problem(field, f"must be at least {low}, got {value}"))
    elif value > high:
        out.append(Problem(field, f"must be at most {high}, got {value}"))


def _check_resources(res: Resources, out: list[Problem]) -> None:
    at = "resources"
    _count(out, f"{at}.gpus_per_node", res.gpus_per_node, 0, MAX_GPUS_PER_NODE)
    if res.cpus_per_proc is not None:
        _count(out, f"{at}.cpus_per_proc", res.cpus_per_proc, 1, MAX_CPUS_PER_PROC)
    if res.memory_per_node_mib is not None:
        _count(out, f"{at}.memory_per_node", res.memory_per_node_mib, 1, MAX_MEMORY_PER_NODE_MIB)
    for field in ("gpu_type", "queue", "account", "qos"):
        value = getattr(res, field)
        if value is not None and (not isinstance(value, str) or not _WORD.fullmatch(value)):
            out.append(
                Problem(
                    f"{at}.{field}",
                    "use 1 to 128 letters, digits, '_', '.', '+' or '-', starting with a letter "
                    f"or digit; got {value!r}",
                )
            )
    if res.gpu_type is not None and not res.gpus_per_node:
        out.append(Problem(f"{at}.gpu_type", "names a GPU type but gpus_per_node is 0"))
    for i, item in enumerate(res.constraints):
        if not isinstance(item, str) or not _CONSTRAINT.fullmatch(item):
            out.append(
                Problem(f"{at}.constraints[{i}]", f"is not a node feature or label: {item!r}")
            )
    if not isinstance(res.exclusive, bool):
        out.append(Problem(f"{at}.exclusive", f"must be true or false, got {res.exclusive!r}"))
    for name, table in res.adapter.items():
        if not _WORD.fullmatch(name):
            out.append(Problem(f"{at}.{name}", "is not an adapter name"))
        for key, value in table.items():
            where = f"{at}.{name}.{key}"
            if isinstance(value, tuple):
                if not all(isinstance(v, str) for v in value):
                    out.append(Problem(where, "a list may hold strings only"))
            elif not isinstance(value, str | int | bool):
                out.append(
                    Problem(
                        where,
                        f"must be a string, number, true/false or list of strings, "
                        f"got {type(value).__name__}",
                    )
                )


#: Past this, a duration is a typo, not a plan. A century keeps every ``now + duration`` the
#: supervisor and the adapters compute (a hold's end, a deadline) far inside what a datetime can
#: hold, so an absurd duration is refused here instead of overflowing in the middle of a step.
MAX_DURATION = timedelta(days=36_500)


def _duration_problem(value: timedelta) -> str | None:
    """Why ``value`` cannot be a positive duration, or None when it can."""
    if value <= timedelta(0):
        return f"must be positive, got {value}"
    if value > MAX_DURATION:
        return f"must be at most {MAX_DURATION.days} days, got {value.days} days"
    return None


def _check_rule(i: int, rule: Rule, seen: dict[object, str], out: list[Problem]) -> None:
    at = f"recovery.rules[{i}]"
    if not rule.on:
        out.append(Problem(f"{at}.on", "a rule must name at least one cause"))
    for j, kind in enumerate(rule.on):
        where = f"{at}.on[{j}]"
        if not kind.recoverable:
            out.append(Problem(where, f"{kind} is not a recoverable cause"))
        elif kind in seen:
            out.append(Problem(where, f"{kind} is already covered by {seen[kind]}"))
        else:
            seen[kind] = at
    if isinstance(rule.budget, bool) or not isinstance(rule.budget, int):
        out.append(Problem(f"{at}.budget", f"must be a whole number, got {rule.budget!r}"))
    elif rule.budget < 0:
        out.append(Problem(f"{at}.budget", f"must not be negative, got {rule.budget}"))
    elif rule.budget > MAX_BUDGET:
        out.append(Problem(f"{at}.budget", f"must be at most {MAX_BUDGET}, got {rule.budget}"))
    if rule.action is Action.HOLD:
        if rule.for_ is None or rule.for_ <= timedelta(0):
            out.append(Problem(f"{at}.for", "a hold needs a positive duration"))
        elif (why := _duration_problem(rule.for_)) is not None:
            out.append(Problem(f"{at}.for", f"a hold's duration {why}"))
    elif rule.for_ is not None:
        out.append(Problem(f"{at}.for", f"only a hold takes a duration, not {rule.action}"))
    if rule.action is Action.ESCALATE and rule.budget:
        out.append(Problem(f"{at}.budget", "escalate fails the job at once; it takes no budget"))
    if not isinstance(rule.charge, Charge):
        out.append(Problem(f"{at}.charge", f"must be every or no-advance, got {rule.charge!r}"))


#: The shortest interval progress may be recorded at: more often, and the record would grow
#: by an event per few steps, which is what the bound exists to prevent.
MIN_RECORD_EVERY = timedelta(seconds=10)


def _check_progress(source: ProgressSource, out: list[Problem]) -> None:
    root = source.root
    if not isinstance(root, str) or not root.strip() or "\x00" in root:
        out.append(
            Problem(
                "progress.root",
                f"must name a checkpoint root (a path, file:// or s3://), got {root!r}",
            )
        )
    if not isinstance(source.record_every, timedelta):
        out.append(Problem("progress.record_every", "must be a duration"))
    elif source.record_every < MIN_RECORD_EVERY:
        out.append(
            Problem(
                "progress.record_every",
                f"must be at least {MIN_RECORD_EVERY.total_seconds():g} s, got "
                f"{source.record_every}",
            )
        )
    elif source.record_every > MAX_DURATION:
        out.append(Problem("progress.record_every", f"must be at most {MAX_DURATION.days} days"))


def _check_pending(rule: PendingRule, out: list[Problem]) -> None:
    if not isinstance(rule.after, timedelta) or (why := _duration_problem(rule.after)):
        out.append(
            Problem(
                "pending.after",
                why if isinstance(rule.after, timedelta) else "must be a duration",
            )
        )
    if rule.cause not in PENDING_CAUSES:
        allowed = " or ".join(str(c) for c in PENDING_CAUSES)
        out.append(Problem("pending.cause", f"must be {allowed}, got {rule.cause}"))


def _check_stall(rule: StallRule, out: list[Problem]) -> None:
    if not isinstance(rule.after, timedelta) or (why := _duration_problem(rule.after)):
        out.append(
            Problem(
                "stall.after", why if isinstance(rule.after, timedelta) else "must be a duration"
            )
        )
    if rule.startup_grace is not None:
        if not isinstance(rule.startup_grace, timedelta):
            out.append(Problem("stall.startup_grace", "must be a duration"))
        elif rule.startup_grace < timedelta(0):
            out.append(
                Problem("stall.startup_grace", f"must not be negative, got {rule.startup_grace}")
            )
        elif rule.startup_grace > MAX_DURATION:
            out.append(Problem("stall.startup_grace", f"must be at most {MAX_DURATION.days} days"))
    if not isinstance(rule.mode, StallMode):
        out.append(Problem("stall.mode", f"must be enforce or observe, got {rule.mode!r}"))
    if not isinstance(rule.blind_after, timedelta) or (why := _duration_problem(rule.blind_after)):
        out.append(
            Problem(
                "stall.blind_after",
                why if isinstance(rule.blind_after, timedelta) else "must be a duration",
            )
        )


def _check_command(command: Sequence[str], out: list[Problem]) -> None:
    """The command is run as given, without a shell: each argument must be a string a process
    can receive (no NUL), and the program must name something."""
    if not command:
        out.append(Problem("command", "must not be empty"))
    for i, arg in enumerate(command):
        if not isinstance(arg, str):
            out.append(Problem(f"command[{i}]", f"must be a string, got {type(arg).__name__}"))
        elif "\x00" in arg:
            out.append(Problem(f"command[{i}]", "must not contain a NUL byte"))
    if command and isinstance(command[0], str) and not command[0].strip():
        out.append(Problem("command[0]", "the program must not be blank"))


def _check_env(env: Mapping[str, str], out: list[Problem]) -> None:
    """Each variable must be one a process can receive, and not one dispatch sets itself
    (the job's would be overwritten without a word)."""
    for name, env_value in env.items():
        where = f"env.{name}"
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            out.append(Problem(where, "is not a valid environment variable name"))
        elif name in RESERVED_ENV:
            out.append(Problem(where, "is set by dispatch for every process; choose another name"))
        if not isinstance(env_value, str):
            out.append(Problem(where, f"value must be a string, got {type(env_value).__name__}"))
        elif "\x00" in env_value:
            out.append(Problem(where, "value must not contain a NUL byte"))


def _check_recovery(spec: JobSpec, out: list[Problem]) -> dict[object, str]:
    """The recovery rules and the suspect exclusion. A rule charged only on no advance needs
    the job's checkpoint root, which is the rest of the spec's, so this takes the whole spec.

    Returns where each cause was first named (``seen``), for checks against other sections."""
    seen: dict[object, str] = {}
    for i, rule in enumerate(spec.recovery.rules):
        _check_rule(i, rule, seen, out)
        if rule.charge is Charge.NO_ADVANCE and spec.progress is None:
            out.append(
                Problem(
                    f"recovery.rules[{i}].charge",
                    "no-advance needs the job's checkpoint root ([progress] root) to tell "
                    "whether training advanced; without one every firing is charged",
                )
            )
    hold_for = spec.recovery.exclude_suspects_for
    if hold_for is not None:
        where = "recovery.exclude_suspects_for"
        if not isinstance(hold_for, timedelta):
            out.append(Problem(where, f"must be a duration, got {type(hold_for).__name__}"))
        elif why := _duration_problem(hold_for):
            out.append(Problem(where, why))
    return seen


def problems(spec: JobSpec) -> list[Problem]:
    """Every problem with ``spec``, in field order; empty when it is valid."""
    out: list[Problem] = []
    if spec.name and not _NAME.fullmatch(spec.name):
        out.append(
            Problem(
                "name",
                "use 1 to 63 letters, digits, '.', '_' or '-', "
                f"starting with a letter or digit; got {spec.name!r}",
            )
        )
    _check_command(spec.command, out)
    _count(out, "nodes", spec.nodes, 1, MAX_NODES)
    _count(out, "procs_per_node", spec.procs_per_node, 1, MAX_PROCS_PER_NODE)
    if spec.image is not None and (not spec.image.strip() or any(c.isspace() for c in spec.image)):
        out.append(
            Problem("image", f"must be an image reference without spaces, got {spec.image!r}")
        )
    if spec.working_dir is not None and (not spec.working_dir or "\x00" in spec.working_dir):
        out.append(Problem("working_dir", "must be a non-empty path without NUL bytes"))
    if spec.output is not None and (not spec.output or "\x00" in spec.output):
        out.append(Problem("output", "must be a non-empty path without NUL bytes"))
    _check_env(spec.env, out)
    _check_resources(spec.resources, out)
    if spec.time_limit is not None and (why := _duration_problem(spec.time_limit)):
        out.append(Problem("time_limit", why))
    seen = _check_recovery(spec, out)
    if spec.progress is not None:
        _check_progress(spec.progress, out)
        given = spec.env.get(ENV_CHECKPOINT_ROOT)
        if given is not None and given != spec.progress.root:
            out.append(
                Problem(
                    f"env.{ENV_CHECKPOINT_ROOT}",
                    f"is {given!r} but [progress] root is {spec.progress.root!r}: the job "
                    "would mark progress where the supervisor does not look; leave the "
                    "variable out (it is set from [progress] root)",
                )
            )
    if spec.pending is not None:
        _check_pending(spec.pending, out)
    if spec.stall is not None:
        _check_stall(spec.stall, out)
    elif CauseKind.STALLED in seen:
        out.append(
            Problem(
                seen[CauseKind.STALLED] + ".on",
                "names stalled, but the job has no stall rule ([stall]): it can never stall",
            )
        )
    return out


def validate(spec: JobSpec) -> None:
    """Raise :class:`ValidationError` listing every problem with ``spec``; return if valid."""
    found = problems(spec)
    if found:
        raise ValidationError(found, subject="job spec")
