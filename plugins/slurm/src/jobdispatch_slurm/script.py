"""The batch script and the sbatch argument list for one Start.

Nothing the user wrote is ever interpreted by a shell as code: every word of the command and
every environment value is quoted with :func:`shlex.quote` into a bash script that sbatch reads
on its standard input, and every sbatch option is one argument of a list (quoted again by the
SSH transport). So quotes, ``$()``, backticks, newlines, ``;|&`` and any unicode reach the job
as the exact bytes given; the only things refused are those no process could receive (a NUL
byte) or no shell could name (an environment variable that is not an identifier).

A program that cannot be started is told apart from a program that exits 126 or 127 itself
(docs/specs/0008 §6): every process the job runs (the batch script's command and, under srun,
every rank) is started by bash with ``execfail`` set, so a failed ``exec`` returns to the
script instead of ending it. Only then does the script write :data:`LAUNCH_MARK` with the
object's name and execution onto its standard error (srun forwards a rank's standard error to
the job's) and exit with bash's own status. The adapter looks for that line only when an
ended run shows one of :data:`EXEC_FAILED_CODES`; an application's own 126 or 127 leaves no
such line, so it stays ``non-zero-exit``.

A working directory that cannot be entered is a launch failure too, as the local adapter has it:
slurmstepd does not fail a job whose ``--chdir`` is missing on its node but runs it in ``/tmp``
(docs/specs/0008 §2). So the batch script, and under srun every rank, first enters the
directory itself; where it cannot, it writes the launch mark and exits 127, which the adapter
reads the same way as a program that cannot start. The check is made where the job runs, so a
folder present on the login node but missing on a compute node fails too.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from datetime import timedelta

import attrs
from jobdispatch.errors import Invalid
from jobdispatch.spi import StartRequest

from jobdispatch_slurm import holds

__all__ = [
    "EXEC_FAILED_CODES",
    "LAUNCH_MARK",
    "RESOURCE_SCHEMA",
    "Submission",
    "directives",
    "launch_mark",
    "render",
    "render_preview",
    "requeue_budget",
]

_WORD_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$"

#: The ``[resources.slurm]`` table: an allow-list of sbatch settings with no portable field,
#: each typed and checked, so a job file can never smuggle a free-form option into sbatch.
RESOURCE_SCHEMA: Mapping[str, object] = {
    "type": "object",
    "properties": {
        "reservation": {
            "type": "string",
            "pattern": _WORD_PATTERN,
            "description": "sbatch --reservation",
        },
        "licenses": {
            "type": "array",
            "items": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]{1,64}(:[0-9]{1,6})?$"},
            "description": "sbatch --licenses, each NAME or NAME:COUNT",
        },
        "hint": {
            "enum": ["compute_bound", "memory_bound", "multithread", "nomultithread"],
            "description": "sbatch --hint",
        },
        "nice": {
            "type": "integer",
            "minimum": 0,
            "maximum": 2147483645,
            "description": "sbatch --nice: lower this job's priority",
        },
    },
}

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A node name ``--exclude`` may carry: a hostname, never a list or a range of its own.
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

#: The first word of the line a job writes to its standard error when a program cannot start.
LAUNCH_MARK = "jobdispatch-launch-failed"
#: The statuses bash gives when ``exec`` fails: 126 (found, not executable), 127 (not found).
#: The script also exits 127, with the mark, when it cannot enter the working directory.
EXEC_FAILED_CODES = frozenset({126, 127})
#: The status the script exits with when it cannot enter the working directory.
NO_WORKING_DIR_CODE = 127

#: Run "$@" in place of this shell; if the exec fails, say so on a line of its own and exit with
#: bash's status. The same lines start the batch script's command and, under srun, each rank.
_EXEC = (
    'exec -- "$@"\n'
    "jd_status=$?\n"
    f"printf '{LAUNCH_MARK} %s %s: rank %s on %s cannot start %q (exit %s)\\n' "
    '"$JOBDISPATCH_OBJECT" "${JOBDISPATCH_EXECUTION:-0}" "${SLURM_PROCID:-0}" '
    '"${SLURMD_NODENAME:-$(hostname)}" "$1" "$jd_status" >&2\n'
    'exit "$jd_status"\n'
)


def _enter(working_dir: str) -> str:
    """Lines that enter ``working_dir`` or, failing that, write the launch mark and exit.

    sbatch makes a relative ``--chdir`` absolute against the directory it ran in, which the job
    sees as ``$SLURM_SUBMIT_DIR`` (ranks inherit it), so the same path is entered here."""
    path = shlex.quote(working_dir)
    if not working_dir.startswith("/"):
        path = '"$SLURM_SUBMIT_DIR"/' + path
    return (
        f"if ! cd -- {path} 2>/dev/null; then\n"
        f"  printf '{LAUNCH_MARK} %s %s: rank %s on %s cannot enter the working directory %q"
        f" (exit {NO_WORKING_DIR_CODE})\\n' "
        '"$JOBDISPATCH_OBJECT" "${JOBDISPATCH_EXECUTION:-0}" "${SLURM_PROCID:-0}" '
        f'"${{SLURMD_NODENAME:-$(hostname)}}" {path} >&2\n'
        f"  exit {NO_WORKING_DIR_CODE}\n"
        "fi\n"
    )


def launch_mark(name: str, execution: int) -> str:
    """The start of the line execution ``execution`` of object ``name`` writes when one of its
    programs cannot be started (what the adapter searches the job's standard error for)."""
    return f"{LAUNCH_MARK} {name} {execution}: "


@attrs.frozen
class Submission:
    """What Start hands to sbatch: its options and the script for its standard input."""

    options: tuple[str, ...]
    script: str
    stdout: str
    stderr: str


def _no_nul(what: str, value: str) -> str:
    if "\x00" in value:
        msg = f"{what} contains a NUL byte, which no process can be given"
        raise Invalid(msg)
    return value


def _minutes(limit: timedelta) -> str:
    """Slurm keeps time limits in whole minutes; a limit is rounded up, never cut short."""
    minutes = max(1, math.ceil(limit.total_seconds() / 60))
    return str(minutes)


def requeue_budget(request: StartRequest) -> int | None:
    """The number of native requeues the offer allows, or None when none is offered.

    Slurm has one restart counter for every way a job is requeued, so several rules enforced
    natively share it: the smallest remaining budget bounds them all (docs/specs/0008 §5).
    """
    offer = request.native
    if not offer.rules:
        return None
    budgets = [offer.remaining.get(i, 0) for i in offer.rules]
    return max(0, min(budgets))


def directives(
    request: StartRequest,
    *,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    mem_per_cpu: int | None = None,
) -> list[str]:
    """The ``#SBATCH`` lines for the spec's resources, the site's defaults filling what the spec
    leaves out. Every value is a validated word or number, so a line cannot carry a second
    option; they sit in the script, where ``scontrol write batch_script`` shows them."""
    res = request.spec.resources
    table = res.adapter.get("slurm", {})
    options: list[str] = []
    queue = res.queue or partition
    if queue:
        options.append(f"--partition={queue}")
    if res.account or account:
        options.append(f"--account={res.account or account}")
    if res.qos or qos:
        options.append(f"--qos={res.qos or qos}")
    if res.gpus_per_node:
        kind = f"{res.gpu_type}:" if res.gpu_type else ""
        options.append(f"--gpus-per-node={kind}{res.gpus_per_node}")
    if res.cpus_per_proc is not None:
        options.append(f"--cpus-per-task={res.cpus_per_proc}")
    if res.memory_per_node_mib is not None:
        # --mem and --mem-per-cpu exclude each other: the spec's own figure wins.
        options.append(f"--mem={res.memory_per_node_mib}M")
    elif mem_per_cpu:
        options.append(f"--mem-per-cpu={mem_per_cpu}")
    if res.constraints:
        options.append("--constraint=" + "&".join(res.constraints))
    if res.exclusive:
        options.append("--exclusive")
    if request.exclude:
        options.append("--exclude=" + ",".join(_node(n) for n in request.exclude))
    if "reservation" in table:
        options.append(f"--reservation={table['reservation']}")
    licenses = table.get("licenses")
    if isinstance(licenses, tuple) and licenses:
        options.append("--licenses=" + ",".join(licenses))
    if "hint" in table:
        options.append(f"--hint={table['hint']}")
    if "nice" in table:
        options.append(f"--nice={table['nice']}")
    for option in options:
        if any(c.isspace() for c in option):
            msg = f"sbatch option {option!r} contains white space"
            raise Invalid(msg)
    return [f"#SBATCH {option}" for option in options]


def _node(name: str) -> str:
    """A suspect node as ``--exclude`` names it; a name that could widen the list (a comma, a
    bracket range) or break the line is refused."""
    if not _NODE.fullmatch(name):
        msg = f"suspect node {name!r} is not a node name --exclude can carry"
        raise Invalid(msg)
    return name


def render(
    request: StartRequest,
    *,
    output_dir: str,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    mem_per_cpu: int | None = None,
    signal: str | None = None,
    container: bool = False,
    extra_env: Mapping[str, str] | None = None,
) -> Submission:
    """The sbatch options and script for ``request``, gated at :data:`holds.GATE`.

    The options on sbatch's command line are the adapter's own mechanics (the gate, the output
    files, the shape); the resources the spec asks for are ``#SBATCH`` lines of the script.
    """
    spec = request.spec
    name = request.name
    stdout = spec.output or f"{output_dir.rstrip('/')}/{name}.out"
    stderr = f"{output_dir.rstrip('/')}/{name}.err"
    options: list[str] = [
        "--parsable",
        f"--job-name={name}",
        f"--begin={holds.slurm_time(holds.GATE)}",
        f"--output={_no_nul('spec.output', stdout)}",
        f"--error={stderr}",
        "--open-mode=append",
        f"--nodes={spec.nodes}",
        f"--ntasks-per-node={spec.procs_per_node}",
    ]
    budget = requeue_budget(request)
    options.append("--requeue" if budget else "--no-requeue")
    if spec.time_limit is not None:
        options.append(f"--time={_minutes(spec.time_limit)}")
    if spec.working_dir:
        options.append(f"--chdir={_no_nul('spec.working_dir', spec.working_dir)}")
    if spec.name:
        options.append(f"--comment={_no_nul('spec.name', spec.name)}")
    if signal:
        options.append(f"--signal={signal}")
    if container and spec.image:
        options.append(f"--container={_no_nul('spec.image', spec.image)}")
    lines = directives(
        request, partition=partition, account=account, qos=qos, mem_per_cpu=mem_per_cpu
    )
    script = _script(request, budget, extra_env or {}, lines)
    return Submission(tuple(options), script, stdout, stderr)


def render_preview(submission: Submission) -> str:
    """A submission as the dry run prints it: the sbatch command line, then the script."""
    return "$ " + shlex.join(["sbatch", *submission.options]) + "\n" + submission.script


def _exports(env: Mapping[str, str]) -> list[str]:
    lines = []
    for key, value in env.items():
        if not _IDENT.fullmatch(key):
            msg = f"environment variable name {key!r} is not a shell identifier"
            raise Invalid(msg)
        lines.append(f"export {key}={shlex.quote(_no_nul(f'env {key}', value))}")
    return lines


def _script(
    request: StartRequest, budget: int | None, extra: Mapping[str, str], sbatch: Sequence[str]
) -> str:
    spec = request.spec
    if not spec.command:
        msg = "spec.command is empty"
        raise Invalid(msg)
    for i, word in enumerate(spec.command):
        _no_nul(f"spec.command[{i}]", word)
    lines = [
        "#!/bin/bash",
        *sbatch,
        f"# jobdispatch: {request.name}. Every word below is quoted; the job sees them verbatim.",
    ]
    if budget:
        # Native requeue budget (0008 §5): once this run's restart count reaches the budget,
        # clear the requeue bit, so the next preemption or node failure ends the job.
        lines += [
            f'if [ "${{SLURM_RESTART_COUNT:-0}}" -ge {budget} ]; then',
            '  scontrol update JobId="$SLURM_JOB_ID" Requeue=0 >/dev/null 2>&1 ||'
            ' echo "jobdispatch: could not clear the requeue bit" >&2',
            "fi",
        ]
    env: dict[str, str] = {
        "JOBDISPATCH_JOB": request.job,
        "JOBDISPATCH_SUBMISSION": str(request.submission),
        "JOBDISPATCH_ATTEMPT": str(request.attempt),
        "JOBDISPATCH_OBJECT": request.name,
    }
    env.update(extra)
    env.update(spec.env)
    env.update(request.env)
    lines += _exports(env)
    lines.append('export JOBDISPATCH_EXECUTION="${SLURM_RESTART_COUNT:-0}"')
    command: Sequence[str] = spec.command
    enter = _enter(spec.working_dir) if spec.working_dir else ""
    if spec.nodes * spec.procs_per_node > 1:
        # Each rank resolves its program on its own node: the same exec-or-mark lines run
        # there, under bash, before the program replaces them (same pid, same signals).
        command = [
            "srun",
            f"--nodes={spec.nodes}",
            f"--ntasks-per-node={spec.procs_per_node}",
            "--kill-on-bad-exit=1",
            "--",
            "/bin/bash",
            "-c",
            "shopt -s execfail\n" + enter + _EXEC,
            "jobdispatch-rank",
            *command,
        ]
    lines.append("shopt -s execfail")
    lines.append("set -- " + shlex.join(command))
    return "\n".join(lines) + "\n" + enter + _EXEC
