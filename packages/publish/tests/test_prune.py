"""Prune's rule as properties, and prune against a store: withdrawal, pins and leftovers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.errors import Invalid
from jobdispatch_publish import layout
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.posix import PosixStore
from jobdispatch_publish.prune import prune, select
from jobdispatch_publish.publish import publish
from jobdispatch_publish.resolve import newest, resolve
from publish_helpers import make_save

steps_st = st.sets(st.integers(min_value=0, max_value=10_000), max_size=60)
keep_last_st = st.integers(min_value=1, max_value=10)
keep_every_st = st.none() | st.integers(min_value=1, max_value=500)


@given(steps_st, keep_last_st, keep_every_st, st.sets(st.integers(0, 10_000), max_size=5))
def test_the_newest_the_last_n_every_kth_and_pinned_are_never_pruned(
    steps: set[int], keep_last: int, keep_every: int | None, pinned: set[int]
) -> None:
    chosen = select(steps, keep_last=keep_last, keep_every=keep_every, pinned=pinned)
    assert chosen <= steps
    if steps:
        assert max(steps) not in chosen
    assert not chosen & set(sorted(steps, reverse=True)[:keep_last])
    assert not chosen & pinned
    if keep_every:
        assert all(s % keep_every for s in chosen)


@given(steps_st, keep_last_st, keep_every_st)
def test_everything_else_is_pruned(steps: set[int], keep_last: int, keep_every: int | None) -> None:
    chosen = select(steps, keep_last=keep_last, keep_every=keep_every)
    kept = steps - chosen
    newest_n = set(sorted(steps, reverse=True)[:keep_last])
    for s in kept:
        assert s in newest_n or (keep_every is not None and s % keep_every == 0)


@given(steps_st, keep_last_st, keep_every_st, st.sets(st.integers(0, 20_000), max_size=30))
def test_a_checkpoint_kept_by_every_k_stays_kept_as_more_arrive(
    steps: set[int], keep_last: int, keep_every: int | None, later: set[int]
) -> None:
    before = steps - select(steps, keep_last=keep_last, keep_every=keep_every)
    after = (steps | later) - select(steps | later, keep_last=keep_last, keep_every=keep_every)
    if keep_every:
        assert {s for s in before if s % keep_every == 0} <= after


@given(steps_st, keep_last_st, keep_every_st)
def test_pruning_is_idempotent(steps: set[int], keep_last: int, keep_every: int | None) -> None:
    first = select(steps, keep_last=keep_last, keep_every=keep_every)
    assert not select(steps - first, keep_last=keep_last, keep_every=keep_every)


def test_keep_last_below_one_is_refused() -> None:
    with pytest.raises(Invalid, match="newest is always kept"):
        select({1, 2}, keep_last=0)


JOB = "job-p"


@pytest.fixture
def store(tmp_path: Path) -> PosixStore:
    (tmp_path / "root").mkdir()
    return PosixStore(tmp_path / "root")


def _fill(store: PosixStore, tmp_path: Path, steps: list[int]) -> None:
    for s in steps:
        publish(store, Identity(JOB, 1, "0"), make_save(tmp_path / f"s{s}", {"m": 100}), s)


def test_prune_withdraws_then_deletes_and_resolve_still_finds_the_newest(
    store: PosixStore, tmp_path: Path
) -> None:
    _fill(store, tmp_path, [100, 200, 300, 400, 500])
    report = prune(store, JOB, keep_last=2, keep_every=200)
    assert report.withdrawn == [100, 300]
    assert report.deleted == [100, 300]
    assert report.kept == [200, 400, 500]
    found = resolve(store, JOB)
    assert found is not None
    assert found.entry.step == 500
    # The log is untouched; the withdrawn steps' data is gone.
    assert len(list(store.keys(layout.log_prefix(JOB)))) == 5
    assert len(list(store.children(f"{JOB}/executions/1/0/"))) == 3
    again = prune(store, JOB, keep_last=2, keep_every=200)
    assert (again.withdrawn, again.deleted) == ([], [])


def test_a_pinned_step_keeps_its_data_until_the_pin_is_gone(
    store: PosixStore, tmp_path: Path
) -> None:
    _fill(store, tmp_path, [1, 2, 3])
    # A resolve of step 1 in progress (its pin), then a prune that would withdraw 1 and 2.
    store.write(layout.pin_key(JOB, 1, "someone"), json.dumps({"pinned_at": time.time()}).encode())
    report = prune(store, JOB, keep_last=1)
    assert report.withdrawn == [2]  # a pinned step is not chosen
    store.delete([layout.pin_key(JOB, 1, "someone")])
    report = prune(store, JOB, keep_last=1)
    assert (report.withdrawn, report.deleted) == ([1], [1])


def test_a_pin_taken_after_withdrawal_holds_the_data(store: PosixStore, tmp_path: Path) -> None:
    _fill(store, tmp_path, [1, 2])
    store.create(layout.pruned_key(JOB, 1), b"{}")  # prune's marker, as if mid-run
    store.write(layout.pin_key(JOB, 1, "late"), json.dumps({"pinned_at": time.time()}).encode())
    report = prune(store, JOB, keep_last=1)
    assert (report.held, report.deleted) == ([1], [])
    assert newest(store, JOB, skip=frozenset({2})) is None  # withdrawn: never resolved again


def test_a_stale_pin_does_not_hold_forever(store: PosixStore, tmp_path: Path) -> None:
    _fill(store, tmp_path, [1, 2])
    store.write(layout.pin_key(JOB, 1, "dead"), b"{}")
    report = prune(store, JOB, keep_last=1, pin_ttl=3600, now=time.time() + 7200)
    assert report.deleted == [1]


def test_orphaned_data_folders_are_swept_after_the_grace(store: PosixStore, tmp_path: Path) -> None:
    _fill(store, tmp_path, [1])
    ident = Identity(JOB, 1, "0")
    lost = layout.data_prefix(ident, 1, now=time.time() - 10)
    store.put_files([], lost)  # a loser's folder: same step, no entry points to it
    (store.root / lost / "x").write_bytes(b"x")
    assert prune(store, JOB, keep_last=1, grace=3600).orphans == 0
    assert prune(store, JOB, keep_last=1, grace=1).orphans == 1
    assert resolve(store, JOB) is not None
