"""Skip or fail a test that needs a service this machine may not run.

The slurm and kubeflow adapters test against real services (a Slurm cluster, a Kubernetes API)
started by ``tools/*/up``. Without one, a developer's run skips those tests; CI sets
``JOBDISPATCH_REQUIRE_SERVICES=1`` after starting them, and there a missing service is an
error, not a reason to skip. That rule is :func:`require_service`, written once for the
adapters' ``testing`` modules.
"""

from __future__ import annotations

import os

__all__ = ["REQUIRE_SERVICES_ENV", "require_service"]

#: Set to ``1`` where the services were started and their absence is a failure.
REQUIRE_SERVICES_ENV = "JOBDISPATCH_REQUIRE_SERVICES"


def require_service(problem: str | None) -> None:
    """Return when ``problem`` is None (the service answers); otherwise skip the test with it,
    or fail it when ``JOBDISPATCH_REQUIRE_SERVICES=1``."""
    if problem is None:
        return
    import pytest

    if os.environ.get(REQUIRE_SERVICES_ENV) == "1":
        pytest.fail(f"{REQUIRE_SERVICES_ENV}=1 but {problem}")
    pytest.skip(problem)
