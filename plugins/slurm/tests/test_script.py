"""The batch script and sbatch options: the gate, the native budget, quoting that survives a
real bash with any bytes but NUL."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobdispatch.errors import Invalid
from jobdispatch.spi import NativeOffer, StartRequest
from jobdispatch.types import JobSpec
from jobdispatch_slurm.script import launch_mark, render, requeue_budget

NASTY = [
    "plain",
    "it's",
    'say "hi"',
    "$(touch /tmp/jobdispatch-pwned)",
    "`id`",
    "a;b|c&d",
    "line1\nline2",
    "tab\there\r",
    "ünïcødé ✓ 日本 🙂",
    "$HOME ${PATH}",
    "\\back\\slash\\",
    "*",
    "~",
    "-n",
    "--begin=now",
    "!history",
    "'; exit 1; '",
    " leading and trailing ",
    "",
]
DUMP = (
    "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], "
    "'env': {k: v for k, v in os.environ.items() if k.startswith('FUZZ_')}}))"
)


def request(
    command: Sequence[str], env: dict[str, str] | None = None, **spec_kw: Any
) -> StartRequest:
    spec = JobSpec(command=tuple(command), env=env or {}, **spec_kw)
    return StartRequest(job="abc", submission=2, attempt=3, spec=spec)


def run_locally(script: str) -> dict[str, Any]:
    """Run the script as Slurm would, with bash, on this machine."""
    done = subprocess.run(["bash", "-s"], input=script.encode(), capture_output=True, check=True)
    got: dict[str, Any] = json.loads(done.stdout)
    return got


def test_gated_at_the_far_future_begin_time_with_its_name() -> None:
    sub = render(request(["true"]), output_dir="/out")
    assert "--begin=2099-01-01T00:00:00" in sub.options
    assert "--job-name=jd-abc-2-3" in sub.options
    assert "--no-requeue" in sub.options
    assert "--output=/out/jd-abc-2-3.out" in sub.options
    assert "--error=/out/jd-abc-2-3.err" in sub.options
    assert sub.script.startswith("#!/bin/bash\n")


def test_suspect_nodes_are_excluded_in_the_script() -> None:
    spec = JobSpec(command=("true",))
    req = StartRequest(job="abc", submission=3, attempt=1, spec=spec, exclude=("n2", "n7"))
    sub = render(req, output_dir="/out")
    assert "#SBATCH --exclude=n2,n7" in sub.script.splitlines()
    assert "--exclude" not in render(request(["true"]), output_dir="/out").script


@pytest.mark.parametrize("name", ["n[1-3]", "n1,n2", "n1 --uid=0", "", "-x"])
def test_a_suspect_node_that_could_widen_the_exclusion_is_refused(name: str) -> None:
    req = StartRequest(
        job="abc", submission=3, attempt=1, spec=JobSpec(command=("true",)), exclude=(name,)
    )
    with pytest.raises(Invalid, match="suspect node"):
        render(req, output_dir="/out")


def test_time_limit_rounds_up_to_minutes() -> None:
    sub = render(request(["true"], time_limit=timedelta(seconds=61)), output_dir="/o")
    assert "--time=2" in sub.options


def test_native_offer_submits_requeueable_with_the_smallest_budget() -> None:
    req = request(["true"])
    offer = NativeOffer(rules=(0, 2), remaining={0: 3, 2: 1})
    req = StartRequest(job="abc", submission=1, attempt=1, spec=req.spec, native=offer)
    assert requeue_budget(req) == 1
    sub = render(req, output_dir="/o")
    assert "--requeue" in sub.options
    assert '"${SLURM_RESTART_COUNT:-0}" -ge 1' in sub.script
    assert "Requeue=0" in sub.script


def test_multi_task_runs_through_srun() -> None:
    sub = render(request(["python", "t.py"], nodes=2, procs_per_node=4), output_dir="/o")
    assert (
        "set -- srun --nodes=2 --ntasks-per-node=4 --kill-on-bad-exit=1 -- /bin/bash -c "
        in sub.script
    )
    assert "' jobdispatch-rank python t.py\n" in sub.script


#: A stand-in for srun on this machine: drop its options and run the command after ``--``, as
#: one task would (with the rank's environment), so the rank's own wrapper is exercised.
FAKE_SRUN = """#!/bin/bash
while [ "$1" != "--" ]; do shift; done
shift
SLURM_PROCID=1 SLURMD_NODENAME=node2 exec "$@"
"""


def run_script(
    script: str, tmp_path: Path, srun: bool = False, fake_srun: str = FAKE_SRUN
) -> subprocess.CompletedProcess[str]:
    """Run the rendered script with bash, as the batch step would, and let it fail."""
    env = {"PATH": "/usr/bin:/bin", "SLURM_RESTART_COUNT": "2"}
    if srun:
        (tmp_path / "srun").write_text(fake_srun)
        (tmp_path / "srun").chmod(0o755)
        env["PATH"] = f"{tmp_path}:{env['PATH']}"
    return subprocess.run(
        ["bash", "-s"], input=script, capture_output=True, text=True, env=env, check=False
    )


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_program_that_cannot_start_leaves_the_launch_mark(tmp_path: Path, nodes: int) -> None:
    """0008 §6: a failed exec is reported on a channel of its own, from the batch script or,
    under srun, from the rank, with bash's status (127 missing, 126 not executable)."""
    plain = tmp_path / "plain.txt"
    plain.write_text("not a program")
    for program, status in (("/nonexistent/train", 127), (str(plain), 126), ("no-such-prog", 127)):
        sub = render(request([program, "--flag"], nodes=nodes), output_dir="/o")
        done = run_script(sub.script, tmp_path, srun=nodes > 1)
        assert done.returncode == status, done.stderr
        mark = launch_mark("jd-abc-2-3", 2)
        lines = [line for line in done.stderr.splitlines() if line.startswith(mark)]
        rank = "rank 1 on node2" if nodes > 1 else "rank 0 on "
        assert len(lines) == 1 and rank in lines[0], done.stderr
        assert f"cannot start {program} (exit {status})" in lines[0]


def marks_of(stderr: str) -> list[str]:
    mark = launch_mark("jd-abc-2-3", 2)
    return [line for line in stderr.splitlines() if line.startswith(mark)]


PWD = [sys.executable, "-c", "import os; print(os.getcwd())"]


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_working_directory_that_cannot_be_entered_leaves_the_launch_mark(
    tmp_path: Path, nodes: int
) -> None:
    """Issue 34.6: slurmstepd runs a job whose --chdir is missing in /tmp instead; the script
    refuses to run anywhere else, with the mark and 127, as a program that cannot start."""
    missing = tmp_path / "no such dir"
    sub = render(request(PWD, nodes=nodes, working_dir=str(missing)), output_dir="/o")
    done = run_script(sub.script, tmp_path, srun=nodes > 1)
    assert done.returncode == 127, done.stderr
    assert done.stdout == ""
    (line,) = marks_of(done.stderr)
    assert "rank 0 on " in line  # the batch script stops before srun starts any rank
    assert "cannot enter the working directory" in line and "no\\ such\\ dir" in line


def test_a_rank_whose_node_lacks_the_working_directory_leaves_the_launch_mark(
    tmp_path: Path,
) -> None:
    """The folder is there where the batch script runs but not on a rank's node: the rank
    refuses too (the stand-in srun removes the folder before it starts the rank)."""
    here = tmp_path / "work"
    here.mkdir()
    sub = render(request(PWD, nodes=2, working_dir=str(here)), output_dir="/o")
    gone = FAKE_SRUN.replace("SLURM_PROCID", f"rmdir {here}; SLURM_PROCID")
    done = run_script(sub.script, tmp_path, srun=True, fake_srun=gone)
    assert done.returncode == 127, done.stderr
    (line,) = marks_of(done.stderr)
    assert "rank 1 on node2 cannot enter the working directory" in line


@pytest.mark.parametrize("nodes", [1, 2])
@pytest.mark.parametrize("relative", [False, True])
def test_a_working_directory_that_exists_is_where_the_job_runs(
    tmp_path: Path, nodes: int, relative: bool
) -> None:
    """A relative working_dir is sbatch's: relative to where it ran ($SLURM_SUBMIT_DIR)."""
    here = tmp_path / "work dir"
    here.mkdir()
    where = "work dir" if relative else str(here)
    sub = render(request(PWD, nodes=nodes, working_dir=where), output_dir="/o")
    script = f"export SLURM_SUBMIT_DIR={tmp_path}\ncd /\n" + sub.script
    done = run_script(script, tmp_path, srun=nodes > 1)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{here}\n"
    assert marks_of(done.stderr) == []


@pytest.mark.parametrize("nodes", [1, 2])
@pytest.mark.parametrize("status", [126, 127])
def test_a_program_that_exits_126_or_127_itself_leaves_no_mark(
    tmp_path: Path, nodes: int, status: int
) -> None:
    sub = render(request(["bash", "-c", f"exit {status}"], nodes=nodes), output_dir="/o")
    done = run_script(sub.script, tmp_path, srun=nodes > 1)
    assert done.returncode == status
    assert "jobdispatch-launch-failed" not in done.stderr


def test_the_job_sees_exactly_the_bytes_given() -> None:
    env = {f"FUZZ_{i}": v for i, v in enumerate(NASTY)}
    got = run_locally(
        render(request([sys.executable, "-c", DUMP, *NASTY], env), output_dir="/o").script
    )
    assert got == {"argv": NASTY, "env": env}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00")),
        max_size=5,
    ),
    st.dictionaries(
        st.from_regex(r"FUZZ_[A-Za-z0-9_]{0,8}", fullmatch=True),
        st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00")),
        max_size=4,
    ),
)
def test_any_command_and_environment_survive_the_script(
    args: list[str], env: dict[str, str]
) -> None:
    got = run_locally(
        render(request([sys.executable, "-c", DUMP, *args], env), output_dir="/o").script
    )
    assert got == {"argv": args, "env": env}


@pytest.mark.parametrize(
    ("command", "env"),
    [
        (["a\x00b"], {}),
        (["true"], {"BAD NAME": "x"}),
        (["true"], {"A\n": "x"}),  # rendered `export A` and `=x` on a line of its own
        (["true"], {"OK": "x\x00"}),
        ([], {}),
    ],
)
def test_what_no_process_could_receive_is_refused(command: list[str], env: dict[str, str]) -> None:
    with pytest.raises(Invalid):
        render(request(command, env), output_dir="/o")
