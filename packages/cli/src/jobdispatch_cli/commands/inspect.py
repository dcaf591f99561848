"""Reading jobs: ``status``, ``list``, ``watch``, ``logs``, ``plugins``, ``capabilities`` and
``clusters``. Each takes ``--json``."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import click
import jobdispatch
from jobdispatch.errors import Invalid, NotFound, Unsupported
from jobdispatch.exitcodes import ExitCode
from jobdispatch.goodput import goodput as goodput_of
from jobdispatch.spi import ObjectRef, OutputReader
from jobdispatch.status import Status
from jobdispatch.types import State
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from jobdispatch_cli.commands import json_option, pass_app, print_json
from jobdispatch_cli.commands.running import extra_answers, interval_option, rank_option
from jobdispatch_cli.completion import complete_jobs
from jobdispatch_cli.config import store_label
from jobdispatch_cli.context import App
from jobdispatch_cli.goodput_view import job_data, job_view
from jobdispatch_cli.jobfile import load_job_file
from jobdispatch_cli.render import (
    capabilities_table,
    dumps,
    jobs_table,
    plugins_data,
    plugins_view,
    status_view,
    to_data,
    unreadable_data,
)
from jobdispatch_cli.timeline import build, render_svg, render_text

__all__ = ["object_of", "register"]


def object_of(status: Status, submission: int | None) -> tuple[int, ObjectRef]:
    """The canonical object of ``submission`` (default: the latest that has one)."""
    subs = [s for s in status.submissions if s.canonical is not None]
    if submission is not None:
        subs = [s for s in subs if s.n == submission]
        if not subs:
            raise NotFound(f"job {status.job} has no object for submission {submission}")
    if not subs:
        raise NotFound(f"job {status.job} has no object yet: it is {status.state}")
    chosen = subs[-1]
    assert chosen.canonical is not None
    return chosen.n, chosen.canonical


def _write_output(path: Path, text: str, option: str) -> None:
    """Write a file a person asked for; a folder that is missing is not found (exit 3), any
    other reason it cannot be written is bad input (exit 2), each naming the option and path."""
    try:
        path.write_text(text)
    except FileNotFoundError:
        msg = f"{option} {path}: no such folder {path.parent}"
        raise NotFound(msg) from None
    except OSError as exc:
        msg = f"{option} {path}: cannot be written: {exc.strerror or exc}"
        raise Invalid(msg) from None


def _status_command(group: click.Group) -> None:
    @group.command()
    @click.argument("job", shell_complete=complete_jobs)
    @click.option("--timeline", is_flag=True, help="Draw the job on a time axis.")
    @click.option(
        "--svg",
        type=click.Path(path_type=Path, dir_okay=False),
        help="Write the timeline as an SVG file.",
    )
    @click.option(
        "--goodput",
        "with_goodput",
        is_flag=True,
        help="Where the job's time went: productive, queued, lost to each cause (with "
        "--timeline or --svg, as a row of the picture).",
    )
    @json_option
    @pass_app
    def status(
        app: App, job: str, timeline: bool, svg: Path | None, with_goodput: bool, as_json: bool
    ) -> None:
        """Show JOB: its state and cause, each submission's executions, its history."""
        app.reads_only = True
        job = app.job(job)
        got = app.cluster().observer.get(job)
        figures = None
        price = None
        if with_goodput:
            figures = goodput_of(app.store().read(job), datetime.now(UTC))
            prices = app.cluster_config.prices
            price = prices.per_hour(figures.unit, figures.queue) if prices else None
        if svg is not None:
            _write_output(svg, render_svg(build(got, goodput=figures)), "--svg")
            app.err.print(f"wrote {svg}", style="dim")
        if as_json and figures is not None:
            click.echo(dumps(job_data(app.cluster_config.name, figures, price)))
        elif as_json:
            print_json(app, got)
        elif timeline:
            picture = build(got, goodput=figures)
            app.console.print(render_text(picture, width=min(app.console.width, 120)))
        elif figures is not None:
            app.console.print(job_view(figures, price))
        elif svg is None:
            app.console.print(status_view(got))


def _list_command(group: click.Group) -> None:
    @group.command(name="list")
    @click.option(
        "--state",
        "states",
        multiple=True,
        type=click.Choice([str(s) for s in State]),
        help="Only jobs in this state (repeat for several).",
    )
    @click.option("--active", is_flag=True, help="Only jobs that have not settled.")
    @json_option
    @pass_app
    def list_(app: App, states: tuple[str, ...], active: bool, as_json: bool) -> int:
        """List the store's jobs, oldest first.

        A job whose record cannot be read is named on standard error, after the others are
        listed, and the exit status is then 8. With --json it is in the list too, after the
        others, whatever --state says: {"job": ID, "state": null, "unreadable": {"message":
        WHAT IS WRONG, "revision": N or null}}; no readable job's entry has "unreadable"."""
        app.reads_only = True
        wanted = jobdispatch.Filter(states=[State(s) for s in states], settled=not active)
        found = app.cluster().observer.list(wanted)
        if as_json:
            print_json(app, [*found, *(unreadable_data(bad) for bad in found.unreadable)])
        elif not found and not found.unreadable:
            app.err.print("no jobs", style="dim")
        elif found:
            app.console.print(jobs_table(found))
        for bad in found.unreadable:
            app.err.print(str(bad), style="red", markup=False, highlight=False, soft_wrap=True)
        return ExitCode.UNREADABLE if found.unreadable else ExitCode.OK


def _watch_command(group: click.Group) -> None:
    @group.command()
    @click.argument("job", shell_complete=complete_jobs)
    @interval_option(
        "--every", least=0.05, default=1.0, help_text="Seconds between two looks at the job."
    )
    @pass_app
    def watch(app: App, job: str, every: float) -> None:
        """Show JOB live until it settles (Ctrl-C stops watching, not the job)."""
        job = app.job(job)
        app.reads_only = True
        observer = app.cluster().observer

        def view(s: Status) -> Group:
            return Group(status_view(s), render_text(build(s), width=min(app.console.width, 110)))

        got = observer.get(job)
        with Live(view(got), console=app.console, refresh_per_second=4) as live:
            while not got.settled:
                time.sleep(every)
                got = observer.get(job)
                live.update(view(got))


def _logs_command(group: click.Group) -> None:
    @group.command()
    @click.argument("job", shell_complete=complete_jobs)
    @click.option("-f", "--follow", is_flag=True, help="Keep printing until the object ends.")
    @rank_option("The rank whose output to print.")
    @click.option("--stderr", is_flag=True, help="Standard error instead of standard output.")
    @click.option("--submission", type=click.IntRange(min=1), help="Default: the latest.")
    @json_option("Print the output as JSON, with the submission, object, rank and stream.")
    @pass_app
    def logs(
        app: App,
        job: str,
        follow: bool,
        rank: int,
        stderr: bool,
        submission: int | None,
        as_json: bool,
    ) -> None:
        """Print a rank's output of JOB's latest (or given) submission."""
        app.reads_only = True
        if follow and as_json:
            raise Invalid("--follow and --json do not go together: JSON needs the whole output")
        cluster = app.cluster()
        job = app.job(job)
        n, ref = object_of(cluster.observer.get(job), submission)
        backend = cluster.backend
        if not isinstance(backend, OutputReader):
            raise Unsupported(f"adapter {backend.name!r} cannot read output")
        stream = "stderr" if stderr else "stdout"
        reader = backend.output(ref, stream=stream, follow=follow, rank=rank)
        if as_json:
            data = reader.read()
            print_json(
                app,
                {
                    "job": job,
                    "submission": n,
                    "object": ref.id,
                    "rank": rank,
                    "stream": stream,
                    "bytes": len(data),
                    "text": data.decode(errors="replace"),
                },
            )
            return
        out = sys.stdout.buffer
        while chunk := reader.read1(65536) if hasattr(reader, "read1") else reader.read(65536):
            out.write(chunk)
            out.flush()


def _plugins_command(group: click.Group) -> None:
    @group.command()
    @json_option
    @pass_app
    def plugins(app: App, as_json: bool) -> None:
        """What loaded (adapters, record stores, sinks...), from where, and what failed and why.

        Adapters show the adapter SPI version they were written for, beside the one this core
        speaks; one this core cannot drive is refused and listed as failed, naming both.
        """
        loaded = jobdispatch.plugins.load()
        if as_json:
            print_json(app, plugins_data(loaded))
        else:
            app.console.print(plugins_view(loaded))


def _capabilities_command(group: click.Group) -> None:
    @group.command()
    @click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False))
    @json_option
    @pass_app
    def capabilities(app: App, file: Path | None, as_json: bool) -> None:
        """What the cluster supports (for the job in FILE when given); unknown is shown."""
        backend = app.backend()
        spec = load_job_file(file).spec if file else None
        answers = backend.capabilities(spec)
        extra = extra_answers(backend)
        if as_json:
            print_json(app, {"capabilities": to_data(dict(answers)), "extra": to_data(extra)})
        else:
            app.console.print(capabilities_table(answers, extra=extra))


def _clusters_command(group: click.Group) -> None:
    @group.command()
    @json_option
    @pass_app
    def clusters(app: App, as_json: bool) -> None:
        """The clusters of the config file (and the built-in local one)."""
        config = app.config
        rows = [
            {
                "name": c.name,
                "adapter": c.adapter,
                "default": c.name == config.default_cluster,
                "source": c.source,
                "store": store_label(config, c.name),
            }
            for c in config.clusters.values()
        ]
        unusable = [
            {"name": name, "problems": [str(p) for p in problems]}
            for name, problems in sorted(config.unusable.items())
        ]
        if as_json:
            print_json(app, {"config": str(config.path), "clusters": rows, "unusable": unusable})
            return
        table = Table(show_edge=False)
        for column in ("name", "adapter", "source", "store"):
            table.add_column(column)
        for row in rows:
            name = Text(str(row["name"]), style="bold")
            if row["default"]:
                name.append(" (default)", style="dim")
            table.add_row(name, str(row["adapter"]), str(row["source"]), str(row["store"]))
        app.console.print(table)
        for cluster in unusable:
            app.err.print(
                f"warning: cluster {cluster['name']!r} cannot be used until this is fixed:",
                style="yellow",
                markup=False,
                highlight=False,
            )
            for line in cluster["problems"]:
                app.err.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
        if not config.exists:
            app.err.print(f"{config.path} does not exist: only the built-ins", style="dim")


def register(group: click.Group) -> None:
    """Add these commands to ``group``, one function each."""
    _status_command(group)
    _list_command(group)
    _watch_command(group)
    _logs_command(group)
    _plugins_command(group)
    _capabilities_command(group)
    _clusters_command(group)
