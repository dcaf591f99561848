"""The adapter suite on the memory adapter, in both shapes, run by hand and running itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobdispatch_conformance.adapter import AdapterSuite
from jobdispatch_conformance.adapter.memory import MemoryFixtures


class TestMemorySlurm(MemoryFixtures, AdapterSuite):
    config: Mapping[str, Any] = {"shape": "slurm"}


class TestMemorySlurmAutoRun(MemoryFixtures, AdapterSuite):
    config: Mapping[str, Any] = {"shape": "slurm", "auto_run": True, "seed": 5}


class TestMemoryKubeflow(MemoryFixtures, AdapterSuite):
    config: Mapping[str, Any] = {"shape": "kubeflow"}


class TestMemoryKubeflowAutoRun(MemoryFixtures, AdapterSuite):
    config: Mapping[str, Any] = {"shape": "kubeflow", "auto_run": True, "allow_rank_restart": True}
