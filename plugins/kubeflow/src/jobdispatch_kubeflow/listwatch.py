"""Following one kind of object on the API server: list, then watch from the list's version.

Everything in the adapter that follows the cluster between polls goes through here: the
backend's ``watch`` (TrainJobs of one job, for a window of seconds), the pod sentinel (the
namespace's JobSet pods, for as long as the backend lives) and the Kueue admission controller
(Workloads and TrainJobs of every namespace, kept in a :class:`Cache`). The shape is client-go's
Reflector (``tools/cache/reflector.go``):

- a LIST gives every object and the collection's ``resourceVersion``; a WATCH from that version
  gives every change after it, so nothing between the two is missed;
- every event moves the version on, a ``BOOKMARK`` too (it carries only a version: the API
  server sends one about every minute and just before the watch's deadline, so that a quiet
  watch can be resumed from a recent version rather than from one the server no longer keeps);
- a watch request the server ends (its ``timeoutSeconds`` is over) is made again from the last
  version, without listing again;
- a ``410 Gone`` (the version is older than the server's history, sent as the request's status
  or as an ERROR event in the stream) lists again and watches from the new list's version;
- a watch request the server ends at once is not repeated in a tight loop: the next waits
  :data:`QUICKEST_WATCH` seconds (client-go backs off likewise after a watch that lasted less
  than a second);
- a connection that goes silent is noticed: :meth:`api.KubeApi.watch` reads with a timeout of
  the request's own ``timeoutSeconds`` plus its ordinary request timeout, and says
  ``Unreachable`` when nothing arrived by then (the Python client's socket otherwise waits for
  ever, and the server's own timeout cannot end a stream whose connection is dead).

Nothing seen here is recorded: the followers only wake a poll, add evidence or feed a
controller whose every write is conditional on the version it read, so an event seen twice, or
a stale object, costs latency, never correctness. Any error but a 410 goes to the caller, who
decides whether to try again (:class:`Follower` does, after a pause, from a new LIST).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
from jobdispatch.errors import DispatchError, Unauthorized

from jobdispatch_kubeflow.api import Api, Gone

__all__ = [
    "QUICKEST_WATCH",
    "RETRY_SECONDS",
    "WATCH_SECONDS",
    "Cache",
    "Changed",
    "Follower",
    "Listed",
    "list_watch",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

#: Seconds one WATCH request lasts (its ``timeoutSeconds``) before it is made again from the
#: last version seen.
WATCH_SECONDS = 60
#: Seconds a watch request lasts at the least before the next is made at once; after one the
#: server ended sooner, the next waits this long.
QUICKEST_WATCH = 1.0
#: Seconds a :class:`Follower` waits before listing again after the API server failed it.
RETRY_SECONDS = 5.0
#: The kinds of watch event that carry a change of an object.
CHANGES = frozenset({"ADDED", "MODIFIED", "DELETED"})


@attrs.frozen(eq=False)
class Listed:
    """What a LIST returned: every object there is, at ``version``. A follower that keeps
    objects replaces what it had with these (one that was deleted meanwhile is not in it)."""

    items: list[Obj]
    version: str


@attrs.frozen(eq=False)
class Changed:
    """One change the watch reported: ``type`` is ADDED, MODIFIED or DELETED, ``obj`` the object
    as it is after the change (as it was last, for DELETED)."""

    type: str
    obj: Obj


Event = Listed | Changed


def _version(obj: Mapping[str, Any], default: str) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or default)


def list_watch(
    api: Api,
    kind: str,
    namespace: str | None,
    *,
    selector: str | None = None,
    window: float | None = None,
    stopped: Callable[[], bool] = lambda: False,
    request_seconds: int = WATCH_SECONDS,
    pause: Callable[[float], object] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> Iterator[Event]:
    """The objects of ``kind`` in ``namespace`` (every namespace when None) matching
    ``selector``: first a :class:`Listed`, then a :class:`Changed` for each change, with a new
    :class:`Listed` after every 410 (see the module doc).

    Args:
        window: seconds to follow, then stop; each watch request asks the server for the rest
            of the window, so a request that ends ends the window (the caller's next call lists
            again). None: follow until ``stopped``, a request lasting ``request_seconds``.
        stopped: asked before each event is handed over and before each request.
        pause: waits between two requests when the server ended one at once; a follower's
            interruptible wait, so that stopping does not wait for it.
        monotonic: the clock of the window and of the quickest watch.
    """
    deadline = None if window is None else monotonic() + window
    items, version = api.list(kind, namespace, label_selector=selector)
    yield Listed(items, version)
    while not stopped():
        timeout = request_seconds
        if deadline is not None:
            timeout = int(deadline - monotonic())
            if timeout <= 0:
                return
        began = monotonic()
        try:
            for event in api.watch(
                kind,
                namespace,
                label_selector=selector,
                resource_version=version,
                timeout=timeout,
            ):
                if stopped():
                    return
                obj = event.get("object") or {}
                version = _version(obj, version)
                if event.get("type") in CHANGES:
                    yield Changed(str(event["type"]), obj)
        except Gone:
            log.info("watch of %s: resourceVersion %s is gone; listing again", kind, version)
            items, version = api.list(kind, namespace, label_selector=selector)
            yield Listed(items, version)
            continue
        if deadline is not None:
            return
        if monotonic() - began < QUICKEST_WATCH:
            # The server should have kept it for request_seconds: wait before the next, rather
            # than ask again and again in a tight loop.
            pause(QUICKEST_WATCH)


class Follower:
    """:func:`list_watch` on a daemon thread, handing every event to ``handle``, until stopped.

    A lost API server (any ``DispatchError``) is logged and followed again after
    :data:`RETRY_SECONDS`, from a new LIST; an identity that may not list or watch the kind
    (``Unauthorized``) is said once as a warning and stops the follower, since asking again
    would not change the answer. An error ``handle`` raises is logged, and following goes on.

    Args:
        api, kind, namespace, selector: what to follow (see :func:`list_watch`).
        handle: called on the follower's thread with each event.
        name: the thread's name, and how the log speaks of this follower.
        unauthorized: the warning logged when the identity may not follow the kind.
        logger: where to log (the caller's module, so its records keep their origin).
        on_lost: called on the follower's thread when it lost the API server or may not follow
            the kind (before it tries again, or stops): whoever reads what it handed over then
            knows it may be stale until the next :class:`Listed`.
    """

    def __init__(
        self,
        api: Api,
        kind: str,
        namespace: str | None,
        handle: Callable[[Event], None],
        *,
        selector: str | None = None,
        name: str,
        unauthorized: str = "",
        logger: logging.Logger = log,
        on_lost: Callable[[Exception], None] = lambda exc: None,
    ) -> None:
        self.api, self.kind, self.namespace, self.selector = api, kind, namespace, selector
        self.on_lost = on_lost
        self.handle, self.name, self.log = handle, name, logger
        self.unauthorized = unauthorized or f"{name} stops: it may not list and watch {kind}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start following, once: a second call while it runs, or after a stop, does nothing."""
        with self._lock:
            if self.running or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop following. The thread ends at its next event or the end of its watch request
        (a daemon, it never holds a process open)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for event in list_watch(
                    self.api,
                    self.kind,
                    self.namespace,
                    selector=self.selector,
                    stopped=self._stop.is_set,
                    pause=self._stop.wait,
                ):
                    self._hand_over(event)
            except Unauthorized as exc:
                self.log.warning("%s (%s)", self.unauthorized, exc)
                self.on_lost(exc)
                return
            except DispatchError as exc:
                self.log.info("%s lost the API server (%s); trying again", self.name, exc)
                self.on_lost(exc)
                self._stop.wait(RETRY_SECONDS)
            except Exception as exc:  # never a silent death: said, then tried again
                self.log.exception("%s failed; trying again", self.name)
                self.on_lost(exc)
                self._stop.wait(RETRY_SECONDS)

    def _hand_over(self, event: Event) -> None:
        try:
            self.handle(event)
        except Exception:  # reported, never fatal: the follower only adds to what polls see
            self.log.exception("%s could not handle a %s event", self.name, type(event).__name__)


class Cache:
    """The objects one follower has seen, by namespace and name: replaced by each
    :class:`Listed`, changed by each :class:`Changed` (an informer's store, without indexes).

    ``synced`` is set once the first LIST is in, so a reader never mistakes an empty cache for
    an empty cluster."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str], Obj] = {}
        self._lock = threading.Lock()
        self.synced = threading.Event()

    @staticmethod
    def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), str(meta.get("name") or "")

    def apply(self, event: Event) -> None:
        """Take in one event of a follower."""
        with self._lock:
            if isinstance(event, Listed):
                self._objects = {self._key(o): o for o in event.items}
                self.synced.set()
            elif event.type == "DELETED":
                self._objects.pop(self._key(event.obj), None)
            else:
                self._objects[self._key(event.obj)] = event.obj

    def items(self) -> list[Obj]:
        """Every object, as last seen (the caller must not change them)."""
        with self._lock:
            return list(self._objects.values())
