"""The adapter over an in-memory API, as the unit tests make it: on the test runtime, with
every look at the cluster's facts made afresh, so no test sees a probe another one cached."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

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
