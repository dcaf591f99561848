"""``jobdispatch local``: what a person can do to the local scheduler itself, as a scheduler's
administrator would (preempt an execution), and a look at every object it holds."""

from __future__ import annotations

from typing import Any

import click
from jobdispatch.errors import NotFound, Unsupported
from jobdispatch.spi import ObjectRef, parse_discovery_name
from jobdispatch.types import ObjectState
from rich.table import Table
from rich.text import Text

from jobdispatch_cli.commands import json_option, pass_app, print_json
from jobdispatch_cli.context import App
from jobdispatch_cli.render import cause_text

__all__ = ["register"]


def _local(app: App) -> Any:
    backend = app.backend()
    if backend.name != "local":
        chosen = app.cluster_config
        raise Unsupported(
            f"cluster {chosen.name!r} uses the {chosen.adapter} adapter; "
            "`jobdispatch local` acts on a local cluster only"
        )
    return backend


def _target(app: App, backend: Any, name: str) -> ObjectRef:
    """An object named directly (``jd-...``), or the running object of a job."""
    if parse_discovery_name(name) is not None:
        return ObjectRef(name)
    found = [o for o in backend.find(name).objects if o.state is ObjectState.RUNNING]
    if not found:
        raise NotFound(f"no running object of job {name!r} on this machine")
    return ObjectRef(found[-1].ref.id)


def register(group: click.Group) -> None:
    @group.group()
    def local() -> None:
        """The local scheduler itself: preempt an execution, list its objects."""

    @local.command()
    @click.argument("target", metavar="OBJECT|JOB")
    @click.option("--wait/--no-wait", default=True, help="Return once the execution has ended.")
    @pass_app
    def preempt(app: App, target: str, wait: bool) -> None:
        """Preempt a running execution as a scheduler does: SIGTERM to its ranks, SIGKILL after
        the grace period; it ends `preempted` (provenance scheduler)."""
        backend = _local(app)
        ref = _target(app, backend, target)
        backend.preempt(ref, by=app.actor, wait=wait)
        line = Text("preempted ", style="dark_orange")
        line.append(ref.id, style="bold")
        app.console.print(line)

    @local.command()
    @click.option("--all", "everything", is_flag=True, help="Ended objects too.")
    @json_option
    @pass_app
    def ps(app: App, everything: bool, as_json: bool) -> None:
        """The objects on this machine, of every job (ended ones with --all)."""
        backend = _local(app)
        seen = backend.survey()
        objects = [o for o in seen.objects if everything or o.state is not ObjectState.ENDED]
        for name in seen.unobservable:
            # Not absent: it exists, and another process (paused or stuck) holds its lock.
            app.err.print(
                f"{name}: unobservable now (another process holds its lock); not listed",
                style="yellow",
            )
        if as_json:
            print_json(app, objects)
            return
        table = Table(show_edge=False)
        for column in ("object", "state", "executions", "last cause"):
            table.add_column(column)
        for o in objects:
            last = o.latest
            table.add_row(
                Text(o.ref.id, style="bold"),
                str(o.state),
                str(len(o.executions)),
                cause_text(last.cause) if last and last.cause else Text(""),
            )
        app.console.print(table)
        app.err.print(f"state directory: {backend.state_dir}", style="dim")
