"""dispatch: submit and supervise multi-node training jobs behind one contract."""

from __future__ import annotations

from jobdispatch.__about__ import __version__

__all__ = ["__version__"]
