"""The pod sentinel: a dying pod the API server reports between two polls has its cause pinned
on its TrainJob, even when the pod is deleted before anyone reads it (spec 0010 §5)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator, Mapping
from contextlib import closing
from typing import Any

import pytest
from fake_adapter import NOW, QueuedWatchApi, fake_adapter, seeded
from jobdispatch.errors import Unauthorized, Unreachable
from jobdispatch.spi import StartRequest
from jobdispatch.testing import eventually
from jobdispatch.types import CauseKind, JobSpec, Provenance
from jobdispatch_kubeflow import KubeflowBackend
from jobdispatch_kubeflow.api import Gone
from jobdispatch_kubeflow.fake import FakeApi
from jobdispatch_kubeflow.sentinel import Sentinel
from objects import cond, pod

POD = "jd-j1-1-1-node-0-0-abcde"
EVICTED = [cond("DisruptionTarget", "EvictionByEvictionAPI", "Eviction API: evicting")]


class WatchedApi(QueuedWatchApi):
    """The in-memory API with a pod watch that streams what the test puts in ``events`` (the
    other kinds', what it puts in ``changes[kind]``): a ``Gone`` or ``Unreachable`` put there is
    raised by the watch, ``None`` ends one request."""

    quiet = 0.05

    def __init__(self) -> None:
        super().__init__()
        self.events: queue.Queue[Any] = queue.Queue()
        self.watches: list[str] = []

    def stream(
        self, kind: str, selector: str | None, version: str, timeout: int
    ) -> Iterator[dict[str, Any]]:
        if kind != "pods":
            return super().stream(kind, selector, version, timeout)
        self.watches.append(version)
        return self._stream(self.events)


@pytest.fixture
def api() -> WatchedApi:
    return seeded(WatchedApi())


@pytest.fixture
def backend(api: WatchedApi) -> Iterator[KubeflowBackend]:
    with closing(fake_adapter(api, lambda: NOW, watch_window=0.2)) as made:
        yield made


def _started(backend: KubeflowBackend) -> None:
    ref = backend.start(
        StartRequest(job="j1", submission=1, attempt=1, spec=JobSpec(command=("train",)))
    )
    backend.open(ref)


def _evidence(api: FakeApi) -> str | None:
    tj = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    return (tj["metadata"].get("annotations") or {}).get("jobdispatch.dev/evidence-0")


def test_an_eviction_between_two_polls_keeps_its_cause(
    backend: KubeflowBackend, api: WatchedApi
) -> None:
    """The pod is evicted and deleted before any poll: only the watch saw it dying."""
    _started(backend)
    api.put("pods", "dispatch", pod())
    for _ in backend.watch("j1"):  # a supervisor follows the job: the sentinel starts
        pass
    dying = pod(deleting=True, conditions=EVICTED)
    del api.objects[("pods", "dispatch", POD)]
    api.events.put({"type": "MODIFIED", "object": dying})
    eventually(lambda: _evidence(api) is not None, "pinned", every=0.01)
    failed = {"status": {"conditions": [cond("Failed", "FailedJobs")]}}
    tj = api.patch("trainjobs", "dispatch", "jd-j1-1-1", failed)
    api.changes.setdefault("trainjobs", queue.Queue()).put({"type": "MODIFIED", "object": tj})
    eventually(lambda: backend.find("j1").objects[0].state.value == "ended", "ended", every=0.01)
    (obs,) = backend.find("j1").objects
    cause = obs.executions[-1].cause
    assert cause is not None
    assert (cause.kind, cause.provenance) == (CauseKind.PREEMPTED, Provenance.ACTOR)


def test_a_caller_that_only_inspects_keeps_the_cause_once_it_follows_dying_pods(
    backend: KubeflowBackend, api: WatchedApi
) -> None:
    """No watch at all (the conformance harness only inspects): ``follow_dying_pods`` starts
    the sentinel on its own follower, and an eviction no look saw still keeps its cause."""
    _started(backend)
    api.put("pods", "dispatch", pod())
    backend.follow_dying_pods()
    eventually(lambda: api.watches, "the sentinel watching pods", every=0.01)
    dying = pod(deleting=True, conditions=EVICTED)
    del api.objects[("pods", "dispatch", POD)]
    api.events.put({"type": "MODIFIED", "object": dying})
    eventually(lambda: _evidence(api) is not None, "pinned", every=0.01)
    api.patch(
        "trainjobs",
        "dispatch",
        "jd-j1-1-1",
        {"status": {"conditions": [cond("Failed", "FailedJobs")]}},
    )
    obs = backend.inspect(backend.find("j1").objects[0].ref)
    cause = obs.executions[-1].cause
    assert cause is not None
    assert (cause.kind, cause.provenance) == (CauseKind.PREEMPTED, Provenance.ACTOR)


def test_each_dying_stage_is_handed_over_once_and_other_pods_not_at_all() -> None:
    handed: list[Mapping[str, Any]] = []
    sentinel = Sentinel(FakeApi(), "dispatch", handed.append)
    sentinel.see(pod())  # running: not dying
    sentinel.see(pod(jobset_name="someone-elses-jobset", phase="Failed"))
    disrupted = pod(deleting=True, conditions=EVICTED)
    sentinel.see(disrupted)
    sentinel.see(disrupted)  # the API server repeats a pod on every change of it
    failed = pod(deleting=True, conditions=EVICTED, phase="Failed")
    sentinel.see(failed)
    assert handed == [disrupted, failed]


def test_a_listed_failed_pod_waits_for_the_polls_and_a_listed_pod_going_does_not() -> None:
    handed: list[Mapping[str, Any]] = []
    sentinel = Sentinel(FakeApi(), "dispatch", handed.append)
    lingering = pod("p-0", phase="Failed")
    going = pod("p-1", deleting=True, conditions=EVICTED)
    sentinel.see(lingering, listed=True)
    sentinel.see(going, listed=True)
    sentinel.see(lingering)  # the same stage again, now as a change: remembered already
    assert handed == [going]


def test_an_error_in_the_hand_over_is_logged_and_the_sentinel_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(pod_obj: Any) -> None:
        raise RuntimeError("the hand-over broke")

    sentinel = Sentinel(FakeApi(), "dispatch", broken)
    with caplog.at_level(logging.ERROR, logger="jobdispatch_kubeflow.sentinel"):
        sentinel.see(pod(phase="Failed"))
    assert "could not pin the evidence" in caplog.text
    sentinel.see(pod(phase="Failed", deleting=True))  # still following


def test_the_sentinel_lists_again_after_a_410_and_tries_again_after_a_lost_server(
    api: WatchedApi,
) -> None:
    from jobdispatch_kubeflow import listwatch as module

    handed: list[Any] = []
    sentinel = Sentinel(api, "dispatch", handed.append)
    module_retry, module.RETRY_SECONDS = module.RETRY_SECONDS, 0.01
    try:
        api.events.put(Gone("too old"))
        api.events.put(Unreachable("the API server went away"))
        api.events.put({"type": "MODIFIED", "object": pod(phase="Failed")})
        sentinel.start()
        eventually(lambda: handed, "handed over after a 410 and a lost server", every=0.01)
        assert api.requests["LIST pods"] >= 3, "a 410 and a lost server each list again"
    finally:
        sentinel.stop()
        module.RETRY_SECONDS = module_retry


def test_a_sentinel_not_allowed_to_watch_pods_says_so_and_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Forbidden(FakeApi):
        def list(self, kind: str, namespace: str | None, **kw: Any) -> Any:
            if kind == "pods":
                raise Unauthorized("pods is forbidden: cannot list resource")
            return super().list(kind, namespace, **kw)

    sentinel = Sentinel(Forbidden(), "dispatch", lambda p: None)
    with caplog.at_level(logging.WARNING, logger="jobdispatch_kubeflow.sentinel"):
        sentinel.start()
        eventually(lambda: not sentinel.running, "stopped", every=0.01)
    assert "may not list and watch pods" in caplog.text


def test_watching_starts_one_follower_per_kind_fed_to_the_sentinel_and_closing_stops_them(
    backend: KubeflowBackend, api: WatchedApi
) -> None:
    """Every watch of every job shares one follower per kind; the sentinel follows nothing of
    its own, it is fed by the pods' follower."""
    _started(backend)
    before = set(threading.enumerate())
    for _ in backend.watch("j1"):
        pass
    for _ in backend.watch("j2"):
        pass
    started = [t for t in set(threading.enumerate()) - before if t.name.startswith("kubeflow-")]
    assert sorted(t.name for t in started) == [
        f"kubeflow-{kind}-dispatch" for kind in ("jobs", "jobsets", "pods", "trainjobs")
    ]
    assert api.requests["LIST pods"] == 1, "one list of pods, shared"
    backend.close()
    for thread in started:
        thread.join(timeout=5)
    assert not started[0].is_alive()
