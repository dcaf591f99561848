"""The helper's reader as the supervisor's progress source: what the helper writes under a root
reaches the core as its own values, one listing per read, and a root that cannot be read is an
error (the supervisor's blindness), never an empty answer."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import pytest
from jobdispatch.clock import ManualClock
from jobdispatch.progress import JobProgress, Mark, Origin, ProgressReader, Resumed
from jobdispatch_publish.errors import ProgressUnreadable
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.marks import Marker
from jobdispatch_publish.posix import PosixStore
from jobdispatch_publish.publish import publish
from jobdispatch_publish.resolve import resolve
from jobdispatch_publish.supervision import RootsReader
from publish_helpers import make_save


def test_what_the_helper_writes_reaches_the_supervisor_as_core_values(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    store = PosixStore(root)
    clock = ManualClock()
    first = Identity("job-a", 1, "0")
    clock.advance(10)
    assert publish(store, first, make_save(tmp_path / "s", {"w.bin": 8}), 20, clock=clock).written
    clock.advance(10)
    second = Identity("job-a", 2, "0")
    assert resolve(store, "job-a", into=tmp_path / "r", identity=second, clock=clock) is not None
    clock.advance(10)
    Marker(store, second, clock=clock).mark(25)
    resolve(store, "job-b", identity=Identity("job-b", 1, "0"), clock=clock)  # a fresh start
    source = RootsReader()
    assert isinstance(source, ProgressReader)
    got = source.read(str(root), {"job-a", "job-b", "job-c"})
    assert set(got) == {"job-a", "job-b"}
    a = got["job-a"]
    assert isinstance(a, JobProgress)
    assert a.checkpoint is not None and a.latest is not None
    assert (a.checkpoint.step, a.checkpoint.origin, a.checkpoint.submission) == (
        20,
        Origin.PUBLICATION,
        1,
    )
    assert (a.latest.step, a.latest.origin, a.latest.submission) == (25, Origin.MARK, 2)
    assert a.latest.at.tzinfo is not None and a.latest.at.utcoffset() == UTC.utcoffset(None)
    assert [(r.submission, r.execution, r.step) for r in a.resumed] == [(2, "0", 20)]
    assert all(isinstance(r, Resumed) for r in a.resumed)
    assert isinstance(a.latest, Mark)
    # A fresh start names no checkpoint: nothing for a no-advance charge to compare with.
    assert got["job-b"] == JobProgress()


def test_a_root_that_cannot_be_read_raises_and_is_never_an_empty_answer(tmp_path: Path) -> None:
    with pytest.raises(ProgressUnreadable):
        RootsReader().read(str(tmp_path / "missing"), {"job-a"})
