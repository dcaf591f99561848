"""The adapter conformance suite: what every dispatch adapter must show, through the SPI alone.

An adapter's tests subclass :class:`AdapterSuite` and provide a backend factory and, where the
harness can act on the cluster, a :class:`Driver`. Checks are gated by the capabilities the
cluster reports: yes must work, no must refuse with Unsupported, unknown is tolerated and noted.
See docs/specs/0003-adapter.md.
"""

from __future__ import annotations

from jobdispatch_conformance.adapter import checks
from jobdispatch_conformance.adapter.driver import OPERATIONS, CannotDrive, Driver, Timeouts
from jobdispatch_conformance.adapter.harness import CheckFailed, Harness
from jobdispatch_conformance.adapter.suite import (
    AdapterFixtures,
    AdapterSuite,
    ConfigurationTests,
    DeclarationTests,
    DiscoveryTests,
    EndingTests,
    HoldTests,
    LifecycleTests,
    OutputTests,
    RerunTests,
    SubmissionTests,
)

__all__ = [
    "OPERATIONS",
    "AdapterFixtures",
    "AdapterSuite",
    "CannotDrive",
    "CheckFailed",
    "ConfigurationTests",
    "DeclarationTests",
    "DiscoveryTests",
    "Driver",
    "EndingTests",
    "Harness",
    "HoldTests",
    "LifecycleTests",
    "OutputTests",
    "RerunTests",
    "SubmissionTests",
    "Timeouts",
    "checks",
]
