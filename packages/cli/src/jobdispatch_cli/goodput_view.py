"""Goodput as the command shows it: rich tables for people, plain data for ``--json``.

The figures come from :mod:`jobdispatch.goodput` (pure, exact in microseconds); here they are
turned into seconds and hours and laid out. The JSON keys are documented in
docs/reference/json.md and checked against it by the contract test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobdispatch.goodput import (
    Blame,
    ClusterFigures,
    Figure,
    JobGoodput,
    Part,
    Report,
    Tally,
    part_key,
)
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from jobdispatch_cli.durations import format_duration

__all__ = ["PART_COLOUR", "job_data", "job_view", "report_data", "report_view"]

#: The colour of each part, in tables and on the timeline's goodput row.
PART_COLOUR: Mapping[Part, str] = {
    Part.QUEUED: "#9aa0a6",
    Part.STARTUP: "#8ab4f8",
    Part.PRODUCTIVE: "#1e8e3e",
    Part.RECOMPUTATION: "#e8710a",
    Part.STALLED: "#c5221f",
    Part.DETECTION: "#f29900",
    Part.DECISION: "#a142f4",
    Part.RELAUNCH: "#12b5cb",
    Part.CLEANUP: "#5f6368",
    Part.UNKNOWN: "#bdc1c6",
}


def _s(micros: int) -> float:
    return micros / 1_000_000


def _blame(b: Blame) -> dict[str, Any]:
    return {
        "cause": str(b.cause),
        "rule": b.rule,
        "enforcer": None if b.enforcer is None else str(b.enforcer),
    }


def _figure(f: Figure) -> dict[str, Any]:
    return {
        "seconds": _s(f.micros),
        "gpu_seconds": _s(f.gpu_micros),
        "core_seconds": _s(f.core_micros),
        "cost": f.cost,
    }


def _tally(t: Tally) -> dict[str, Any]:
    return {
        "jobs": t.jobs,
        **_figure(t.total),
        "parts": {k: _figure(v) for k, v in sorted(t.parts.items())},
    }


def _cluster(c: ClusterFigures) -> dict[str, Any]:
    return {
        "cluster": c.cluster,
        "running_seconds": _s(c.running_micros),
        "interruptions": c.interruptions,
        "rate_per_hour": c.rate_per_hour,
        "mtbi": None if c.mtbi is None else c.mtbi.total_seconds(),
        "checkpoint_cost": None if c.checkpoint_cost is None else c.checkpoint_cost.total_seconds(),
        "interval": None if c.interval is None else c.interval.total_seconds(),
    }


def job_data(cluster: str, g: JobGoodput, price: float | None = None) -> dict[str, Any]:
    """One job's figures as plain data (``status --goodput --json``, ``goodput``'s jobs)."""
    return {
        "job": g.job,
        "cluster": cluster,
        "name": g.name,
        "submitter": g.submitter,
        "state": None if g.state is None else str(g.state),
        "settled": g.settled,
        "created_at": g.created_at.isoformat(),
        "until": g.until.isoformat(),
        "unit": str(g.unit),
        "width": g.width,
        "queue": g.queue,
        "seconds": _s(g.total_micros),
        "resource_seconds": _s(g.resource_micros),
        "goodput": g.goodput,
        "cost": None if price is None else g.resource_micros / 3.6e9 * price,
        "parts": [
            {
                "part": str(x.part),
                "reason": None if x.reason is None else str(x.reason),
                **_blame(x.blame),
                "seconds": _s(x.micros),
                "resource_seconds": _s(x.resource_micros),
            }
            for x in g.shares
        ],
        "spans": [
            {
                "start": _s(x.start),
                "end": _s(x.end),
                "part": str(x.part),
                "reason": None if x.reason is None else str(x.reason),
                **_blame(x.blame),
                "holding": x.holding,
            }
            for x in g.spans
        ],
        "runs": [
            {
                "submission": r.submission,
                "object": r.ref,
                "index": r.index,
                "started_at": None if r.started_at is None else r.started_at.isoformat(),
                "ended_at": None if r.ended_at is None else r.ended_at.isoformat(),
                **_blame(r.blame),
                "running_seconds": _s(r.running_micros),
            }
            for r in g.runs
        ],
    }


def report_data(r: Report, prices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A window report as plain data (``goodput --json``)."""
    prices = prices or {}

    def price(cluster: str, g: JobGoodput) -> float | None:
        p = prices.get(cluster)
        return None if p is None else p.per_hour(g.unit, g.queue)

    return {
        "since": None if r.since is None else r.since.isoformat(),
        "until": r.until.isoformat(),
        "total": _tally(r.total),
        "by_cause": {k: _tally(v) for k, v in r.by_cause.items()},
        "by_rule": {k: _tally(v) for k, v in r.by_rule.items()},
        "by_cluster": {k: _tally(v) for k, v in r.by_cluster.items()},
        "clusters": [_cluster(c) for c in r.clusters],
        "jobs": [job_data(c, g, price(c, g)) for c, g in r.jobs],
    }


# ------------------------------------------------------------------------ tables


def _hours(micros: int) -> str:
    return f"{micros / 3.6e9:.2f}"


def _resource(f: Figure) -> str:
    parts = []
    if f.gpu_micros:
        parts.append(f"{_hours(f.gpu_micros)} GPU-h")
    if f.core_micros:
        parts.append(f"{_hours(f.core_micros)} core-h")
    return ", ".join(parts) or "-"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _part_style(key: str) -> str:
    word = key.split(":", 1)[0]
    try:
        return PART_COLOUR[Part(word)]
    except ValueError:
        return ""


def _tally_table(title: str, tallies: Mapping[str, Tally], first: str) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column(first)
    table.add_column("jobs", justify="right")
    table.add_column("wall", justify="right")
    table.add_column("resource time", justify="right")
    table.add_column("cost", justify="right")
    table.add_column("largest parts")
    for key, t in tallies.items():
        top = sorted(t.parts.items(), key=lambda kv: -kv[1].micros)[:3]
        parts = Text()
        for i, (name, f) in enumerate(top):
            if i:
                parts.append(", ")
            parts.append(name, style=_part_style(name))
            parts.append(f" {format_duration(_s(f.micros))}")
        table.add_row(
            key,
            str(t.jobs),
            format_duration(_s(t.total.micros)),
            _resource(t.total),
            _cost(t.total.cost),
            parts,
        )
    return table


def report_view(r: Report) -> RenderableType:
    """The window report: totals by part, by cause, by rule, per cluster, per job."""
    window = f"from {r.since:%Y-%m-%d %H:%M} " if r.since else ""
    head = Text(f"goodput of {len(r.jobs)} job(s) {window}until {r.until:%Y-%m-%d %H:%M} UTC")
    parts = Table(title="by part", title_justify="left", show_edge=False)
    parts.add_column("part")
    parts.add_column("wall", justify="right")
    parts.add_column("resource time", justify="right")
    parts.add_column("cost", justify="right")
    for key, f in sorted(r.total.parts.items(), key=lambda kv: -kv[1].micros):
        parts.add_row(
            Text(key, style=_part_style(key)),
            format_duration(_s(f.micros)),
            _resource(f),
            _cost(f.cost),
        )
    clusters = Table(
        title="interruptions and checkpoint interval", title_justify="left", show_edge=False
    )
    for col in (
        "cluster",
        "running",
        "interruptions",
        "per hour",
        "MTBI",
        "checkpoint cost",
        "interval",
    ):
        clusters.add_column(col, justify="left" if col == "cluster" else "right")
    for c in r.clusters:
        clusters.add_row(
            c.cluster,
            format_duration(_s(c.running_micros)),
            str(c.interruptions),
            "-" if c.rate_per_hour is None else f"{c.rate_per_hour:.3f}",
            "-" if c.mtbi is None else format_duration(c.mtbi),
            "-" if c.checkpoint_cost is None else format_duration(c.checkpoint_cost),
            "-" if c.interval is None else format_duration(c.interval),
        )
    jobs = Table(title="by job", title_justify="left", show_edge=False)
    for col in ("job", "name", "state", "wall", "goodput", "badput (largest)"):
        jobs.add_column(col, justify="right" if col in ("wall", "goodput") else "left")
    for _, g in r.jobs:
        bad = [x for x in g.shares if x.part is not Part.PRODUCTIVE]
        worst = max(bad, key=lambda x: x.micros, default=None)
        label = Text("-")
        if worst is not None:
            label = Text(part_key(worst), style=_part_style(part_key(worst)))
            label.append(f" {format_duration(_s(worst.micros))} ({worst.blame.cause})")
        jobs.add_row(
            g.job,
            g.name,
            "-" if g.state is None else str(g.state),
            format_duration(_s(g.total_micros)),
            "-" if g.goodput is None else f"{g.goodput:.0%}",
            label,
        )
    return Group(
        head,
        Text(),
        parts,
        Text(),
        _tally_table("by cause", r.by_cause, "cause"),
        Text(),
        _tally_table("by rule", r.by_rule, "rule"),
        Text(),
        _tally_table("by cluster", r.by_cluster, "cluster"),
        Text(),
        clusters,
        Text(),
        jobs,
    )


def job_view(g: JobGoodput, price: float | None = None) -> RenderableType:
    """One job's parts: what each was, how long, whose ending it follows."""
    unit = "GPU" if str(g.unit) == "gpu" else "core"
    head = Text(f"{g.job}", style="bold")
    if g.name:
        head.append(f"  {g.name}", style="dim")
    head.append(
        f"  {format_duration(_s(g.total_micros))} wall, "
        f"{_hours(g.resource_micros)} {unit}-h ({g.width} {unit}{'s' if g.width != 1 else ''})"
    )
    if g.goodput is not None:
        head.append(f", goodput {g.goodput:.0%}", style="bold")
    if price is not None:
        head.append(f", cost {_cost(g.resource_micros / 3.6e9 * price)}")
    table = Table(show_edge=False)
    for col in ("part", "wall", f"{unit}-h", "cause", "rule", "enforcer"):
        table.add_column(col, justify="right" if col in ("wall", f"{unit}-h") else "left")
    for x in g.shares:
        table.add_row(
            Text(part_key(x), style=_part_style(part_key(x))),
            format_duration(_s(x.micros)),
            _hours(x.resource_micros),
            "-" if x.part is Part.PRODUCTIVE else str(x.blame.cause),
            "-" if x.blame.rule is None else str(x.blame.rule),
            "-" if x.blame.enforcer is None else str(x.blame.enforcer),
        )
    return Group(head, table)
