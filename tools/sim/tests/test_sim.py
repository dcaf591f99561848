"""The simulator end to end: the real code passes, mutants fail, a seed replays exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobdispatch_sim.cli import main, read_seed_file
from jobdispatch_sim.mutants import MUTANTS, active
from jobdispatch_sim.options import derive
from jobdispatch_sim.runner import run_seed, sweep


def test_the_real_code_passes_a_short_sweep() -> None:
    failing = [r.report() for r in sweep(range(40)) if not r.ok]
    assert not failing, failing[0]


def test_every_option_is_derived_from_the_seed_and_printed() -> None:
    a, b = derive(7), derive(7)
    assert a == b
    assert derive(8) != a
    described = a.describe()
    assert described[0] == "seed=7"
    assert len(described) == len(a.__attrs_attrs__)


#: Mutants the first 400 seeds may not catch. Since a poll runs its jobs as one batch,
#: budget-after-start's window (a crash between a rule's first Start and its late charge) was
#: first met by seed 692 (606 before the executor read a batch's records in one call, which
#: moved the draws; 198 since issue 26's progress seeds: spec 0005 D8); the bound is nox's,
#: 1,000.
#: stall-from-record-only needs a run that marks progress often, under a stall rule shorter
#: than record_every, read while not blind: first met by seed 418.
SEEDS_FOR = {"budget-after-start": 1000, "stall-from-record-only": 1000}
#: The progress mutants (issue 26), each caught by the invariant that states its protection.
CAUGHT_BY = {
    "stall-from-record-only": 8,
    "declares-while-blind": 9,
    "charges-on-advance": 10,
    "kills-before-stall-commit": 11,
    # The pending deadline (issue 35).
    "kills-before-pending-commit": 12,
}


@pytest.mark.sweep
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_every_mutant_is_caught_within_a_bounded_number_of_seeds(name: str) -> None:
    seeds = SEEDS_FOR.get(name, 400)
    caught = next((r for r in sweep(range(seeds), name, workers=2) if not r.ok), None)
    assert caught is not None, f"mutant {name} survived {seeds} seeds"
    assert caught.violations[0].invariant in range(1, 13)
    if name in CAUGHT_BY:
        assert caught.violations[0].invariant == CAUGHT_BY[name], caught.report()


def test_a_mutants_patches_are_undone_after_the_run() -> None:
    from jobdispatch.records import rules

    before = rules.check_revision
    with active("no-revision-check"):
        assert rules.check_revision is not before
    assert rules.check_revision is before


def test_a_failing_seed_replays_byte_for_byte() -> None:
    first = run_seed(0, "cancel-not-first", trace=True)
    second = run_seed(0, "cancel-not-first", trace=True)
    assert not first.ok
    assert first.report() == second.report()
    assert "replay: nox -s sim -- --seed 0 --mutant cancel-not-first" in first.report()


def test_a_replay_in_another_process_with_another_string_hash_seed_is_identical() -> None:
    """Hash randomization is the classic leak (set order); two processes must agree."""
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run(
            [sys.executable, "-m", "jobdispatch_sim", "--seed", "3", "--mutant", "no-fencing"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    assert "SEED=3" in outputs[0]


def test_the_cli_replays_one_seed_with_its_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SEED=5\noptions: seed=5 ")
    assert "commit" in out and "authorize n=1" in out


def test_the_cli_fails_a_sweep_that_finds_a_violation(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--seeds", "3", "--mutant", "open-before-canonical", "--workers", "1"])
    out = capsys.readouterr().out
    assert code == 1
    assert "VIOLATION: invariant 2" in out
    assert "replay: nox -s sim -- --seed 0 --mutant open-before-canonical" in out


def test_the_store_mutants_revert_the_shared_rules_for_the_memory_store() -> None:
    """no-fencing and no-revision-check patch ``jobdispatch.records.rules``, which every store
    calls (the LMDB store's own test shows the same for it); here, for the memory store."""
    from datetime import timedelta

    from jobdispatch.clock import ManualClock
    from jobdispatch.errors import LeaseLost, RevisionMoved
    from jobdispatch.records.memory import MemoryRecords
    from jobdispatch_conformance.records import decision, evidence, make_header

    clock = ManualClock()
    store = MemoryRecords(clock)
    store.create(make_header("j"))
    expired = store.acquire("j", "a", timedelta(seconds=5))
    clock.advance(5)  # nobody took it over: the lease only lapsed
    with active("no-fencing"):
        assert store.append("j", [decision(1)], expect_revision=0, owner=expired) == 1
    with pytest.raises(LeaseLost):
        store.append("j", [decision(2)], expect_revision=1, owner=expired)
    with active("no-revision-check"):
        assert store.append("j", [evidence(3)], expect_revision=0) == 2
    with pytest.raises(RevisionMoved):
        store.append("j", [evidence(4)], expect_revision=0)


REGRESSIONS = Path(__file__).parents[1] / "regressions.txt"


def test_every_seed_that_ever_failed_passes() -> None:
    """The regression list ``nox -s sim`` replays: every seed the simulator ever failed on,
    seed 1008073 (an open decided before a cancel, carried out after it) among them."""
    seeds = read_seed_file(REGRESSIONS)
    assert 1008073 in seeds and len(seeds) == len(set(seeds))
    failing = [r.report() for r in sweep(seeds) if not r.ok]
    assert not failing, failing[0]


def test_seed_1008073_the_open_it_carries_out_after_the_cancel_was_decided_before_it() -> None:
    """What the restated invariant 4 allows there, and nothing more: the gate lifted after the
    cancel's commit by the open decided before it, within that decision's deadline (spec
    0001, D8). Before the fix the open carried no deadline and the checkers refused it."""
    result = run_seed(1008073, trace=True)
    assert result.ok, result.report()
    trace = result.report()
    assert trace.index("open-decided n=1 1001") < trace.index("CANCEL requested")
    assert trace.index("CANCEL requested") < trace.index("opened 1001 lifted=True")


def test_a_seed_file_names_its_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listed = tmp_path / "seeds.txt"
    listed.write_text("# a comment\n\n12  # why\n7\n", encoding="utf-8")
    assert read_seed_file(listed) == [12, 7]
    assert main(["--seed-file", str(listed), "--workers", "1"]) == 0
    assert "sim: 2 seeds from" in capsys.readouterr().out
    listed.write_text("12\nseven\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"seeds.txt:2: 'seven' is not a seed"):
        read_seed_file(listed)
    with pytest.raises(SystemExit, match="cannot read the seed file"):
        read_seed_file(tmp_path / "missing.txt")
