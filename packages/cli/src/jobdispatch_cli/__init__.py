"""The ``jobdispatch`` command: submit, run, watch and recover training jobs from a terminal."""

from __future__ import annotations

from jobdispatch_cli.__about__ import __version__

__all__ = ["__version__"]
