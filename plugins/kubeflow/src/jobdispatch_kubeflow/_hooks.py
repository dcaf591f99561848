"""Registers the ``kubeflow`` adapter. Cheap to import: the kubernetes client and the backend
are imported only when a backend is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobdispatch.hookspecs import hookimpl
from jobdispatch.plugins import Registry


def _kubeflow_backend(config: Mapping[str, Any], token: Any = None) -> Any:
    from jobdispatch_kubeflow.backend import KubeflowBackend

    return KubeflowBackend.from_config(config, token)


@hookimpl
def jobdispatch_register_adapters(registry: Registry) -> None:
    from jobdispatch_kubeflow.config import CONFIG_SCHEMA

    registry.add(
        "kubeflow",
        _kubeflow_backend,
        schema=CONFIG_SCHEMA,
        spi="1.1",
        summary="Kubeflow Trainer v2: one TrainJob per submission, over the Kubernetes API",
    )
