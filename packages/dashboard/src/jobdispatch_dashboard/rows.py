"""One line of the jobs list, derived from a job's record alone, and the list's filter.

Pure, like ``fold`` and ``project``: no I/O, no clock (``now`` is the store's). A row is what
the list shows and filters on; the job's page reads the whole record again.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import attrs
from jobdispatch.job import fold
from jobdispatch.records.events import View
from jobdispatch.spi import Discovery
from jobdispatch.status import project
from jobdispatch.types import JobID

__all__ = ["Query", "Row", "row_of", "select"]


@attrs.frozen(kw_only=True)
class Row:
    """A job as the list shows it: the state and cause its record gives (no cluster is
    asked), and when it was created."""

    cluster: str
    job: JobID
    name: str
    state: str
    cause: str
    provenance: str
    created_at: datetime | None
    settled: bool


def row_of(cluster: str, view: View, now: datetime) -> Row:
    """The row of the record ``view`` in ``cluster``'s store; Invalid for a record the
    protocol cannot have written (as ``fold``)."""
    status = project(fold(view, now), Discovery(job=view.header.job), now)
    return Row(
        cluster=cluster,
        job=status.job,
        name=status.name,
        state=str(status.state),
        cause=str(status.cause.kind),
        provenance=str(status.cause.provenance),
        created_at=status.created_at,
        settled=status.settled,
    )


@attrs.frozen(kw_only=True)
class Query:
    """The list's filter, as its form gives it: each field empty for "any". ``search``
    matches as a word on the command line does: a job's id, a prefix of it, or its name."""

    state: str = ""
    cause: str = ""
    cluster: str = ""
    search: str = ""

    def matches(self, row: Row) -> bool:
        return (
            (not self.state or row.state == self.state)
            and (not self.cause or row.cause == self.cause)
            and (not self.cluster or row.cluster == self.cluster)
            and (not self.search or row.job.startswith(self.search) or row.name == self.search)
        )


def select(rows: Iterable[Row], query: Query) -> list[Row]:
    """The rows ``query`` matches, newest first (the list's order: a fleet's news is on top)."""
    chosen = [r for r in rows if query.matches(r)]
    oldest = datetime.min.replace(tzinfo=None)
    chosen.sort(
        key=lambda r: (r.created_at.replace(tzinfo=None) if r.created_at else oldest, r.job),
        reverse=True,
    )
    return chosen
