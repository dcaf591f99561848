"""One list and one watch per kind, shared by the poll and every follower of a backend.

A supervisor asks the adapter about all its jobs every poll and follows up to sixteen of them
between polls. Measured on the control plane (issue 35), a list per poll and a list-then-watch
per followed job sent about 620 requests a minute whatever the number of jobs, most of them
re-lists of whole chains (and every Node) by the followers. client-go's answer is the shared
informer, and this is it, without its indexes: one :class:`listwatch.Follower` per kind the
observation reads (TrainJobs, JobSets, Jobs, Pods, and Workloads when Kueue gates), each
keeping a :class:`listwatch.Cache` of the namespace's objects, resumed from its
``resourceVersion`` with bookmarks and listed again only after a 410. The poll and every
follower read the caches; the changes each kind reports are handed to every subscriber (the
backend's ``watch`` windows and the pod sentinel), so following a job costs no request.

Selectors never name jobs: each kind is followed by a label every object of dispatch carries
(TrainJobs and JobSets ``jobdispatch.dev/managed``; Jobs and Pods the JobSet controller's
``jobset-name``), so a request has the same size at ten jobs as at sixty thousand (a selector
naming every job id got HTTP 431 at 60,000 jobs).

Nodes are the exception, being the cluster's and not the project's: they are followed only
once a pod's evidence needs them (:meth:`Informers.follow_nodes`), by one watch of every Node,
listed once; until then (and by a backend that follows nothing) a node is read by name.

A follower that lost the API server (or may not follow its kind) marks its cache unlisted
until its next list is in: a poll then asks the API server, and says so when it does not
answer, rather than answer from what may be stale.

Read-your-writes: a write's reply is put in the cache at once (:meth:`Informers.wrote`), so a
poll right after a create sees the object; an event older than what the cache holds (by
``resourceVersion``, which the API server hands out in increasing order) does not undo it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from jobdispatch_kubeflow import names
from jobdispatch_kubeflow.api import Api
from jobdispatch_kubeflow.listwatch import Cache, Changed, Event, Follower

__all__ = ["OBSERVED", "Informers", "Subscriber"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
#: Called with the kind and each event of it, on the kind's follower thread.
Subscriber = Callable[[str, Event], None]

#: The label selector each kind is followed by: one every object of dispatch carries, never
#: one that names jobs.
OBSERVED: Mapping[str, str | None] = {
    "trainjobs": f"{names.MANAGED}=true",
    "jobsets": f"{names.MANAGED}=true",
    "jobs": names.JOBSET_NAME,
    "pods": names.JOBSET_NAME,
    "workloads": None,
    "nodes": None,
}


def _version(obj: Mapping[str, Any]) -> int | None:
    value = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return int(value) if value.isdigit() else None


class _Store(Cache):
    """A cache that a stale event does not roll back past a write's reply put in it."""

    def apply(self, event: Event) -> None:
        if isinstance(event, Changed) and event.type != "DELETED":
            key = self._key(event.obj)
            with self._lock:
                held = self._objects.get(key)
            if held is not None:
                new, old = _version(event.obj), _version(held)
                if new is not None and old is not None and new < old:
                    return
        super().apply(event)

    def get(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._objects.get((namespace, name))


class Informers:
    """The followed kinds of one namespace, started once and read by everyone.

    Args:
        api: the adapter's API (its identity needs ``list`` and ``watch`` on each kind).
        namespace: where the TrainJobs and everything beneath them live.
        kinds: the kinds to follow (Workloads only when Kueue gates the TrainJobs).
    """

    def __init__(self, api: Api, namespace: str, kinds: tuple[str, ...]) -> None:
        self.api, self.namespace, self.kinds = api, namespace, kinds
        self._stores: dict[str, _Store] = {kind: _Store() for kind in (*kinds, "nodes")}
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._followers: dict[str, Follower] = {}
        self._started = False

    def _follower(self, kind: str) -> Follower:
        def handle(event: Event) -> None:
            self._stores[kind].apply(event)
            with self._lock:
                subscribers = list(self._subscribers)
            for subscriber in subscribers:
                subscriber(kind, event)

        namespace = None if kind == "nodes" else self.namespace
        return Follower(
            self.api,
            kind,
            namespace,
            handle,
            selector=OBSERVED[kind],
            name=f"kubeflow-{kind}-{self.namespace}",
            unauthorized=(
                f"the adapter may not list and watch {kind}"
                + ("" if namespace is None else f" in {namespace}")
                + "; the polls list them instead"
            ),
            logger=log,
            on_lost=lambda exc: self._stores[kind].synced.clear(),
        )

    def start(self) -> None:
        """Start following every kind, once."""
        with self._lock:
            if self._started:
                return
            self._started = True
            for kind in self.kinds:
                self._followers[kind] = self._follower(kind)
        for kind in self.kinds:
            self._followers[kind].start()

    def follow_nodes(self) -> None:
        """Start following the nodes (once; asked when a pod's evidence first needs them)."""
        with self._lock:
            if not self._started or "nodes" in self._followers:
                return
            self._followers["nodes"] = follower = self._follower("nodes")
        follower.start()

    def stop(self) -> None:
        with self._lock:
            followers = list(self._followers.values())
        for follower in followers:
            follower.stop()

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Hand every event of every kind to ``subscriber`` from now on; returns the call that
        ends it."""
        with self._lock:
            self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with self._lock:
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)

        return unsubscribe

    def ready(self, *kinds: str) -> bool:
        """Whether every one of ``kinds`` (each followed kind by default) is followed and its
        first list is in, so that the caches, not the API server, answer a poll."""
        wanted = kinds or self.kinds
        with self._lock:
            followed = {k: f for k, f in self._followers.items() if k in wanted}
        return len(followed) == len(wanted) and all(
            f.running and self._stores[k].synced.is_set() for k, f in followed.items()
        )

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every followed kind's first list."""
        for kind in self.kinds:
            if not self._stores[kind].synced.wait(timeout):
                return False
        return self.ready()

    def items(self, kind: str) -> list[Obj]:
        return self._stores[kind].items()

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        ns = "" if kind == "nodes" else (namespace or self.namespace)
        return self._stores[kind].get(ns, name)

    def wrote(self, kind: str, obj: Obj | None) -> None:
        """Put a write's reply in the cache (read-your-writes; see the module doc)."""
        meta = (obj or {}).get("metadata") or {}
        if kind not in self._stores or not obj or not meta.get("name"):
            return
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            # The write let it go: its DELETED event may be in already, and must stay so.
            return
        self._stores[kind].apply(Changed("MODIFIED", obj))
