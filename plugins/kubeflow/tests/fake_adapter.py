"""The adapter over an in-memory API, as the unit tests make it: on the test runtime, with
every look at the cluster's facts made afresh, so no test sees a probe another one cached."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from jobdispatch_kubeflow import KubeflowBackend, Settings, probe
from jobdispatch_kubeflow.fake import FakeApi


def fake_adapter(api: FakeApi, clock: Callable[[], datetime]) -> KubeflowBackend:
    """The adapter over ``api`` at ``clock``: the probe cache of earlier tests forgotten and
    nothing kept from one look to the next (``probe_ttl`` 0)."""
    probe.forget()
    settings = Settings.from_config(
        {"namespace": "dispatch", "runtime": {"name": "dispatch-torch-test"}, "probe_ttl": 0}
    )
    return KubeflowBackend(settings, api=api, clock=clock)
