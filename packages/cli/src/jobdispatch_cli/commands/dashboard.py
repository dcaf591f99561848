"""``dashboard``: the read-only web dashboard of the clusters' record stores.

The dashboard lives in its own distribution, jobdispatch-dashboard
(``jobdispatch-cli[dashboard]``), so that its web server, framework and templates weigh on no
other command; it is imported only when this command runs,
and its absence is told with what to install.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from jobdispatch_cli.commands import listen_option, optional_module, pass_app
from jobdispatch_cli.commands.running import interval_option
from jobdispatch_cli.context import App

__all__ = ["register"]


def _dashboard_module() -> Any:
    return optional_module("jobdispatch_dashboard", "the web dashboard", "jobdispatch-dashboard")


def _sources(app: App, dashboard: Any) -> list[Any]:
    """The clusters to show: the one ``--cluster`` or ``--store`` names, else every usable
    cluster of the configuration; each with its store opened read-only."""
    config = app.config
    if app.cluster_name is not None or app.store_option is not None:
        names = [app.cluster_config.name]
    else:
        names = list(config.clusters)
    out = []
    for name in names:
        one = App(
            config_path=app.config_path,
            cluster=name,
            store=app.store_option,
            actor=app.actor_name,
            console=app.console,
            err=app.err,
        )
        one.reads_only = True
        cluster = one.cluster_config
        out.append(
            dashboard.ClusterSource(
                name=name,
                adapter=cluster.adapter,
                source=cluster.source,
                store_label=one.store_label,
                open_store=one.store_readonly,
                backend=one.backend,
            )
        )
    return out


def _secrets(app: App, dashboard: Any) -> list[str]:
    """Every inline secret of the configuration, for the dashboard to blank out."""
    config = app.config
    found = [s for c in config.clusters.values() for s in dashboard.secret_values(c.settings)]
    if config.shared_store is not None:
        found += dashboard.secret_values(config.shared_store.settings)
    return found


def register(group: click.Group) -> None:
    @group.command()
    @listen_option("127.0.0.1:8765", "the pages", " Any address but loopback needs --token-file.")
    @click.option(
        "--token-file",
        type=click.Path(path_type=Path, dir_okay=False),
        help="A file (mode 600) whose first line is the token every request must carry: "
        "Authorization: Bearer TOKEN, or the password of the browser's login prompt.",
    )
    @interval_option(
        "--refresh",
        least=0.2,
        default=2.0,
        help_text="Seconds between two refreshes of an open page.",
    )
    @pass_app
    def dashboard(app: App, listen: str, token_file: Path | None, refresh: float) -> None:
        """Serve a read-only web dashboard of the clusters' jobs until stopped (Ctrl-C or
        SIGTERM).

        The jobs with their states and causes, each job's plan, submissions, timeline,
        budgets and output, and the clusters' capabilities; pages refresh themselves. It
        opens the stores read-only, serves nothing but GET, and shows no secret. With
        --cluster or --store, that cluster's jobs; otherwise every configured cluster's."""
        module = _dashboard_module()
        board = module.Board(_sources(app, module), redactor=module.Redactor(_secrets(app, module)))
        server = module.server(board, listen, token_file=token_file, refresh_seconds=refresh)
        app.err.print(
            f"serving the dashboard of {', '.join(board.sources)} at http://{listen}/; "
            "Ctrl-C or SIGTERM stops",
            style="dim",
            soft_wrap=True,
        )
        module.log_through(board)
        server.run()
