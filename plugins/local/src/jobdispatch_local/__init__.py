"""jobdispatch-local: jobs as real processes on this machine, the embedded default adapter.

A job of N nodes and P processes per node runs N x P processes here, started and watched by a
small runner process per object that outlives whoever opened it and records every ending on
disk. See the package README for the layout of the state directory and the causes it reports.

The names below are imported on first use: the runner process imports this package too, and it
must start without loading the core (attrs, cattrs, jsonschema).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobdispatch._lazy import lazy

from jobdispatch_local.__about__ import __version__

if TYPE_CHECKING:
    from jobdispatch_local.backend import LocalBackend, Survey
    from jobdispatch_local.config import CONFIG_SCHEMA, Settings, default_state_dir

__all__ = [
    "CONFIG_SCHEMA",
    "LocalBackend",
    "Settings",
    "Survey",
    "__version__",
    "default_state_dir",
]

__getattr__, __dir__ = lazy(__name__, __file__)
