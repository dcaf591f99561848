"""Checkpoints for dispatch jobs: publish and resolve them on POSIX or S3, isolated per execution.

The names below are loaded on first use, so importing the package (as the plugin manager and the
``jobdispatch-publish`` command do) costs nothing until something is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobdispatch._lazy import lazy

from jobdispatch_publish.__about__ import __version__

if TYPE_CHECKING:
    from jobdispatch_publish.entry import Entry
    from jobdispatch_publish.identity import Identity
    from jobdispatch_publish.marks import Marker, progress
    from jobdispatch_publish.posix import PosixStore
    from jobdispatch_publish.probe import probe
    from jobdispatch_publish.prune import prune
    from jobdispatch_publish.publish import publish
    from jobdispatch_publish.reader import ProgressReader, read_progress
    from jobdispatch_publish.resolve import resolve
    from jobdispatch_publish.stores import open_store
    from jobdispatch_publish.watch import Watcher

__all__ = [
    "Entry",
    "Identity",
    "Marker",
    "PosixStore",
    "ProgressReader",
    "Watcher",
    "__version__",
    "open_store",
    "probe",
    "progress",
    "prune",
    "publish",
    "read_progress",
    "resolve",
]

__getattr__, __dir__ = lazy(__name__, __file__)
