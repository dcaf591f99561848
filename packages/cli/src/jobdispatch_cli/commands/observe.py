"""Watching the fleet: ``metrics``, the Prometheus endpoint of the store's records.

The endpoint lives in its own distribution, jobdispatch-metrics (``jobdispatch-cli[metrics]``),
so that prometheus_client weighs on no other command; it is imported where it is served.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import click
from jobdispatch.errors import Invalid

from jobdispatch_cli.commands import listen_option, optional_module, pass_app
from jobdispatch_cli.context import App

__all__ = ["check_listen", "metrics_options", "register", "start_metrics"]

_LISTEN_HELP = (
    "Serve Prometheus metrics of the store's records on HOST:PORT ([::1]:PORT for IPv6), "
    "read-only, beside supervising."
)


def _endpoint_module() -> Any:
    return optional_module(
        "jobdispatch_metrics", "the metrics endpoint", "'jobdispatch-cli[metrics]'"
    )


def check_listen(listen: str) -> None:
    """Refuse a bad HOST:PORT (Invalid) before anything is opened."""
    _endpoint_module().parse_listen(listen)


def metrics_options(f: Any) -> Any:
    """``--per-job``: the per-job budget gauges, which only the endpoint's own command and a
    supervisor serving one take."""
    return click.option(
        "--per-job",
        is_flag=True,
        help="Also serve each unsettled job's budget left per rule (a series per job).",
    )(f)


def start_metrics(app: App, listen: str, *, per_job: bool, lease_ttl: timedelta) -> Any:
    """Serve the metrics of ``app``'s store on ``listen`` from a thread of their own, through
    a read-only store opened at the first scrape that finds it answering; returns the
    endpoint (``stop()`` it)."""
    metrics = _endpoint_module()
    check_listen(listen)
    collector = metrics.RecordCollector(
        app.store_readonly,
        cluster=app.cluster_config.name,
        per_job=per_job,
        lease_ttl=lease_ttl,
    )
    try:
        endpoint = metrics.serve(collector, listen)
    except OSError as exc:
        msg = f"cannot listen on {listen}: {exc.strerror or exc}"
        raise Invalid(msg) from None
    # The first scrape reads and folds every record (the benchmark has its cost beside a
    # plain read); taking it now, off the request, leaves Prometheus the cheap ones.
    threading.Thread(
        target=lambda: list(collector.collect()), name="metrics warm-up", daemon=True
    ).start()
    return endpoint


def register(group: click.Group) -> None:
    from jobdispatch_cli.commands.running import _positive_duration, _stop_on_signals

    @group.command()
    @listen_option("127.0.0.1:9464", "/metrics")
    @metrics_options
    @click.option(
        "--lease-ttl",
        callback=_positive_duration,
        metavar="DURATION",
        default="30s",
        show_default=True,
        help="The supervisors' --lease-ttl, which is how long their announcements last: "
        "the age of each one's last poll is measured against it.",
    )
    @pass_app
    def metrics(app: App, listen: str, per_job: bool, lease_ttl: timedelta) -> None:
        """Serve Prometheus metrics of the store's records until stopped (SIGTERM or Ctrl-C).

        Each scrape reads the store, read-only and without a lease, and counts what its
        records hold: jobs by state, endings by cause, recoveries by rule, the supervisors
        sharing it. docs/reference/metrics.md names every series.
        """
        endpoint = start_metrics(app, listen, per_job=per_job, lease_ttl=lease_ttl)
        app.err.print(
            f"serving metrics of {app.store_label} (cluster {app.cluster_config.name}) at "
            f"{endpoint.url}; Ctrl-C or SIGTERM stops",
            style="dim",
            soft_wrap=True,  # one line whatever the width, so a log keeps the URL whole
        )
        done = threading.Event()
        try:
            with _stop_on_signals(done.set):
                while not done.wait(3600):
                    pass
        finally:
            endpoint.stop()
        app.err.print("stopped", style="dim")
