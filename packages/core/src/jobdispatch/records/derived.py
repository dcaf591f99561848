"""Something derived from every record of a store, kept up to date by revision.

A reader that watches a whole store (the metrics endpoint, the web dashboard) must not fold ten
thousand records each time it looks. The store's :meth:`~jobdispatch.records.store.Surveyed.
survey` answers every job's revision from one read transaction without fetching a record; a
:class:`Derived` keeps each job's value with the revision it was derived from, and reads and
derives again only the records whose revision moved. So a look with nothing changed costs the
survey alone. What is derived is the caller's: the metrics' facts, the dashboard's rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Generic, TypeVar

from jobdispatch.errors import Invalid, NotFound
from jobdispatch.records.events import View
from jobdispatch.records.store import READ_BATCH, Records, Survey, Surveyed, read_in_batches
from jobdispatch.types import JobID

__all__ = ["READ_BATCH", "Derived"]

T = TypeVar("T")


class Derived(Generic[T]):
    """Each record's value (``derive(view, now)``), brought up to date by :meth:`refresh`.

    ``derive`` is pure (it gets the store's clock as ``now``); it raises Invalid for a record
    the protocol cannot have written, which is then kept in :attr:`unreadable` and warned of
    on ``log``. ``reader`` names the watcher in the error for a store that cannot be surveyed.
    Subclasses see each replacement through :meth:`changed`. Not thread-safe: callers refresh
    under a lock.
    """

    def __init__(
        self,
        store: Records,
        derive: Callable[[View, datetime], T],
        *,
        reader: str,
        log: logging.Logger,
        read_batch: int = READ_BATCH,
    ) -> None:
        if not isinstance(store, Surveyed):
            msg = f"{store!r} cannot be surveyed, so the {reader} cannot watch it"
            raise Invalid(msg)
        self.store = store
        self._surveyed: Surveyed = store
        self._derive = derive
        self.read_batch = read_batch
        self.log = log
        #: Each readable job's value.
        self.values: dict[JobID, T] = {}
        #: The revision each job was last read at, readable or not.
        self.revisions: dict[JobID, int] = {}
        #: Jobs whose record cannot be read or derived, with the revision that could not.
        self.unreadable: dict[JobID, int] = {}
        self.survey: Survey | None = None

    def refresh(self) -> int:
        """Survey the store and derive again each record whose revision moved; returns how
        many were read. Raises what the store raises when it cannot answer (Unavailable):
        the values are then as of the last refresh that succeeded."""
        survey = self._surveyed.survey()
        changed = [
            job for job, revision in survey.revisions.items() if self.revisions.get(job) != revision
        ]
        for job, answer in read_in_batches(self.store, changed, self.read_batch):
            self._update(job, answer, survey.now, survey.revisions[job])
        self.survey = survey
        return len(changed)

    def changed(self, job: JobID, old: T | None, new: T | None) -> None:
        """Called when ``job``'s value is replaced (None: none before, or none now)."""

    def _update(self, job: JobID, answer: object, now: datetime, surveyed: int) -> None:
        """Replace the job's value by that of ``answer`` (its View, or why it could not be
        read); an unreadable record is remembered at the revision ``surveyed``, so that it is
        tried again only once it has grown."""
        old = self.values.pop(job, None)
        self.unreadable.pop(job, None)
        self.revisions[job] = surveyed
        new: T | None = None
        if isinstance(answer, View):
            self.revisions[job] = answer.revision
            try:
                new = self._derive(answer, now)
            except Invalid as exc:
                self.log.warning("record %s cannot be folded: %s", job, exc)
                self.unreadable[job] = surveyed
            else:
                self.values[job] = new
        elif isinstance(answer, NotFound):
            # Listed, then gone: no store removes records, so a damaged index.
            del self.revisions[job]
        else:
            self.log.warning("record %s cannot be read: %s", job, answer)
            self.unreadable[job] = surveyed
        if old is not None or new is not None:
            self.changed(job, old, new)
