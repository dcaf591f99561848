"""The record format is a promise to every record already on disk: a refactoring of the code
that writes records must write the same bytes. This test runs the CI sweep's 2,000 seeds and
digests every record each seed's world holds (header and events, in the store's creation
order, each as the codec encodes it), then compares the digest with the one computed on the
commit before issue 18's consolidation (d67a33f). A change that alters a single byte of a single
event of any seed fails it; a deliberate change of the format must say so by updating the
digest, and the spec, in the same commit."""

from __future__ import annotations

import hashlib

import attrs
import pytest
from jobdispatch import codec
from jobdispatch_sim.options import derive
from jobdispatch_sim.runner import quiet_logs
from jobdispatch_sim.world import World
from jobdispatch_supervise import ownership

SEEDS = 2000
#: ``record_digest(range(2000))``. First computed on d67a33f, where issue 18's consolidation
#: started (efa18c93...), and held through it. The open-after-cancel fix then changed the format
#: on purpose (``open-decided`` records its deadline; clean-up records one more observation after
#: a requeue answered ok: spec 0001 D8, spec 0002): the digest below was computed twice, on the
#: main line without the consolidation and with it, each with that fix merged, and the two
#: agreed, so the consolidation still writes the bytes the code before it wrote.
#: Issue 19's batches then changed the order of what the simulator writes, not what a record
#: means: a simulated poll runs its jobs as one batch through the executor's phases (every read,
#: then every decision, every call, every answer) where it ran them one job after another, so
#: the world's random draws (faults, pauses) fall in another order and the seeds play
#: differently. A pass of one job writes what it wrote: with the batching executor and the old
#: one-job-at-a-time poll, ``record_digest(range(300))`` was 62d0a645... on both sides. The
#: poll's ownership is batched too (``Ownership.own_many``: one acquire_many, one renew_many),
#: which moves the lease calls' draws as well (0f5e83f3...). The simulated store then draws one
#: fault point per batch commit, not one per part (b36ff0e: a commit has one moment before it
#: where its writer may crash), which with batched polls moves the draws again: with that one
#: change undone, this tree's digest is 0f5e83f3... exactly (checked when merging ``polls``,
#: whose pacing changes no simulated record).
#: The executor then read a batch's records with one ``read_many`` before computing any job's
#: step (every read first, where each job's read came just before its own step), which moves the
#: simulated store's read faults before the other draws of the batch. With ``read_many`` read
#: lazily, one job at a time as the steps are computed, this tree's digest is 266c29a9...
#: exactly, so the reads answer what they answered and only their order moved.
#: Issue 30 added the event ``notice-delivered`` and the spec extension ``notify``, additively
#: (spec 0002): the digest held, since the simulator's jobs ask for no notices and its sink
#: delivers escalations only, so no simulated record holds either; records without them encode
#: byte for byte as before.
#: Issue 26's output-growth capability then added one row to every plan's capability table: the
#: memory backend answers ``output-growth: no`` (it keeps no output files to watch), and a plan
#: records every answer. Nothing else moved: computed in one pass over the 2,000 seeds, the
#: digest of the same records with that one row taken out of each header is the previous one
#: exactly (1d69d746... without progress, 9e8eb897... with it), so only that row changed.
BEFORE = "ff20a5ad73c067413263660258c9ab9f80cfb6fadb13a277fe911effeea35c6a"
#: Issue 26 (progress as evidence) changed the format on purpose, additively: new evidence
#: (progress-seen, resumed-from, progress-blind, progress-sighted), a new decision
#: (stall-declared), the spec's [progress] and [stall], a rule's charge, a plan's stall and a
#: firing's charged, each written only when used. The simulator now gives a share of its jobs a
#: progress source and a stall rule, from generators of their own. So the seeds whose options
#: draw no progress write exactly what they wrote before: with progress switched off in every
#: seed, the digest is still BEFORE (the first test below), and only the seeds with progress
#: changed (AFTER; first f8316bcf..., then the stall detail's durations read as ``20.4 s``
#: where they were ``0:00:20.392464``).
#: A run that had ended by itself before its stall was decided then kept its own cause (spec
#: 0001 row P3, ``jobdispatch.job.ended_before``): the supervisor's poll may still show an
#: ended run running (Slurm does until accounting has its record), and the ending must not
#: depend on which evidence came first. Of the 2,000 seeds, one changed (seed 108: a run killed
#: by signal 11 at 00:02:00, declared stalled at 00:06:10 when the poll still showed it
#: running; its recovery now names non-zero-exit and fires the rule on it, where it named
#: stalled and held the job); per-seed digests of every other seed are as before (before:
#: bf8b1c1e... for AFTER, fa9b92c8... for PENDING).
#: Issue 26 item 9 (the cost of progress at 10,000 jobs) then moved when progress is recorded,
#: on purpose: a job's ``progress-seen`` is committed at most once in each of its own
#: ``record_every`` windows, phased by its id (``jobdispatch.progress.window``), the first one
#: included (it waits for the edge of the window the job was created in), where it was committed
#: at the first reading and then once ``record_every`` had passed since the last. So jobs
#: launched together no longer all record their progress in the same poll. What a
#: ``progress-seen`` says is unchanged; when it lands moved, and with it the passes around it
#: and the world's draws, so the seeds with progress play differently. The seeds without
#: progress write exactly what they wrote (BEFORE holds); before this change AFTER was
#: 3a50deb4... and PENDING 5dbe423f...
AFTER = "143e506f734f1fdf5b8a36fce81ddd07073993b6b61b929aa0a6826aaf5edeac"
#: Issue 35 (the pending deadline) changed the format on purpose, additively: a new decision
#: (pending-expired), the spec's [pending] and the cause never-fits, each written only when
#: used. The simulator gives a share of its supervised jobs a pending deadline, from generators
#: of their own, and never draws never-fits into the ordinary rules: with pending deadlines
#: switched off in every seed the digests are still BEFORE and AFTER (the tests below), and
#: only the seeds with pending deadlines changed (PENDING).
PENDING = "9d316a7f5fc46ad5c0ef4101f9b18ce7bd38d94ba649ba8b425ae3c601c523ba"
#: Issue 26 item 9 then spread lease renewals (spec 0004 D3): each job's lease is renewed at its
#: own point between a third and a half of its life, where every lease was renewed at half, so
#: that leases taken in one poll are not all renewed in one later poll. That moves when the
#: simulated supervisors renew (and so which of them acts after a pause), not what any record
#: holds: with the spread switched off (``RENEWAL_SPREAD = 0``, the renewal at half a lease's
#: life as before), every seed writes byte for byte what it wrote, and BEFORE, AFTER and PENDING
#: hold (the three tests below run so). With the spread, as supervisors run, the digest is:
SPREAD = "b0691c10ee3d1c7c2966c6cd770ad2211a7e729a3044927d1bec7b12f1062fa3"


def _chunk(data: bytes) -> bytes:
    # Length-prefixed, so that no two different sequences of records digest alike.
    return len(data).to_bytes(8, "big") + data


def record_digest(seeds: range, *, progress: bool = True, pending: bool = True) -> str:
    """SHA-256 over every record every seed's run wrote, seed by seed (``progress``, ``pending``:
    as the seed draws them; off: no job of any seed names a progress source, or has a pending
    deadline)."""
    quiet_logs()
    digest = hashlib.sha256()
    for seed in seeds:
        opts = derive(seed)
        if not progress:
            opts = attrs.evolve(opts, p_progress=0.0)
        if not pending:
            opts = attrs.evolve(opts, p_pending=0.0)
        world = World(opts)
        world.run()
        store = world.store.inner
        jobs = list(store.list())
        digest.update(_chunk(f"seed {seed}: {len(jobs)} records".encode()))
        for job in jobs:
            view = store.read(job)
            digest.update(_chunk(codec.encode_header(view.header)))
            digest.update(_chunk(str(len(view.events)).encode()))
            for event in view.events:
                digest.update(_chunk(codec.encode_event(event)))
    return digest.hexdigest()


@pytest.fixture
def renewed_at_half_life(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leases renewed at half their life, as before the spread (the digests above were taken
    so): the format tests then see the records' bytes alone, not when renewals fall."""
    monkeypatch.setattr(ownership, "RENEWAL_SPREAD", 0.0)


def test_the_digest_tells_one_changed_seed_from_another() -> None:
    # The digest is not constant: different seeds write different records.
    assert record_digest(range(3)) != record_digest(range(1, 4))


@pytest.mark.sweep
def test_without_progress_every_record_the_ci_seeds_write_is_byte_for_byte_as_before(
    renewed_at_half_life: None,
) -> None:
    assert record_digest(range(SEEDS), progress=False, pending=False) == BEFORE


@pytest.mark.sweep
def test_without_pending_deadlines_every_record_is_byte_for_byte_as_before_them(
    renewed_at_half_life: None,
) -> None:
    assert record_digest(range(SEEDS), pending=False) == AFTER


@pytest.mark.sweep
def test_every_record_the_ci_seeds_write_is_byte_for_byte_as_recorded(
    renewed_at_half_life: None,
) -> None:
    assert record_digest(range(SEEDS)) == PENDING


@pytest.mark.sweep
def test_with_renewals_spread_every_record_is_byte_for_byte_as_recorded() -> None:
    assert ownership.RENEWAL_SPREAD > 0
    assert record_digest(range(SEEDS)) == SPREAD
