"""Checkpoints for dispatch jobs: publish and resolve them on POSIX or S3, isolated per execution.

The names below are loaded on first use, so importing the package (as the plugin manager and the
``jobdispatch-publish`` command do) costs nothing until something is used.
"""

from __future__ import annotations

import importlib
from typing import Any

from jobdispatch_publish.__about__ import __version__

__all__ = [
    "Entry",
    "Identity",
    "PosixStore",
    "Watcher",
    "__version__",
    "open_store",
    "probe",
    "prune",
    "publish",
    "resolve",
]

_LAZY = {
    "Entry": "jobdispatch_publish.entry",
    "Identity": "jobdispatch_publish.identity",
    "PosixStore": "jobdispatch_publish.posix",
    "Watcher": "jobdispatch_publish.watch",
    "open_store": "jobdispatch_publish.stores",
    "probe": "jobdispatch_publish.probe",
    "prune": "jobdispatch_publish.prune",
    "publish": "jobdispatch_publish.publish",
    "resolve": "jobdispatch_publish.resolve",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'jobdispatch_publish' has no attribute {name!r}")
