"""A job on a time axis: its states, each submission's executions and why each one ended.

One picture answers what a table makes you reconstruct: how long the job ran, where it was
preempted, how long recovery took, and which submission finally finished. The same model is
drawn in the terminal (rich text, one row per submission) and as a standalone SVG written by
hand (no plotting library), for a report or an issue.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from xml.sax.saxutils import escape

import attrs
from jobdispatch.goodput import JobGoodput
from jobdispatch.status import Status, Submission
from jobdispatch.types import Cause, CauseKind, State
from rich.console import Group, RenderableType
from rich.text import Text

from jobdispatch_cli.durations import format_duration

__all__ = ["Timeline", "build", "render_svg", "render_text"]


@attrs.frozen
class Segment:
    """A stretch of the job's committed state."""

    state: State
    start: float
    end: float


@attrs.frozen
class Bar:
    """One execution: when it ran and why it ended (``cause`` None while it runs)."""

    submission: int
    index: int
    start: float
    end: float
    cause: Cause | None


@attrs.frozen
class Band:
    """A span of the job's goodput: productive, or a part of badput and the cause it follows
    (``part``, ``cause`` and ``rule`` as :mod:`jobdispatch.goodput` names them)."""

    part: str
    cause: CauseKind
    rule: int | None
    start: float
    end: float


@attrs.frozen
class Timeline:
    """Times are seconds since the job was created."""

    job: str
    name: str
    state: State
    cause: Cause
    origin: datetime
    span: float
    segments: tuple[Segment, ...]
    rows: tuple[tuple[int, tuple[Bar, ...]], ...]
    marks: tuple[tuple[float, str], ...]
    #: The goodput row, when asked for: one band per span of the job's parts.
    bands: tuple[Band, ...] = ()


def _seconds(at: datetime | None, origin: datetime, default: float) -> float:
    return default if at is None else max(0.0, (at - origin).total_seconds())


def _span(status: Status, origin: datetime, now: datetime) -> float:
    """How far the axis runs: to the last thing the record saw, or to ``now`` while the job
    is not over (never zero, so the picture can be scaled)."""
    times = [_seconds(t.at, origin, 0.0) for t in status.history]
    for sub in status.submissions:
        for e in sub.executions:
            times.append(_seconds(e.started_at, origin, 0.0))
            if e.ended_at is not None:
                times.append(_seconds(e.ended_at, origin, 0.0))
    open_ended = not status.state.terminal
    return max([*times, _seconds(now, origin, 0.0) if open_ended else 0.0, 0.001])


def _committed(status: Status, origin: datetime, end: float) -> tuple[list[Segment], State]:
    """The committed states, from the history, and the last of them (the job's own)."""
    committed = []
    state, since = State.PENDING, 0.0
    for t in status.history:
        at = _seconds(t.at, origin, 0.0)
        committed.append(Segment(state, since, at))
        state, since = t.to, at
    committed.append(Segment(state, since, end))
    return committed, state


def _marks(status: Status, origin: datetime) -> list[tuple[float, str]]:
    """A mark at each transition, naming the state and the cause it came with, and at each
    stall verdict, observe-only ones included: a team measures how often the rule would have
    fired before enforcing it."""
    marks = []
    for t in status.history:
        label = str(t.to)
        if t.cause.kind is not CauseKind.NONE:
            label += f": {t.cause.kind}"
        marks.append((_seconds(t.at, origin, 0.0), label))
    if status.progress is not None:
        for v in status.progress.stalls:
            what = "stalled" if v.enforced else "would stall (observe)"
            marks.append((_seconds(v.at, origin, 0.0), f"{what}: run {v.execution}"))
        marks.sort(key=lambda m: m[0])
    return marks


def _segments(
    status: Status, origin: datetime, end: float, committed: list[Segment], state: State
) -> list[Segment]:
    """The committed states shown as running wherever an execution ran (running is never
    committed: it is what the backend shows), so the row reads pending, running, recovering,
    running, succeeded. A final state ends the row with a zero-width segment of its own."""
    runs = sorted(
        (
            _seconds(e.started_at, origin, 0.0),
            _seconds(e.ended_at, origin, end) if e.ended_at is not None else end,
        )
        for sub in status.submissions
        for e in sub.executions
    )
    cuts = sorted(
        {
            0.0,
            end,
            *(t for seg in committed for t in (seg.start, seg.end)),
            *(t for run in runs for t in run),
        }
    )
    segments: list[Segment] = []
    for a, b in itertools.pairwise(cuts):
        if b <= a:
            continue
        mid = (a + b) / 2
        seg_state = next((seg.state for seg in committed if seg.start <= mid < seg.end), state)
        if not seg_state.terminal and any(r0 <= mid < r1 for r0, r1 in runs):
            seg_state = State.RUNNING
        if segments and segments[-1].state is seg_state:
            segments[-1] = Segment(seg_state, segments[-1].start, b)
        else:
            segments.append(Segment(seg_state, a, b))
    if state.terminal:
        segments.append(Segment(state, end, end))
    return segments


def _bars(sub: Submission, origin: datetime, end: float) -> tuple[Bar, ...]:
    """One submission's executions; one still running reaches the axis's end."""
    return tuple(
        Bar(
            submission=sub.n,
            index=e.index,
            start=_seconds(e.started_at, origin, 0.0),
            end=_seconds(e.ended_at, origin, end),
            cause=e.cause if e.ended_at is not None else None,
        )
        for e in sub.executions
    )


def _bands(goodput: JobGoodput, origin: datetime) -> tuple[Band, ...]:
    """Goodput's spans on this axis (goodput counts from its own creation instant)."""
    shift = _seconds(goodput.created_at, origin, 0.0)
    return tuple(
        Band(
            str(x.part),
            x.blame.cause,
            x.blame.rule,
            shift + x.start / 1e6,
            shift + x.end / 1e6,
        )
        for x in goodput.spans
    )


def build(
    status: Status, now: datetime | None = None, goodput: JobGoodput | None = None
) -> Timeline:
    """The timeline of ``status`` as of ``now``, with ``goodput``'s parts as a row of its own
    when given (figured from the same record)."""
    now = now or datetime.now(UTC)
    origin = status.created_at or now
    end = _span(status, origin, now)
    committed, state = _committed(status, origin, end)
    marks = _marks(status, origin)
    segments = _segments(status, origin, end, committed, state)
    rows = [(sub.n, _bars(sub, origin, end)) for sub in status.submissions]
    bands: tuple[Band, ...] = ()
    if goodput is not None:
        bands = _bands(goodput, origin)
        end = max(end, *(b.end for b in bands)) if bands else end
    return Timeline(
        job=status.job,
        name=status.name,
        state=status.state,
        cause=status.cause,
        origin=origin,
        span=end,
        segments=tuple(segments),
        rows=tuple(rows),
        marks=tuple(marks),
        bands=bands,
    )


# ------------------------------------------------------------------------ colours

STATE_COLOUR = {
    State.PENDING: "#9aa0a6",
    State.HELD: "#12b5cb",
    State.RUNNING: "#1a73e8",
    State.ENDED: "#5f6368",
    State.RECOVERING: "#a142f4",
    State.SUCCEEDED: "#1e8e3e",
    State.FAILED: "#d93025",
    State.CANCELLED: "#f9ab00",
    State.UNKNOWN: "#5f6368",
}
RUNNING = "#1a73e8"
CAUSE_COLOUR = {
    CauseKind.NONE: "#1e8e3e",
    CauseKind.PREEMPTED: "#e8710a",
    CauseKind.TIME_LIMIT: "#f29900",
    CauseKind.NODE_LOST: "#b31412",
    CauseKind.OUT_OF_MEMORY: "#c5221f",
    CauseKind.NON_ZERO_EXIT: "#d93025",
    CauseKind.LAUNCH_FAILED: "#a50e0e",
    CauseKind.CANCELLED: "#f9ab00",
    CauseKind.REQUEUED: "#a142f4",
    CauseKind.STALLED: "#8430ce",
    CauseKind.DUPLICATE: "#9aa0a6",
}


def bar_colour(bar: Bar) -> str:
    if bar.cause is None:
        return RUNNING
    return CAUSE_COLOUR.get(bar.cause.kind, "#5f6368")


def bar_label(bar: Bar) -> str:
    if bar.cause is None:
        return "running"
    label = str(bar.cause.kind)
    if bar.cause.kind is CauseKind.NONE:
        label = "succeeded"
    if bar.cause.exit_code is not None and bar.cause.kind is not CauseKind.NONE:
        label += f" (exit {bar.cause.exit_code})"
    return label


#: Goodput's parts that are not losses, in their own colours; every other part takes its
#: cause's colour, so a picture shows at a glance what each loss followed.
GOOD_COLOUR = {"productive": "#1e8e3e", "queued": "#9aa0a6", "unknown": "#bdc1c6"}


def band_colour(band: Band) -> str:
    if band.part == "productive" or band.cause is CauseKind.NONE:
        return GOOD_COLOUR.get(band.part, "#80868b")
    return CAUSE_COLOUR.get(band.cause, "#5f6368")


def band_label(band: Band) -> str:
    if band.part == "productive" or band.cause is CauseKind.NONE:
        return band.part
    rule = f", rule {band.rule}" if band.rule is not None else ""
    return f"{band.part} ({band.cause}{rule})"


def _ticks(span: float, most: int = 8) -> list[float]:
    steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400]
    step = next((s for s in steps if span / s <= most), span / most)
    if span < most:
        step = max(span / most, 0.1)
    out, t = [], 0.0
    while t <= span + 1e-9:
        out.append(t)
        t += step
    return out


# ------------------------------------------------------------------------ terminal


def render_text(tl: Timeline, width: int = 100) -> RenderableType:
    """Rows of block characters scaled to ``width`` columns."""
    label_w = 10
    tail_w = 22
    cols = max(20, width - label_w - tail_w - 2)

    def col(t: float) -> int:
        return min(cols - 1, int(t / tl.span * cols)) if tl.span > 0 else 0

    lines: list[Text] = [_text_heading(tl)]
    cells = [" "] * cols
    styles = [""] * cols
    for seg in tl.segments:
        for c in range(col(seg.start), max(col(seg.start) + 1, col(seg.end))):
            cells[c], styles[c] = "▬", STATE_COLOUR.get(seg.state, "")
    lines.append(_text_row("job".ljust(label_w), cells, styles))
    for n, bars in tl.rows:
        lines.append(_text_submission(f"sub {n}".ljust(label_w), bars, cols, col))
    if tl.bands:
        cells = [" "] * cols
        styles = [""] * cols
        for band in tl.bands:
            for c in range(col(band.start), max(col(band.start) + 1, col(band.end))):
                cells[c] = "█" if band.part == "productive" else "▒"
                styles[c] = band_colour(band)
        lines.append(_text_row("goodput".ljust(label_w), cells, styles))
    lines.extend(_text_axis(tl.span, label_w, cols, col))
    lines.extend(_text_legends(tl, label_w))
    return Group(*lines)


def _text_heading(tl: Timeline) -> Text:
    """The job, its name, its state (with the cause unless it ended well) and the span."""
    head = Text(f"{tl.job}", style="bold")
    if tl.name:
        head.append(f"  {tl.name}", style="dim")
    head.append(f"  {tl.state}", style=STATE_COLOUR.get(tl.state, ""))
    if tl.cause.kind is not CauseKind.NONE:
        head.append(f" ({tl.cause.kind})")
    head.append(f"  over {format_duration(tl.span)}", style="dim")
    return head


def _text_row(label: str, cells: list[str], styles: list[str]) -> Text:
    """A labelled row of cells, each in its own style."""
    row = Text(label)
    for cell, style in zip(cells, styles, strict=True):
        row.append(cell, style=style)
    return row


def _text_submission(
    label: str, bars: tuple[Bar, ...], cols: int, col: Callable[[float], int]
) -> Text:
    """One submission's executions, each ended one closed by a half block so that back to
    back executions stay apart, then how each ended (or that none started)."""
    cells = [" "] * cols
    styles = [""] * cols
    for bar in bars:
        first = col(bar.start)
        last = max(first + 1, col(bar.end) + (1 if bar.cause is None else 0))
        for c in range(first, min(cols, last)):
            cells[c], styles[c] = "█", bar_colour(bar)
        if bar.cause is not None and last - 1 < cols:
            cells[last - 1] = "▌" if last - first > 1 else "█"
    row = _text_row(label, cells, styles)
    if bars:
        row.append("  ")
        row.append(" / ".join(bar_label(b) for b in bars), style=bar_colour(bars[-1]))
    else:
        row.append("  not started", style="dim")
    return row


def _text_axis(span: float, label_w: int, cols: int, col: Callable[[float], int]) -> list[Text]:
    """The time axis: a tick line, and under it each tick's duration from the job's start."""
    axis = [" "] * cols
    labels = [" "] * (cols + 8)
    for t in _ticks(span, most=max(2, cols // 12)):
        c = col(t)
        axis[c] = "┬"
        for i, ch in enumerate(format_duration(t)):
            if c + i < len(labels):
                labels[c + i] = ch
    return [
        Text(" " * label_w + "".join(axis), style="dim"),
        Text(" " * label_w + "".join(labels).rstrip(), style="dim"),
    ]


def _text_legends(tl: Timeline, label_w: int) -> list[Text]:
    """The states' legend and, with a goodput row, its legend: one entry per colour, a good
    part by its name, a loss by the cause it follows."""
    legend = Text(" " * label_w)
    for state in dict.fromkeys(s.state for s in tl.segments):
        legend.append("▬ ", style=STATE_COLOUR.get(state, ""))
        legend.append(f"{state}  ", style="dim")
    if not tl.bands:
        return [legend]
    parts = Text(" " * label_w)
    named: dict[str, str] = {}
    for b in tl.bands:
        good = b.part == "productive" or b.cause is CauseKind.NONE
        rule = f", rule {b.rule}" if b.rule is not None else ""
        named.setdefault(band_colour(b), b.part if good else f"lost to {b.cause}{rule}")
    for colour, label in named.items():
        parts.append("█ " if label == "productive" else "▒ ", style=colour)
        parts.append(f"{label}  ", style="dim")
    return [legend, parts]


# ------------------------------------------------------------------------ SVG

_FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"


def render_svg(tl: Timeline, width: int = 960) -> str:
    """A standalone SVG document of the timeline."""
    left, right, top, row_h, bar_h = 130, 240, 74, 34, 18
    plot_w = width - left - right
    rows = 1 + len(tl.rows) + (1 if tl.bands else 0)
    legend_y = top + rows * row_h + 46
    items = _legend_items(tl)
    placed = _legend_places(items, width)
    height = legend_y + 34 + _LEGEND_LINE * max((line for _, line in placed), default=0)

    def x(t: float) -> float:
        return left + (t / tl.span * plot_w if tl.span > 0 else 0.0)

    out: list[str] = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' {_FONT} font-size='13'>",
        f"<rect width='{width}' height='{height}' fill='#ffffff'/>",
    ]
    title = f"job {tl.job}" + (f" · {tl.name}" if tl.name else "")
    outcome = str(tl.state) + (f" ({tl.cause.kind})" if tl.cause.kind is not CauseKind.NONE else "")
    out.append(f"<text x='20' y='28' font-size='17' font-weight='bold'>{escape(title)}</text>")
    out.append(
        f"<text x='20' y='50' fill='{STATE_COLOUR.get(tl.state, '#000')}' font-weight='bold'>"
        f"{escape(outcome)}</text>"
    )
    out.append(
        f"<text x='{width - 20}' y='50' text-anchor='end' fill='#5f6368'>"
        f"{escape(tl.origin.astimezone().strftime('%Y-%m-%d %H:%M:%S'))}, "
        f"{escape(format_duration(tl.span))}</text>"
    )

    axis_y = top + rows * row_h + 6
    for t in _ticks(tl.span):
        xt = x(t)
        out.append(
            f"<line x1='{xt:.1f}' y1='{top - 4}' x2='{xt:.1f}' y2='{axis_y}' "
            "stroke='#e8eaed' stroke-width='1'/>"
        )
        out.append(
            f"<text x='{xt:.1f}' y='{axis_y + 16}' text-anchor='middle' fill='#5f6368' "
            f"font-size='11'>{escape(format_duration(t))}</text>"
        )
    out.append(
        f"<line x1='{left}' y1='{axis_y}' x2='{left + plot_w}' y2='{axis_y}' stroke='#9aa0a6'/>"
    )

    # The job's committed states.
    y = top
    out.append(_label(y, row_h, "job", bold=True))
    for seg in tl.segments:
        colour = STATE_COLOUR.get(seg.state, "#5f6368")
        if seg.end <= seg.start:  # the terminal state: a dot where the job ended
            out.append(
                f"<circle cx='{x(seg.start):.1f}' cy='{y + row_h / 2:.1f}' r='6' "
                f"fill='{colour}'><title>{escape(str(seg.state))}</title></circle>"
            )
            continue
        x0, x1 = x(seg.start), max(x(seg.end), x(seg.start) + 2)
        out.append(
            f"<rect x='{x0:.1f}' y='{y + (row_h - 10) / 2:.1f}' width='{x1 - x0:.1f}' height='10' "
            f"rx='3' fill='{colour}' opacity='0.85'><title>{escape(str(seg.state))}</title></rect>"
        )
        if x1 - x0 > 8 * len(str(seg.state)):
            out.append(
                f"<text x='{(x0 + x1) / 2:.1f}' y='{y + row_h / 2 - 8:.1f}' text-anchor='middle' "
                f"fill='{colour}' font-size='11'>{escape(str(seg.state))}</text>"
            )
    for at, label in tl.marks:
        xm = x(at)
        out.append(
            f"<line x1='{xm:.1f}' y1='{top}' x2='{xm:.1f}' y2='{axis_y}' stroke='#5f6368' "
            f"stroke-dasharray='3,3' stroke-width='1'><title>{escape(label)}</title></line>"
        )

    # One row per submission, one bar per execution.
    for n, bars in tl.rows:
        y += row_h
        out.append(_label(y, row_h, f"submission {n}"))
        if not bars:
            out.append(
                f"<text x='{left + 4}' y='{y + row_h / 2 + 4:.1f}' fill='#9aa0a6'>"
                "not started</text>"
            )
        for bar in bars:
            x0, x1 = x(bar.start), max(x(bar.end), x(bar.start) + 3)
            colour = bar_colour(bar)
            tip = f"execution {bar.index}: {bar_label(bar)}"
            if bar.cause is not None and bar.cause.detail:
                tip += f" ({bar.cause.detail})"
            out.append(
                f"<rect x='{x0:.1f}' y='{y + (row_h - bar_h) / 2:.1f}' width='{x1 - x0:.1f}' "
                f"height='{bar_h}' rx='4' fill='{colour}'><title>{escape(tip)}</title></rect>"
            )
            if bar.cause is not None and bar.cause.kind is not CauseKind.NONE:
                out.append(
                    f"<text x='{x1 - 4:.1f}' y='{y + row_h / 2 + 5:.1f}' text-anchor='end' "
                    f"fill='#ffffff' font-weight='bold'>✕</text>"
                )
        if bars:
            last = bars[-1]
            out.append(
                f"<text x='{left + plot_w + 12}' y='{y + row_h / 2 + 4:.1f}' "
                f"fill='{bar_colour(last)}'>"
                f"{escape(' → '.join(bar_label(b) for b in bars))}</text>"
            )

    # The goodput row: each part of the job's time, a loss in the colour of its cause.
    if tl.bands:
        y += row_h
        out.append(_label(y, row_h, "goodput", bold=True))
        for band in tl.bands:
            x0, x1 = x(band.start), max(x(band.end), x(band.start) + 1)
            opacity = "1" if band.part == "productive" else "0.8"
            out.append(
                f"<rect x='{x0:.1f}' y='{y + (row_h - bar_h) / 2:.1f}' width='{x1 - x0:.1f}' "
                f"height='{bar_h}' fill='{band_colour(band)}' opacity='{opacity}'>"
                f"<title>{escape(band_label(band))}: "
                f"{escape(format_duration(band.end - band.start))}</title></rect>"
            )

    for (lx, line), (colour, label) in zip(placed, items, strict=True):
        ly = legend_y + line * _LEGEND_LINE
        out.append(
            f"<rect x='{lx:.1f}' y='{ly - 10}' width='12' height='12' rx='2' fill='{colour}'/>"
        )
        out.append(f"<text x='{lx + 17:.1f}' y='{ly}' fill='#3c4043'>{escape(label)}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


#: The height of one line of the SVG's legend, and the width a legend label's letter takes.
_LEGEND_LINE = 20
_LEGEND_LETTER = 7.2


def _legend_items(tl: Timeline) -> list[tuple[str, str]]:
    """The states and causes the picture uses, each with its colour, in the order first seen."""
    items: list[tuple[str, str]] = [
        (STATE_COLOUR.get(s.state, "#5f6368"), f"job {s.state}")
        for s in {seg.state: seg for seg in tl.segments if seg.end > seg.start}.values()
    ]
    seen = set()
    for _, bars in tl.rows:
        for bar in bars:
            label = "running" if bar.cause is None else bar_label(bar).split(" (")[0]
            if label not in seen:
                seen.add(label)
                items.append((bar_colour(bar), label))
    for band in tl.bands:
        label = band_label(band)
        if band.part != "productive" and label not in seen:
            seen.add(label)
            items.append((band_colour(band), label))
    return items


def _legend_places(items: list[tuple[str, str]], width: int) -> list[tuple[float, int]]:
    """Where each legend item goes (its x and its line): left to right, onto a new line when
    the next would cross the picture's right margin, so that no label is cut off."""
    placed: list[tuple[float, int]] = []
    lx, line = 20.0, 0
    for _, label in items:
        if lx > 20.0 and _legend_right(lx, label) > width - 20:
            lx, line = 20.0, line + 1
        placed.append((lx, line))
        lx = _legend_right(lx, label) + 13  # the next swatch after a gap
    return placed


def _legend_right(x: float, label: str) -> float:
    """Where a legend item placed at ``x`` ends: its swatch and gap (17 px), then its label.
    One computation for the placing and for whoever checks it, so the two cannot disagree by
    a float's last digit (a label once ended at 577.0000000000001 of a 577 px limit)."""
    return x + 17 + _LEGEND_LETTER * len(label)


def _label(y: float, row_h: float, text: str, *, bold: bool = False) -> str:
    weight = " font-weight='bold'" if bold else ""
    return f"<text x='20' y='{y + row_h / 2 + 4:.1f}' fill='#3c4043'{weight}>{escape(text)}</text>"
