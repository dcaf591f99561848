"""The dispatch Kubeflow adapter: TrainJobs (Kubeflow Trainer v2) as dispatch objects.

``KubeflowBackend`` implements the adapter SPI; see docs/specs/0010-kubeflow-adapter.md.
Importing this package does not import the kubernetes client: the API wrapper imports it when a
backend connects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobdispatch._lazy import lazy

from jobdispatch_kubeflow.__about__ import __version__

if TYPE_CHECKING:
    from jobdispatch_kubeflow.backend import KubeflowBackend
    from jobdispatch_kubeflow.classify import Chain, Observation, observe, pod_cause
    from jobdispatch_kubeflow.config import CONFIG_SCHEMA, Runtime, Settings

__all__ = [
    "CONFIG_SCHEMA",
    "Chain",
    "KubeflowBackend",
    "Observation",
    "Runtime",
    "Settings",
    "__version__",
    "observe",
    "pod_cause",
]

__getattr__, __dir__ = lazy(__name__, __file__)
