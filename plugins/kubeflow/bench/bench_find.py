"""API requests per poll: one LIST for many jobs against a GET per job.

For N jobs (100 by default), one supervisor poll through ``find_all`` (the adapter's
MultiFinder: one LIST of TrainJobs by label selector, and at most one LIST each of the JobSets,
Jobs, Pods and Nodes beneath them) is measured beside the same poll done object by object
(``inspect``: a GET of each TrainJob and of its JobSet, and the LISTs of its own Jobs, Pods and
Events) and job by job (``find`` per job, what ``find_all`` does for an adapter without
MultiFinder). All three run in the same process on the same objects, and their answers are
checked to agree.

By default the requests are answered by the in-memory API (jobdispatch_kubeflow.fake), so the
count is exact and the time is the adapter's own. With ``--real`` and the control plane from
tools/kube/up, N gated TrainJobs are created, polled the three ways, stopped and forgotten.

    python plugins/kubeflow/bench/bench_find.py [--jobs N] [--real]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from jobdispatch.spi import StartRequest, find_all
from jobdispatch.types import JobSpec
from jobdispatch_kubeflow import KubeflowBackend, Settings
from jobdispatch_kubeflow.config import Runtime
from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT

RUNTIME = TEST_RUNTIME_OBJECT


def _measure(backend: KubeflowBackend, poll: Callable[[], Any]) -> tuple[int, float, Any]:
    backend.api.requests.clear()
    t0 = time.perf_counter()
    answer = poll()
    return sum(backend.api.requests.values()), time.perf_counter() - t0, answer


def _summary(found: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    return {job: sorted((o.ref.id, str(o.state)) for o in d.objects) for job, d in found.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument(
        "--real", action="store_true", help="use the control plane from tools/kube/up"
    )
    args = parser.parse_args(argv)
    prefix = "b" + uuid.uuid4().hex[:6]
    if args.real:
        from jobdispatch_kubeflow.testing import cluster_problem, settings

        problem = cluster_problem()
        if problem:
            print(f"--real: {problem}", file=sys.stderr)
            return 2
        backend = KubeflowBackend(settings())
        where = "the real control plane"
    else:
        from jobdispatch_kubeflow.fake import FakeApi

        api = FakeApi()
        api.put("clustertrainingruntimes", None, RUNTIME)
        backend = KubeflowBackend(
            Settings(namespace="dispatch", runtime=Runtime(name="dispatch-torch-test")), api=api
        )
        where = "the in-memory API"
    jobs = [f"{prefix}{i:04d}" for i in range(args.jobs)]
    refs = []
    for job in jobs:
        refs.append(
            backend.start(
                StartRequest(job=job, submission=1, attempt=1, spec=JobSpec(command=("sleep", "1")))
            )
        )
    try:
        backend.facts()  # the capability probe is cached per cluster: not part of a poll
        many_n, many_t, many = _measure(backend, lambda: find_all(backend, jobs))
        each_n, each_t, each = _measure(backend, lambda: {job: backend.find(job) for job in jobs})
        gets_n, gets_t, _ = _measure(backend, lambda: [backend.inspect(r) for r in refs])
        if _summary(many) != _summary(each):
            print("find_all and find per job disagree", file=sys.stderr)
            return 1
    finally:
        for ref in refs:
            backend.stop(ref, "benchmark done")
            backend.forget(ref)
    print(f"{args.jobs} gated TrainJobs, one poll, against {where}")
    print(f"{'strategy':<34} {'requests':>9} {'seconds':>9} {'x baseline':>11}")
    rows = [
        ("find_all (one LIST per kind)", many_n, many_t),
        ("find per job (a LIST per job)", each_n, each_t),
        ("inspect per object (GETs)", gets_n, gets_t),
    ]
    for label, n, t in rows:
        print(f"{label:<34} {n:>9} {t:>9.3f} {t / many_t if many_t else 0:>10.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
