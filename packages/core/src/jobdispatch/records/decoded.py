"""Decoded records kept for re-reads, and the checks that rebuild one from stored rows.

A durable store keeps each record as bytes: a header and one row per event. A supervisor reads
every job it owns on every poll, and decoding is the slow part of a read, so a store keeps what
it decoded (:class:`DecodedCache`) and, since records only grow and events never change, fetches
and decodes only the rows past the cached prefix (:func:`extend`). What a store commits itself
is cached as stored when it commits (``put`` on create, ``committed`` on append), so the
writer's next read, a supervisor's next round, decodes nothing at all. The LMDB store and the
PostgreSQL store both do this, so the cache and the damage checks live here once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from jobdispatch import codec
from jobdispatch.errors import Unreadable
from jobdispatch.records.events import AnyEvent, Header, Settled

__all__ = ["DEFAULT_CACHE_EVENTS", "Decoded", "DecodedCache", "extend"]

#: Decoded events kept per store for re-reads. It fills only with what is read, so a command
#: that reads a few jobs keeps a few; a supervisor re-reads every job it owns on every poll,
#: and once those records outgrow the cache each read decodes the whole record again (the
#: least recently read goes first, which a poll's round-robin always is). 200,000 events hold
#: 10,000 jobs of twenty events each, at about half a kilobyte an event.
DEFAULT_CACHE_EVENTS = 200_000

#: A record as decoded: its header and its events, in revision order.
Decoded = tuple[Header, tuple[AnyEvent, ...]]


class DecodedCache:
    """Decoded records by a key the store never reuses for another record (its creation
    sequence), least recently read out first, bounded by their total number of events (a
    header counts as one). A limit of 0 keeps nothing."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._items: OrderedDict[int, Decoded] = OrderedDict()
        self._size = 0
        #: For a cached record: how many of its first events :meth:`settles` has looked at,
        #: and whether one of them settles it. Dropped with the record.
        self._looked: dict[int, tuple[int, bool]] = {}

    def get(self, key: int) -> Decoded | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: int, header: Header, events: tuple[AnyEvent, ...]) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._size -= len(old[1]) + 1
            if len(events) + 1 > self.limit:
                self._looked.pop(key, None)
                return
            self._items[key] = (header, events)
            self._size += len(events) + 1
            while self._size > self.limit:
                gone, (_, dropped) = self._items.popitem(last=False)
                self._looked.pop(gone, None)
                self._size -= len(dropped) + 1

    def settles(self, key: int, events: Sequence[AnyEvent]) -> bool:
        """Whether an event of ``events`` (record ``key``'s, as just read) settles it, looking
        only at the events past those looked at before for the same record. A store checks
        this against its index row on every read, and a running job's record grows all its
        life (progress, observations): looking at every event every poll cost each read the
        record's whole length. Sound because a record only grows and its key is never reused,
        so the events looked at are the same ones at any later revision."""
        with self._lock:
            looked, found = self._looked.get(key, (0, False))
        if looked > len(events):  # cannot be (records only grow): look at them all again
            looked, found = 0, False
        found = found or any(isinstance(e, Settled) for e in events[looked:])
        with self._lock:
            if key in self._items:  # remembered only beside the record it is about
                self._looked[key] = (len(events), found)
        return found

    def committed(self, key: int, at: int, events: tuple[AnyEvent, ...]) -> None:
        """``events`` (as stored: stamped) were just committed after revision ``at``: a
        record cached up to exactly ``at`` gets them, so the writer's next read decodes
        nothing. Any other cached state (ahead of ``at``: a read got there first; behind it:
        another writer committed in between) is left for the next read to extend."""
        with self._lock:
            item = self._items.get(key)
        if item is not None and len(item[1]) == at:
            self.put(key, item[0], item[1] + events)


def extend(
    job: str,
    header: Header | bytes,
    prefix: Sequence[AnyEvent],
    rows: Sequence[tuple[int, bytes]],
    revision: int,
) -> Decoded:
    """The record ``job`` at ``revision``: ``header`` (decoded already, or its stored bytes),
    the events ``prefix`` decoded already, then ``rows`` (each a revision and its stored
    bytes, in order) decoded after it.

    Raises Unreadable, naming the job and the revision, for damage the rows show: a header of
    another job, a revision missing from the run, or fewer or more events than the revision.
    """
    if isinstance(header, bytes):
        header = codec.decode_header(header, job=job)
        if header.job != job:
            msg = f"record {job} is damaged: its index row leads to the header of {header.job}"
            raise Unreadable(msg, job=job, revision=0)
    events = list(prefix)
    for expected, (got, data) in enumerate(rows, start=len(prefix) + 1):
        if got != expected:
            msg = f"record {job} is damaged: revision {expected} is missing"
            raise Unreadable(msg, job=job, revision=expected)
        events.append(codec.decode_event(data, revision=expected, job=job))
    if len(events) != revision:
        msg = f"record {job} is damaged: {len(events)} events stored, revision {revision}"
        raise Unreadable(msg, job=job)
    return header, tuple(events)
