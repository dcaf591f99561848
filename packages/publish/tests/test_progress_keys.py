"""The pure halves of progress: key names (round trips, order), what a listing means, and the
throttle's decision."""

from __future__ import annotations

import datetime as dt
import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.clock import ManualClock
from jobdispatch_publish import layout
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.layout import ProgressKey
from jobdispatch_publish.marks import Marker
from jobdispatch_publish.reader import summarize

NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
MILLIS = st.integers(min_value=0, max_value=layout.MAX_MILLIS)
STEP = st.integers(min_value=0, max_value=layout.MAX_STEP)
SUB = st.integers(min_value=1, max_value=999_999_999)


@st.composite
def progress_keys(draw: st.DrawFn, job: str | None = None) -> ProgressKey:
    kind = draw(st.sampled_from(layout.PROGRESS_KINDS))
    step = draw(st.none() | STEP) if kind == "resumed" else draw(STEP)
    return ProgressKey(kind, job or draw(NAME), draw(SUB), draw(NAME), step, draw(MILLIS))


@given(progress_keys())
def test_a_key_parses_back_to_what_it_was_made_of(parsed: ProgressKey) -> None:
    key = parsed.key()
    assert layout.parse_progress_key(key) == parsed
    assert key.startswith(layout.progress_prefix(parsed.job))
    assert parsed.at == layout.time_of(parsed.millis)
    assert layout.millis_of(parsed.at) == parsed.millis


@given(st.lists(progress_keys(job="j"), min_size=2, max_size=30))
def test_one_jobs_keys_list_newest_first(keys: list[ProgressKey]) -> None:
    listed = [layout.parse_progress_key(k) for k in sorted(k.key() for k in keys)]
    millis = [p.millis for p in listed if p is not None]
    assert millis == sorted(millis, reverse=True)


@given(st.lists(progress_keys(), min_size=1, max_size=40))
def test_each_jobs_keys_are_contiguous_in_a_listing(keys: list[ProgressKey]) -> None:
    """A comma sorts below every character of a name, so no other job's key falls between two
    keys of one job (even a job whose name extends another's: ``a`` and ``a.b``)."""
    jobs = [
        p.job for p in (layout.parse_progress_key(k) for k in sorted(x.key() for x in keys)) if p
    ]
    runs = [j for i, j in enumerate(jobs) if i == 0 or jobs[i - 1] != j]
    assert len(runs) == len(set(runs))


@given(st.text(max_size=80))
def test_any_name_parses_or_is_ignored_never_raises(text: str) -> None:
    for key in (text, layout.PROGRESS_PREFIX + text):
        parsed = layout.parse_progress_key(key)
        assert parsed is None or parsed.key() == key


@pytest.mark.parametrize(
    "name",
    [
        "j,8203797607046,mark,1,-,0",  # only a resumed entry may lack a step
        "j,8203797607046,mark,0,5,0",  # submissions start at 1
        "j,8203797607046,mark,1,05,0",  # a step is written without leading zeros
        "j,820379760704,mark,1,5,0",  # 12 digits of time
        "j,8203797607046,note,1,5,0",  # no such kind
        "j,8203797607046,mark,1,5,../x",  # not an execution name
        "_j,8203797607046,mark,1,5,0",  # not a job name
        "j,8203797607046,mark,1,1000000000000000000,0",  # above MAX_STEP
    ],
)
def test_a_stray_or_tampered_name_is_not_progress(name: str) -> None:
    assert layout.parse_progress_key(layout.PROGRESS_PREFIX + name) is None


def test_keys_refuse_what_they_cannot_say() -> None:
    with pytest.raises(ValueError, match="needs a step"):
        ProgressKey("mark", "j", 1, "0", None, 0)
    with pytest.raises(ValueError, match="step must be"):
        ProgressKey("published", "j", 1, "0", -1, 0)
    with pytest.raises(ValueError, match="not a valid name"):
        ProgressKey("mark", "j/k", 1, "0", 1, 0)
    with pytest.raises(ValueError, match="timezone-aware"):
        layout.millis_of(dt.datetime(2026, 1, 1))


def _expected(
    keys: list[ProgressKey], job: str
) -> tuple[ProgressKey | None, ProgressKey | None, list[ProgressKey]]:
    progress = [k for k in keys if k.job == job and k.kind != "resumed"]
    newest = max(progress, key=lambda k: (k.millis, k.step or 0), default=None)
    published = [k for k in progress if k.kind == "published"]
    best = max(published, key=lambda k: (k.step or 0, k.millis), default=None)
    resumed = sorted(
        (k for k in keys if k.job == job and k.kind == "resumed"),
        key=lambda k: (k.millis, k.submission, k.execution, -1 if k.step is None else k.step),
    )
    return newest, best, resumed


@given(
    st.lists(
        progress_keys(job="a") | progress_keys(job="a.b") | progress_keys(job="z"),
        max_size=40,
        unique_by=lambda k: k.key(),
    ),
    st.lists(st.text(max_size=10), max_size=3),
    st.randoms(),
)
def test_summarize_takes_each_jobs_newest_whatever_the_order(
    keys: list[ProgressKey], strays: list[str], rnd: random.Random
) -> None:
    names = [k.key() for k in keys] + [f"{layout.PROGRESS_PREFIX}{s}" for s in strays]
    snapshots = [summarize(sorted(names)), summarize(rnd.sample(names, len(names)))]
    assert snapshots[0] == snapshots[1]
    snap = snapshots[0]
    assert snap.listed == len(names)
    assert snap.strays == len(names) - len(keys)
    assert set(snap.jobs) == {k.job for k in keys}
    for job, seen in snap.jobs.items():
        newest, best, resumed = _expected(keys, job)
        if newest is None:
            assert seen.newest is None
        else:
            assert seen.newest is not None
            assert (seen.newest.step, layout.millis_of(seen.newest.at)) == (
                newest.step,
                newest.millis,
            )
        if best is None:
            assert seen.checkpoint is None
        else:
            assert seen.checkpoint is not None
            assert seen.checkpoint.source == "published"
            assert seen.checkpoint.step == best.step
        assert [
            (r.submission, r.execution, r.step, layout.millis_of(r.at)) for r in seen.resumed
        ] == [(k.submission, k.execution, k.step, k.millis) for k in resumed]


class _Recording:
    """Just what a Marker asks of a store, recording each mark written."""

    def __init__(self) -> None:
        self.written: list[ProgressKey] = []

    def keys(self, prefix: str) -> list[str]:
        return []

    def replace_marks(self, key: str, old: list[str]) -> None:
        parsed = layout.parse_progress_key(key)
        assert parsed is not None
        self.written.append(parsed)


@given(
    st.floats(min_value=0.001, max_value=3600, allow_nan=False),
    st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=120, allow_nan=False),
            st.integers(min_value=0, max_value=20),
        ),
        max_size=80,
    ),
)
def test_the_throttle_writes_at_most_once_per_interval_and_only_when_the_step_moves(
    interval: float, calls: list[tuple[float, int]]
) -> None:
    """Whatever the steps and the pauses between calls (a clock that never goes back), two
    writes are at least ``interval`` apart (to the millisecond the key keeps), no write repeats
    the step of the one before, and a call an interval after the last write with a new step
    writes."""
    store = _Recording()
    clock = ManualClock()
    marker = Marker(store, Identity("j", 1, "0"), interval=interval, clock=clock)  # type: ignore[arg-type]
    last: tuple[dt.datetime, int] | None = None
    for pause, step in calls:
        clock.advance(pause)
        expected = last is None or (
            # to the microsecond, which is what the clock keeps
            step != last[1] and (clock() - last[0]).total_seconds() >= interval - 1e-6
        )
        assert marker.mark(step) == expected
        if expected:
            last = (clock(), step)
    for before, after in itertools.pairwise(store.written):
        assert (after.millis - before.millis) / 1000 >= interval - 0.001
        assert after.step != before.step
