"""The conformance suites of dispatch: what every adapter and every record store must show."""

from __future__ import annotations

from jobdispatch_conformance.__about__ import __version__

__all__ = ["__version__"]
