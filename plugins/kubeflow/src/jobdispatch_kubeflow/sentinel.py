"""Pinning what a dying pod shows the moment the API server says so, between polls.

A pod is deleted with its evidence: on the control plane an evicted pod was Running with a
``deletionTimestamp`` and ``DisruptionTarget`` for about a second, then gone, and its Job failed
``BackoffLimitExceeded``, which says nothing of why. The adapter pins a dying pod's cause on its
TrainJob (0010 §5), but a poll pins only what it sees, and a supervisor polls the Kubeflow
adapter every 10 s: most evictions would fall between two polls and read ``unknown``.

The sentinel follows the namespace's JobSet pods (a :class:`listwatch.Follower`: LIST, then
WATCH from its resourceVersion, a 410 lists again) on a daemon thread and hands every pod it
sees dying, once per stage (Failed, deleted, disrupted), to ``on_dying``: the backend then
reads that pod's TrainJob and pins, with the pod from the event in the chain even when the API
server has already deleted it. It only adds evidence, never decides: a sentinel that cannot
run (no ``watch`` on pods, the API server away) logs why and leaves the polls to pin what they
see.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from jobdispatch.spi import parse_discovery_name

from jobdispatch_kubeflow import classify, names
from jobdispatch_kubeflow.api import Api
from jobdispatch_kubeflow.listwatch import Event, Follower, Listed

__all__ = ["Sentinel"]

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]

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
        self._seen: OrderedDict[tuple[str, str, bool, bool], None] = OrderedDict()
        self._follower = Follower(
            api,
            "pods",
            namespace,
            self.handle,
            selector=names.JOBSET_NAME,
            name=f"kubeflow-sentinel-{namespace}",
            unauthorized=(
                f"the pod sentinel stops: the adapter may not list and watch pods in {namespace}; "
                "dying pods are pinned by polls only"
            ),
            logger=log,
        )

    @property
    def running(self) -> bool:
        return self._follower.running

    def start(self) -> None:
        """Start following, once: a second call while it runs does nothing."""
        self._follower.start()

    def stop(self) -> None:
        """Stop following. The thread ends at its next event or the end of its watch request
        (a daemon, it never holds a process open)."""
        self._follower.stop()

    def handle(self, event: Event) -> None:
        """Take in one event of the namespace's JobSet pods (from the sentinel's own follower,
        or from the backend's shared one)."""
        if isinstance(event, Listed):
            for pod in event.items:
                self.see(pod, listed=True)
        else:
            self.see(event.obj)

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
