"""A writer for test_crash.py: appends a batch to every job, then takes and renews their
leases, forever, printing each call that returned; the test SIGKILLs it at random moments.

Usage: crash_writer.py CONFIG_JSON FIRST_BATCH JOB...
Prints ``ready``, then ``appended N`` after batch N committed (one event per job, detail
``batch-N``) and ``leased TOKEN`` after an acquire_many answered (the first job's token).
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta

from jobdispatch.records.store import AppendRequest, Lease
from jobdispatch_conformance.records import evidence
from jobdispatch_records_postgres import PostgresRecords


def main() -> None:
    config, batch, jobs = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    store = PostgresRecords(config)
    print("ready", flush=True)
    while True:
        revisions = [store.read(job).revision for job in jobs]
        answers = store.append_many(
            [
                AppendRequest(
                    job=job,
                    events=(evidence(batch, detail=f"batch-{batch}"),),
                    expect_revision=revision,
                )
                for job, revision in zip(jobs, revisions, strict=True)
            ]
        )
        assert all(isinstance(a, int) for a in answers), answers
        print(f"appended {batch}", flush=True)
        batch += 1
        leases = store.acquire_many(jobs, "writer", timedelta(seconds=30))
        first = leases[0]
        assert isinstance(first, Lease), first
        print(f"leased {first.token}", flush=True)
        store.release_many([lease for lease in leases if isinstance(lease, Lease)])


if __name__ == "__main__":
    main()
