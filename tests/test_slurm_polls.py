"""``jobdispatch supervise`` on the real Slurm cluster spares the scheduler: counted by shims
in front of Slurm's programs, a quiet supervisor costs at most two commands (one squeue, one
sacct) per poll, with polls at least the floor apart, whether it serves 1 job or 20.

Before this was so, its report asked ``observer.get`` of every job each round (an squeue and
an sacct each): 2N+2 commands a round. The bound checked is a count (commands against the
number of polls the window can hold at the floor), so a slow machine only makes it easier.
"""

from __future__ import annotations

from pathlib import Path

import cli_process
import pytest
from jobdispatch_records_lmdb import LmdbRecords
from jobdispatch_slurm.testing import cluster_problem, count_cli_polls, require

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("jobs", [1, 20])
def test_a_quiet_supervisor_costs_at_most_two_commands_a_poll_whatever_the_jobs(
    jobs: int, tmp_path: Path
) -> None:
    require(cluster_problem())
    # --poll 2 is the adapter's floor: polls as often as Slurm's pacing allows.
    got = count_cli_polls(
        jobs, tmp_path, LmdbRecords, poll=2.0, polls=8, command=cli_process.command()
    )
    commands = {c.command for c in got.steady}
    assert commands == {"squeue", "sacct"}, f"a quiet poll ran {commands}"
    assert len(got.steady) <= got.most_allowed, (
        f"{len(got.steady)} commands in {got.window:.1f} s for {jobs} jobs: more than 2 a "
        f"poll at one poll per {got.floor:g} s ({got.most_allowed}); bursts: "
        f"{[len(b) for b in got.bursts]}"
    )
    queries = [c.command for c in got.steady]
    assert abs(queries.count("squeue") - queries.count("sacct")) <= 1
