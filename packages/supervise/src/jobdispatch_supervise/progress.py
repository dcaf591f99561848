"""One poll's readings of progress: every checkpoint root listed at most once, every running
object's output looked at at most once.

The supervisor makes one :class:`ProgressPoll` per poll and hands it to every batch of the
poll's rounds. The first batch holds every owned job: the poll groups the jobs that name a
progress source by their checkpoint root and lists each root once, through the injected
:class:`~jobdispatch.progress.ProgressReader`, whatever the number of jobs under it; later
rounds reuse those listings. A root that cannot be listed (the source raises, or no source is
configured where this supervisor runs) makes every job under it :class:`Blind`, which ``next``
records and never declares a stall on (spec 0004, "Progress").

Jobs whose plan counts output growth as progress (the cluster answers yes for
``output-growth``) have their running objects' output looked at too: one batched
:meth:`~jobdispatch.spi.OutputGrowthReader.output_growth` call for every such job of the
batch, at most one look per job per poll. An adapter that cannot look (it raises, or this
supervisor's adapter does not read output growth) makes those jobs blind, never stalled.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import attrs
from jobdispatch.members import OBJ_RUNNING
from jobdispatch.progress import Blind, JobProgress, ProgressReader, Reading
from jobdispatch.records import events as ev
from jobdispatch.spi import Discovery, Growth, ObjectRef, OutputGrowthReader
from jobdispatch.types import JobID

__all__ = ["ProgressPoll", "watches_output"]

log = logging.getLogger("jobdispatch.supervise")

_NOTHING_YET = JobProgress()
#: The adapter's output growth in the set of sources found unreadable (no root is named so).
_OUTPUT_KEY = "\0output-growth"


def watches_output(header: ev.Header) -> bool:
    """Whether the job's plan counts the growth of its output as progress."""
    stall = header.plan.stall
    return stall is not None and stall.output_growth


class ProgressPoll:
    """The progress readings of one poll, made lazily: one listing per root, one look at each
    job's running output."""

    def __init__(
        self,
        source: ProgressReader | None,
        holder: str = "",
        unreadable: set[str] | None = None,
        growth: OutputGrowthReader | None = None,
    ) -> None:
        self._source = source
        self._holder = holder
        self._growth = growth
        self._roots: dict[str, Mapping[JobID, JobProgress] | Blind] = {}
        self._output: dict[JobID, Mapping[str, Growth] | Blind] = {}
        #: The roots found unreadable by earlier polls (the supervisor keeps the set across
        #: polls): an outage is logged once when it begins and once when it ends, not per poll.
        self._unreadable = set() if unreadable is None else unreadable

    @property
    def listings(self) -> int:
        """How many roots this poll has listed (or tried to)."""
        return len(self._roots)

    @property
    def looks(self) -> int:
        """How many jobs' output this poll has looked at (or tried to)."""
        return len(self._output)

    def readings(
        self,
        headers: Mapping[JobID, ev.Header],
        discoveries: Mapping[JobID, Discovery | None] | None = None,
    ) -> dict[JobID, Reading]:
        """The reading of every job of ``headers`` that names a progress source; roots not yet
        listed this poll are listed now, once each, for all of their jobs at once, and the
        output of the running objects ``discoveries`` shows, of the jobs whose plan watches
        output growth, is looked at in one call for all of them."""
        wanted: dict[str, set[JobID]] = {}
        watched: list[JobID] = []
        for job, header in headers.items():
            source = header.spec.progress
            if source is not None:
                wanted.setdefault(source.root, set()).add(job)
            if watches_output(header):
                watched.append(job)
        for root, jobs in wanted.items():
            if root not in self._roots:
                self._roots[root] = self._list(root, jobs)
        self._look([j for j in watched if j not in self._output], discoveries or {})
        out: dict[JobID, Reading] = {}
        for root, jobs in wanted.items():
            listed = self._roots[root]
            for job in jobs:
                out[job] = listed if isinstance(listed, Blind) else listed.get(job, _NOTHING_YET)
        for job in watched:
            if job in self._output:
                out[job] = _merged(out.get(job, _NOTHING_YET), self._output[job])
            else:  # its output not looked at yet (no discovery this pass): judged when it is
                out.pop(job, None)
        return out

    def _list(self, root: str, jobs: set[JobID]) -> Mapping[JobID, JobProgress] | Blind:
        if self._source is None:
            who = f" {self._holder}" if self._holder else ""
            return Blind(f"no progress source is configured on supervisor{who}")
        try:
            found = self._source.read(root, jobs)
        except Exception as exc:  # any failure to read is blindness, never a stall
            if root not in self._unreadable:
                self._unreadable.add(root)
                log.warning(
                    "progress under %s unreadable (%d job%s blind until it reads again): %s",
                    root,
                    len(jobs),
                    "" if len(jobs) == 1 else "s",
                    exc,
                )
            return Blind(f"{type(exc).__name__}: {exc}")
        if root in self._unreadable:
            self._unreadable.discard(root)
            log.warning("progress under %s reads again", root)
        return found

    def _look(self, jobs: list[JobID], discoveries: Mapping[JobID, Discovery | None]) -> None:
        """Look at the output of every running object of ``jobs`` in one call."""
        if not jobs:
            return
        if self._growth is None:
            blind = Blind("this supervisor's adapter cannot see output grow (output-growth)")
            self._output.update(dict.fromkeys(jobs, blind))
            return
        refs: dict[JobID, list[ObjectRef]] = {}
        for job in jobs:
            found = discoveries.get(job)
            if found is None:  # not found this pass: looked at when it is
                continue
            refs[job] = [o.ref for o in found.objects if o.state is OBJ_RUNNING]
        every = [r for rs in refs.values() for r in rs]
        try:
            grown = self._growth.output_growth(every) if every else {}
        except Exception as exc:  # any failure to look is blindness, never a stall
            if _OUTPUT_KEY not in self._unreadable:
                self._unreadable.add(_OUTPUT_KEY)
                log.warning("output growth unreadable (jobs blind until it reads again): %s", exc)
            blind = Blind(f"output growth: {type(exc).__name__}: {exc}")
            self._output.update(dict.fromkeys(refs, blind))
            return
        if every and _OUTPUT_KEY in self._unreadable:
            self._unreadable.discard(_OUTPUT_KEY)
            log.warning("output growth reads again")
        for job, rs in refs.items():
            self._output[job] = {r.id: grown[r] for r in rs if r in grown}


def _merged(reading: Reading, output: Mapping[str, Growth] | Blind | None) -> Reading:
    """A job's reading of its checkpoint root with its output growth: blind when either is."""
    if isinstance(reading, Blind):
        return reading
    if isinstance(output, Blind):
        return output
    if not output:
        return reading
    return attrs.evolve(reading, output=output)
