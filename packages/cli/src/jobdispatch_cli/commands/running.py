"""Getting jobs to run: ``submit``, ``plan``, ``run`` and ``supervise``."""

from __future__ import annotations

import logging
import math
import queue
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any, ParamSpec, TypeVar

import click
import jobdispatch
from jobdispatch.errors import DispatchError, Unavailable, Unreachable, Unsupported
from jobdispatch.exitcodes import ExitCode
from jobdispatch.plan import pending_assignment
from jobdispatch.spi import Discovery, ObjectRef, OutputReader
from jobdispatch.types import JobSpec, Plan, State, Support
from jobdispatch.validate import MAX_DURATION
from rich.text import Text

from jobdispatch_cli.commands import json_option, pass_app, print_json
from jobdispatch_cli.commands.observe import check_listen, metrics_options, start_metrics
from jobdispatch_cli.context import App
from jobdispatch_cli.durations import parse_duration
from jobdispatch_cli.jobfile import load_job_file
from jobdispatch_cli.render import (
    cause_text,
    pending_text,
    plan_view,
    sinks_table,
    state_text,
    to_data,
)
from jobdispatch_cli.report import Reporter
from jobdispatch_cli.sinkcheck import sink_reports, unknown_sinks
from jobdispatch_cli.timeline import build, render_text

#: The supervisor's own logger: what the command says about the store reads as the rest.
log = logging.getLogger("jobdispatch.supervise")

__all__ = ["Seconds", "register"]

P = ParamSpec("P")
T = TypeVar("T")


class _RankStreams:
    """``run --follow``: one rank's output of each submission's object, printed as it comes,
    between the job's own lines. A reader thread per object follows it until it ends; the
    console is shared under a lock so a line is never cut by another."""

    def __init__(self, app: App, backend: Any, rank: int) -> None:
        self.app = app
        self.backend = backend
        self.rank = rank
        self.lock = threading.Lock()
        self.seen: set[str] = set()
        self.threads: list[threading.Thread] = []
        if not isinstance(backend, OutputReader):
            raise Unsupported(f"adapter {backend.name!r} cannot read output: run without --follow")

    def print(self, line: Any) -> None:
        with self.lock:
            self.app.console.print(line, soft_wrap=True)

    def follow(self, status: Any) -> None:
        """Start following every canonical object not followed yet."""
        for sub in status.submissions:
            ref = sub.canonical
            if ref is None or ref.id in self.seen:
                continue
            self.seen.add(ref.id)
            thread = threading.Thread(
                target=self._copy, args=(ref,), name=f"output {ref.id}", daemon=True
            )
            thread.start()
            self.threads.append(thread)

    def _copy(self, ref: ObjectRef) -> None:
        try:
            reader = self.backend.output(ref, stream="stdout", follow=True, rank=self.rank)
            read = reader.read1 if hasattr(reader, "read1") else reader.read
            while chunk := read(65536):
                with self.lock:
                    self.app.console.file.write(chunk.decode(errors="replace"))
                    self.app.console.file.flush()
        except DispatchError as exc:
            self.print(Text(f"output of {ref.id} rank {self.rank}: {exc}", style="yellow"))

    def finish(self, timeout: float = 10.0) -> None:
        """Let the readers print what the ended objects wrote last."""
        for thread in self.threads:
            thread.join(timeout)


def _duration(_ctx: click.Context, _param: click.Parameter, value: str | None) -> timedelta | None:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _positive_duration(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> timedelta | None:
    """A duration that must be more than zero (``--lease-ttl``): refused while the options are
    read, before anything is submitted or served."""
    got = _duration(ctx, param, value)
    if got is not None and got <= timedelta(0):
        raise click.BadParameter(f"must be positive, got {value!r}")
    return got


class Seconds(click.FloatRange):
    """A number of seconds of at least ``least`` and at most the core's MAX_DURATION. click's
    FloatRange lets NaN through (every comparison with it is false), and a NaN poll makes every
    wait return at once: a busy loop. So NaN and infinities are refused by name, and so is a
    wait longer than a thread's wait can take (``1e300`` overflowed the reporter's wait)."""

    name = "seconds"

    def __init__(self, least: float) -> None:
        super().__init__(min=least, max=MAX_DURATION.total_seconds())

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            got = float(value)
        except (TypeError, ValueError):
            got = 0.0  # FloatRange says it is not a number
        if math.isnan(got) or math.isinf(got):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return super().convert(value, param, ctx)


def interval_option(
    name: str, *, least: float, default: float, help_text: str
) -> Callable[[Any], Any]:
    """An option of the :class:`Seconds` between two repetitions of what a command repeats (a
    page's refresh, a look at a job): at least ``least``, ``default`` unless told, shown."""
    return click.option(
        name, type=Seconds(least=least), default=default, show_default=True, help=help_text
    )


def supervisor_options(f: Any) -> Any:
    f = click.option(
        "--poll",
        type=Seconds(least=0.001),
        default=None,
        help="Longest wait, in seconds, between two looks at the cluster [default: the "
        "cluster's poll_interval, else its adapter's: slurm 30, local 0.5]; never below the "
        "poll floor.",
    )(f)
    return click.option(
        "--lease-ttl",
        callback=_positive_duration,
        metavar="DURATION",
        default="30s",
        show_default=True,
        help="How long this supervisor's ownership of a job lasts without renewal; another "
        "supervisor takes over this long after it dies.",
    )(f)


def rank_option(help_text: str) -> Callable[[Any], Any]:
    """``--rank``: which rank's output (0, the first, by default)."""
    return click.option(
        "--rank", type=click.IntRange(min=0), default=0, show_default=True, help=help_text
    )


def accept_option(f: Any) -> Any:
    return click.option(
        "--accept-unenforced",
        "accept",
        type=int,
        multiple=True,
        metavar="RULE",
        help="Accept that nobody enforces this rule (by index): a matching cause fails the job.",
    )(f)


def extra_answers(backend: Any) -> dict[str, Support]:
    """Answers an adapter gives beside the contract's capabilities (the local adapter's
    out-of-memory detection)."""
    memory = getattr(backend, "memory_support", None)
    return {"out-of-memory detection": memory()} if callable(memory) else {}


def _plan_summary(plan: Plan, spec: JobSpec) -> Text:
    text = Text()
    for a in plan.rules:
        text.append(f"rule {a.index}: ", style="bold")
        text.append(f"{a.effective.action} on {', '.join(str(k) for k in a.effective.on)}")
        text.append(f", budget {a.effective.budget}, enforced by the {a.enforcer}\n", style="dim")
    text.append("uncovered: ", style="bold")
    text.append(" ".join(str(k) for k in plan.uncovered) or "nothing", style="dark_orange")
    pending = pending_assignment(spec, plan)
    if pending is not None:
        text.append("\n")
        text.append_text(pending_text(pending))
    return text


@contextmanager
def _stop_on_signals(stop: Any) -> Iterator[threading.Event]:
    """Turn SIGINT and SIGTERM into ``stop()`` (and a set event) for the block's duration."""
    stopped = threading.Event()
    previous = {}

    def handler(signo: int, _frame: FrameType | None) -> None:
        stopped.set()
        stop()

    for signo in (signal.SIGINT, signal.SIGTERM):
        previous[signo] = signal.signal(signo, handler)
    try:
        yield stopped
    finally:
        for signo, old in previous.items():
            signal.signal(signo, old)


def _store_once_it_answers(app: App, poll: float | None, stopped: threading.Event) -> Any:
    """The record store, opened once it answers: a supervisor started while a shared store is
    away (its server restarting, cut off) waits for it, asking every poll, rather than exit;
    it says so once, and once when the store answers. None when stopped first. A store that
    refuses the credentials or the settings is no outage: that error ends the command."""
    told = False
    while True:
        try:
            store = app.store()
        except (Unavailable, Unreachable) as exc:
            pause = poll if poll is not None else app.pacing().interval
            if not told:
                log.warning(
                    "the record store does not answer: %s; waiting for it, asking every %g s",
                    exc,
                    pause,
                )
                told = True
            if stopped.wait(pause):
                return None
            continue
        if told:
            log.warning("the record store answers; supervising starts")
        return store


def _unless_away(read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
    """``read(...)``, or None while the record store is away: a report skipped then is caught
    up by the next one (the supervisor says once that the store is away and once it is back)."""
    try:
        return read(*args, **kwargs)
    except (Unavailable, Unreachable):
        return None


def _once_it_answers(read: Callable[[], T], stopped: threading.Event) -> T:
    """``read()``, asked again every second while the record store is away; a stop (Ctrl-C)
    asks once more, and lets that last answer or error stand."""
    while True:
        got = _unless_away(read)
        if got is not None:
            return got
        if stopped.wait(1.0):
            return read()


def _logging(verbose: bool) -> None:
    from rich.logging import RichHandler

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(show_path=False, console=None)],
    )


def _submit_command(group: click.Group) -> None:
    @group.command()
    @click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
    @accept_option
    @click.option(
        "--idempotency-key",
        default="",
        metavar="KEY",
        help="Submitting again with it returns the same job.",
    )
    @json_option
    @pass_app
    def submit(
        app: App, file: Path, accept: tuple[int, ...], idempotency_key: str, as_json: bool
    ) -> None:
        """Record the job in FILE; a `jobdispatch supervise` process launches it."""
        job_file = load_job_file(file)
        app.check_poll(job_file.spec, file)
        cluster = app.cluster()
        plan = cluster.operator.submit(
            job_file.spec,
            by=app.actor,
            supervised=True,
            idempotency_key=idempotency_key,
            accept_unenforced=accept,
        )
        if as_json:
            print_json(
                app,
                {
                    "job": plan.job,
                    "cluster": app.cluster_config.name,
                    "store": app.store_label,
                    "plan": to_data(plan),
                },
            )
            return
        head = Text("submitted ", style="green")
        head.append(f"{plan.job}", style="bold")
        head.append(f" ({job_file.spec.name or file.name}) on cluster {app.cluster_config.name}")
        app.console.print(head)
        app.console.print(_plan_summary(plan, job_file.spec))
        app.console.print(
            "it starts when a supervisor serves this store: `jobdispatch supervise` "
            "(or submit and supervise at once with `jobdispatch run`)",
            style="dim",
        )


def _plan_command(group: click.Group) -> None:
    @group.command()
    @click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
    @accept_option
    @json_option
    @click.option(
        "--show-submission",
        is_flag=True,
        help="Also print exactly what the adapter would create (batch script, command lines).",
    )
    @pass_app
    def plan(
        app: App, file: Path, accept: tuple[int, ...], as_json: bool, show_submission: bool
    ) -> None:
        """Show who would enforce each rule of FILE, and what nobody covers. Submits nothing.

        With --show-submission, also what the first submission would create on the cluster,
        exactly as Start would send it (names carry the placeholder job id "dryrun")."""
        job_file = load_job_file(file)
        app.check_poll(job_file.spec, file)
        backend = app.backend()
        if show_submission:
            dry = jobdispatch.preview(
                backend, job_file.spec, supervised=True, accept_unenforced=accept
            )
            made, submission = dry.plan, dry.submission
        else:
            made = jobdispatch.make_plan(
                backend, None, job_file.spec, supervised=True, accept_unenforced=accept
            )
            submission = None
        extra = extra_answers(backend)
        pending = pending_assignment(job_file.spec, made)
        sinks = app.sinks()
        kinds = {e.name: e.sink for e in app.config.escalations} | {"log": "log"}
        reports = sink_reports(sinks, kinds, job_file.spec)
        missing = unknown_sinks(sinks, job_file.spec)
        if as_json:
            data = to_data(made)
            data["extra"] = to_data(extra)
            data["pending"] = to_data(pending)
            data["cluster"] = app.cluster_config.name
            data["sinks"] = [r.as_data() for r in reports]
            data["unknown_sinks"] = missing
            if submission is not None:
                data["submission"] = submission
            print_json(app, data)
            return
        app.console.print(
            plan_view(made, cluster=app.cluster_config.name, extra=extra, pending=pending)
        )
        app.console.print(sinks_table(reports))
        for name in missing:
            warning = f"notify_sinks names {name!r}, which this cluster's supervisors lack"
            app.console.print(Text(warning, style="yellow"))
        if submission is not None:
            app.console.print("\n[bold]What the first submission creates[/bold]")
            app.console.print(submission, markup=False, highlight=False, soft_wrap=True)


def _run_command(group: click.Group) -> None:
    @group.command()
    @click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
    @accept_option
    @supervisor_options
    @click.option("--timeline/--no-timeline", default=True, help="Draw the timeline at the end.")
    @click.option(
        "-f",
        "--follow",
        is_flag=True,
        help="Stream a rank's output (each submission's, as it starts) while supervising.",
    )
    @rank_option("With --follow: the rank whose output to print.")
    @pass_app
    def run(
        app: App,
        file: Path,
        accept: tuple[int, ...],
        poll: float | None,
        lease_ttl: timedelta,
        timeline: bool,
        follow: bool,
        rank: int,
    ) -> int:
        """Submit FILE and supervise it here until it settles, showing what happens.

        Exits 0 when the job succeeds, 1 when it fails or is cancelled, 130 when interrupted
        (the job goes on: `jobdispatch supervise` picks it up).
        """
        job_file = load_job_file(file)
        app.check_poll(job_file.spec, file, poll)
        cluster = app.cluster()
        # Before submitting: an adapter that cannot read output refuses --follow up front, and
        # a poll the cluster must not be asked at is refused.
        streams = _RankStreams(app, cluster.backend, rank) if follow else None
        # What the supervisor's own polls showed, for the report: it asks the scheduler
        # nothing more (a query per report would double the load of a quiet job).
        seen: queue.SimpleQueue[Discovery] = queue.SimpleQueue()
        supervisor = app.supervisor(poll, lease_ttl, lambda _job, found: seen.put(found))
        plan = cluster.operator.submit(
            job_file.spec, by=app.actor, supervised=True, accept_unenforced=accept
        )
        job = plan.job or ""
        head = Text("job ", style="dim")
        head.append(job, style="bold")
        head.append(f"  {job_file.spec.name or file.name} on cluster {app.cluster_config.name}")
        app.console.print(head)
        app.console.print(_plan_summary(plan, job_file.spec))
        failure: list[BaseException] = []

        def supervise() -> None:
            try:
                supervisor.run(job)
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=supervise, name="supervisor", daemon=True)
        reporter = Reporter()
        last: Discovery | None = None
        with _stop_on_signals(supervisor.stop) as interrupted:
            thread.start()
            while True:
                alive = thread.is_alive()
                try:
                    last = seen.get(timeout=0.2)
                    while not seen.empty():
                        last = seen.get_nowait()
                except queue.Empty:
                    if alive:
                        continue
                status = None if last is None else _unless_away(cluster.observer.get, job, last)
                if status is not None:
                    for line in reporter.news(status):
                        if streams is not None:
                            streams.print(line)
                        else:
                            app.console.print(line, soft_wrap=True)
                    if streams is not None:
                        streams.follow(status)
                if not alive:
                    break
        thread.join()
        if streams is not None:
            streams.finish()
        if failure:
            raise failure[0]
        status = _once_it_answers(lambda: cluster.observer.get(job, last), interrupted)
        if timeline and status.submissions:
            app.console.print(render_text(build(status), width=min(app.console.width, 110)))
        if interrupted.is_set() and not status.settled:
            note = Text("stopped supervising; job ", style="yellow")
            note.append(job, style="bold")
            note.append(
                f" is {status.state} and goes on: `jobdispatch supervise` resumes it, "
                f"`jobdispatch cancel {job}` ends it"
            )
            app.err.print(note)
            return ExitCode.INTERRUPTED
        line = Text("outcome: ")
        line.append_text(state_text(status.state))
        line.append("  ")
        line.append_text(cause_text(status.cause))
        app.console.print(line)
        return ExitCode.OK if status.state is State.SUCCEEDED else ExitCode.FAILED


def _supervise_command(group: click.Group) -> None:
    @group.command()
    @supervisor_options
    @click.option("-v", "--verbose", is_flag=True, help="Log every step the supervisor takes.")
    @click.option(
        "--metrics-listen",
        metavar="HOST:PORT",
        default=None,
        help="Also serve Prometheus metrics of the store's records there, read-only, as "
        "`jobdispatch metrics` does.",
    )
    @metrics_options
    @pass_app
    def supervise(
        app: App,
        poll: float | None,
        lease_ttl: timedelta,
        verbose: bool,
        metrics_listen: str | None,
        per_job: bool,
    ) -> None:
        """Serve every unsettled job of the store until stopped (SIGTERM or Ctrl-C).

        Several supervisors may serve one store: they share its jobs out evenly, each job is
        owned by one at a time, and the others take over when its owner's lease lapses.
        """
        _logging(verbose)
        if metrics_listen is not None:
            check_listen(metrics_listen)  # refused before waiting for anything
        with _stop_on_signals(lambda: None) as stopped:
            store = _store_once_it_answers(app, poll, stopped)
        if store is None:
            app.err.print("stopped before the record store answered", style="dim")
            return
        endpoint = None
        if metrics_listen is not None:
            # Once the store is open for writing: an LMDB store opened read-only first would
            # keep this process from opening it for writing.
            endpoint = start_metrics(app, metrics_listen, per_job=per_job, lease_ttl=lease_ttl)
            app.err.print(f"serving metrics at {endpoint.url}", style="dim", soft_wrap=True)
        try:
            _supervise(app, store, poll, lease_ttl)
        finally:
            if endpoint is not None:
                endpoint.stop()

    def _supervise(app: App, store: Any, poll: float | None, lease_ttl: timedelta) -> None:
        cluster = app.cluster()
        reporters: dict[str, Reporter] = {}
        told: dict[str, tuple[int, object]] = {}

        def report(job: str, found: Discovery) -> None:
            # Called by the supervisor after each job's passes with what its own batched poll
            # showed: the report reads the record, never the scheduler. A job is followed from
            # its first poll until its settling is told; one whose record and observation did
            # not change since the last report is not folded again.
            key = (store.read(job).revision, found.objects)
            if told.get(job) == key:
                return
            told[job] = key
            status = cluster.observer.get(job, found)
            reporter = reporters.setdefault(job, Reporter())
            for line in reporter.news(status):
                app.console.print(Text(f"{job}  ", style="bold") + line, soft_wrap=True)
            if status.settled:
                reporters.pop(job, None)
                told.pop(job, None)

        supervisor = app.supervisor(poll, lease_ttl, report)
        app.err.print(
            f"supervising {app.store_label} on cluster {app.cluster_config.name} "
            f"as {supervisor.holder}, polling every {supervisor.pacing.interval:g} s "
            f"(floor {supervisor.pacing.floor:g} s); escalations to "
            f"{', '.join(s.name for s in supervisor.executor.sinks)}; Ctrl-C or SIGTERM stops",
            style="dim",
        )
        with _stop_on_signals(supervisor.stop):
            supervisor.serve()
        app.err.print("stopped; every lease was released", style="dim")


def register(group: click.Group) -> None:
    """Add these commands to ``group``, one function each."""
    _submit_command(group)
    _plan_command(group)
    _run_command(group)
    _supervise_command(group)
