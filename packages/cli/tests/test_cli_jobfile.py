"""Job files: TOML and YAML mirror JobSpec, and every error names the file, line and field."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from jobdispatch.types import (
    Action,
    CauseKind,
    Charge,
    CheckpointMode,
    PendingRule,
    ProgressSource,
    StallMode,
    StallRule,
)
from jobdispatch_cli.durations import format_duration, parse_duration
from jobdispatch_cli.jobfile import FileError, NoSuchFile, load_job_file
from jobdispatch_cli.locate import line_of, toml_lines

GOOD_TOML = """\
# a comment
name = "train"
command = ["python3", "train.py", "--steps", "3"]
nodes = 2
procs_per_node = 4
time_limit = "1h30m"
working_dir = "."
output = "logs"
checkpoint = "isolated"

[env]
CHECKPOINT_DIR = "/tmp/ckpt"
"QUOTED_NAME" = "x"

[[recovery.rules]]
on = ["preempted", "node-lost"]
action = "resubmit"
budget = 3

[[recovery.rules]]
on = "non-zero-exit"
action = "hold"
for = "30m"
"""

GOOD_YAML = """\
name: train
command: python3 train.py --steps 3
nodes: 2
time_limit: 90s
env:
  CHECKPOINT_DIR: /tmp/ckpt
recovery:
  rules:
    - on: [preempted]
      action: resubmit
      budget: 3
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(FileError) as err:
        load_job_file(path)
    return [str(p) for p in err.value.problems]


def test_toml_mirrors_jobspec(tmp_path: Path) -> None:
    spec = load_job_file(write(tmp_path, "job.toml", GOOD_TOML)).spec
    assert spec.name == "train"
    assert spec.command == ("python3", "train.py", "--steps", "3")
    assert (spec.nodes, spec.procs_per_node) == (2, 4)
    assert spec.time_limit == timedelta(hours=1, minutes=30)
    assert spec.working_dir == str(tmp_path)
    assert spec.output == str(tmp_path / "logs")
    assert spec.env == {"CHECKPOINT_DIR": "/tmp/ckpt", "QUOTED_NAME": "x"}
    assert spec.checkpoint is CheckpointMode.ISOLATED
    first, second = spec.recovery.rules
    assert first.on == (CauseKind.PREEMPTED, CauseKind.NODE_LOST)
    assert (first.action, first.budget) == (Action.RESUBMIT, 3)
    assert second.on == (CauseKind.NON_ZERO_EXIT,)
    assert (second.action, second.for_) == (Action.HOLD, timedelta(minutes=30))


def test_yaml_mirrors_jobspec_and_keeps_on_a_word(tmp_path: Path) -> None:
    spec = load_job_file(write(tmp_path, "job.yaml", GOOD_YAML)).spec
    assert spec.command == ("python3", "train.py", "--steps", "3")
    assert spec.time_limit == timedelta(seconds=90)
    # YAML 1.1 reads a bare `on` as true; a job file's `on` is the rule's causes.
    assert spec.recovery.rules[0].on == (CauseKind.PREEMPTED,)


def test_a_reserved_env_name_is_an_invalid_key(tmp_path: Path) -> None:
    text = GOOD_TOML.replace('"QUOTED_NAME" = "x"', 'RANK = "3"')
    assert problems(write(tmp_path, "job.toml", text)) == [
        f"{tmp_path}/job.toml:13: env.RANK: is set by dispatch for every process; "
        "choose another name"
    ]


def test_toml_errors_name_line_and_field(tmp_path: Path) -> None:
    text = """\
name = "train"
command = ["python3", "train.py"]
nodes = 0
tim_limit = "10m"

[[recovery.rules]]
on = ["preempted"]
action = "resubmit"
budget = 3

[[recovery.rules]]
on = ["preempt"]
action = "resubmit"
"""
    f = f"{tmp_path}/bad.toml"
    assert problems(write(tmp_path, "bad.toml", text)) == [
        f"{f}:3: nodes: must be at least 1, got 0",
        f"{f}:4: tim_limit: unknown key (known keys: name, command, nodes, procs_per_node, "
        "time_limit, env, working_dir, output, image, checkpoint, resources, notify, "
        "notify_sinks, recovery, progress, stall, pending)",
        f"{f}:12: recovery.rules[1].on[0]: unknown cause 'preempt' (rules cover: preempted, "
        "node-lost, out-of-memory, time-limit, non-zero-exit, launch-failed, no-capacity, "
        "never-fits, requeued, stalled, unknown)",
    ]


def test_yaml_errors_name_line_and_field(tmp_path: Path) -> None:
    text = """\
name: train
command: [python3, train.py]
time_limit: ten minutes
recovery:
  rules:
    - on: [preempted]
      action: resubmit
      budget: 3
    - on: [node-lost]
      action: requeue
      budgett: 1
"""
    f = f"{tmp_path}/bad.yaml"
    assert problems(write(tmp_path, "bad.yaml", text)) == [
        f"{f}:3: time_limit: not a duration: 'ten minutes' (use 90s, 10m, 1h30m or 2d)",
        f"{f}:11: recovery.rules[1].budgett: unknown key (known keys: on, action, budget, for, "
        "charge)",
    ]


def test_core_validation_problems_get_their_lines(tmp_path: Path) -> None:
    text = """\
command = ["x"]
[[recovery.rules]]
on = ["preempted"]
action = "resubmit"
budget = -1
[[recovery.rules]]
on = ["preempted", "held"]
action = "hold"
"""
    f = f"{tmp_path}/j.toml"
    assert problems(write(tmp_path, "j.toml", text)) == [
        f"{f}:5: recovery.rules[0].budget: must not be negative, got -1",
        # A key that is missing has no line: its table's is the nearest.
        f"{f}:6: recovery.rules[1].for: a hold needs a positive duration",
        f"{f}:7: recovery.rules[1].on[0]: preempted is already covered by recovery.rules[0]",
        f"{f}:7: recovery.rules[1].on[1]: held is not a recoverable cause",
    ]


PROGRESS_TOML = """\
command = ["python3", "train.py"]

[progress]
root = "s3://ckpt/team-a"
record_every = "2m"

[stall]
after = "20m"
startup_grace = "1h"
mode = "observe"

[[recovery.rules]]
on = ["stalled", "preempted"]
action = "resubmit"
budget = 2
charge = "no-advance"
"""


def test_progress_stall_and_charge_mirror_jobspec(tmp_path: Path) -> None:
    spec = load_job_file(write(tmp_path, "p.toml", PROGRESS_TOML)).spec
    assert spec.progress == ProgressSource(
        root="s3://ckpt/team-a", record_every=timedelta(minutes=2)
    )
    assert spec.stall == StallRule(
        after=timedelta(minutes=20), startup_grace=timedelta(hours=1), mode=StallMode.OBSERVE
    )
    (rule,) = spec.recovery.rules
    assert rule.on == (CauseKind.PREEMPTED, CauseKind.STALLED) or rule.on == (
        CauseKind.STALLED,
        CauseKind.PREEMPTED,
    )
    assert rule.charge is Charge.NO_ADVANCE


def test_pending_reads_its_deadline_and_cause(tmp_path: Path) -> None:
    text = 'command = ["x"]\n[pending]\nafter = "2h"\ncause = "never-fits"\n'
    spec = load_job_file(write(tmp_path, "p.toml", text)).spec
    assert spec.pending == PendingRule(after=timedelta(hours=2), cause=CauseKind.NEVER_FITS)
    plain = load_job_file(write(tmp_path, "q.toml", 'command = ["x"]\n[pending]\nafter = "1h"\n'))
    assert plain.spec.pending == PendingRule(after=timedelta(hours=1))
    bad = 'command = ["x"]\n[pending]\nafter = "1h"\ncause = "preempted"\n'
    f = f"{tmp_path}/b.toml"
    assert problems(write(tmp_path, "b.toml", bad)) == [
        f"{f}:4: pending.cause: must be no-capacity or never-fits, got 'preempted'"
    ]


def test_bad_progress_and_stall_fields_are_named_with_their_lines(tmp_path: Path) -> None:
    text = """\
command = ["x"]
[stall]
after = "0s"
mode = "watch"
[[recovery.rules]]
on = ["preempted"]
action = "resubmit"
budget = 1
charge = "no-advance"
"""
    f = f"{tmp_path}/s.toml"
    assert problems(write(tmp_path, "s.toml", text)) == [
        f"{f}:4: stall.mode: must be enforce or observe, got 'watch'",
        f"{f}:9: recovery.rules[0].charge: no-advance needs the job's checkpoint root "
        "([progress] root) to tell whether training advanced; without one every firing is "
        "charged",
    ]
    text = 'command = ["x"]\n[progress]\nroot = "/ckpt"\n[stall]\nafter = "0s"\n'
    assert problems(write(tmp_path, "z.toml", text)) == [
        f"{tmp_path}/z.toml:5: stall.after: must be positive, got 0:00:00"
    ]


def test_syntax_errors_name_the_line(tmp_path: Path) -> None:
    [toml] = problems(write(tmp_path, "s.toml", 'name = "x"\ncommand = [\n"a",,\n]\n'))
    assert toml.startswith(f"{tmp_path}/s.toml:3: not valid TOML")
    [yaml] = problems(write(tmp_path, "s.yaml", "name: x\ncommand: [a, b\nnodes: 2\n"))
    assert f"{tmp_path}/s.yaml:" in yaml and "not valid YAML" in yaml
    [dup] = problems(write(tmp_path, "d.yaml", "command: [a]\nnodes: 1\nnodes: 2\n"))
    assert dup == f"{tmp_path}/d.yaml:3: nodes: is given twice"


def test_wrong_types_and_missing_command(tmp_path: Path) -> None:
    text = 'name = "x"\nnodes = "two"\nenv = { A = true }\n'
    f = f"{tmp_path}/t.toml"
    assert problems(write(tmp_path, "t.toml", text)) == [
        f"{f}: command: is required: the program and its arguments",
        f"{f}:2: nodes: must be a whole number, got str 'two'",
        f"{f}:3: env.A: must be a string, got True",
    ]


def test_unknown_file_kinds_and_missing_files(tmp_path: Path) -> None:
    [kind] = problems(write(tmp_path, "job.json", "{}"))
    assert "use .toml, .yaml or .yml" in kind
    with pytest.raises(NoSuchFile, match="no such file") as missing:
        load_job_file(tmp_path / "nope.toml")
    assert missing.value.path == f"{tmp_path}/nope.toml"


def test_durations_read_and_print_back() -> None:
    cases = [("90s", 90), ("10m", 600), ("1h30m", 5400), ("2d", 172800), ("45", 45)]
    for text, seconds in cases:
        assert parse_duration(text) == timedelta(seconds=seconds)
        again = parse_duration(format_duration(timedelta(seconds=seconds)))
        assert again.total_seconds() == seconds
    for bad in ("10 minutes", "m10", "1m1h", "", "1h1h", True):
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration(bad)


def test_toml_lines_follow_tables_arrays_and_inline_tables() -> None:
    text = (
        'a = 1\n[t]\nb = { c = 2, d = [1,\n  2] }\n[[r]]\nx = "#"  # c\n'
        '[[r]]\nx = """\nmulti\n"""\ny = 1\n'
    )
    lines = toml_lines(text)
    assert lines["a"] == 1
    assert lines["t.b"] == 3 and lines["t.b.c"] == 3 and lines["t.b.d[1]"] == 4
    assert lines["r[0].x"] == 6 and lines["r[1].x"] == 8 and lines["r[1].y"] == 11
    assert line_of(lines, "r[1].z") == 7
