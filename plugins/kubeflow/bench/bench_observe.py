"""Benchmark: the API requests a supervisor's observation sends at a quiet steady state, beside
the Kubeflow SDK's get-per-job loop at the same interval, measured in the same run (issue 35).

One command::

    python plugins/kubeflow/bench/bench_observe.py [--real 50,200] [--fake 10000] [--window 120]

(or ``./dev nox -s bench``, which runs every benchmark with its defaults).

For each N on the **real** control plane (``tools/kube/up``'s exports; skipped with the reason
when it does not answer), N one-node sleeping TrainJobs are started and opened, and once every
pod runs, three windows of ``--window`` seconds are measured back to back. The pods run on kwok
nodes of the benchmark's own (tainted, and chosen by a runtime patch with a node selector and a
toleration, added before the open), so that others using the plane (a test deleting a node
under its own pod) do not end them mid-window; the nodes are deleted at the end.

1. idle: nothing of ours runs (the apiserver's CPU is the plane's background, other users of
   the plane included);
2. supervisor: what ``jobdispatch supervise`` does to the API at its default pacing, in one
   process: a poll every 10 s (``capabilities``, cached for ``probe_ttl``, then ``find_many``
   of the N jobs) and the supervisor's own watch threads (``jobdispatch_supervise.watching``,
   16 jobs followed, each calling the adapter's ``watch`` in turn); after a warm-up of one
   watch window and two polls (the caches filled, the placements pinned), so the window is
   the steady state;
3. SDK: the Kubeflow Trainer SDK's ``TrainerClient.get_job`` for each of the N TrainJobs every
   10 s, as the research measured it: per job a GET of the TrainJob, a GET of the namespaced
   TrainingRuntime (a 404 for a ClusterTrainingRuntime), a GET of the ClusterTrainingRuntime and
   a LIST of the TrainJob's pods by label. Sent with the same client as the adapter's, so both
   are counted the same way.

Requests are counted by the client (``KubeApi.requests``: every request, a watch when it is
opened), over the window, as requests per minute. The apiserver's CPU (utime + stime of its
process, from ``/proc``; when readable) is the percentage of one core over each window, the
idle one included, so the ratio to idle reads beside it: on a plane other work shares, it is an
upper bound.

On the **fake** (``jobdispatch_kubeflow.fake``) the same supervisor runs over N in-memory jobs
whose watches stream nothing (a quiet steady state: each watch request lasts its timeout), and
the SDK loop is counted against an empty in-memory API, which answers at once: its count is the
loop's, not the server's. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from jobdispatch import JobSpec, StartRequest
from jobdispatch_kubeflow import KubeflowBackend, Settings, names
from jobdispatch_kubeflow.api import Api
from jobdispatch_kubeflow.config import Runtime
from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT, FakeApi
from jobdispatch_kubeflow.testing import own_node, place_on_own_node
from jobdispatch_supervise.watching import Watching

#: The supervisor's default poll interval for this adapter (``KubeflowBackend.pacing``), used
#: for the SDK loop too.
INTERVAL = 10.0
#: Jobs the supervisor follows at once (``Supervisor``'s default ``watch_limit``).
WATCH_LIMIT = 16
RUNTIME = "dispatch-torch-test"
#: Pods the benchmark puts on each kwok node of its own, and the label and taint naming them.
PODS_PER_NODE = 100
BENCH_LABEL = "dispatch.bench/node"

Row = dict[str, Any]


# ---------------------------------------------------------------------------- the two clients


def supervise(backend: KubeflowBackend, jobs: list[str], seconds: float) -> float:
    """Poll ``jobs`` every INTERVAL and follow WATCH_LIMIT of them, for ``seconds``; the
    longest poll, in seconds."""
    stopping = threading.Event()
    watching = Watching(
        backend, lambda: None, pause=backend.pacing.floor, stopping=stopping, limit=WATCH_LIMIT
    )
    longest = 0.0
    end = time.monotonic() + seconds
    try:
        watching.follow(jobs)
        while (left := end - time.monotonic()) > 0:
            began = time.monotonic()
            backend.capabilities()
            backend.find_many(jobs)
            took = time.monotonic() - began
            longest = max(longest, took)
            stopping.wait(min(left, max(0.0, INTERVAL - took)))
    finally:
        watching.stop()
        stopping.set()
    return longest


def sdk_loop(api: Api, namespace: str, trainjobs: list[str], seconds: float) -> None:
    """The SDK's get_job of every TrainJob every INTERVAL, for ``seconds`` (see the doc)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        began = time.monotonic()
        for name in trainjobs:
            if time.monotonic() > end:
                return
            api.get("trainjobs", namespace, name)
            api.get("trainingruntimes", namespace, RUNTIME)
            api.get("clustertrainingruntimes", None, RUNTIME)
            api.list("pods", namespace, label_selector=f"{names.JOBSET_NAME}={name}")
        time.sleep(min(left, max(0.0, INTERVAL - (time.monotonic() - began))))


def counted(api: Api, run: Callable[[], object]) -> tuple[Counter[str], float, object]:
    """The requests ``api`` sent while ``run`` ran, its seconds, and its result."""
    before = Counter(api.requests)
    began = time.monotonic()
    result = run()
    took = time.monotonic() - began
    after = Counter(api.requests)
    after.subtract(before)
    return +after, took, result


# ---------------------------------------------------------------------------- apiserver CPU


class ApiserverCpu:
    """Percent of one core the kube-apiserver process used over a window, from /proc."""

    def __init__(self) -> None:
        state = Path(os.environ.get("JOBDISPATCH_KUBE_STATE", "/var/lib/jobdispatch-kube"))
        self.pid: int | None = None
        try:
            self.pid = int((state / "run" / "kube-apiserver.pid").read_text().strip())
        except (OSError, ValueError):
            self.pid = None
        self.tick = os.sysconf("SC_CLK_TCK")

    def _ticks(self) -> float | None:
        if self.pid is None:
            return None
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return float(fields[11]) + float(fields[12])  # utime + stime

    def over(self, run: Callable[[], object]) -> tuple[float | None, object]:
        t0, w0 = self._ticks(), time.monotonic()
        result = run()
        t1, w1 = self._ticks(), time.monotonic()
        if t0 is None or t1 is None:
            return None, result
        return 100.0 * (t1 - t0) / self.tick / (w1 - w0), result


# ---------------------------------------------------------------------------- the real plane


def real(sizes: list[int], window: float) -> list[Row]:
    from jobdispatch_kubeflow import testing
    from jobdispatch_kubeflow.api import KubeApi

    problem = testing.cluster_problem()
    if problem is not None:
        print(f"real control plane: skipped ({problem})", file=sys.stderr)
        return []
    settings = testing.settings(probe_ttl=300.0)
    setup = KubeflowBackend(settings)
    admin = KubeApi(kubeconfig=os.environ.get("KUBECONFIG"))
    cpu = ApiserverCpu()
    tag = uuid.uuid4().hex[:6]
    jobs: list[str] = []
    rows: list[Row] = []
    nodes = [f"kwok-bench-{tag}-{i}" for i in range(-(-max(sizes, default=0) // PODS_PER_NODE))]
    try:
        for name in nodes:
            own_node(admin, name, BENCH_LABEL, tag, pods=PODS_PER_NODE + 10)
        for n in sorted(sizes):
            _grow(setup, admin, jobs, n, tag)
            trainjobs = [f"jd-{job}-1-1" for job in jobs]
            idle, _ = cpu.over(lambda: time.sleep(window))
            backend = KubeflowBackend(settings)
            try:
                supervise(backend, jobs, 2 * INTERVAL + 1)  # warm-up: caches, pins
                cpu_sup, (sup, took, longest) = cpu.over(
                    partial(counted, backend.api, partial(supervise, backend, jobs, window))
                )
            finally:
                backend.close()
            sdk_api = KubeApi(kubeconfig=settings.kubeconfig, token=_token(settings))
            run_sdk = partial(sdk_loop, sdk_api, settings.namespace, trainjobs, window)
            cpu_sdk, (sdk, took_sdk, _) = cpu.over(partial(counted, sdk_api, run_sdk))
            sdk_api.close()
            rows.append(
                _row("real", n, sup, took, sdk, took_sdk, longest, (idle, cpu_sup, cpu_sdk))
            )
            _print(rows[-1:])
    finally:
        _teardown(setup, jobs)
        setup.close()
        for name in nodes:
            admin.delete("nodes", None, name, propagation="Background")
    return rows


def _token(settings: Settings) -> Callable[[], str] | None:
    from jobdispatch_kubeflow.api import file_token

    return file_token(settings.token_file) if settings.token_file else None


def _grow(backend: KubeflowBackend, admin: Api, jobs: list[str], n: int, tag: str) -> None:
    """Start and open jobs until there are ``n``; wait until each has a running pod."""
    spec = JobSpec(command=("sleep", "36000"), nodes=1)
    while len(jobs) < n:
        job = f"bench{tag}x{len(jobs)}"
        ref = backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
        place_on_own_node(
            admin,
            backend.namespace,
            f"jd-{job}-1-1",
            BENCH_LABEL,
            tag,
            manager="dispatch.bench/placement",
        )
        backend.open(ref)
        jobs.append(job)
    wanted = {f"jd-{job}-1-1" for job in jobs}
    deadline = time.monotonic() + 60 + 2 * n
    while True:
        pods, _ = admin.list("pods", backend.namespace, label_selector=names.JOBSET_NAME)
        running = {
            str(p["metadata"]["labels"][names.JOBSET_NAME])
            for p in pods
            if (p.get("status") or {}).get("phase") == "Running"
        }
        missing = wanted - running
        if not missing:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(missing)} of {n} TrainJobs have no running pod in time")
        time.sleep(2)


def _teardown(backend: KubeflowBackend, jobs: list[str]) -> None:
    for job in jobs:
        ref = names.ref_of(backend.namespace, f"jd-{job}-1-1")
        try:
            backend.stop(ref, "benchmark over")
            backend.forget(ref)
        except Exception as exc:  # said, never hidden: forget_receipts clears the rest
            print(f"could not remove {ref}: {exc}", file=sys.stderr)


# ---------------------------------------------------------------------------- the fake


class QuietFakeApi(FakeApi):
    """The in-memory API at a quiet steady state: every watch request streams nothing and lasts
    its timeout, as the API server's does when nothing changes."""

    streams = True

    def __init__(self) -> None:
        super().__init__()
        self.closed = threading.Event()

    def stream(
        self, kind: str, selector: str | None, version: str, timeout: int
    ) -> Iterator[dict[str, Any]]:
        return self._quiet(timeout)

    def _quiet(self, timeout: int) -> Iterator[dict[str, Any]]:
        self.closed.wait(timeout)
        yield from ()

    def close(self) -> None:
        self.closed.set()


def fake(sizes: list[int], window: float) -> list[Row]:
    from jobdispatch_kubeflow import probe

    rows: list[Row] = []
    for n in sizes:
        probe.forget()
        api = QuietFakeApi()
        api.put("clustertrainingruntimes", None, TEST_RUNTIME_OBJECT)
        api.put("nodes", None, _node())
        settings = Settings(namespace="dispatch", runtime=Runtime(name=RUNTIME), probe_ttl=300.0)
        backend = KubeflowBackend(settings, api=api)
        jobs = [f"f{i}" for i in range(n)]
        spec = JobSpec(command=("sleep", "36000"), nodes=1)
        for job in jobs:
            backend.open(backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec)))
            api.put("pods", "dispatch", _pod(f"jd-{job}-1-1"))
        try:
            supervise(backend, jobs, 2 * INTERVAL + 1)
            sup, took, longest = counted(api, partial(supervise, backend, jobs, window))
        finally:
            backend.close()
        stub = FakeApi()  # empty: every GET and LIST answers at once, with nothing
        trainjobs = [f"jd-{j}-1-1" for j in jobs]
        sdk, took_sdk, _ = counted(stub, partial(sdk_loop, stub, "dispatch", trainjobs, window))
        rows.append(_row("fake", n, sup, took, sdk, took_sdk, longest, (None, None, None)))
        _print(rows[-1:])
    return rows


def _node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "kwok-node-1", "uid": "node-uid-1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pod(jobset: str) -> dict[str, Any]:
    t = "2026-12-01T10:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{jobset}-node-0-0-abcde",
            "namespace": "dispatch",
            "uid": f"uid-{jobset}",
            "labels": {
                names.JOBSET_NAME: jobset,
                names.RESTART_ATTEMPT: "0",
                "batch.kubernetes.io/job-completion-index": "0",
            },
        },
        "spec": {"nodeName": "kwok-node-1", "containers": [{"name": "node"}]},
        "status": {
            "phase": "Running",
            "startTime": t,
            "containerStatuses": [
                {"name": "node", "ready": True, "state": {"running": {"startedAt": t}}}
            ],
        },
    }


# ---------------------------------------------------------------------------- the table


def _row(
    where: str,
    n: int,
    sup: Counter[str],
    took: float,
    sdk: Counter[str],
    took_sdk: float,
    longest: object,
    cpu: tuple[float | None, float | None, float | None],
) -> Row:
    return {
        "where": where,
        "n": n,
        "supervisor": sum(sup.values()) / took * 60,
        "sdk": sum(sdk.values()) / took_sdk * 60,
        "kinds": dict(sorted(sup.items())),
        "longest_poll": float(longest) if isinstance(longest, float) else 0.0,
        "cpu": cpu,
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def _print(rows: list[Row]) -> None:
    for r in rows:
        idle, sup_cpu, sdk_cpu = r["cpu"]
        print(
            f"| {r['where']} | {r['n']} | {r['supervisor']:.1f} | {r['sdk']:.0f} | "
            f"{r['longest_poll']:.2f} s | {_pct(idle)} / {_pct(sup_cpu)} / {_pct(sdk_cpu)} | "
            f"{', '.join(f'{k} {v}' for k, v in r['kinds'].items()) or 'none'} |",
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", default="50,200", help="job counts on the real plane ('' none)")
    parser.add_argument("--fake", default="10000", help="job counts on the fake ('' none)")
    parser.add_argument("--window", type=float, default=120.0, help="seconds per window")
    parser.add_argument("--quick", action="store_true", help="--real '' --fake 1000 --window 30")
    args = parser.parse_args(argv)
    if args.quick:
        args.real, args.fake, args.window = "", "1000", 30.0
    sizes = [int(x) for x in args.real.split(",") if x]
    fakes = [int(x) for x in args.fake.split(",") if x]
    print(
        f"requests a minute at a quiet steady state, poll and SDK loop every {INTERVAL:.0f} s, "
        f"{args.window:.0f}-s windows"
    )
    print(
        "| plane | N | supervisor req/min | SDK get_job loop req/min | longest poll | "
        "apiserver CPU idle / supervisor / SDK | supervisor's requests in the window |"
    )
    print("|---|---|---|---|---|---|---|")
    fake(fakes, args.window)
    real(sizes, args.window)


if __name__ == "__main__":
    main()
