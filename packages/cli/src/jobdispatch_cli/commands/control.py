"""Acting on jobs: ``cancel``, ``hold``, ``release``, ``resubmit``, ``give-up``, ``requeue``,
``abandon`` and ``supersede``. Every action is recorded with its actor (``--as``, default the OS
user)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import attrs
import click
from jobdispatch.errors import DispatchError
from jobdispatch.exitcodes import ExitCode, code_for
from jobdispatch.types import JobID, State
from rich.text import Text

from jobdispatch_cli.commands import json_option, pass_app, print_json
from jobdispatch_cli.commands.running import _duration, accept_option
from jobdispatch_cli.completion import complete_jobs
from jobdispatch_cli.context import App
from jobdispatch_cli.jobfile import load_job_file

__all__ = ["register"]

F = TypeVar("F", bound=Callable[..., Any])


def reason_option(f: F) -> F:
    return click.option("--reason", default="", help="Why, for the record.")(f)


def _done(app: App, what: str, job: str) -> None:
    line = Text(f"{what} ", style="green")
    line.append(job, style="bold")
    line.append(f" (as {app.actor})", style="dim")
    app.console.print(line)


@attrs.frozen
class Chosen:
    """Which jobs a command acts on, as its options said: ``JOB...`` (ids, id prefixes or
    names), or ``every`` job that has not settled, narrowed by ``states`` and ``name``."""

    jobs: tuple[str, ...]
    every: bool
    states: tuple[str, ...]
    name: str | None


def jobs_options(f: F) -> F:
    """``JOB...`` (ids, id prefixes or names) or ``--all`` narrowed by ``--state``/``--name``,
    handed to the command as one ``chosen`` (:class:`Chosen`)."""

    command = f

    @functools.wraps(command)
    def with_chosen(
        *args: Any,
        jobs: tuple[str, ...],
        every: bool,
        states: tuple[str, ...],
        name: str | None,
        **kwargs: Any,
    ) -> Any:
        return command(*args, chosen=Chosen(jobs, every, states, name), **kwargs)

    f = cast("F", with_chosen)
    f = click.option("--name", metavar="NAME", help="With --all: only jobs of this name.")(f)
    f = click.option(
        "--state",
        "states",
        multiple=True,
        type=click.Choice([s.value for s in State]),
        help="With --all: only jobs in this state (repeatable).",
    )(f)
    f = click.option("--all", "every", is_flag=True, help="Every job that has not settled.")(f)
    return click.argument("jobs", nargs=-1, metavar="[JOB]...", shell_complete=complete_jobs)(f)


def _each(app: App, which: Chosen, act: Callable[[JobID], None]) -> int:
    """Act on every job chosen; a job that fails is told and the others still go. The exit
    status is the first failure's (0 when all went)."""
    states = [State(s) for s in which.states]
    chosen = app.select_jobs(which.jobs, every=which.every, states=states, name=which.name)
    if which.every and not chosen:
        app.err.print("no job matches", style="dim")
    code = ExitCode.OK
    for job in chosen:
        try:
            act(job)
        except DispatchError as exc:
            if len(chosen) == 1:
                raise
            app.err.print(f"{job}: {exc}", style="red", markup=False, highlight=False)
            code = code or code_for(exc, otherwise=ExitCode.USAGE)
    return code


def _cancelled(app: App, job: str, receipt: Any) -> None:
    if not receipt.committed:
        app.console.print(f"job {job} is {receipt.already} already: nothing to cancel")
        return
    _done(app, "cancelled", job)
    if receipt.cleanup_complete:
        app.console.print("clean-up complete: nothing of it is live", style="dim")
    else:
        live = ", ".join(r.id for r in receipt.live)
        app.console.print(f"clean-up pending: still live: {live}", style="yellow")
    if receipt.cessation_unproven:
        nodes = ", ".join(receipt.cessation_unproven)
        app.console.print(f"processes may live on: {nodes}", style="yellow")


#: The actions on one JOB that take nothing but a reason: (command, the method of
#: :class:`~jobdispatch.cluster.Operator` it calls, what the confirmation says was done, the
#: command's help). The method is named, not imported: the commands are registered for
#: ``--help``, which must not import the core.
_ONE_JOB_ACTIONS: tuple[tuple[str, str, str, str], ...] = (
    (
        "resubmit",
        "resubmit",
        "resubmission asked for",
        "Start JOB again as a new submission (the current one is stopped first).",
    ),
    (
        "give-up",
        "give_up",
        "gave up on",
        "Stop recovering JOB: it fails with the cause of its last execution.",
    ),
    (
        "requeue",
        "requeue",
        "requeue asked for",
        "Rerun JOB's running object in place, where the cluster can (Slurm, local).",
    ),
)


def _one_job_command(group: click.Group, name: str, act: str, done: str, doc: str) -> None:
    """Add the command ``name``: resolve JOB, call the operator's method ``act``, confirm."""

    @group.command(name=name, help=doc)
    @click.argument("job", shell_complete=complete_jobs)
    @reason_option
    @pass_app
    def command(app: App, job: str, reason: str) -> None:
        job = app.job(job)
        getattr(app.cluster().operator, act)(job, by=app.actor, reason=reason)
        _done(app, done, job)


def register(group: click.Group) -> None:
    @group.command()
    @jobs_options
    @reason_option
    @json_option
    @pass_app
    def cancel(app: App, chosen: Chosen, reason: str, as_json: bool) -> int:
        """Cancel each JOB: commit the outcome, then stop whatever of it is live."""
        receipts: list[Any] = []

        def one(job: JobID) -> None:
            receipt = app.cluster().operator.cancel(job, by=app.actor, reason=reason)
            if as_json:
                receipts.append(receipt)
                return
            _cancelled(app, job, receipt)

        code = _each(app, chosen, one)
        if as_json:
            one_only = len(receipts) == 1 and not chosen.every
            print_json(app, receipts[0] if one_only else receipts)
        return code

    @group.command()
    @jobs_options
    @reason_option
    @click.option(
        "--for",
        "for_",
        callback=_duration,
        metavar="DURATION",
        help="Release by itself after this long (90s, 10m, 1h30m, 2d).",
    )
    @pass_app
    def hold(app: App, chosen: Chosen, reason: str, for_: timedelta | None) -> int:
        """Hold each JOB: nothing new of it starts until it is released."""
        until = datetime.now(UTC) + for_ if for_ is not None else None

        def one(job: JobID) -> None:
            app.cluster().operator.hold(job, by=app.actor, reason=reason, until=until)
            _done(app, "held", job)

        return _each(app, chosen, one)

    @group.command()
    @jobs_options
    @reason_option
    @pass_app
    def release(app: App, chosen: Chosen, reason: str) -> int:
        """Release each JOB's hold."""

        def one(job: JobID) -> None:
            app.cluster().operator.release(job, by=app.actor, reason=reason)
            _done(app, "released", job)

        return _each(app, chosen, one)

    for name, act, done, doc in _ONE_JOB_ACTIONS:
        _one_job_command(group, name, act, done, doc)

    @group.command()
    @click.argument("job", shell_complete=complete_jobs)
    @click.argument("submission", type=click.IntRange(min=1))
    @click.argument("attempt", type=click.IntRange(min=1))
    @reason_option
    @pass_app
    def abandon(app: App, job: str, submission: int, attempt: int, reason: str) -> None:
        """Give up on attempt ATTEMPT of submission SUBMISSION of JOB: a start whose outcome
        stayed unknown. Do it once you have checked that no object named
        jd-JOB-SUBMISSION-ATTEMPT exists (the escalation unresolved:SUBMISSION asks for
        this)."""
        job = app.job(job)
        app.cluster().operator.abandon(job, submission, attempt, by=app.actor, reason=reason)
        _done(app, f"abandoned attempt {submission}.{attempt} of", job)

    @group.command()
    @click.argument("job", shell_complete=complete_jobs)
    @click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False))
    @reason_option
    @accept_option
    @json_option
    @pass_app
    def supersede(
        app: App, job: str, file: Path | None, reason: str, accept: tuple[int, ...], as_json: bool
    ) -> None:
        """Replace JOB by a new job (from FILE, or JOB's own spec); JOB is cancelled first."""
        job = app.job(job)
        spec = load_job_file(file).spec if file is not None else None
        plan = app.cluster().operator.supersede(
            job, by=app.actor, reason=reason, spec=spec, accept_unenforced=accept
        )
        if as_json:
            print_json(app, {"job": plan.job, "supersedes": job})
            return
        line = Text("superseded ", style="green")
        line.append(job, style="bold")
        line.append(" by ")
        line.append(str(plan.job), style="bold")
        app.console.print(line)
