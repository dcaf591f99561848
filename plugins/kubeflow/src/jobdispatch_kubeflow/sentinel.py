"""Pinning what a dying pod shows the moment the API server says so, between polls.

A pod is deleted with its evidence: on the control plane an evicted pod was Running with a
``deletionTimestamp`` and ``DisruptionTarget`` for about a second, then gone, and its Job failed
``BackoffLimitExceeded``, which says nothing of why. The adapter pins a dying pod's cause on its
TrainJob (0010 §5), but a poll pins only what it sees, and a supervisor polls the Kubeflow
adapter every 10 s: most evictions would fall between two polls and read ``unknown``.

The sentinel follows one watch of the namespace's JobSet pods (LIST, then WATCH from its
resourceVersion; a 410 lists again) on a daemon thread and hands every pod it sees dying, once
per stage (Failed, deleted, disrupted), to ``on_dying``: the backend then reads that pod's
TrainJob and pins, with the pod from the event in the chain even when the API server has already
deleted it. It only adds evidence, never decides: a sentinel that cannot run (no ``watch`` on
pods, the API server away) logs why and leaves the polls to pin what they see.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from jobdispatch.errors import DispatchError, Unauthorized
from jobdispatch.spi import parse_discovery_name

from jobdispatch_kubeflow import classify, names
from jobdispatch_kubeflow.api import Api, Gone

__all__ = ["Sentinel"]

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]

#: Seconds one WATCH request lasts before it is made again from the last version seen.
WATCH_SECONDS = 60
#: Seconds a watch request lasts at the least before the next is made at once.
QUICKEST_WATCH = 1.0
#: Seconds to wait before trying again after the API server failed to answer.
RETRY_SECONDS = 5.0
#: Pod stages remembered, so that a stage seen again (the API server repeats a pod on every
#: change of it) is not handed over twice. Bounded: the oldest are forgotten first.
REMEMBERED = 10_000


def _stage(pod: Obj) -> tuple[str, str, bool, bool] | None:
    """What tells one dying stage of a pod from the next, or None for a pod not dying."""
    if not classify.dying(pod):
        return None
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    disrupted = any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    return (
        str(meta.get("uid") or meta.get("name")),
        str(status.get("phase")),
        bool(meta.get("deletionTimestamp")),
        disrupted,
    )


class Sentinel:
    """Follows the namespace's JobSet pods and calls ``on_dying(pod)`` for each dying stage.

    Args:
        api: the adapter's API (its own identity; the watch needs ``watch`` on pods).
        namespace: where the TrainJobs and their pods live.
        on_dying: called on the sentinel's thread with each dying pod of a dispatch TrainJob;
            an error it raises is logged, and the sentinel goes on.
    """

    def __init__(self, api: Api, namespace: str, on_dying: Callable[[Obj], None]) -> None:
        self.api = api
        self.namespace = namespace
        self.on_dying = on_dying
        self._stop = threading.Event()
        self._seen: OrderedDict[tuple[str, str, bool, bool], None] = OrderedDict()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start following, once: a second call while it runs does nothing."""
        with self._lock:
            if self.running or self._stop.is_set():
                return
            self._thread = threading.Thread(
                target=self._run, name=f"kubeflow-sentinel-{self.namespace}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop following. The thread ends at its next event or the end of its watch request
        (a daemon, it never holds a process open)."""
        self._stop.set()

    def see(self, pod: Obj, *, listed: bool = False) -> None:
        """Hand ``pod`` over if it is a dispatch pod in a dying stage not handed over before.

        ``listed``: the pod comes from a LIST, not a change. A failed pod that is neither
        being deleted nor disrupted then stays where the next poll reads it, and is only
        remembered: a supervisor starting beside a thousand failed pods of ended jobs reads no
        thousand TrainJobs for them."""
        name = (pod.get("metadata") or {}).get("labels", {}).get(names.JOBSET_NAME)
        if not name or parse_discovery_name(str(name)) is None:
            return
        stage = _stage(pod)
        if stage is None or stage in self._seen:
            return
        self._seen[stage] = None
        while len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)
        _, _, deleting, disrupted = stage
        if listed and not deleting and not disrupted:
            return
        try:
            self.on_dying(pod)
        except Exception:  # reported, never fatal: the polls still pin what they see
            log.exception("could not pin the evidence of pod %s", pod.get("metadata", {}))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
            except Unauthorized as exc:
                log.warning(
                    "the pod sentinel stops: the adapter may not list and watch pods in %s (%s); "
                    "dying pods are pinned by polls only",
                    self.namespace,
                    exc,
                )
                return
            except DispatchError as exc:
                log.info("the pod sentinel lost the API server (%s); trying again", exc)
                self._stop.wait(RETRY_SECONDS)
            except Exception:  # never a silent death: said, then tried again
                log.exception("the pod sentinel failed; trying again")
                self._stop.wait(RETRY_SECONDS)

    def _follow(self) -> None:
        """LIST, then WATCH from that version until stopped; a 410 returns to list again."""
        selector = names.JOBSET_NAME
        pods, version = self.api.list("pods", self.namespace, label_selector=selector)
        for pod in pods:
            self.see(pod, listed=True)
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                for event in self.api.watch(
                    "pods",
                    self.namespace,
                    label_selector=selector,
                    resource_version=version,
                    timeout=WATCH_SECONDS,
                ):
                    if self._stop.is_set():
                        return
                    obj = event.get("object") or {}
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self.see(obj)
            except Gone:
                return
            if time.monotonic() - began < QUICKEST_WATCH:
                # A watch request the server ended at once (it should last WATCH_SECONDS): wait
                # before the next, rather than ask again and again in a tight loop.
                self._stop.wait(QUICKEST_WATCH)
