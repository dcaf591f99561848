"""The durable dispatch record store on LMDB: ``LmdbRecords(path)``.

A commit that returned is on disk (fdatasync'd), several processes on one host may share a
store, and a crash at any moment loses nothing committed. docs/specs/0002-record.md holds the
details and what the guarantee rests on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobdispatch._lazy import lazy

from jobdispatch_records_lmdb.__about__ import __version__

if TYPE_CHECKING:
    from jobdispatch_records_lmdb.store import FORMAT, FORMAT_VERSION, LmdbRecords

__all__ = ["FORMAT", "FORMAT_VERSION", "LmdbRecords", "__version__"]

__getattr__, __dir__ = lazy(__name__, __file__)
