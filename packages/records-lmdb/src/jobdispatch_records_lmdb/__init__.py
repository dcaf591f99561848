"""The durable dispatch record store on LMDB."""

from __future__ import annotations

from jobdispatch_records_lmdb.__about__ import __version__

__all__ = ["__version__"]
