"""An in-memory progress source: checkpoint roots held in a dict, as the tests and the simulator
play a job's helper (marks, publications, resumed entries) and a store that goes blind.

It answers :class:`jobdispatch.progress.ProgressReader` as the helper's own reader does: one
listing of a root answers for every job under it, with each job's newest progress of any origin,
its newest publication and its resumed entries; a root made blind raises
:class:`~jobdispatch.progress.ProgressUnreadable`. It counts the listings of each root, so a test
can check the supervisor's bound (at most one per root per poll).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from datetime import datetime

import attrs

from jobdispatch.progress import JobProgress, Mark, Origin, ProgressUnreadable, Resumed
from jobdispatch.types import JobID

__all__ = ["MemoryProgress"]


@attrs.define
class _Job:
    latest: Mark | None = None
    checkpoint: Mark | None = None
    resumed: list[Resumed] = attrs.Factory(list)


class MemoryProgress:
    """Checkpoint roots in memory. ``mark``, ``publish`` and ``resume`` play a job's helper;
    ``blind`` and ``see`` play the store failing and recovering."""

    def __init__(self) -> None:
        self._roots: dict[str, dict[JobID, _Job]] = {}
        self._blind: dict[str, str] = {}
        #: Listings made, by root.
        self.listings: Counter[str] = Counter()

    def _job(self, root: str, job: JobID) -> _Job:
        return self._roots.setdefault(root, {}).setdefault(job, _Job())

    def mark(
        self, root: str, job: JobID, step: int, at: datetime, submission: int, execution: str = ""
    ) -> None:
        """The job marks progress at ``step`` (``jobdispatch-publish progress --step``)."""
        rec = self._job(root, job)
        rec.latest = Mark(step=step, at=at, submission=submission, execution=execution)

    def publish(
        self, root: str, job: JobID, step: int, at: datetime, submission: int, execution: str = ""
    ) -> None:
        """The job's helper publishes a checkpoint of ``step``: progress, and a step to resume
        from. A step not newer than the newest publication changes nothing (the helper refuses
        to publish a step twice; an older one is no newer checkpoint)."""
        rec = self._job(root, job)
        mark = Mark(
            step=step,
            at=at,
            submission=submission,
            execution=execution,
            origin=Origin.PUBLICATION,
        )
        if rec.checkpoint is None or step > rec.checkpoint.step:
            rec.checkpoint = mark
        if rec.latest is None or at >= rec.latest.at:
            rec.latest = mark

    def resume(
        self, root: str, job: JobID, submission: int, execution: str, at: datetime
    ) -> int | None:
        """``resolve`` for a starting execution: the step it resumes from (None: nothing
        published yet), recorded as a resumed entry when there is one."""
        rec = self._job(root, job)
        if rec.checkpoint is None:
            return None
        step = rec.checkpoint.step
        if not any(r.submission == submission and r.execution == execution for r in rec.resumed):
            rec.resumed.append(
                Resumed(submission=submission, execution=execution, step=step, at=at)
            )
        return step

    def newest_checkpoint(self, root: str, job: JobID) -> int | None:
        rec = self._roots.get(root, {}).get(job)
        return rec.checkpoint.step if rec is not None and rec.checkpoint is not None else None

    def blind(self, root: str, detail: str = "the checkpoint store does not answer") -> None:
        self._blind[root] = detail

    def see(self, root: str) -> None:
        self._blind.pop(root, None)

    def is_blind(self, root: str) -> bool:
        return root in self._blind

    def read(self, root: str, jobs: Collection[JobID]) -> Mapping[JobID, JobProgress]:
        """One listing of ``root``: every job of ``jobs`` found under it."""
        self.listings[root] += 1
        if root in self._blind:
            raise ProgressUnreadable(f"{root}: {self._blind[root]}")
        found = self._roots.get(root, {})
        return {
            job: JobProgress(
                latest=rec.latest, checkpoint=rec.checkpoint, resumed=tuple(rec.resumed)
            )
            for job, rec in found.items()
            if job in jobs
        }
