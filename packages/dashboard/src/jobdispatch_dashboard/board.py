"""What the pages show, read from each cluster's record store, read-only.

The jobs list is a :class:`~jobdispatch.records.derived.Derived` of each record's
:class:`~jobdispatch_dashboard.rows.Row` per cluster (the same revision-keyed cache the metrics
endpoint reads through), so a refresh with nothing changed costs one survey per store. A job's
page reads that one record again and folds it whole. The adapter is asked only for what the
record cannot hold: the tail of each rank's output and the cluster's capabilities.

A store that cannot be opened or does not answer is not an error page: its cluster shows why,
and it is tried again at the next refresh.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs
from jobdispatch.errors import DispatchError, Invalid, NotFound
from jobdispatch.goodput import goodput
from jobdispatch.job import fold
from jobdispatch.records.derived import Derived
from jobdispatch.records.store import Records
from jobdispatch.spi import Discovery, OutputReader
from jobdispatch.status import Status, project
from jobdispatch.types import JobID, JobSpec
from jobdispatch_cli.commands.inspect import object_of
from jobdispatch_cli.commands.running import extra_answers
from jobdispatch_cli.goodput_view import job_data
from jobdispatch_cli.timeline import build, render_svg

from jobdispatch_dashboard.redact import Redactor
from jobdispatch_dashboard.rows import Row, row_of

__all__ = ["Board", "ClusterSource", "JobPage", "OutputTail"]

log = logging.getLogger("jobdispatch.dashboard")

#: How much of each rank's output a job's page shows: its last bytes.
TAIL_BYTES = 4096
#: How long a cluster's probed capabilities are shown before they are asked again.
CAPABILITIES_TTL = 300.0


@attrs.frozen
class ClusterSource:
    """One cluster the dashboard shows: where it is configured, a label for its store (no
    secret in it), a function opening its store read-only, and one making its adapter (None:
    no output tails or capabilities)."""

    name: str
    adapter: str
    source: str
    store_label: str
    open_store: Callable[[], Records]
    backend: Callable[[], Any] | None = None


@attrs.frozen
class OutputTail:
    """The end of one rank's standard output, or why it cannot be shown."""

    rank: int
    text: str = ""
    problem: str = ""


@attrs.frozen
class JobPage:
    """Everything a job's page shows."""

    cluster: str
    status: Status
    timeline_svg: str
    goodput: dict[str, Any] | None
    budgets: list[dict[str, Any]]
    output: list[OutputTail]


class Board:
    """Every cluster's jobs, refreshed from the stores on demand (thread-safe: the server
    answers requests from a pool of threads)."""

    def __init__(
        self, sources: Sequence[ClusterSource], *, redactor: Redactor | None = None
    ) -> None:
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            msg = f"clusters named twice: {sorted(n for n in names if names.count(n) > 1)}"
            raise Invalid(msg)
        self.sources = {s.name: s for s in sources}
        #: What blanks the configuration's secrets out of pages and logs.
        self.redactor = redactor or Redactor()
        self._lock = threading.Lock()
        self._watches: dict[str, Derived[Row]] = {}
        #: Why each cluster's store could not be read at the last refresh.
        self.problems: dict[str, str] = {}
        self._capabilities: dict[str, tuple[float, list[dict[str, str]] | str]] = {}

    def refresh(self) -> None:
        """Bring every cluster's rows up to date; a store that fails is named in
        :attr:`problems` and its rows stay as of its last refresh."""
        with self._lock:
            for name, source in self.sources.items():
                try:
                    watch = self._watches.get(name)
                    if watch is None:
                        watch = Derived(
                            source.open_store(),
                            functools.partial(row_of, name),
                            reader="dashboard",
                            log=log,
                        )
                        self._watches[name] = watch
                    watch.refresh()
                except DispatchError as exc:
                    self.problems[name] = str(exc)
                    log.warning("cluster %s: the record store did not answer: %s", name, exc)
                else:
                    self.problems.pop(name, None)

    def rows(self) -> list[Row]:
        """Every readable job of every cluster, as of the last refresh."""
        with self._lock:
            return [row for w in self._watches.values() for row in w.values.values()]

    def unreadable(self) -> dict[str, list[JobID]]:
        """Each cluster's jobs whose record cannot be read or folded."""
        with self._lock:
            return {n: sorted(w.unreadable) for n, w in self._watches.items() if w.unreadable}

    def job(self, cluster: str, job: JobID, *, now: datetime | None = None) -> JobPage:
        """The page of ``job`` in ``cluster``: NotFound when neither is known."""
        source = self.sources.get(cluster)
        if source is None:
            raise NotFound(f"no cluster {cluster!r}")
        with self._lock:
            watch = self._watches.get(cluster)
        if watch is None:
            raise NotFound(f"cluster {cluster!r}: its record store is not open")
        now = now or datetime.now(UTC)
        view = watch.store.read(job)
        status = project(fold(view, now), Discovery(job=job), now)
        figures = goodput(view, now) if status.submissions else None
        return JobPage(
            cluster=cluster,
            status=status,
            timeline_svg=render_svg(build(status, goodput=figures)),
            goodput=None if figures is None else job_data(cluster, figures),
            budgets=_budgets(status),
            output=self._output(source, status, view.header.spec),
        )

    def clusters(self) -> list[dict[str, Any]]:
        """Each cluster: its adapter, where it is configured, its store, how many jobs it
        has, and its capabilities as the adapter answers them (probed, declared or
        catalogued; asked again after :data:`CAPABILITIES_TTL`)."""
        out = []
        rows = self.rows()
        for name, source in self.sources.items():
            out.append(
                {
                    "name": name,
                    "adapter": source.adapter,
                    "source": source.source,
                    "store": source.store_label,
                    "jobs": sum(1 for r in rows if r.cluster == name),
                    "problem": self.problems.get(name, ""),
                    "capabilities": self._capabilities_of(source),
                }
            )
        return out

    def _capabilities_of(self, source: ClusterSource) -> list[dict[str, str]] | str:
        if source.backend is None:
            return "this cluster's adapter is not loaded here"
        cached = self._capabilities.get(source.name)
        if cached is not None and time.monotonic() - cached[0] < CAPABILITIES_TTL:
            return cached[1]
        answer: list[dict[str, str]] | str
        try:
            backend = source.backend()
            answers = {str(k): v for k, v in backend.capabilities(None).items()}
            answers.update(extra_answers(backend))
            answer = [
                {
                    "name": name,
                    "answer": str(s.answer),
                    "source": str(s.source),
                    "detail": s.detail,
                }
                for name, s in answers.items()
            ]
        except DispatchError as exc:
            answer = f"the adapter could not answer: {exc}"
        self._capabilities[source.name] = (time.monotonic(), answer)
        return answer

    def _output(self, source: ClusterSource, status: Status, spec: JobSpec) -> list[OutputTail]:
        """The tail of each rank's output of the latest submission that has an object."""
        if source.backend is None or not any(s.canonical for s in status.submissions):
            return []
        _, ref = object_of(status, None)
        try:
            backend = source.backend()
        except DispatchError as exc:
            return [OutputTail(0, problem=f"the adapter could not be made: {exc}")]
        if not isinstance(backend, OutputReader):
            return [OutputTail(0, problem=f"adapter {source.adapter!r} cannot read output")]
        tails = []
        for rank in range(spec.nodes * spec.procs_per_node):
            try:
                reader = backend.output(ref, stream="stdout", follow=False, rank=rank)
                try:
                    data = reader.read()
                finally:
                    close = getattr(reader, "close", None)
                    if callable(close):
                        close()
            except (DispatchError, OSError) as exc:
                tails.append(OutputTail(rank, problem=str(exc)))
                continue
            tails.append(OutputTail(rank, text=data[-TAIL_BYTES:].decode(errors="replace")))
        return tails


def _budgets(status: Status) -> list[dict[str, Any]]:
    """Each rule's budget, what its firings spent of it and what is left."""
    if status.plan is None:
        return []
    return [
        {
            "rule": a.index,
            "on": ", ".join(str(k) for k in a.effective.on),
            "action": str(a.effective.action),
            "enforcer": str(a.enforcer),
            "budget": a.effective.budget,
            "fired": a.firings,
            "used": a.charged,
            "left": max(0, a.effective.budget - a.charged),
        }
        for a in status.plan.rules
    ]
