"""Parsers for what Slurm's commands print. Pure: text in, values out.

Every parser reads the output of a command run with ``TZ=UTC`` (docs/specs/0007 §2: times are
printed in the client's zone, so a command run elsewhere would be read wrongly), in the
delimited forms the adapter asks for: ``squeue -O 'Field:|,...'`` and ``sacct -P``. Fixed-width
output is never parsed: sacct cuts ``CANCELLED by 0`` to ``CANCELLED+`` there (0007 §8).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime

import attrs

__all__ = [
    "SACCT_FIELDS",
    "SQUEUE_FIELDS",
    "ExitStatus",
    "SacctRow",
    "SqueueRow",
    "expand_hostlist",
    "parse_exit",
    "parse_key_values",
    "parse_sacct",
    "parse_squeue",
    "parse_time",
]

#: The squeue ``-O`` fields the adapter asks for, in order. ``Requeue`` and ``RestartCnt`` are
#: ``-O`` names that 22.05.8 accepts (0007 tried ``Restarts``, which it refuses).
SQUEUE_FIELDS: tuple[str, ...] = (
    "JobID",
    "Name",
    "Partition",
    "State",
    "Reason",
    "StartTime",
    "EndTime",
    "NodeList",
    "Requeue",
    "RestartCnt",
    "SubmitTime",
)

#: The sacct ``-o`` fields the adapter asks for, in order.
SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobName",
    "Partition",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Submit",
    "Start",
    "End",
    "NodeList",
    "Reason",
)

_NO_TIME = frozenset({"", "unknown", "none", "n/a", "invalid"})


def parse_time(text: str) -> datetime | None:
    """A Slurm timestamp printed under ``TZ=UTC`` as an aware UTC datetime; ``None`` for the
    words Slurm prints when there is no time (Unknown, None, N/A, NONE)."""
    text = text.strip()
    if text.lower() in _NO_TIME:
        return None
    if len(text) != 19 or text[10] != "T":
        return None
    try:
        return datetime.fromisoformat(text).replace(tzinfo=UTC)
    except ValueError:
        return None


@attrs.frozen
class ExitStatus:
    """Slurm's ``exit:signal`` pair (``WEXITSTATUS:WTERMSIG``)."""

    code: int
    signal: int

    @property
    def clean(self) -> bool:
        return self.code == 0 and self.signal == 0

    def __str__(self) -> str:
        return f"{self.code}:{self.signal}"


def parse_exit(text: str) -> ExitStatus | None:
    """``3:0`` → ExitStatus(3, 0); an empty field (a batch step of a failed node) → None."""
    m = re.fullmatch(r"\s*(\d+):(\d+)\s*", text)
    if m is None:
        return None
    return ExitStatus(int(m[1]), int(m[2]))


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Expand a Slurm hostlist as ``scontrol show hostnames`` does (22.05, checked against the
    real command in the tests); "None assigned" and empty → ``()``.

    ``node[1-2,5],gpu03`` → ``node1 node2 node5 gpu03``. A range keeps the width of its low end
    (``n[08-10]`` → ``n08 n09 n10``; ``n[8-010]`` → ``n8 n9 n10``). A name with several bracket
    groups is their product (``rack[1-2]-node[01-02]``), in Slurm's order: the last group varies
    fastest, then the first, the second, and so on up to the one before last. Duplicates are
    kept, as Slurm keeps them. Text after the last group (``n[1-2]x``) is refused by 22.05; it
    is expanded here as the same product, so a later Slurm that prints it still reads.

    Raises ``ValueError`` for what Slurm refuses to parse: an unclosed or empty group, a range
    that is not digits, or one whose low end is above its high end.
    """
    text = text.strip()
    if not text or text.lower().startswith("none") or text == "(null)":
        return ()
    out: list[str] = []
    for name in _split_hostlist(text):
        out.extend(_expand_name(name))
    return tuple(out)


def _split_hostlist(text: str) -> list[str]:
    """Split at the commas outside brackets; empty names (``a,,b``, a trailing comma) drop."""
    names: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                msg = f"invalid hostlist {text!r}: nested '['"
                raise ValueError(msg)
        elif ch == "]":
            depth -= 1
            if depth < 0:
                msg = f"invalid hostlist {text!r}: ']' without '['"
                raise ValueError(msg)
        elif ch == "," and depth == 0:
            names.append(text[start:i])
            start = i + 1
    if depth:
        msg = f"invalid hostlist {text!r}: unclosed '['"
        raise ValueError(msg)
    names.append(text[start:])
    return [n.strip() for n in names if n.strip()]


_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def _expand_group(group: str, name: str) -> list[str]:
    """One bracket group's values, each already padded to its range's width."""
    values: list[str] = []
    for rng in group.split(","):
        m = _RANGE.fullmatch(rng)
        if m is None:
            msg = f"invalid hostlist {name!r}: bad range {rng!r}"
            raise ValueError(msg)
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            values.append(lo)
            continue
        if int(lo) > int(hi):
            msg = f"invalid hostlist {name!r}: range {rng!r} runs backwards"
            raise ValueError(msg)
        values.extend(f"{i:0{len(lo)}d}" for i in range(int(lo), int(hi) + 1))
    return values


def _expand_name(name: str) -> list[str]:
    """One name of a hostlist, its bracket groups expanded in Slurm's order."""
    pieces = re.split(r"\[([^\]]*)\]", name)
    texts, groups = pieces[0::2], [_expand_group(g, name) for g in pieces[1::2]]
    if not groups:
        return [name]
    # Slurm nests the loops with the last group innermost and, outside it, the first group
    # fastest: for the groups g1..gn the outermost loop is g(n-1), then ..., g1, then gn.
    order = [*range(len(groups) - 2, -1, -1), len(groups) - 1]
    out: list[str] = []
    for combo in itertools.product(*(groups[i] for i in order)):
        chosen = dict(zip(order, combo, strict=True))
        parts = [texts[0]]
        for i in range(len(groups)):
            parts += [chosen[i], texts[i + 1]]
        out.append("".join(parts))
    return out


def _nodes(text: str) -> tuple[str, ...]:
    """A row's NodeList, expanded; a list this parser cannot read is kept as it was printed, so
    one odd row never loses the job's state (the nodes are only shown and compared)."""
    try:
        return expand_hostlist(text)
    except ValueError:
        return (text.strip(),)


def _split(line: str, fields: Sequence[str], free: str) -> dict[str, str] | None:
    """Split a ``|``-delimited line into ``fields``. A ``|`` inside the one free-text field
    (a foreign job's name) would add columns: the extras are joined back into ``free``."""
    parts = line.split("|")
    if len(parts) < len(fields):
        return None
    extra = len(parts) - len(fields)
    if extra:
        at = list(fields).index(free)
        parts[at : at + extra + 1] = ["|".join(parts[at : at + extra + 1])]
    return dict(zip(fields, parts, strict=True))


@attrs.frozen
class SqueueRow:
    """One job as ``squeue -t all`` shows it (live, or ended and still in slurmctld's memory)."""

    job_id: str
    name: str
    state: str
    reason: str = ""
    partition: str = ""
    start: datetime | None = None
    end: datetime | None = None
    nodes: tuple[str, ...] = ()
    requeue: bool | None = None
    restarts: int | None = None
    submit: datetime | None = None


def parse_squeue(
    text: str,
    fields: Sequence[str] = SQUEUE_FIELDS,
    keep: Callable[[str], bool] | None = None,
) -> list[SqueueRow]:
    """Rows of ``squeue -h -O 'F1:|,F2:|,...'`` (or ``-o '%i|%j|...'`` with matching
    ``fields``). A trailing ``|`` (what ``-O`` prints after the last field) is dropped. With
    ``keep``, only rows whose job name it accepts are converted (a user's queue may be long)."""
    rows = []
    for raw in text.splitlines():
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        if line.endswith("|") and len(line.split("|")) == len(fields) + 1:
            line = line[:-1]
        cols = _split(line, fields, "Name")
        if cols is None or (keep is not None and not keep(cols["Name"])):
            continue
        requeue = cols.get("Requeue", "").strip()
        restarts = cols.get("RestartCnt", "").strip()
        rows.append(
            SqueueRow(
                job_id=cols["JobID"].strip(),
                name=cols["Name"],
                state=cols["State"].strip(),
                reason=cols.get("Reason", "").strip(),
                partition=cols.get("Partition", "").strip(),
                start=parse_time(cols.get("StartTime", "")),
                end=parse_time(cols.get("EndTime", "")),
                nodes=_nodes(cols.get("NodeList", "")),
                requeue=None if requeue not in ("0", "1") else requeue == "1",
                restarts=int(restarts) if restarts.isdigit() else None,
                submit=parse_time(cols.get("SubmitTime", "")),
            )
        )
    return rows


@attrs.frozen
class SacctRow:
    """One accounting row: a job record (``28``) or one of its steps (``28.batch``, ``28.0``)."""

    job_id: str
    name: str
    state: str
    exit: ExitStatus | None = None
    derived: ExitStatus | None = None
    partition: str = ""
    submit: datetime | None = None
    start: datetime | None = None
    end: datetime | None = None
    nodes: tuple[str, ...] = ()
    reason: str = ""

    @property
    def is_step(self) -> bool:
        return "." in self.job_id

    @property
    def base_id(self) -> str:
        return self.job_id.split(".", 1)[0]

    @property
    def step(self) -> str:
        return self.job_id.split(".", 1)[1] if self.is_step else ""

    @property
    def base_state(self) -> str:
        """``CANCELLED by 0`` → ``CANCELLED``."""
        return self.state.split(" ", 1)[0] if self.state else ""


def parse_sacct(
    text: str,
    fields: Sequence[str] = SACCT_FIELDS,
    keep: Callable[[str], bool] | None = None,
) -> list[SacctRow]:
    """Rows of ``sacct -P`` in the order printed. A header line (``JobID|...``, when ``-n`` was
    not given) names the columns and overrides ``fields``. With ``keep``, only job rows whose
    name it accepts (and their steps) are converted."""
    rows = []
    kept: set[str] = set()
    for raw in text.splitlines():
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        if line.startswith("JobID|"):
            fields = line.split("|")
            continue
        cols = _split(line, fields, "JobName")
        if cols is None:
            continue
        if keep is not None:
            base = cols["JobID"].strip().split(".", 1)[0]
            if "." not in cols["JobID"] and keep(cols["JobName"]):
                kept.add(base)
            if base not in kept:
                continue
        rows.append(
            SacctRow(
                job_id=cols["JobID"].strip(),
                name=cols.get("JobName", ""),
                state=cols.get("State", "").strip(),
                exit=parse_exit(cols.get("ExitCode", "")),
                derived=parse_exit(cols.get("DerivedExitCode", "")),
                partition=cols.get("Partition", "").strip(),
                submit=parse_time(cols.get("Submit", "")),
                start=parse_time(cols.get("Start", "")),
                end=parse_time(cols.get("End", "")),
                nodes=_nodes(cols.get("NodeList", "")),
                reason=cols.get("Reason", "").strip(),
            )
        )
    return rows


def parse_key_values(text: str) -> dict[str, str]:
    """``scontrol show config`` (``Key = value`` lines) or ``scontrol -o show job`` /
    ``show partition`` (``Key=value`` words) as a dict. Values with spaces survive in the
    first form; in the second, a word without ``=`` is appended to the previous value."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^(\w[\w/\[\]]*)\s+=\s?(.*)$", line)
        if m is not None:
            out[m[1]] = m[2].strip()
            continue
        last = ""
        for word in line.split():
            if "=" in word:
                key, _, value = word.partition("=")
                out[key] = value
                last = key
            elif last:
                out[last] += " " + word
    return out


def by_job(rows: Iterable[SacctRow]) -> Mapping[str, list[SacctRow]]:
    """Rows grouped by their job id, in the order printed."""
    out: dict[str, list[SacctRow]] = {}
    for row in rows:
        out.setdefault(row.base_id, []).append(row)
    return out
