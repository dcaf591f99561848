"""The optional parts of the package and the extras that install them.

The helper runs inside every job container, so its base install is small: POSIX checkpoints need
nothing beyond the core. S3 needs boto3 (``jobdispatch-publish[s3]``), the Vault credential source
hvac (``jobdispatch-publish[vault]``, which brings S3 too). A feature whose extra is missing says
which extra to install, before anything else is tried.
"""

from __future__ import annotations

import importlib

from jobdispatch_publish.errors import MissingExtra

__all__ = ["require"]


def require(module: str, *, feature: str, extra: str) -> None:
    """:class:`MissingExtra` unless ``module`` can be imported."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise MissingExtra(feature, extra, module) from None
