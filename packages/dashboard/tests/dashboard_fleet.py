"""The dashboard tests' scripted run: a job preempted and recovered and one that succeeded at
once, supervised over a real LMDB store; and the secrets no page or log line may show."""

from __future__ import annotations

from pathlib import Path

from jobdispatch import ManualClock
from jobdispatch_dashboard import ClusterSource
from jobdispatch_records_lmdb import LmdbRecords
from jobdispatch_supervise.scripted import PREEMPT_RESUBMIT, Scripted

#: Secrets the configuration holds; no page and no log line may show them.
SECRET = "s3cr3t-Password-Never-Shown"
URL_PASSWORD = "url-pass-word-9f3a"


class Fleet:
    """Three jobs supervised to their end: ``recovered`` preempted once and resubmitted by its
    rule, ``quick`` succeeded at once, ``doomed`` preempted until its budget ran out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        clock = ManualClock()
        scripted = Scripted(LmdbRecords(str(path), clock=clock), clock)
        self.scripted = scripted
        self.recovered = scripted.submit(PREEMPT_RESUBMIT, name="recovered")
        scripted.preempt_runs(self.recovered, [1])
        scripted.complete_run(self.recovered, 2)
        scripted.run(self.recovered)
        self.quick = scripted.submit(PREEMPT_RESUBMIT, name="quick")
        scripted.complete_run(self.quick, 1)
        scripted.run(self.quick)
        self.doomed = scripted.submit(PREEMPT_RESUBMIT, name="doomed")
        scripted.preempt_runs(self.doomed, [1, 2, 3])
        scripted.run(self.doomed)

    def source(self, name: str = "lab", *, label: str = "") -> ClusterSource:
        backend = self.scripted.backend
        return ClusterSource(
            name=name,
            adapter="memory",
            source="the test",
            store_label=label or str(self.path),
            open_store=lambda: LmdbRecords(str(self.path), readonly=True),
            backend=lambda: backend,
        )
