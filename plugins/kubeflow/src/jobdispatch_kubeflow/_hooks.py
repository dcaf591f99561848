"""Registers the ``kubeflow`` adapter. Imports nothing of the adapter (nor the kubernetes
client): the backend and its schema are named by string and imported when used."""

from __future__ import annotations

from jobdispatch.plugins import Registration, registers

jobdispatch_register_adapters = registers(
    Registration(
        "kubeflow",
        "jobdispatch_kubeflow.backend:KubeflowBackend.from_config",
        schema="jobdispatch_kubeflow.config:CONFIG_SCHEMA",
        spi="1.1",
        summary="Kubeflow Trainer v2: one TrainJob per submission, over the Kubernetes API",
    )
)
