"""Shared set-up of the Kubeflow adapter's tests: the API-shaped object builders (objects.py)
are importable from every test module, and the gate for tests that need the real control plane.

Real-cluster tests skip with the reason when the control plane is not up, except under
``JOBDISPATCH_REQUIRE_SERVICES=1`` (CI starts the services first), where they fail instead.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest


@pytest.fixture(scope="session")
def kube_cluster() -> Iterator[None]:
    """The real control plane answers (else skip, or fail under REQUIRE_SERVICES); afterwards
    the receipts of the TrainJobs the tests stopped are removed."""
    from jobdispatch_kubeflow import testing

    testing.require(testing.cluster_problem())
    try:
        yield
    finally:
        testing.forget_receipts()
