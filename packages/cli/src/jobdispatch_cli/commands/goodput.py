"""``goodput``: where the time of a cluster's jobs went, by part, cause, rule and job.

It reads the cluster's records (every one, or the JOBs named), and hands them to the core's
pure :func:`jobdispatch.goodput.report` with the window and filters given: the figures are
the core's, this only selects, reads and shows, and keeps settled jobs' figures in a cache
(:mod:`jobdispatch_cli.goodput_cache`) so a later report need not read those records again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
from jobdispatch.errors import Invalid, Unreadable
from jobdispatch.exitcodes import ExitCode
from jobdispatch.goodput import JobSummary, Selection, report
from jobdispatch.records import events as ev
from jobdispatch.records.store import ListFilter, Records, Revisions
from jobdispatch.types import State

from jobdispatch_cli.commands import json_option, pass_app
from jobdispatch_cli.completion import complete_jobs
from jobdispatch_cli.context import App
from jobdispatch_cli.durations import parse_duration
from jobdispatch_cli.goodput_cache import FiguresCache, cache_path, read_through
from jobdispatch_cli.goodput_view import report_data, report_view
from jobdispatch_cli.render import dumps

__all__ = ["moment", "register"]


def moment(value: str, now: datetime, option: str) -> datetime:
    """``--since``/``--until``: an ISO 8601 time (UTC when it names no offset), or a duration
    meaning that long before ``now`` (``7d``, ``12h``)."""
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        try:
            return now - parse_duration(value)
        except ValueError:
            msg = (
                f"{option} {value!r}: not a time (2026-12-01, 2026-12-01T08:00+00:00) "
                "nor a duration before now (90m, 12h, 7d)"
            )
            raise Invalid(msg) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _views(
    app: App, jobs: tuple[str, ...], bad: list[Unreadable], now: datetime, *, cache: bool
) -> Generator[ev.View | JobSummary, None, None]:
    """The records of ``jobs`` (every job when none is named), read in batches (a read
    transaction, or a round trip to a server, per batch rather than per record), settled
    jobs' figures taken from the cache where it holds them at their record's revision
    (:func:`~jobdispatch_cli.goodput_cache.read_through`); records that cannot be read are
    told on standard error and kept in ``bad``, so the others are still counted."""
    store = app.store()
    ids = [app.job(j) for j in jobs] if jobs else list(store.list(ListFilter(settled=None)))

    def unreadable(exc: Unreadable) -> None:
        app.err.print(str(exc), style="red", markup=False, highlight=False, soft_wrap=True)
        bad.append(exc)

    path = _cache_file(app, store) if cache and isinstance(store, Revisions) else None
    with contextlib.ExitStack() as stack:
        kept = None if path is None else stack.enter_context(FiguresCache(path))
        yield from read_through(store, ids, now, kept, unreadable)


def _cache_file(app: App, store: Records) -> Path | None:
    """Where the figures cache of ``app``'s store is: named by the LMDB directory's resolved
    path, or by the PostgreSQL server, database and schema (as the store names itself in
    messages: never a password); None for a store of another kind, which gets no cache."""
    shared = app.shared_store()
    if shared is None:
        return cache_path(f"lmdb {app.store_dir.resolve()}")
    try:
        from jobdispatch_records_postgres import PostgresRecords
    except ImportError:
        return None
    if isinstance(store, PostgresRecords):
        return cache_path(f"postgresql {store.settings.where()}")
    return None


def _clusters(app: App) -> list[App]:
    """``--all-clusters``: the chosen cluster's App, and one for every other configured cluster
    whose records exist (a cluster never used has no store, and reading must not make one)."""
    if app.store_given is not None:
        msg = "--all-clusters reads each cluster's own store; --store names a single one"
        raise Invalid(msg)
    apps = [app]
    for name in sorted(app.config.clusters):
        if name == app.cluster_config.name:
            continue
        other = App(
            config_path=app.config_path,
            cluster=name,
            store=None,
            actor=app.actor_name,
            console=app.console,
            err=app.err,
        )
        other.reads_only = True
        if other.shared_store() is None and not other.store_dir.is_dir():
            continue
        apps.append(other)
    return apps


def register(group: click.Group) -> None:
    @group.command()
    @click.argument("jobs", nargs=-1, shell_complete=complete_jobs)
    @click.option("--since", help="Count from this time (ISO 8601) or this long ago (7d).")
    @click.option("--until", help="Count up to this time, or this long ago. Default: now.")
    @click.option(
        "--name",
        "names",
        multiple=True,
        help="Only jobs of this name (NAME* for a prefix); repeat for several.",
    )
    @click.option(
        "--state",
        "states",
        multiple=True,
        type=click.Choice([str(s) for s in State if s.terminal]),
        help="Only jobs that ended in this state (repeat for several).",
    )
    @click.option(
        "--submitter",
        "submitters",
        multiple=True,
        help="Only jobs submitted by this person (repeat for several).",
    )
    @click.option(
        "--all-clusters",
        is_flag=True,
        help="Every configured cluster's records, each cluster totalled apart.",
    )
    @click.option(
        "--checkpoint-cost",
        help="How long one checkpoint write takes (90s), for the interval where none was measured.",
    )
    @click.option(
        "--no-cache",
        is_flag=True,
        help="Read every record afresh: neither use nor fill the cache of settled jobs' figures.",
    )
    @json_option
    @pass_app
    def goodput(
        app: App,
        jobs: tuple[str, ...],
        since: str | None,
        until: str | None,
        names: tuple[str, ...],
        states: tuple[str, ...],
        submitters: tuple[str, ...],
        all_clusters: bool,
        checkpoint_cost: str | None,
        no_cache: bool,
        as_json: bool,
    ) -> int:
        """Where the cluster's job time went: productive, queued, lost to each cause and rule.

        Each job's life, from its creation to its settlement, is split exactly into parts
        (queued by reason, startup, productive, recomputation, stalled, detection, decision,
        relaunch, clean-up, unknown), each loss charged to the ending it follows and the rule
        that acted. --since and --until clip the jobs to a window. The cluster's prices, when
        configured, turn resource time into cost; its interruptions give the checkpoint
        interval that minimises expected loss (Young/Daly).

        Settled jobs' figures are cached (under $XDG_CACHE_HOME/jobdispatch/goodput), each
        used only while its record is at the revision it was computed from; --no-cache
        reads every record afresh."""
        app.reads_only = True
        now = datetime.now(UTC)
        cost: timedelta | None = None
        if checkpoint_cost is not None:
            try:
                cost = parse_duration(checkpoint_cost)
            except ValueError as exc:
                raise Invalid(f"--checkpoint-cost: {exc}") from None
            if cost <= timedelta(0):
                raise Invalid(f"--checkpoint-cost {checkpoint_cost!r}: must be more than 0")
        selection = Selection(
            names=names,
            states=tuple(State(s) for s in states),
            submitters=submitters,
            since=None if since is None else moment(since, now, "--since"),
            until=None if until is None else moment(until, now, "--until"),
        )
        if selection.since and selection.until and selection.since >= selection.until:
            raise Invalid("--since must be before --until")
        if all_clusters and jobs:
            raise Invalid("name JOBs or give --all-clusters, not both: a job is one cluster's")
        apps = _clusters(app) if all_clusters else [app]
        prices = {
            a.cluster_config.name: a.cluster_config.prices
            for a in apps
            if a.cluster_config.prices is not None
        }
        bad: list[Unreadable] = []
        # Made before they run, so each is closed here whatever happens (its cache file with
        # it), not whenever the collector finds a reader an error left half-way.
        readers = [(a, _views(a, jobs, bad, now, cache=not no_cache)) for a in apps]
        try:
            got = report(
                ((a.cluster_config.name, v) for a, views in readers for v in views),
                now,
                selection,
                prices=prices,
                checkpoint_cost=cost,
            )
        finally:
            for _, views in readers:
                views.close()
            for a in apps:
                if a is not app:
                    a.close()
        if as_json:
            click.echo(dumps(report_data(got, prices)))
        elif not got.jobs:
            app.err.print("no jobs in the window", style="dim")
        else:
            app.console.print(report_view(got))
        return ExitCode.UNREADABLE if bad else ExitCode.OK
