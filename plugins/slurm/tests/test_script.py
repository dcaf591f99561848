"""The batch script and sbatch options: the gate, the native budget, quoting that survives a
real bash with any bytes but NUL."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobdispatch.errors import Invalid
from jobdispatch.spi import NativeOffer, StartRequest
from jobdispatch.types import JobSpec
from jobdispatch_slurm.script import render, requeue_budget

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


def request(command, env=None, **spec_kw):
    spec = JobSpec(command=tuple(command), env=env or {}, **spec_kw)
    return StartRequest(job="abc", submission=2, attempt=3, spec=spec)


def run_locally(script: str) -> dict:
    """Run the script as Slurm would, with bash, on this machine."""
    done = subprocess.run(["bash", "-s"], input=script.encode(), capture_output=True, check=True)
    return json.loads(done.stdout)


def test_gated_at_the_far_future_begin_time_with_its_name():
    sub = render(request(["true"]), output_dir="/out")
    assert "--begin=2099-01-01T00:00:00" in sub.options
    assert "--job-name=jd-abc-2-3" in sub.options
    assert "--no-requeue" in sub.options
    assert "--output=/out/jd-abc-2-3.out" in sub.options
    assert "--error=/out/jd-abc-2-3.err" in sub.options
    assert sub.script.startswith("#!/bin/bash\n")


def test_time_limit_rounds_up_to_minutes():
    sub = render(request(["true"], time_limit=timedelta(seconds=61)), output_dir="/o")
    assert "--time=2" in sub.options


def test_native_offer_submits_requeueable_with_the_smallest_budget():
    req = request(["true"])
    offer = NativeOffer(rules=(0, 2), remaining={0: 3, 2: 1})
    req = StartRequest(job="abc", submission=1, attempt=1, spec=req.spec, native=offer)
    assert requeue_budget(req) == 1
    sub = render(req, output_dir="/o")
    assert "--requeue" in sub.options
    assert '"${SLURM_RESTART_COUNT:-0}" -ge 1' in sub.script
    assert "Requeue=0" in sub.script


def test_multi_task_runs_through_srun():
    sub = render(request(["python", "t.py"], nodes=2, procs_per_node=4), output_dir="/o")
    assert (
        "exec -- srun --nodes=2 --ntasks-per-node=4 --kill-on-bad-exit=1 -- python t.py"
        in sub.script
    )


def test_the_job_sees_exactly_the_bytes_given():
    env = {f"FUZZ_{i}": v for i, v in enumerate(NASTY)}
    got = run_locally(
        render(request([sys.executable, "-c", DUMP, *NASTY], env), output_dir="/o").script
    )
    assert got == {"argv": NASTY, "env": env}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
        max_size=5,
    ),
    st.dictionaries(
        st.from_regex(r"FUZZ_[A-Za-z0-9_]{0,8}", fullmatch=True),
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
        max_size=4,
    ),
)
def test_any_command_and_environment_survive_the_script(args, env):
    got = run_locally(
        render(request([sys.executable, "-c", DUMP, *args], env), output_dir="/o").script
    )
    assert got == {"argv": args, "env": env}


@pytest.mark.parametrize(
    ("command", "env"),
    [(["a\x00b"], {}), (["true"], {"BAD NAME": "x"}), (["true"], {"OK": "x\x00"}), ([], {})],
)
def test_what_no_process_could_receive_is_refused(command, env):
    with pytest.raises(Invalid):
        render(request(command, env), output_dir="/o")
