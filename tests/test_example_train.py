"""The example training job (examples/train.py) knows its rank wherever it runs: torchrun's
``RANK``, else srun's ``SLURM_PROCID``. Under srun every task once read itself as rank 0, and
on Slurm both ranks of a two-node job saved and published the same steps into one root: two
publishing a step at once failed a run now and then (the five-preemption Slurm test's
submission 5, in CI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TRAIN = Path(__file__).parents[1] / "examples" / "train.py"


def _run(tmp_path: Path, **env: str) -> tuple[str, list[Path]]:
    """Two steps of the example with ``env`` (no RANK unless given); what it printed and the
    checkpoints it wrote."""
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    base = {k: v for k, v in base.items() if not k.startswith(("SLURM_", "JOBDISPATCH_"))}
    done = subprocess.run(
        [sys.executable, str(TRAIN), "--steps", "2", "--step-seconds", "0"],
        env={**base, "CHECKPOINT_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, sorted(tmp_path.rglob("step-*.json"))


@pytest.mark.parametrize(
    ("env", "rank", "writes"),
    [
        ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, "rank 1/2", False),
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, "rank 0/2", True),
        # torchrun under srun: torchrun's own ranks win
        (
            {"RANK": "0", "WORLD_SIZE": "4", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"},
            "rank 0/4",
            True,
        ),
        ({}, "rank 0/1", True),
    ],
)
def test_the_example_reads_its_rank_from_torchrun_else_srun(
    tmp_path: Path, env: dict[str, str], rank: str, writes: bool
) -> None:
    out, saved = _run(tmp_path, **env)
    assert f"[{rank} " in out, out
    assert bool(saved) is writes, saved
