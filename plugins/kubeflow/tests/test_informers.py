"""The shared caches (module ``informers``): one list and one watch per kind, read by the poll
and every follower, so that a poll and a followed job cost no request (issue 35, item 1)."""

from __future__ import annotations

import queue
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
from fake_adapter import NOW, QueuedWatchApi, fake_adapter, seeded
from jobdispatch.spi import StartRequest
from jobdispatch.testing import eventually
from jobdispatch.types import JobSpec, ObjectState
from jobdispatch_kubeflow import KubeflowBackend
from jobdispatch_kubeflow.fake import FakeApi
from jobdispatch_kubeflow.informers import OBSERVED, Informers
from jobdispatch_kubeflow.listwatch import Changed, Listed
from objects import pod

Obj = dict[str, Any]


class StreamingApi(QueuedWatchApi):
    """The in-memory API whose watches stream what the test puts in ``changes[kind]``, noting
    each kind's selector."""

    def __init__(self) -> None:
        super().__init__()
        self.selectors: dict[str, str | None] = {}

    def stream(self, kind: str, selector: str | None, version: str, timeout: int) -> Iterator[Obj]:
        self.selectors[kind] = selector
        return super().stream(kind, selector, version, timeout)


@pytest.fixture
def api() -> StreamingApi:
    return seeded(StreamingApi())


@pytest.fixture
def backend(api: StreamingApi) -> Iterator[KubeflowBackend]:
    with closing(fake_adapter(api, lambda: NOW, watch_window=0.3)) as made:
        yield made


def _start(backend: KubeflowBackend, job: str) -> None:
    spec = JobSpec(command=("train",))
    backend.open(backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec)))


def _cached(backend: KubeflowBackend) -> None:
    """Follow the cluster, as a supervisor does, until the caches are in."""
    for _ in backend.watch("j0"):
        pass
    informers = backend._informers
    assert informers is not None
    eventually(informers.ready, "the caches filled", within=10, every=0.01)


def test_once_followed_a_poll_sends_no_request_whatever_the_number_of_jobs(
    backend: KubeflowBackend, api: StreamingApi
) -> None:
    jobs = [f"j{i}" for i in range(40)]
    for job in jobs:
        _start(backend, job)
    api.put("pods", "dispatch", pod(jobset_name="jd-j3-1-1"))
    _cached(backend)
    backend.find_many(jobs)  # the first look pins j3's placement: one write, once
    informers = backend._informers
    assert informers is not None
    eventually(lambda: informers.ready("nodes"), "the nodes followed", within=10, every=0.01)
    backend.find_many(jobs)
    before = api.requests.total()
    found = backend.find_many(jobs)
    assert api.requests.total() == before, "a poll reads the caches"
    assert all(len(found[j].objects) == 1 for j in jobs)
    assert found["j3"].objects[0].state is ObjectState.RUNNING
    lists = {k: v for k, v in api.requests.items() if k.startswith("LIST")}
    assert lists == {f"LIST {k}": 1 for k in ("trainjobs", "jobsets", "jobs", "pods", "nodes")}


def test_every_kind_is_followed_by_a_selector_that_names_no_job(
    backend: KubeflowBackend, api: StreamingApi
) -> None:
    _start(backend, "j1")
    _cached(backend)
    eventually(lambda: len(api.selectors) >= 4, "four watches", within=10, every=0.01)
    for kind, selector in api.selectors.items():
        assert selector == OBSERVED[kind]
        assert "j1" not in (selector or "")


def test_a_change_wakes_the_followed_job_and_the_poll_sees_it(
    backend: KubeflowBackend, api: StreamingApi
) -> None:
    _start(backend, "j1")
    _cached(backend)
    api.put("pods", "dispatch", pod(jobset_name="jd-j1-1-1"))
    running = api.get("pods", "dispatch", "jd-j1-1-1-node-0-0-abcde")
    assert running is not None
    before = Counter(api.requests)
    seen: list[ObjectState] = []
    backend.watch_window = 5.0
    api.change("pods", running, "ADDED")
    for obs in backend.watch("j1"):
        seen.append(obs.state)
        if obs.state is ObjectState.RUNNING:
            break
    assert seen[-1] is ObjectState.RUNNING, seen
    assert backend.find("j1").objects[0].state is ObjectState.RUNNING
    sent = Counter(api.requests)
    sent.subtract(before)
    asked = {k: v for k, v in sent.items() if v and not k.startswith("WATCH")}
    # The one write the first look at a run makes (its placement pinned), and the node
    # follower's first list: nothing per look.
    assert set(asked) <= {"PATCH trainjobs", "LIST nodes"}, asked
    assert all(v == 1 for v in asked.values()), asked


def test_a_write_is_read_back_at_once_and_a_stale_event_does_not_undo_it(
    backend: KubeflowBackend, api: StreamingApi
) -> None:
    _start(backend, "j0")
    _cached(backend)
    informers = backend._informers
    assert informers is not None
    _start(backend, "j1")  # no event streams: the write's reply is in the cache
    (obs,) = backend.find("j1").objects  # created, then opened: both replies are cached
    assert obs.state is not ObjectState.GATED
    tj = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    stale = {**tj, "metadata": {**tj["metadata"], "resourceVersion": "1"}}
    stale["spec"] = {**tj["spec"], "suspend": True}
    informers._stores["trainjobs"].apply(Changed("MODIFIED", stale))
    cached = informers.get("trainjobs", "jd-j1-1-1")
    assert cached is not None and cached["metadata"]["resourceVersion"] != "1"


def test_a_list_replaces_the_cache_and_a_deleted_object_goes() -> None:
    informers = Informers(FakeApi(), "dispatch", ("pods",))
    store = informers._stores["pods"]
    a = pod("a")
    store.apply(Listed([a, pod("b")], "10"))
    store.apply(Changed("DELETED", pod("b")))
    assert [p["metadata"]["name"] for p in informers.items("pods")] == ["a"]
    store.apply(Listed([pod("c")], "20"))
    assert [p["metadata"]["name"] for p in informers.items("pods")] == ["c"]
    informers.wrote("pods", {**a, "metadata": {**a["metadata"], "deletionTimestamp": "x"}})
    assert informers.get("pods", "a") is None, "a write that let it go does not bring it back"


def test_a_follower_that_lost_the_server_sends_the_poll_to_the_server(
    backend: KubeflowBackend, api: StreamingApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache whose follower lost the API server may be stale: the poll asks the server, and
    says Unreachable when it does not answer, until the follower has listed again."""
    from jobdispatch.errors import Unreachable
    from jobdispatch_kubeflow import listwatch

    _start(backend, "j1")
    _cached(backend)
    informers = backend._informers
    assert informers is not None
    retry, listwatch.RETRY_SECONDS = listwatch.RETRY_SECONDS, 0.5
    listing = api.list
    down = [True]

    def lost(kind: str, namespace: str | None, **kw: Any) -> tuple[list[Obj], str]:
        if down[0]:
            raise Unreachable("the API server went away")
        return listing(kind, namespace, **kw)

    try:
        monkeypatch.setattr(api, "list", lost)
        broken: Any = Unreachable("stream broke")
        api.changes.setdefault("pods", queue.Queue()).put(broken)
        eventually(
            lambda: not informers.ready(), "the pods' cache marked stale", within=10, every=0.01
        )
        with pytest.raises(Unreachable):
            backend.find("j1")
        down[0] = False
        eventually(informers.ready, "listed again", within=10, every=0.01)
        assert backend.find("j1").objects
    finally:
        listwatch.RETRY_SECONDS = retry
