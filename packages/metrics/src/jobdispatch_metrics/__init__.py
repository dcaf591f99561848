"""Prometheus metrics of a dispatch record store, derived from the records at scrape time:
:class:`RecordCollector` for a registry of one's own, :func:`serve` for the HTTP endpoint that
``jobdispatch metrics`` and ``jobdispatch supervise --metrics-listen`` run."""

from __future__ import annotations

from jobdispatch_metrics.__about__ import __version__
from jobdispatch_metrics.collector import RecordCollector
from jobdispatch_metrics.facts import JobFacts, facts_of
from jobdispatch_metrics.server import DEFAULT_LISTEN, Endpoint, parse_listen, serve
from jobdispatch_metrics.watch import Watch

__all__ = [
    "DEFAULT_LISTEN",
    "Endpoint",
    "JobFacts",
    "RecordCollector",
    "Watch",
    "__version__",
    "facts_of",
    "parse_listen",
    "serve",
]
