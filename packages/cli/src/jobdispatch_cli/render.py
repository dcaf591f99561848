"""How jobs, plans and plugins look in a terminal (rich), and as JSON.

A state is always shown with its cause, never alone: "failed" without "why" is the complaint
dispatch exists to answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from jobdispatch import codec
from jobdispatch.errors import Unreadable
from jobdispatch.job import Transition
from jobdispatch.plugins import Plugins
from jobdispatch.spi import ExecutionObs
from jobdispatch.status import Firing, ProgressStatus, Status
from jobdispatch.types import (
    Capability,
    Cause,
    CauseKind,
    Charge,
    PendingAssignment,
    Plan,
    Rule,
    StallAssignment,
    State,
    Support,
    Tristate,
)
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from jobdispatch_cli.durations import format_duration

__all__ = [
    "STATE_STYLE",
    "capabilities_table",
    "cause_text",
    "dumps",
    "jobs_table",
    "pending_text",
    "plan_view",
    "plugins_view",
    "state_text",
    "status_view",
    "to_data",
    "transition_text",
    "unreadable_data",
]

STATE_STYLE: Mapping[State, str] = {
    State.PENDING: "dim",
    State.HELD: "cyan",
    State.RUNNING: "bold blue",
    State.ENDED: "bold",
    State.RECOVERING: "bold magenta",
    State.SUCCEEDED: "bold green",
    State.FAILED: "bold red",
    State.CANCELLED: "yellow",
    State.UNKNOWN: "bold white on red",
}

CAUSE_STYLE: Mapping[CauseKind, str] = {
    CauseKind.NONE: "green",
    CauseKind.PREEMPTED: "dark_orange",
    CauseKind.NODE_LOST: "red",
    CauseKind.OUT_OF_MEMORY: "red",
    CauseKind.TIME_LIMIT: "dark_orange",
    CauseKind.NON_ZERO_EXIT: "red",
    CauseKind.LAUNCH_FAILED: "red",
    CauseKind.CANCELLED: "yellow",
    CauseKind.REQUEUED: "magenta",
    CauseKind.STALLED: "red",
    CauseKind.DUPLICATE: "dim",
    CauseKind.UNKNOWN: "bold red",
}

#: The mark on a state and cause the record has not committed yet (``Status.committed``).
UNCOMMITTED = "not yet committed"

_ANSWER_STYLE = {Tristate.YES: "green", Tristate.NO: "red", Tristate.UNKNOWN: "yellow"}


# ------------------------------------------------------------------------ JSON


def to_data(value: Any) -> Any:
    """Plain data for JSON: attrs values through the core's converter, so names and words
    are the record's. A status also says whether its state and cause are committed (a
    property, which the converter does not see), so a script can tell an ``ended`` run's
    cause from the job's outcome."""
    data = codec.output_converter().unstructure(value)
    if isinstance(value, Status):
        data["committed"] = value.committed
    elif isinstance(value, list | tuple):
        for item, plain in zip(value, data, strict=True):
            if isinstance(item, Status):
                plain["committed"] = item.committed
    return data


def unreadable_data(error: Unreadable) -> dict[str, Any]:
    """A job whose record cannot be read, as ``list --json`` shows it among the others: its
    id, ``state`` null (what cannot be known), and ``unreadable`` (a key no readable job's
    entry has): the message naming what is wrong, and the revision of the value that is (0:
    the header; null when not one value)."""
    return {
        "job": error.job,
        "state": None,
        "unreadable": {"message": error.message, "revision": error.revision},
    }


def dumps(value: Any) -> str:
    return json.dumps(to_data(value), indent=2, default=str, sort_keys=False)


# ------------------------------------------------------------------------ pieces


def state_text(state: State) -> Text:
    return Text(str(state), style=STATE_STYLE.get(state, ""))


def cause_text(cause: Cause | None) -> Text:
    if cause is None:
        return Text("—", style="dim")
    text = Text(str(cause.kind), style=CAUSE_STYLE.get(cause.kind, ""))
    extra = []
    if cause.provenance.value != "none":
        extra.append(str(cause.provenance))
    if cause.exit_code is not None:
        extra.append(f"exit {cause.exit_code}")
    if cause.signal is not None:
        extra.append(f"signal {cause.signal}")
    if cause.actor is not None:
        extra.append(f"by {cause.actor}")
    if extra:
        text.append(f" ({', '.join(extra)})", style="dim")
    if cause.detail:
        text.append(f": {cause.detail}")
    return text


def when(at: datetime | None) -> str:
    if at is None:
        return "—"
    return at.astimezone().strftime("%H:%M:%S")


def age(at: datetime | None, now: datetime | None = None) -> str:
    if at is None:
        return "—"
    now = now or datetime.now(UTC)
    return format_duration(max(0.0, (now - at).total_seconds())) + " ago"


def transition_text(t: Transition) -> Text:
    text = Text(f"{when(t.at)}  ")
    text.append_text(state_text(t.from_))
    text.append(" → ")
    text.append_text(state_text(t.to))
    text.append(f"  (submission {t.submission})  ", style="dim")
    if t.cause.kind is not CauseKind.NONE or t.to is State.SUCCEEDED:
        text.append_text(cause_text(t.cause))
    return text


def _execution_text(e: ExecutionObs) -> Text:
    text = Text(f"#{e.index} ")
    if e.ended_at is None:
        text.append("running", style="bold blue")
        if e.started_at is not None:
            text.append(f" since {when(e.started_at)}", style="dim")
        return text
    text.append_text(cause_text(e.cause))
    if e.started_at is not None and e.ended_at is not None:
        span = format_duration((e.ended_at - e.started_at).total_seconds())
        text.append(f"  [{when(e.started_at)}, {span}]", style="dim")
    return text


# ------------------------------------------------------------------------ views


def status_view(status: Status) -> RenderableType:
    """One job: state and cause, submissions with their executions, history, plan."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    title = Text(status.job, style="bold")
    if status.name:
        title.append(f"  {status.name}", style="dim")
    head.add_row("job", title)
    state = state_text(status.state)
    if status.settled:
        state.append("  (settled)", style="dim")
    cause = cause_text(status.cause)
    if status.state is State.ENDED:
        # The run's end as the backend shows it, before the supervisor commits what follows:
        # say so, or a reader takes the run's cause for the job's outcome.
        state.append(f"  ({UNCOMMITTED})", style="yellow")
        cause.append("  (the run's; the job's outcome is not recorded yet)", style="yellow")
    head.add_row("state", state)
    head.add_row("cause", cause)
    if status.hold is not None:
        until = f" until {status.hold.until.isoformat()}" if status.hold.until else ""
        head.add_row("hold", f"{status.hold.kind} by {status.hold.by}{until}: {status.hold.reason}")
    if status.cleanup.value != "clear":
        head.add_row("clean-up", Text(str(status.cleanup), style="yellow"))
    if status.supersedes:
        head.add_row("supersedes", status.supersedes)
    head.add_row("created", f"{when(status.created_at)} ({age(status.created_at)})")

    subs = Table(title="submissions", title_justify="left", expand=False, show_edge=False)
    subs.add_column("n", justify="right")
    subs.add_column("object")
    subs.add_column("state")
    subs.add_column("by")
    subs.add_column("executions")
    for sub in status.submissions:
        by = "submit" if sub.rule is None else f"rule {sub.rule}"
        if sub.n > 1 and sub.rule is None:
            by = "a person"
        executions = Text("\n").join(_execution_text(e) for e in sub.executions) or Text(
            "—", style="dim"
        )
        subs.add_row(
            str(sub.n),
            str(sub.canonical)
            if sub.canonical
            else Text(f"{sub.attempts} attempt(s)", style="dim"),
            str(sub.state) if sub.state else "—",
            by,
            executions,
        )
    parts: list[RenderableType] = [head]
    if status.submissions:
        parts.append(subs)
    if status.history:
        parts.append(Text("history", style="italic"))
        parts.extend(transition_text(t) for t in status.history)
    if status.plan is not None and status.plan.rules:
        parts.append(_rules_table(status.plan, title="recovery"))
    parts.extend(_suspects_text(status))
    if status.plan is not None and status.plan.stall is not None:
        parts.append(_stall_text(status.plan.stall))
    if status.pending is not None:
        parts.append(pending_text(status.pending))
    if status.progress is not None:
        parts.extend(_progress_view(status.progress, status.firings))
    for esc in status.escalations:
        delivered = ", ".join(esc.delivered) or "not yet delivered"
        parts.append(Text(f"escalated {when(esc.at)}: {esc.detail} ({delivered})", style="red"))
    return Panel(Group(*parts), border_style=STATE_STYLE.get(status.state, ""), expand=False)


def _suspects_text(status: Status) -> list[RenderableType]:
    """The suspect nodes each submission was told to keep off, as recorded with its
    authorization (two consecutive node-lost or stalled runs before it shared them), and those
    the plan of a next submission would carry if it were authorized now."""
    out: list[RenderableType] = []
    for sub in status.submissions:
        if sub.exclude:
            until = f" until {when(sub.exclude_until)}" if sub.exclude_until else ""
            nodes = ", ".join(sub.exclude)
            out.append(
                Text(
                    f"submission {sub.n} keeps off suspect nodes {nodes}{until} "
                    "(shared by two consecutive node-lost or stalled runs)",
                    style="yellow",
                )
            )
    if status.next_exclude:
        until = f" until {when(status.next_exclude_until)}" if status.next_exclude_until else ""
        out.append(
            Text(
                f"a next submission would keep off suspect nodes "
                f"{', '.join(status.next_exclude)}{until}",
                style="yellow",
            )
        )
    return out


def jobs_table(statuses: Sequence[Status]) -> Table:
    table = Table(show_edge=False)
    table.add_column("job", style="bold")
    table.add_column("name")
    table.add_column("state")
    table.add_column("cause")
    table.add_column("subs", justify="right")
    table.add_column("created")
    for s in statuses:
        state = state_text(s.state)
        if s.settled:
            state.append(" ✓", style="dim")
        if s.state is State.ENDED:
            state.append(" (uncommitted)", style="yellow")
        table.add_row(
            s.job,
            s.name,
            state,
            cause_text(s.cause) if s.cause.kind is not CauseKind.NONE else Text(""),
            str(len(s.submissions)),
            age(s.created_at),
        )
    return table


def _support(s: Support) -> Text:
    text = Text(str(s.answer), style=_ANSWER_STYLE[s.answer])
    text.append(f" [{s.source}]", style="dim")
    return text


def _rules_table(plan: Plan, title: str) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("#", justify="right")
    table.add_column("on")
    table.add_column("action")
    table.add_column("budget", justify="right")
    table.add_column("enforcer")
    table.add_column("fired", justify="right")
    table.add_column("why")
    for a in plan.rules:
        rule = a.effective
        action = _action(rule)
        budget = str(rule.budget)
        if rule.charge is Charge.NO_ADVANCE:
            budget += " (no-advance)"
        if a.effective != a.rule:
            action += f" (asked: {a.rule.action})"
        enforcer = Text(str(a.enforcer), style="red" if a.enforcer.value == "nobody" else "")
        why = a.accepted or a.support.perform.detail or a.support.native.detail
        table.add_row(
            str(a.index),
            ", ".join(str(k) for k in rule.on),
            action,
            budget,
            enforcer,
            _fired(a.firings, a.charged, rule.charge),
            Text(why, style="dim"),
        )
    return table


def _action(rule: Rule) -> str:
    """A rule's action as the job file writes it: ``hold for 1d``, ``resubmit``."""
    if rule.for_ is None:
        return str(rule.action)
    return f"{rule.action} for {format_duration(rule.for_)}"


def _fired(firings: int, charged: int, charge: Charge) -> str:
    """How often a rule fired; under no-advance, how many of those its budget paid for."""
    if charge is not Charge.NO_ADVANCE or not firings:
        return str(firings)
    return f"{firings} ({charged} charged, {firings - charged} free)"


def _stall_text(stall: StallAssignment) -> Text:
    rule = stall.rule
    text = Text("stall: ", style="bold")
    grace = rule.grace
    text.append(
        f"{rule.mode} after {format_duration(rule.after)} without progress "
        f"(startup grace {format_duration(grace)}), enforced by ",
    )
    text.append(str(stall.enforcer), style="red" if stall.enforcer.value == "nobody" else "")
    if stall.sources:
        text.append(f"; progress read from {' and '.join(stall.sources)}", style="dim")
    if stall.note:
        text.append(f"; {stall.note}", style="yellow")
    return text


def pending_text(pending: PendingAssignment) -> Text:
    """The pending deadline: how long a submission may wait, the cause its ending takes, who
    stops it, and which rule then acts (or that the job fails)."""
    rule, cause = pending.rule, pending.rule.cause
    text = Text("pending: ", style="bold")
    text.append(
        f"a submission not started {format_duration(rule.after)} after it was opened ends "
        f"with cause {cause}, enforced by "
    )
    text.append(str(pending.enforcer), style="red" if pending.enforcer.value == "nobody" else "")
    acting = pending.acting
    if acting is None:
        text.append(f"; no rule names {cause}: the job fails with it", style="dark_orange")
    else:
        rule_ = acting.effective
        budget = f"budget {rule_.budget}, " if rule_.budget else ""
        text.append(
            f"; then rule {acting.index} acts: {_action(rule_)} "
            f"({budget}enforced by {acting.enforcer})",
            style="dim",
        )
    return text


def _progress_view(progress: ProgressStatus, firings: Sequence[Firing]) -> list[RenderableType]:
    """What the record holds of the job's progress: the newest step, the newest checkpoint,
    a blind spell, stall verdicts and the charge of each firing."""
    out: list[RenderableType] = []
    line = Text("progress: ", style="bold")
    if progress.step is None:
        line.append("none seen yet", style="dim")
    else:
        line.append(f"step {progress.step} at {when(progress.marked_at)} ({progress.origin})")
    if progress.checkpoint is not None:
        line.append(f"; newest checkpoint step {progress.checkpoint}")
    line.append(f"  [{progress.root}]", style="dim")
    out.append(line)
    if progress.blind_since is not None:
        out.append(
            Text(
                f"blind since {when(progress.blind_since)}: {progress.blind_detail} "
                "(no stall is declared while blind)",
                style="yellow",
            )
        )
    for v in progress.stalls:
        what = "stalled, stopped" if v.enforced else "would have stalled (observe only)"
        out.append(
            Text(
                f"{what}: run {v.execution} of {v.ref} at {when(v.at)}: {v.cause.detail}",
                style="red",
            )
        )
    for sub, execution, step in progress.resumed:
        out.append(
            Text(f"submission {sub} execution {execution} resumed from step {step}", style="dim")
        )
    for f in firings:
        charged = "charged" if f.charged else "not charged (training advanced)"
        ckpt = "none" if f.checkpoint is None else str(f.checkpoint)
        out.append(
            Text(
                f"rule {f.rule} fired {when(f.at)}: {charged}; newest checkpoint {ckpt}",
                style="dim",
            )
        )
    return out


def plan_view(
    plan: Plan,
    *,
    cluster: str,
    extra: Mapping[str, Support] | None = None,
    pending: PendingAssignment | None = None,
) -> RenderableType:
    """A plan: who enforces each rule, what nobody covers, what it rests on; ``pending``, the
    spec's pending deadline as the plan enforces it (:func:`jobdispatch.plan.pending_assignment`),
    derived from the spec since the plan does not record it."""
    parts: list[RenderableType] = []
    if plan.rules:
        parts.append(_rules_table(plan, title=f"recovery on cluster {cluster}"))
    else:
        parts.append(Text("no recovery rules: any ending other than success fails the job"))
    uncovered = Text("uncovered: ", style="bold")
    uncovered.append(" ".join(str(k) for k in plan.uncovered) or "nothing", style="dark_orange")
    parts.append(uncovered)
    parts.append(Text(f"checkpoints: {plan.checkpoint}    unmatched attempts: {plan.unmatched}"))
    if plan.stall is not None:
        parts.append(_stall_text(plan.stall))
    if pending is not None:
        parts.append(pending_text(pending))
    if plan.identity_weakened:
        parts.append(Text(f"execution identity weakened: {plan.identity_weakened}", style="yellow"))
    parts.append(capabilities_table(plan.capabilities, extra=extra))
    return Group(*parts)


def sinks_table(reports: Iterable[Any]) -> Table:
    """Where the job's escalations and notices would go, and what a probe found of each sink."""
    table = Table(title="notices", title_justify="left", show_edge=False)
    table.add_column("sink")
    table.add_column("kind")
    table.add_column("gets")
    table.add_column("probe")
    table.add_column("detail", style="dim")
    for r in reports:
        if not r.configured:
            probe = Text("not configured", style="red")
        elif r.reachable is False:
            probe = Text("unreachable", style="red")
        elif r.reachable:
            probe = Text("reachable", style="green")
        else:
            probe = Text("configured", style="green")
        table.add_row(r.name, r.sink, ", ".join(r.gets), probe, r.detail)
    return table


def capabilities_table(
    capabilities: Mapping[Capability, Support], *, extra: Mapping[str, Support] | None = None
) -> Table:
    table = Table(title="capabilities", title_justify="left", show_edge=False)
    table.add_column("capability")
    table.add_column("answer")
    table.add_column("detail", style="dim")
    rows: Iterable[tuple[str, Support]] = [(str(c), s) for c, s in capabilities.items()]
    for name, support in [*rows, *(extra or {}).items()]:
        table.add_row(name, _support(support), support.detail)
    return table


def plugins_view(loaded: Plugins) -> RenderableType:
    """Every registration with its provider; adapters also with the SPI version they declare,
    under a line saying which SPI this core speaks, so a refused adapter's failure reads against
    it."""
    from jobdispatch.plugins import ADAPTER_SPI

    table = Table(show_edge=False)
    table.add_column("kind")
    table.add_column("name", style="bold")
    table.add_column("from")
    table.add_column("spi")
    table.add_column("what", style="dim")
    for kind, registry in loaded.registries.items():
        for entry in registry:
            table.add_row(kind, entry.name, entry.provider, entry.spi, entry.summary)
    parts: list[RenderableType] = [
        Text(f"adapter SPI {ADAPTER_SPI} (jobdispatch {_core_version()})"),
        table,
    ]
    for failure in loaded.failures:
        parts.append(
            Text(f"failed: {failure.plugin} ({failure.distribution}): {failure.error}", style="red")
        )
    return Group(*parts)


def _core_version() -> str:
    from jobdispatch.__about__ import __version__

    return __version__


def plugins_data(loaded: Plugins) -> dict[str, Any]:
    from jobdispatch.plugins import ADAPTER_SPI

    return {
        "adapter_spi": ADAPTER_SPI,
        "core_version": _core_version(),
        "registries": {
            kind: [
                {"name": e.name, "provider": e.provider, "summary": e.summary}
                | ({"spi": e.spi} if kind == "adapter" else {})
                for e in registry
            ]
            for kind, registry in loaded.registries.items()
        },
        "loaded": [{"plugin": p, "distribution": d} for p, d in loaded.loaded],
        "failures": [
            {"plugin": f.plugin, "distribution": f.distribution, "error": f.error}
            for f in loaded.failures
        ],
    }
