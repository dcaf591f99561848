"""The cache of settled jobs' goodput figures: a hit gives back exactly what was kept, a new
revision or another version misses, a damaged file is started afresh without a word, the file
and its folders are private, and ``jobdispatch goodput`` uses it only while a record is at the
revision its figures came from (``--no-cache`` not at all)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from jobdispatch.goodput import JobSummary, Part, summarize
from jobdispatch.records import events as ev
from jobdispatch.spi import ExecutionObs
from jobdispatch.testing import PREEMPTED, SUCCESS, Story, observation
from jobdispatch.triggers import End
from jobdispatch.types import Action, CauseKind, ObjectState, Resources, Rule, State
from jobdispatch_cli import goodput_cache
from jobdispatch_cli.goodput_cache import FiguresCache, cache_path, decode, encode
from jobdispatch_records_lmdb import LmdbRecords

Invoke = Callable[..., Any]

_RUNNING = ObjectState.RUNNING
_ENDED = ObjectState.ENDED


def _run(start: Any, end: Any = None, preempted: bool = False) -> ExecutionObs:
    if end is None:
        return ExecutionObs(index=0, state=_RUNNING, started_at=start)
    cause = PREEMPTED if preempted else SUCCESS
    return ExecutionObs(index=0, state=_ENDED, cause=cause, started_at=start, ended_at=end)


def settled_record(job: str = "job-1", *, settle: bool = True) -> Story:
    """A job preempted once, resubmitted by its rule, then successful (and settled): figures
    with spans of several parts, blames, a rule and two runs."""
    s = Story.with_rules(Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=3))
    s.job_id = job
    s.spec = attrs.evolve(s.spec, nodes=2, resources=Resources(gpus_per_node=4))
    s.later(2).launched(1, "o1", running=False)
    start = s.later(60).now
    s.observe(observation(job, 1, 1, "o1", _RUNNING, _run(start)))
    end = s.later(900).now
    s.observe(observation(job, 1, 1, "o1", _ENDED, _run(start, end, True)))
    s.later(2).authorize(2, End("o1", 0), rule=0, cause=PREEMPTED)
    s.attempt(2, 1).reply(2, 1, "o2").canonical(2, "o2").open(2, "o2")
    start2 = s.later(120).now
    s.observe(observation(job, 2, 1, "o2", _RUNNING, _run(start2)))
    end2 = s.later(3600).now
    s.observe(observation(job, 2, 1, "o2", _ENDED, _run(start2, end2)))
    s.later(1).add(ev.OutcomeDecided, state=State.SUCCEEDED, cause=SUCCESS)
    if settle:
        s.later(3).add(ev.Settled)
    return s


def _summary(job: str = "job-1", *, settle: bool = True) -> tuple[int, JobSummary]:
    s = settled_record(job, settle=settle)
    view = s.view()
    return len(view.events), summarize(view, s.now + timedelta(days=1))


def test_a_summary_comes_back_from_its_encoding_exactly() -> None:
    _, summary = _summary()
    f = summary.figures
    assert f.settled and len(f.runs) == 2 and summary.rule_labels  # a summary worth the test
    assert {s.part for s in f.spans} >= {Part.PRODUCTIVE, Part.DECISION, Part.CLEANUP}
    assert decode(encode(summary)) == summary
    costly = attrs.evolve(summary, figures=attrs.evolve(f, checkpoint_costs=(timedelta(2),)))
    assert decode(encode(costly)) == costly


def test_a_hit_is_the_summary_kept_at_that_revision(tmp_path: Path) -> None:
    revision, summary = _summary()
    path = tmp_path / "c.sqlite"
    with FiguresCache(path) as cache:
        assert cache.usable
        assert cache.get({"job-1": revision}) == {}
        cache.put([(revision, summary)])
    with FiguresCache(path) as again:  # kept across runs
        assert again.get({"job-1": revision, "job-2": 4}) == {"job-1": summary}


def test_another_revision_misses_and_its_figures_replace_the_old(tmp_path: Path) -> None:
    revision, summary = _summary()
    with FiguresCache(tmp_path / "c.sqlite") as cache:
        cache.put([(revision, summary)])
        # The settled record took one more event (an observation, a clean-up): a miss.
        assert cache.get({"job-1": revision + 1}) == {}
        newer = attrs.evolve(summary, submitter_id="someone")
        cache.put([(revision + 1, newer)])
        assert cache.get({"job-1": revision + 1}) == {"job-1": newer}
        assert cache.get({"job-1": revision}) == {}


def test_a_job_not_settled_is_never_kept(tmp_path: Path) -> None:
    revision, running = _summary(settle=False)
    assert not running.figures.settled
    with FiguresCache(tmp_path / "c.sqlite") as cache:
        cache.put([(revision, running)])
        assert cache.get({"job-1": revision}) == {}


def test_figures_of_another_version_are_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    revision, summary = _summary()
    path = tmp_path / "c.sqlite"
    with FiguresCache(path) as cache:
        cache.put([(revision, summary)])
    monkeypatch.setattr(goodput_cache, "_VERSION", "figures 999, format 1")
    with FiguresCache(path) as newer:
        assert newer.usable
        assert newer.get({"job-1": revision}) == {}
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT count(*) FROM figures").fetchone() == (0,)
        assert db.execute("SELECT value FROM meta").fetchone() == ("figures 999, format 1",)


@pytest.mark.parametrize(
    "damage",
    [b"", b"not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000],
    ids=["empty", "text", "torn"],
)
def test_a_damaged_file_is_started_afresh(tmp_path: Path, damage: bytes) -> None:
    revision, summary = _summary()
    path = tmp_path / "c.sqlite"
    path.write_bytes(damage)
    with FiguresCache(path) as cache:
        assert cache.usable
        assert cache.get({"job-1": revision}) == {}
        cache.put([(revision, summary)])
        assert cache.get({"job-1": revision}) == {"job-1": summary}


def test_a_kept_value_that_does_not_decode_is_a_miss(tmp_path: Path) -> None:
    revision, summary = _summary()
    path = tmp_path / "c.sqlite"
    with FiguresCache(path) as cache:
        cache.put([(revision, summary), (revision, _summary("job-2")[1])])
    # closing: a connection's own context commits but does not close it (Python 3.13 warns).
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE figures SET data = ? WHERE job = 'job-1'", (b"[1, 2",))
        # Another job's figures under this job's name: not this job's.
        db.execute("UPDATE figures SET job = 'job-3' WHERE job = 'job-2'")
    with FiguresCache(path) as cache:
        assert cache.get({"job-1": revision, "job-3": revision}) == {}


def test_a_cache_that_cannot_be_made_is_no_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    revision, summary = _summary()
    with FiguresCache(blocker / "goodput" / "c.sqlite") as cache:
        assert not cache.usable
        cache.put([(revision, summary)])
        assert cache.get({"job-1": revision}) == {}


def test_a_file_outside_the_caches_layout_changes_no_folder_that_exists(tmp_path: Path) -> None:
    """A benchmark's cache in a fresh folder under /tmp once closed /tmp itself (the parent
    of the file's folder): only the cache's own folders are ever closed."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    fresh = shared / "bench"
    fresh.mkdir()
    os.chmod(fresh, 0o755)
    with FiguresCache(fresh / "c.sqlite") as cache:
        cache.put([_summary()])
        assert cache.usable
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o755
    assert stat.S_IMODE((fresh / "c.sqlite").stat().st_mode) == 0o600
    made = shared / "new" / "deeper"
    with FiguresCache(made / "c.sqlite") as cache:
        assert cache.usable
    assert stat.S_IMODE(made.stat().st_mode) == 0o700  # made by the cache: private
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777


def test_the_file_is_0600_and_its_folders_0700_whatever_the_umask(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    path = cache_path("lmdb /some/store", env)
    (tmp_path / "cache" / "jobdispatch").mkdir(parents=True, mode=0o755)
    os.chmod(tmp_path / "cache" / "jobdispatch", 0o755)  # as an earlier tool may have left it
    old = os.umask(0o000)
    try:
        with FiguresCache(path) as cache:
            cache.put([_summary()])
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    assert path.parent == tmp_path / "cache" / "jobdispatch" / "goodput"


def test_the_file_name_says_nothing_of_the_store() -> None:
    identity = "postgresql postgresql://me@db.example.org:5432/dispatch (schema jobdispatch_a)"
    path = cache_path(identity, {"XDG_CACHE_HOME": "/c"})
    assert path.parent == Path("/c/jobdispatch/goodput")
    stem = path.name.removesuffix(".sqlite")
    assert len(stem) == 16 and all(c in "0123456789abcdef" for c in stem)
    other = cache_path(identity.replace("_a)", "_b)"), {"XDG_CACHE_HOME": "/c"})
    assert other != path  # each schema, each store, a file of its own


def test_without_xdg_cache_home_the_cache_is_under_dot_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_path("x", {}).parent == tmp_path / ".cache" / "jobdispatch" / "goodput"


# ------------------------------------------------------------------------------ the command


def _store(home: Path) -> Path:
    return home / "records"


def _files(home: Path) -> list[Path]:
    return sorted((home / "cache" / "jobdispatch" / "goodput").glob("*.sqlite"))


def _report(invoke: Invoke, home: Path, *args: str) -> list[dict[str, Any]]:
    """The jobs of ``goodput --json`` on the test's own store (the rest names ``now``)."""
    got = invoke("--store", str(_store(home)), "goodput", "--json", *args)
    assert got.code == 0 and got.err == "", got.err
    jobs: list[dict[str, Any]] = got.json()["jobs"]
    return jobs


def _create(home: Path, job: str) -> Story:
    with LmdbRecords(_store(home)) as store:
        s = settled_record(job)
        store.create(s.header, s.events)
    return s


def test_the_command_uses_kept_figures_only_at_their_revision(invoke: Invoke, home: Path) -> None:
    """The cache is proved used by doctoring what it holds: the report shows the doctored
    figures while the record stays at their revision, the record's own once it grows, and
    always the record's own with --no-cache."""
    s = _create(home, "job-x")
    first = _report(invoke, home)
    assert [j["job"] for j in first] == ["job-x"] and first[0]["state"] == "succeeded"
    (path,) = _files(home)
    revision = len(s.events)
    with FiguresCache(path) as cache:
        (kept,) = cache.get({"job-x": revision}).values()
        doctored = attrs.evolve(kept, figures=attrs.evolve(kept.figures, name="from-the-cache"))
        cache.put([(revision, doctored)])
    assert [j["name"] for j in _report(invoke, home)] == ["from-the-cache"]
    assert _report(invoke, home, "--no-cache") == first
    assert [j["name"] for j in _report(invoke, home)] == ["from-the-cache"]  # left as it was
    with LmdbRecords(_store(home)) as store:
        # A settled record still takes events: its kept figures no longer count.
        late = ev.CallAnswered(at=s.now, by=s.events[-1].by, call=9, ok=True)
        store.append("job-x", [late], expect_revision=revision)
    assert _report(invoke, home) == first
    with FiguresCache(path) as cache:
        assert cache.get({"job-x": revision + 1}) == {"job-x": kept}


def test_a_damaged_cache_file_is_no_error_to_the_user(invoke: Invoke, home: Path) -> None:
    _create(home, "job-y")
    good = _report(invoke, home)
    (path,) = _files(home)
    path.write_bytes(b"\x00garbage" * 64)
    assert _report(invoke, home) == good  # no word on standard error either
    assert _report(invoke, home) == good
