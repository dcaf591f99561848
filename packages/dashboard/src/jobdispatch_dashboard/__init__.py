"""A read-only web dashboard of dispatch record stores: :class:`Board` reads the stores,
:func:`make_app` is the Starlette application, :func:`server` the uvicorn server that
``jobdispatch dashboard`` runs."""

from __future__ import annotations

from jobdispatch_dashboard.__about__ import __version__
from jobdispatch_dashboard.app import make_app
from jobdispatch_dashboard.board import Board, ClusterSource, JobPage
from jobdispatch_dashboard.redact import Redactor, secret_values
from jobdispatch_dashboard.rows import Query, Row, row_of
from jobdispatch_dashboard.serve import (
    DEFAULT_LISTEN,
    is_loopback,
    log_through,
    read_token,
    server,
)

__all__ = [
    "DEFAULT_LISTEN",
    "Board",
    "ClusterSource",
    "JobPage",
    "Query",
    "Redactor",
    "Row",
    "__version__",
    "is_loopback",
    "log_through",
    "make_app",
    "read_token",
    "row_of",
    "secret_values",
    "server",
]
