"""Progress as evidence through the Kubeflow adapter (issue 26, item 8): a TrainJob whose
progress comes from the publication log is stopped as ``stalled`` once the log stops moving,
and resubmitted.

kwok's pods run no process, so the test writes the log the way the job's rank 0 would, with the
checkpoint helper's own functions (``Marker`` for the throttled marks, ``record_publication``
for a published step, ``record_resumed`` for the resumed entry), under a checkpoint root that
the supervisor lists through the helper's reader (``RootsReader``), as ``jobdispatch
supervise`` does. Runs over the in-memory API with its controllers' stand-in, and on the real
control plane (tools/kube/up): skipped with the reason when it is not running, failed under
JOBDISPATCH_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import jobdispatch
from jobdispatch import Action, Actor, CauseKind, JobSpec, RecoveryPolicy, Rule, State
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.testing import eventually, job_of
from jobdispatch.types import ProgressSource, Provenance, StallRule
from jobdispatch_publish.marks import Marker, record_publication, record_resumed
from jobdispatch_publish.supervision import RootsReader
from jobdispatch_supervise import Supervisor
from test_kubeflow_end_to_end import kube, running_submission

__all__ = ["kube"]  # the fixture, shared with the Kubeflow end-to-end tests

STALL_AFTER = timedelta(seconds=10)


class Rank0:
    """What a training job's rank 0 writes to the publication log, written from the test for a
    pod that runs nothing: a mark each step (at most one a half second), a publication every
    ``publish_every`` steps, until told to hang."""

    def __init__(self, root: Path, job: str, submission: int, publish_every: int = 3) -> None:
        env = {
            "JOBDISPATCH_JOB": job,
            "JOBDISPATCH_SUBMISSION": str(submission),
            "JOBDISPATCH_EXECUTION": "0",
            "JOBDISPATCH_CHECKPOINT_ROOT": str(root),
            "JOBDISPATCH_PROGRESS_INTERVAL": "0.5",
        }
        self.marker = Marker.from_env(env)
        self.publish_every = publish_every
        self.step = 0
        self.hung = threading.Event()
        self.thread = threading.Thread(target=self._train, daemon=True)

    def resume(self, step: int | None) -> None:
        record_resumed(self.marker.store, self.marker.identity, step, dt.datetime.now(dt.UTC))
        self.step = step or 0

    def _train(self) -> None:
        while not self.hung.wait(0.1):
            self.step += 1
            self.marker.mark(self.step)
            if self.step % self.publish_every == 0:
                record_publication(
                    self.marker.store, self.marker.identity, self.step, dt.datetime.now(dt.UTC)
                )


def test_a_trainjob_whose_log_stops_moving_is_stopped_as_stalled_and_resubmitted(
    kube: Any, tmp_path: Path
) -> None:
    backend, driver, made = kube
    root = tmp_path / "published"
    root.mkdir()
    spec = JobSpec(
        name="e2e-stalled",
        command=("python", "train.py"),
        progress=ProgressSource(root=str(root), record_every=timedelta(seconds=10)),
        stall=StallRule(after=STALL_AFTER, startup_grace=timedelta(minutes=10)),
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.STALLED], action=Action.RESUBMIT, budget=1)]
        ),
    )
    store = MemoryRecords()
    cluster = jobdispatch.compose(backend, store=store)
    job = job_of(cluster.operator.submit(spec, by=Actor.human("e2e"), supervised=True))
    made.append(job)
    sup = Supervisor(backend, store, poll=0.5, progress=RootsReader())
    thread = threading.Thread(target=sup.serve, daemon=True)
    thread.start()
    try:
        running_submission(cluster, job, 1)
        first = Rank0(root, job, 1)
        first.resume(None)
        first.thread.start()
        eventually(lambda: first.step >= 7, "submission 1 to publish step 6", every=0.1)
        first.hung.set()  # the rank wedges: the pod keeps running, the log stops moving
        first.thread.join(timeout=30)
        hung_at = first.step

        second_ref = running_submission(cluster, job, 2)
        status = cluster.observer.get(job)
        ended = status.submissions[0].executions[-1].cause
        assert ended is not None
        assert (ended.kind, ended.provenance) == (CauseKind.STALLED, Provenance.SUPERVISOR), ended
        # The newest progress the supervisor saw: the last publication at least, the last
        # (throttled) mark at most.
        seen = re.search(r"last progress: step ([0-9]+)", ended.detail)
        assert seen is not None, ended.detail
        assert hung_at - hung_at % 3 <= int(seen[1]) <= hung_at, (ended.detail, hung_at)

        # The second submission resumes from the newest publication and finishes.
        second = Rank0(root, job, 2)
        second.resume(hung_at - hung_at % 3)
        driver.complete(second_ref)
        done = eventually(
            lambda: cluster.observer.get(job), "the job settling", holds=lambda s: s.settled
        )
        assert done.state is State.SUCCEEDED, done
        one, two = done.submissions
        assert [e.cause.kind for e in one.executions if e.cause] == [CauseKind.STALLED]
        assert [e.cause.kind for e in two.executions if e.cause] == [CauseKind.NONE]
        assert done.plan is not None and done.plan.rules[0].firings == 1
    finally:
        sup.stop()
        thread.join(timeout=60)
