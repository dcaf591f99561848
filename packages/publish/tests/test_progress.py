"""Progress marks, publication progress, resumed entries and the batched reader, on POSIX and on
a real S3 (radosgw from tools/s3/up; the S3 cases skip without it)."""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.clock import ManualClock
from jobdispatch.errors import Invalid, Unreachable
from jobdispatch.exitcodes import ExitCode
from jobdispatch_publish import layout, marks
from jobdispatch_publish.cli import main
from jobdispatch_publish.errors import BadStep, ProgressUnreadable, RootUnavailable
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.marks import (
    Marker,
    MarkState,
    StateFile,
    check_step,
    parse_interval,
    parse_step,
)
from jobdispatch_publish.posix import PosixStore
from jobdispatch_publish.publish import publish
from jobdispatch_publish.reader import ProgressReader, read_progress
from jobdispatch_publish.resolve import resolve
from jobdispatch_publish.store import Store
from publish_helpers import HELPER, make_save

JOB = "job-p"


def ident(submission: int = 1, execution: str = "0", job: str = JOB) -> Identity:
    return Identity(job, submission, execution)


@pytest.fixture(params=["posix", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A fresh root on each kind of store."""
    if request.param == "posix":
        root = tmp_path / "root"
        root.mkdir()
        return PosixStore(root)
    make: Callable[..., Store] = request.getfixturevalue("make_s3_store")
    return make()


def progress_keys(store: Store) -> list[layout.ProgressKey]:
    found = [layout.parse_progress_key(k) for k in store.keys(layout.PROGRESS_PREFIX)]
    assert None not in found
    return [k for k in found if k is not None]


# -- marks ---------------------------------------------------------------------------------------


def test_marks_are_written_once_per_interval_and_replace_each_other(store: Store) -> None:
    clock = ManualClock()
    marker = Marker(store, ident(), interval=60, clock=clock)
    written = []
    for step in range(200):
        written.append(marker.mark(step))
        clock.advance(0.5)  # two steps a second: 100 s in all
    assert [i for i, w in enumerate(written) if w] == [0, 120]
    [mark] = progress_keys(store)
    assert (mark.kind, mark.step, mark.submission, mark.execution) == ("mark", 120, 1, "0")
    assert mark.at == layout.time_of(layout.millis_of(clock()) - 40_000)
    assert marker.state.pending == 199


def test_a_repeated_step_is_not_progress_and_flush_writes_the_last_step(store: Store) -> None:
    clock = ManualClock()
    marker = Marker(store, ident(), interval=60, clock=clock)
    assert marker.mark(5)
    clock.advance(600)
    assert not marker.mark(5)  # ten minutes on the same step: nothing to say
    assert not marker.flush()
    assert marker.mark(6)  # a new step, and the interval is long past
    clock.advance(1)
    assert not marker.mark(7)
    assert marker.flush()
    assert [k.step for k in progress_keys(store)] == [7]


def test_a_clock_set_back_writes_rather_than_going_silent(store: Store) -> None:
    clock = ManualClock()
    marker = Marker(store, ident(), interval=60, clock=clock)
    assert marker.mark(1)
    clock.set(clock() - dt.timedelta(hours=1))
    assert marker.mark(2)
    assert [k.step for k in progress_keys(store)] == [2]


def test_a_restarted_writer_replaces_the_mark_its_predecessor_left(store: Store) -> None:
    clock = ManualClock()
    assert Marker(store, ident(), clock=clock).mark(10)
    clock.advance(5)
    assert Marker(store, ident(), clock=clock).mark(11)  # a new process: a new marker
    other = Marker(store, ident(submission=2), clock=clock)
    clock.advance(5)
    assert other.mark(3)
    found = sorted((k.submission, k.step) for k in progress_keys(store))
    assert found == [(1, 11), (2, 3)]


def test_every_publication_is_progress_and_resolve_records_where_it_resumed(
    store: Store, tmp_path: Path
) -> None:
    clock = ManualClock()
    first, second = ident(1, "0"), ident(2, "0")
    for step in (10, 20):
        save = make_save(tmp_path / f"save-{step}", {"w.bin": 64})
        clock.advance(30)
        assert publish(store, first, save, step, clock=clock).written
    assert publish(store, first, tmp_path / "save-20", 20, clock=clock).written is False
    clock.advance(30)
    found = resolve(store, JOB, into=tmp_path / "resume", identity=second, clock=clock)
    assert found is not None
    assert found.entry.step == 20
    keys = progress_keys(store)
    assert sorted((k.kind, k.submission, k.step) for k in keys) == [
        ("published", 1, 20),  # the older publication of the same execution was replaced
        ("resumed", 2, 20),
    ]
    snapshot = read_progress(store)
    job = snapshot.jobs[JOB]
    assert job.checkpoint is not None
    assert (job.checkpoint.step, job.checkpoint.source, job.checkpoint.submission) == (
        20,
        "published",
        1,
    )
    assert job.newest == job.checkpoint
    assert [(r.submission, r.execution, r.step, r.at) for r in job.resumed] == [
        (2, "0", 20, layout.time_of(layout.millis_of(clock())))
    ]


def test_resolve_with_nothing_published_records_a_fresh_start(store: Store) -> None:
    assert resolve(store, JOB, identity=ident(3, "1")) is None
    [entry] = progress_keys(store)
    assert (entry.kind, entry.submission, entry.execution, entry.step) == ("resumed", 3, "1", None)
    assert read_progress(store).jobs[JOB].resumed[0].step is None


def test_resolve_without_an_identity_records_nothing(store: Store) -> None:
    assert resolve(store, JOB) is None
    assert progress_keys(store) == []
    with pytest.raises(Invalid, match="resolve of job job-p for an execution of job other"):
        resolve(store, JOB, identity=ident(job="other"))


def test_the_reader_sees_every_job_and_execution_in_one_listing(store: Store) -> None:
    clock = ManualClock()
    for n in range(12):
        for sub in (1, 2):
            clock.advance(1)
            Marker(store, ident(sub, "0", job=f"job-{n:02d}"), clock=clock).mark(n * 10 + sub)
    snapshot = read_progress(store)
    assert sorted(snapshot.jobs) == [f"job-{n:02d}" for n in range(12)]
    for n in range(12):
        newest = snapshot.jobs[f"job-{n:02d}"].newest
        assert newest is not None
        assert (newest.step, newest.submission, newest.source) == (n * 10 + 2, 2, "mark")
    assert snapshot.listed == 24
    assert snapshot.strays == 0


# -- S3: the cost of marks and of the reader, in requests ---------------------------------------


def _count_requests(client: Any) -> dict[str, int]:
    counts: dict[str, int] = {}

    def count(model: Any, **_: Any) -> None:
        counts[model.name] = counts.get(model.name, 0) + 1

    client.meta.events.register("before-call.s3", count)
    return counts


@pytest.mark.s3
def test_on_s3_a_mark_is_one_put_and_one_delete_and_the_reader_one_list(
    make_s3_store: Callable[..., Any],
) -> None:
    store = make_s3_store()
    clock = ManualClock()
    markers = [Marker(store, ident(1, "0", job=f"job-{n}"), clock=clock) for n in range(5)]
    for m in markers:
        m.mark(1)  # the first mark of each writer also lists its job's keys once
    counts = _count_requests(store.client)
    for step in range(2, 50):
        clock.advance(30)
        for m in markers:
            m.mark(step)
    assert counts == {"PutObject": 5 * 24, "DeleteObjects": 5 * 24}
    counts.clear()
    snapshot = read_progress(store)
    assert counts == {"ListObjectsV2": 1}  # no check_root request, no GET of any object
    assert {j: p.newest.step for j, p in snapshot.jobs.items() if p.newest} == {
        f"job-{n}": 49
        for n in range(5)  # steps 3, 5, ... 49 were written, 60 s apart
    }


@pytest.mark.s3
def test_the_reader_on_s3_is_blind_not_wrong_when_it_cannot_read(
    s3_env: dict[str, str], tmp_path: Path
) -> None:
    root = s3_env["JOBDISPATCH_CHECKPOINT_ROOT"]
    secret = "a-wrong-secret-value-987"
    with pytest.raises(ProgressUnreadable) as caught:
        ProgressReader(root, env={**s3_env, "AWS_SECRET_ACCESS_KEY": secret}).read()
    assert caught.value.reason == "credentials"
    assert secret not in str(caught.value)

    no_keys = {k: v for k, v in s3_env.items() if not k.startswith("AWS_ACCESS_KEY_ID")}
    no_keys.pop("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ProgressUnreadable) as caught:
        ProgressReader(root, env=no_keys).read()
    assert caught.value.reason == "credentials"

    config = tmp_path / "c.json"
    config.write_text(json.dumps({"s3": {"max_attempts": 1, "connect_timeout": 2}}))
    away = {**s3_env, "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9"}
    with pytest.raises(ProgressUnreadable) as caught:
        ProgressReader(root, env=away, config=str(config)).read()
    assert caught.value.reason == "unreachable"

    with pytest.raises(ProgressUnreadable) as caught:
        ProgressReader("s3://no-such-bucket-jd/x", env=s3_env).read()
    assert caught.value.reason == "root"

    assert ProgressReader(root, env=s3_env).read().jobs == {}  # an empty root is no error


# -- POSIX: failures ----------------------------------------------------------------------------


def test_a_mark_never_creates_a_missing_root(tmp_path: Path) -> None:
    store = PosixStore(tmp_path / "not-mounted")
    with pytest.raises(RootUnavailable, match="does not exist"):
        Marker(store, ident()).mark(1)
    assert not (tmp_path / "not-mounted").exists()


class _Flaky(PosixStore):
    """A POSIX store whose marks fail as an unreachable store's would, ``failures`` times."""

    def __init__(self, root: Path, failures: int) -> None:
        super().__init__(root)
        self.failures = failures
        self.tries = 0

    def replace_marks(self, key: str, old: Any) -> None:
        self.tries += 1
        if self.tries <= self.failures:
            raise Unreachable("the store cannot be reached (test)")
        super().replace_marks(key, old)


def test_a_store_that_is_down_never_stops_training_and_is_tried_once_per_interval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = _Flaky(tmp_path, failures=1)
    clock = ManualClock()
    marker = Marker(store, ident(), interval=60, clock=clock)
    with caplog.at_level(logging.WARNING):
        assert not marker.mark(1)
    assert "progress mark of step 1 not written" in caplog.text
    for step in range(2, 50):
        clock.advance(1)
        assert not marker.mark(step)
    assert store.tries == 1
    clock.advance(12)
    assert marker.mark(50)
    assert [k.step for k in progress_keys(store)] == [50]


class _HalfDone(PosixStore):
    """Writes the new mark, then fails as an S3 store whose DELETE did not go through."""

    fail = False

    def replace_marks(self, key: str, old: Any) -> None:
        if self.fail:
            self.fail = False
            super().replace_marks(key, [])
            raise Unreachable("the store cannot be reached (test)")
        super().replace_marks(key, old)


def test_a_mark_written_by_a_failed_call_is_replaced_by_the_next(tmp_path: Path) -> None:
    store = _HalfDone(tmp_path)
    clock = ManualClock()
    marker = Marker(store, ident(), interval=60, clock=clock)
    assert marker.mark(1)
    clock.advance(60)
    store.fail = True
    assert not marker.mark(2)  # written, but the old one is still there
    steps = [k.step for k in progress_keys(store)]
    assert sorted(s for s in steps if s is not None) == [1, 2] and None not in steps, steps
    clock.advance(60)
    assert marker.mark(3)
    assert [k.step for k in progress_keys(store)] == [3]


def test_the_reader_is_blind_not_wrong_on_a_missing_or_forbidden_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ProgressUnreadable) as caught:
        read_progress(PosixStore(tmp_path / "missing"))
    assert caught.value.reason == "root"
    assert "does not exist" in str(caught.value)

    def forbidden(path: Any) -> Any:
        # The tests run as root, whom no mode keeps out: the refusal is made here.
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    (tmp_path / "_progress").mkdir()
    with monkeypatch.context() as m:
        m.setattr("jobdispatch_publish.reader.os.scandir", forbidden)
        with pytest.raises(ProgressUnreadable) as caught:
            read_progress(PosixStore(tmp_path))
    assert caught.value.reason == "credentials"
    with pytest.raises(ProgressUnreadable) as caught:
        ProgressReader(str(tmp_path / "missing")).read()
    assert caught.value.reason == "root"
    with pytest.raises(Invalid, match="checkpoint root"):
        ProgressReader("gs://bucket/x")
    assert ProgressReader(str(tmp_path)).read().jobs == {}


# -- bad input ------------------------------------------------------------------------------------


class _Index:
    def __index__(self) -> int:
        return 12


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (-1, "step: -1 is negative"),
        (1.0, "step: 1.0 is not a whole number"),
        (True, "step: True is not a whole number"),
        ("3", "step: '3' is not a whole number"),
        (None, "step: None is not a whole number"),
        (10**18, "is above the largest step"),
    ],
)
def test_a_bad_step_is_refused_naming_what_is_wrong(step: object, message: str) -> None:
    with pytest.raises(BadStep, match=message):
        check_step(step)


def test_a_step_with_an_index_is_taken() -> None:
    assert check_step(_Index()) == 12


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-4", "--step: -4 is negative"),
        ("1.5", "--step: '1.5' is not a whole number"),
        ("1e3", "--step: '1e3' is not a whole number"),
        ("", "--step: '' is not a whole number"),
        ("٣", "not a whole number"),  # a digit, but not an ASCII one
    ],
)
def test_a_bad_step_flag_is_refused(text: str, message: str) -> None:
    with pytest.raises(BadStep, match=message):
        parse_step(text)


@pytest.mark.parametrize("value", [0, -5, "0", "abc", "nan", "inf", float("nan"), True, None])
def test_a_bad_interval_is_refused_naming_where_it_came_from(value: object) -> None:
    with pytest.raises(Invalid, match=r"JOBDISPATCH_PROGRESS_INTERVAL: .* is not an interval"):
        parse_interval(value, where="JOBDISPATCH_PROGRESS_INTERVAL")


def test_a_marker_refuses_a_bad_interval() -> None:
    with pytest.raises(Invalid, match="interval: -1 is not an interval"):
        Marker(PosixStore(Path("/nowhere")), ident(), interval=-1)


def test_a_marker_never_replaces_a_key_that_is_not_its_own_mark(tmp_path: Path) -> None:
    store = PosixStore(tmp_path)
    clock = ManualClock()
    others = [
        layout.progress_key("mark", ident(2, "0"), 5, clock()),
        layout.progress_key("mark", ident(1, "0", job="job-q"), 5, clock()),
        layout.progress_key("resumed", ident(), 5, clock()),
    ]
    (tmp_path / "_progress").mkdir()
    for key in others:
        (tmp_path / key).touch()
    state = MarkState(live=list(others))  # a state file edited by hand, or mistaken
    clock.advance(1)
    assert Marker(store, ident(), clock=clock, state=state).mark(6)
    assert sorted(os.listdir(tmp_path / "_progress")) == sorted(
        [k.removeprefix("_progress/") for k in others]
        + [layout.progress_key("mark", ident(), 6, clock()).removeprefix("_progress/")]
    )


def test_a_state_file_that_is_not_one_is_a_fresh_state() -> None:
    assert MarkState.from_json("not json") == MarkState()
    assert MarkState.from_json('{"last_at": "x", "last_step": 1, "live": []}') == MarkState()
    assert MarkState.from_json('{"last_at": 1, "last_step": 1, "live": ["../etc"]}') == MarkState()
    state = MarkState(1.5, 3, [layout.progress_key("mark", ident(), 3, ManualClock()())], 4)
    assert MarkState.from_json(state.to_json()) == state


# -- the command ----------------------------------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path, clean_env: dict[str, str]) -> dict[str, str]:
    root = tmp_path / "root"
    root.mkdir()
    return {
        **clean_env,
        "JOBDISPATCH_JOB": JOB,
        "JOBDISPATCH_SUBMISSION": "2",
        "JOBDISPATCH_EXECUTION": "0",
        "JOBDISPATCH_CHECKPOINT_ROOT": str(root),
        "JOBDISPATCH_PROGRESS_STATE": str(tmp_path / "state.json"),
    }


def _state(env: dict[str, str]) -> dict[str, Any]:
    """The one state the command's state file holds."""
    [state] = json.loads(Path(env["JOBDISPATCH_PROGRESS_STATE"]).read_text())["states"].values()
    assert isinstance(state, dict)
    return state


def _marks(env: dict[str, str]) -> list[tuple[str, int | None]]:
    folder = Path(env["JOBDISPATCH_CHECKPOINT_ROOT"]) / "_progress"
    if not folder.exists():
        return []
    found = [layout.parse_progress_key(f"_progress/{n}") for n in sorted(os.listdir(folder))]
    return [(k.kind, k.step) for k in found if k is not None]


def test_the_command_throttles_across_processes_without_touching_the_store(
    env: dict[str, str], tmp_path: Path
) -> None:
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*HELPER, *argv], env=env, capture_output=True, text=True, check=False
        )

    first = run("progress", "--step", "1")
    assert (first.returncode, first.stdout, first.stderr) == (0, "", "")
    assert _marks(env) == [("mark", 1)]
    # The root goes away: a call that is not due never notices, since it asks no store.
    root = Path(env["JOBDISPATCH_CHECKPOINT_ROOT"])
    root.rename(tmp_path / "elsewhere")
    second = run("progress", "--step", "2")
    assert (second.returncode, second.stderr) == (0, "")
    assert _state(env)["pending"] == 2
    third = run("progress", "--step", "3", "--now")
    assert third.returncode == ExitCode.ROOT_UNAVAILABLE, third.stderr
    assert "does not exist" in third.stderr
    (tmp_path / "elsewhere").rename(root)
    fourth = run("progress", "--step", "4", "--now")
    assert fourth.returncode == 0, fourth.stderr
    assert _marks(env) == [("mark", 4)]


def test_a_call_that_is_not_due_builds_no_s3_client(env: dict[str, str], tmp_path: Path) -> None:
    """The throttle is decided from the state file alone: with an S3 root and no server at all,
    a call that is not due exits 0 without importing boto3 (nor asking for credentials)."""
    state = Path(env["JOBDISPATCH_PROGRESS_STATE"])
    now = dt.datetime.now(dt.UTC)
    key = layout.progress_key("mark", ident(2, "0"), 1, now)
    owner = f"s3://no-server/x {JOB} 2 0"
    doc = {"states": {owner: MarkState(now.timestamp(), 1, [key]).to_doc()}}
    state.write_text(json.dumps(doc))
    code = (
        "import sys\n"
        "from jobdispatch_publish.cli import main\n"
        "rc = main(['progress', '--step', '2'])\n"
        "print(rc, 'boto3' in sys.modules, 'botocore' in sys.modules)\n"
    )
    s3 = {**env, "JOBDISPATCH_CHECKPOINT_ROOT": "s3://no-server/x"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=s3, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["0", "False", "False"], out.stderr
    assert json.loads(state.read_text())["states"][owner]["pending"] == 2


def test_a_state_file_of_another_execution_is_not_its_throttle(env: dict[str, str]) -> None:
    assert main(["progress", "--step", "1"], env=env) == 0
    other = {**env, "JOBDISPATCH_EXECUTION": "1"}  # the same state file, by mistake
    assert main(["progress", "--step", "1"], env=other) == 0
    assert sorted(_marks(env)) == [("mark", 1), ("mark", 1)]  # one mark for each
    for each in (env, other):  # and each its own throttle: neither is due again
        assert main(["progress", "--step", "2"], env=each) == 0
    assert sorted(_marks(env)) == [("mark", 1), ("mark", 1)]
    states = json.loads(Path(env["JOBDISPATCH_PROGRESS_STATE"]).read_text())["states"]
    assert sorted(st["pending"] for st in states.values()) == [2, 2]


def test_a_state_file_keeps_the_most_recent_owners(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    for n in range(StateFile.MAX_OWNERS + 4):
        state_file = StateFile(path, f"owner-{n}")
        state = state_file.lock()
        assert state == MarkState()
        state_file.save(MarkState(last_at=1000.0 + n, last_step=n))
        state_file.unlock()
    states = json.loads(path.read_text())["states"]
    assert sorted(states) == sorted(f"owner-{n}" for n in range(4, StateFile.MAX_OWNERS + 4))
    state_file = StateFile(path, "owner-9")
    assert state_file.lock() == MarkState(last_at=1009.0, last_step=9)
    state_file.unlock()


def test_the_command_skips_while_another_call_holds_the_state(env: dict[str, str]) -> None:
    path = Path(env["JOBDISPATCH_PROGRESS_STATE"])
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert main(["progress", "--step", "1", "--now"], env=env) == 0
        assert _marks(env) == []
    finally:
        os.close(fd)
    assert main(["progress", "--step", "1"], env=env) == 0
    assert _marks(env) == [("mark", 1)]


def test_the_interval_comes_from_the_flag_the_variable_or_the_configuration(
    env: dict[str, str], tmp_path: Path
) -> None:
    assert main(["progress", "--step", "1"], env=env) == 0
    path = Path(env["JOBDISPATCH_PROGRESS_STATE"])
    doc = json.loads(path.read_text())
    [state] = doc["states"].values()
    state["last_at"] -= 5  # five seconds ago
    path.write_text(json.dumps(doc))
    assert main(["progress", "--step", "2"], env=env) == 0
    assert _marks(env) == [("mark", 1)]  # 60 s by default
    assert main(["progress", "--step", "2", "--interval", "4"], env=env) == 0
    assert _marks(env) == [("mark", 2)]
    config = tmp_path / "c.toml"
    config.write_text("[progress]\ninterval = 0.001\n")
    assert main(["progress", "--step", "3", "--config", str(config)], env=env) == 0
    assert _marks(env) == [("mark", 3)]
    slow = {**env, "JOBDISPATCH_PROGRESS_INTERVAL": "3600"}
    assert main(["progress", "--step", "4", "--config", str(config)], env=slow) == 0
    assert _marks(env) == [("mark", 3)]  # the variable wins over the file


@pytest.mark.parametrize(
    ("argv", "extra", "message"),
    [
        (["--step", "-3"], {}, "--step: -3 is negative"),
        (["--step", "2.5"], {}, "--step: '2.5' is not a whole number"),
        (["--step", "x"], {}, "--step: 'x' is not a whole number"),
        (["--step", "1", "--interval", "-1"], {}, "--interval: '-1' is not an interval"),
        (["--step", "1", "--interval", "soon"], {}, "--interval: 'soon' is not an interval"),
        (
            ["--step", "1"],
            {"JOBDISPATCH_PROGRESS_INTERVAL": "0"},
            "JOBDISPATCH_PROGRESS_INTERVAL: '0' is not an interval",
        ),
        (["--step", "1"], {"JOBDISPATCH_SUBMISSION": "0"}, "JOBDISPATCH_SUBMISSION"),
    ],
)
def test_bad_input_to_the_command_is_exit_3_naming_it(
    env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    extra: dict[str, str],
    message: str,
) -> None:
    assert main(["progress", *argv], env={**env, **extra}) == ExitCode.USAGE
    assert message in capsys.readouterr().err
    assert _marks(env) == []


def test_a_bad_interval_in_the_configuration_is_named_by_its_path(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[progress]\ninterval = -2\n")
    assert main(["progress", "--step", "1", "--config", str(config)], env=env) == ExitCode.USAGE
    assert "progress.interval: must be more than 0" in capsys.readouterr().err
    config.write_text("[progress]\ninterval = nan\n")
    assert main(["progress", "--step", "1", "--config", str(config)], env=env) == ExitCode.USAGE
    assert "progress.interval: nan is not an interval" in capsys.readouterr().err


def test_publish_refuses_a_bad_step_with_exit_3(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save = make_save(tmp_path / "save", {"a": 4})
    assert main(["publish", str(save), "--step", "-2"], env=env) == ExitCode.USAGE
    assert "--step: -2 is negative" in capsys.readouterr().err
    assert main(["publish", str(save), "--step", "7"], env=env) == 0
    assert _marks(env) == [("published", 7)]


def test_resolve_by_the_command_writes_the_resumed_entry_of_its_execution(
    env: dict[str, str],
) -> None:
    assert main(["resolve"], env=env) == 0
    assert _marks(env) == [("resumed", None)]
    by_hand = {k: v for k, v in env.items() if k != "JOBDISPATCH_SUBMISSION"}
    assert main(["resolve"], env=by_hand) == 0
    assert _marks(env) == [("resumed", None)]  # a person resolving: no entry
    bad = {**env, "JOBDISPATCH_EXECUTION": "../x"}
    assert main(["resolve"], env=bad) == ExitCode.USAGE


def test_the_python_call_builds_its_marker_from_the_environment(env: dict[str, str]) -> None:
    marks._default.clear()
    try:
        assert marks.progress(1, env=env)
        assert not marks.progress(2, env=env)
        with pytest.raises(BadStep, match="negative"):
            marks.progress(-1, env=env)
    finally:
        marks._default.clear()
    assert _marks(env) == [("mark", 1)]
