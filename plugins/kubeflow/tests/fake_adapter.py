"""The adapter over an in-memory API, as the unit tests make it: on the test runtime, with
every look at the cluster's facts made afresh, so no test sees a probe another one cached."""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

from jobdispatch_kubeflow import KubeflowBackend, Settings, probe
from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT, FakeApi
from objects import node

A = TypeVar("A", bound=FakeApi)

#: The time the tests' adapters read (the objects' builders date things about it).
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def seeded(api: A) -> A:
    """``api`` holding what every look at the cluster reads first: the test runtime and one
    ready node."""
    api.put("clustertrainingruntimes", None, TEST_RUNTIME_OBJECT)
    api.put("nodes", None, node())
    return api


def fake_adapter(
    api: FakeApi, clock: Callable[[], datetime], *, watch_window: float | None = None
) -> KubeflowBackend:
    """The adapter over ``api`` at ``clock``: the probe cache of earlier tests forgotten and
    nothing kept from one look to the next (``probe_ttl`` 0); ``watch_window``, how long its
    watches wait, when the test sets it."""
    probe.forget()
    settings = Settings.from_config(
        {"namespace": "dispatch", "runtime": {"name": "dispatch-torch-test"}, "probe_ttl": 0}
    )
    made = KubeflowBackend(settings, api=api, clock=clock)
    if watch_window is not None:
        made.watch_window = watch_window
    return made


class QueuedWatchApi(FakeApi):
    """The in-memory API whose watches stream what a test puts in ``changes[kind]``: an
    exception put there is raised by the watch and ``None`` ends one request, which also ends
    once nothing came for ``quiet`` seconds (as one the server ends)."""

    streams = True
    quiet = 0.2

    def __init__(self) -> None:
        super().__init__()
        self.changes: dict[str, queue.Queue[Any]] = {}

    def stream(
        self, kind: str, selector: str | None, version: str, timeout: int
    ) -> Iterator[dict[str, Any]]:
        return self._stream(self.changes.setdefault(kind, queue.Queue()))

    def _stream(self, events: queue.Queue[Any]) -> Iterator[dict[str, Any]]:
        while True:
            try:
                item = events.get(timeout=self.quiet)
            except queue.Empty:
                return
            if item is None:
                return
            if isinstance(item, Exception):
                raise item
            yield item

    def change(self, kind: str, obj: dict[str, Any], type_: str = "MODIFIED") -> None:
        """Have the watch of ``kind`` stream a ``type_`` event of ``obj``."""
        self.changes.setdefault(kind, queue.Queue()).put({"type": type_, "object": obj})
