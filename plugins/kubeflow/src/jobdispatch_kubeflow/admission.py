"""``jobdispatch-kueue-admission``: the Kueue AdmissionCheck controller that lets dispatch gate
admission and readmission (spec 0012 §3).

Under Kueue, ``suspend`` belongs to Kueue, so the adapter cannot gate a TrainJob by suspending
it. The first admission is gated by Kueue's ``kueue.x-k8s.io/admission-gated-by`` annotation,
written at creation (no quota is reserved while it stands) and removed by the adapter's
``open``. That annotation can only be removed, never added back, so it cannot gate a
*readmission* after an eviction. The AdmissionCheck this controller answers can: Kueue resets
every check to Pending when it evicts a workload, and this controller answers Ready only for an
open that has not yet been spent on an admission.

How an open reaches the controller: the adapter's ``open`` writes the annotation
``jobdispatch.dev/open`` on the TrainJob, ``{"id": <new id>, "deadline": <ISO time or null>}``.
The controller answers Ready for that open only before its deadline, judged on its own clock
just before the write, so an open is still refused after its deadline (spec 0001 D8, 0004's
open-after-cancel window). Before answering Ready it records the open as spent on the Workload
(annotation ``jobdispatch.dev/admission-spent``, with the check's ``lastTransitionTime`` as it
was then), in a write conditional on the Workload's resourceVersion. After an eviction, Kueue's
reset changes that time, and the spent open no longer counts: the check answers Rejected, so
the evicted Workload is never readmitted and holds no quota, and the adapter reads the object
ended for the supervisor's rule to decide (spec 0012 §9). A controller killed between the two
writes finds its record with the time unchanged and answers Ready for the same open: nothing
is admitted twice, nothing is lost.

Workloads whose job is not a dispatch submission (no ``jobdispatch.dev/job`` label) are answered
Ready at once: the check gates dispatch's submissions only.

Two replicas are safe: only the holder of a coordination.k8s.io Lease acts, and every write is
conditional on the version read, so even a leader that lost its lease while paused writes
nothing stale. ``decide`` is pure (no I/O, ``now`` given); :class:`Controller` does the I/O.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs
from jobdispatch.errors import Conflict, NotFound, OutcomeUnknown, Unauthorized, Unreachable

from jobdispatch_kubeflow import api as kapi
from jobdispatch_kubeflow import names
from jobdispatch_kubeflow.listwatch import Cache, Follower

__all__ = [
    "CONTROLLER_NAME",
    "Answer",
    "Controller",
    "Lease",
    "active_message",
    "decide",
    "lease_of",
    "main",
    "open_annotation",
    "rbac_manifest",
]

log = logging.getLogger("jobdispatch.kueue-admission")
Obj = dict[str, Any]

#: The AdmissionCheck's ``spec.controllerName`` this controller answers.
CONTROLLER_NAME = "jobdispatch.dev/admission"
#: Kueue's owner label on a Workload: the uid of its job.
JOB_UID = "kueue.x-k8s.io/job-uid"
#: Kueue's message on a check it reset to Pending when it evicted the workload.
_RESET = "Reset to Pending after eviction"

PENDING, READY, REJECTED = "Pending", "Ready", "Rejected"


def open_annotation(open_id: str, deadline: datetime | None) -> str:
    """The value of ``jobdispatch.dev/open`` the adapter writes for one open."""
    return json.dumps(
        {"id": open_id, "deadline": deadline.isoformat() if deadline else None},
        sort_keys=True,
    )


def _parse_open(value: str | None) -> tuple[str, datetime | None] | None:
    if not value:
        return None
    try:
        data = json.loads(value)
        deadline = datetime.fromisoformat(data["deadline"]) if data.get("deadline") else None
        return str(data["id"]), deadline
    except (ValueError, KeyError, TypeError):
        return None


#: How many spent opens a Workload remembers besides the latest (a restored old annotation
#: must not readmit either).
SPENT_HISTORY = 32


def _parse_spent(value: str | None) -> tuple[str, str, list[str]] | None:
    if not value:
        return None
    try:
        data = json.loads(value)
        return str(data["open"]), str(data["check_time"]), [str(x) for x in data.get("earlier", [])]
    except (ValueError, KeyError, TypeError):
        return None


def spent_annotation(open_id: str, check_time: str, previous: str | None) -> str:
    """The Workload's record of the open spent on its admission, keeping earlier ones."""
    earlier: list[str] = []
    old = _parse_spent(previous)
    if old is not None and old[0] != open_id:
        earlier = [*old[2], old[0]][-SPENT_HISTORY:]
    return json.dumps(
        {"open": open_id, "check_time": check_time, "earlier": earlier}, sort_keys=True
    )


@attrs.frozen
class Answer:
    """What the controller writes for one Workload's check.

    state/message: the check's new state and message. spend: the open id to record as spent
    on the Workload first (None: nothing to record).
    """

    state: str
    message: str
    spend: str | None = None


def decide(
    check: Mapping[str, Any],
    workload: Mapping[str, Any],
    trainjob: Mapping[str, Any] | None,
    now: datetime,
) -> Answer | None:
    """The answer for one check of one Workload, or None when nothing should be written.

    Pure: ``check`` is the Workload's ``status.admissionChecks`` entry of ours, ``trainjob``
    the Workload's owner (None when it is gone or not a TrainJob), ``now`` the controller's
    clock."""
    state = check.get("state")
    if state != PENDING:
        # Ready stays until Kueue resets it on an eviction; Retry and Rejected are Kueue's.
        return None
    if trainjob is None:
        return None
    md = trainjob.get("metadata") or {}
    labels = md.get("labels") or {}
    annotations = md.get("annotations") or {}
    if names.JOB not in labels:
        return Answer(READY, "not a dispatch submission: not gated by dispatch")
    if md.get("deletionTimestamp") or names.STOP in annotations:
        return _pending(check, "stopped by dispatch: never admitted")
    opened = _parse_open(annotations.get(names.OPEN))
    if opened is None:
        return _pending(check, "gated by dispatch: waiting for its open")
    open_id, deadline = opened
    if deadline is not None and now > deadline:
        return _pending(
            check,
            f"open {open_id} came too late (its deadline {deadline.isoformat()} passed): "
            "waiting for the next open",
        )
    wl_annotations = (workload.get("metadata") or {}).get("annotations") or {}
    spent = _parse_spent(wl_annotations.get(names.ADMISSION_SPENT))
    check_time = str(check.get("lastTransitionTime") or "")
    if spent is not None and open_id in spent[2]:
        return _pending(
            check, f"open {open_id} was spent on an earlier admission: waiting for a new open"
        )
    if spent is not None and spent[0] == open_id:
        if spent[1] != check_time or str(check.get("message", "")).startswith(_RESET):
            # The open was spent on an admission and Kueue has reset the check since: an
            # eviction. The run has ended; its recovery is the supervisor's rule (a resubmit),
            # and a Pending check would hold the requeued Workload's quota against it (spec
            # 0012 §9), so the check rejects: Kueue deactivates the Workload and frees it.
            return Answer(
                REJECTED,
                f"evicted after the admission open {open_id} allowed: never readmitted; "
                "dispatch decides its recovery",
            )
        return Answer(READY, f"opened by dispatch (open {open_id})")
    return Answer(READY, f"opened by dispatch (open {open_id})", spend=open_id)


def _pending(check: Mapping[str, Any], message: str) -> Answer | None:
    return None if check.get("message") == message else Answer(PENDING, message)


#: How the Active condition of a check names the controller's Lease (:func:`active_message`).
_ACTIVE = re.compile(r"^answered by the holder of lease (?P<namespace>[^/\s]+)/(?P<name>[^/\s]+)$")


def active_message(namespace: str, name: str) -> str:
    """The message of the Active condition the controller writes on its AdmissionChecks: the
    Lease its replicas share, the same for every replica (so they never rewrite each other's),
    whose ``renewTime`` says whether a controller still answers (read by the adapter's probe)."""
    return f"answered by the holder of lease {namespace}/{name}"


def lease_of(message: str) -> tuple[str, str] | None:
    """The (namespace, name) of the Lease an Active condition's ``message`` names; None when it
    names none (a controller of an earlier version, or someone else's)."""
    found = _ACTIVE.match(message or "")
    return None if found is None else (found["namespace"], found["name"])


# ---------------------------------------------------------------------------- leader election


class Lease:
    """Leader election through a coordination.k8s.io/v1 Lease, as client-go does it.

    A holder renews ``renewTime`` every round. Another candidate takes the lease over only once
    it has seen the same record unchanged for ``duration`` seconds on its *own* monotonic clock
    (clocks of different hosts are never compared). The leader acts only while its last renewal
    is younger than ``renew_deadline``, which is shorter than ``duration``: it stops acting before
    anyone may take over. Every write carries the resourceVersion read, so two candidates never
    both win one round.
    """

    def __init__(
        self,
        api: kapi.Api,
        namespace: str,
        name: str,
        identity: str,
        *,
        duration: float = 15.0,
        renew_deadline: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not 0 < renew_deadline < duration:
            raise ValueError("renew_deadline must be positive and shorter than duration")
        self.api, self.namespace, self.name, self.identity = api, namespace, name, identity
        self.duration, self.renew_deadline = duration, renew_deadline
        self._mono, self._wall = monotonic, wall
        self._renewed: float | None = None
        self._seen: tuple[str, str] | None = None
        self._seen_at = 0.0

    def held(self) -> bool:
        """Whether this candidate may act now."""
        return self._renewed is not None and self._mono() - self._renewed < self.renew_deadline

    def _micro(self) -> str:
        return self._wall().strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def _spec(self, transitions: int, acquired: str | None = None) -> Obj:
        now = self._micro()
        spec: Obj = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.duration)),
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        spec["acquireTime"] = acquired or now
        return spec

    def round(self) -> bool:
        """Acquire or renew once; True when this candidate holds the lease afterwards."""
        started = self._mono()
        try:
            lease = self.api.get("leases", self.namespace, self.name)
            if lease is None:
                self.api.create(
                    "leases",
                    self.namespace,
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": self._spec(0),
                    },
                )
                return self._won(started, "acquired (new lease)")
            spec = lease.get("spec") or {}
            rv = lease["metadata"]["resourceVersion"]
            holder = spec.get("holderIdentity") or ""
            if holder == self.identity:
                body = {
                    "metadata": {"resourceVersion": rv},
                    "spec": self._spec(
                        int(spec.get("leaseTransitions") or 0), spec.get("acquireTime")
                    ),
                }
                self.api.patch("leases", self.namespace, self.name, body)
                return self._won(started, None)
            record = (holder, str(spec.get("renewTime") or ""))
            if record != self._seen:
                self._seen, self._seen_at = record, started
            if holder and started - self._seen_at < self.duration:
                self._renewed = None
                return False
            body = {
                "metadata": {"resourceVersion": rv},
                "spec": self._spec(int(spec.get("leaseTransitions") or 0) + 1),
            }
            self.api.patch("leases", self.namespace, self.name, body)
            return self._won(started, f"taken over from {holder or 'nobody'}")
        except (Conflict, Unreachable, OutcomeUnknown, Unauthorized) as exc:
            log.info("lease %s/%s: not held this round (%s)", self.namespace, self.name, exc)
            self._renewed = None
            return False

    def _won(self, started: float, how: str | None) -> bool:
        if how:
            log.info("lease %s/%s %s by %s", self.namespace, self.name, how, self.identity)
        self._renewed = started
        return True

    def release(self) -> None:
        """Give the lease up (on a clean exit), so a standby takes over at once."""
        if self._renewed is None:
            return
        self._renewed = None
        try:
            lease = self.api.get("leases", self.namespace, self.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            self.api.patch(
                "leases",
                self.namespace,
                self.name,
                {
                    "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                    "spec": {"holderIdentity": "", "leaseDurationSeconds": 1},
                },
            )
        except (Conflict, Unreachable, OutcomeUnknown, Unauthorized, NotFound) as exc:
            log.info("lease %s/%s not released (%s)", self.namespace, self.name, exc)


# ---------------------------------------------------------------------------- the controller


class Controller:
    """One reconcile round over every Workload with a check of ours; see the module doc.

    The Workloads and TrainJobs a round reads come from two followers
    (:class:`listwatch.Follower`) once :meth:`follow` has started them (``run`` does): a LIST
    each, then a watch, rather than a LIST of every Workload every round. Until a follower has
    listed (and for a controller that follows nothing, as in one-round tests), the round LISTs
    itself. Every write is conditional on the version the round read, so an object the
    followers have not caught up with yet costs a 409 and the next round, never a wrong answer.
    """

    def __init__(
        self,
        api: kapi.Api,
        lease: Lease,
        *,
        controller_name: str = CONTROLLER_NAME,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api, self.lease, self.controller_name = api, lease, controller_name
        self.clock = clock
        self.writes = 0
        self.workloads = Cache()
        self.trainjobs = Cache()
        self._followers: dict[str, Follower] = {}

    def _caches(self) -> dict[str, Cache]:
        return {"workloads": self.workloads, "trainjobs": self.trainjobs}

    def follow(self) -> None:
        """Keep the Workloads and TrainJobs of every namespace by list-watch (threads)."""
        for kind, cache in self._caches().items():
            if kind not in self._followers:
                follower = Follower(self.api, kind, None, cache.apply, name=f"following {kind}")
                follower.start()
                self._followers[kind] = follower

    def unfollow(self) -> None:
        for follower in self._followers.values():
            follower.stop()

    def _objects(self, kind: str) -> list[Obj]:
        """Every object of ``kind``: its follower's, once listed and while it follows (one
        refused stops, and its cache would age for ever); else a LIST now."""
        cache, follower = self._caches()[kind], self._followers.get(kind)
        if follower is not None and follower.running and cache.synced.is_set():
            return cache.items()
        items, _ = self.api.list(kind, None)
        return items

    def spent(self, namespace: str, name: str, open_id: str) -> None:
        """Said once an open is recorded spent on a Workload, before the check is answered
        (the kill-and-restart test's fault point is a controller that exits here)."""
        log.info("workload %s/%s: open %s spent", namespace, name, open_id)

    def _checks(self) -> list[str]:
        """Our AdmissionChecks, each marked Active (Kueue keeps a ClusterQueue that lists a
        check without an Active condition inactive), the condition naming the controller's
        Lease (:func:`active_message`), where the adapter's probe reads whether a controller
        still answers the check."""
        items, _ = self.api.list("admissionchecks", None)
        ours = [
            c for c in items if (c.get("spec") or {}).get("controllerName") == self.controller_name
        ]
        message = active_message(self.lease.namespace, self.lease.name)
        for check in ours:
            conds = (check.get("status") or {}).get("conditions") or []
            if any(
                c.get("type") == "Active"
                and c.get("status") == "True"
                and c.get("message") == message
                for c in conds
            ):
                continue
            if not self.lease.held():
                break
            now = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
            body = {
                "metadata": {"resourceVersion": check["metadata"]["resourceVersion"]},
                "status": {
                    "conditions": [
                        *(c for c in conds if c.get("type") != "Active"),
                        {
                            "type": "Active",
                            "status": "True",
                            "reason": "Active",
                            "message": message,
                            "lastTransitionTime": now,
                            "observedGeneration": check["metadata"].get("generation", 1),
                        },
                    ]
                },
            }
            try:
                self.api.patch("admissionchecks/status", None, check["metadata"]["name"], body)
            except Conflict:
                continue
        return [c["metadata"]["name"] for c in ours]

    def reconcile(self) -> int:
        """One round; the number of Workloads written to."""
        if not self.lease.held():
            return 0
        ours = set(self._checks())
        if not ours:
            return 0
        workloads = self._objects("workloads")
        trainjobs: dict[str, Obj] | None = None
        written = 0
        for wl in workloads:
            checks = (wl.get("status") or {}).get("admissionChecks") or []
            mine = [c for c in checks if c.get("name") in ours]
            if not mine:
                continue
            namespace = wl["metadata"]["namespace"]
            if trainjobs is None:
                items = self._objects("trainjobs")
                trainjobs = {str(t["metadata"].get("uid")): t for t in items}
            owner = _owner(wl, trainjobs)
            for check in mine:
                if not self.lease.held():
                    return written
                answer = decide(check, wl, owner, self.clock())
                if answer is None:
                    continue
                try:
                    self._write(wl, check, answer)
                    written += 1
                except (Conflict, NotFound) as exc:
                    log.info(
                        "workload %s/%s changed under us (%s): next round",
                        namespace,
                        wl["metadata"]["name"],
                        exc,
                    )
                break
        return written

    def _write(self, wl: Obj, check: Mapping[str, Any], answer: Answer) -> None:
        namespace, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        rv = wl["metadata"]["resourceVersion"]
        if answer.spend is not None:
            previous = (wl["metadata"].get("annotations") or {}).get(names.ADMISSION_SPENT)
            spent = spent_annotation(
                answer.spend, str(check.get("lastTransitionTime") or ""), previous
            )
            result = self.api.patch(
                "workloads",
                namespace,
                name,
                {
                    "metadata": {
                        "resourceVersion": rv,
                        "annotations": {names.ADMISSION_SPENT: spent},
                    },
                },
            )
            rv = result["metadata"]["resourceVersion"]
            self.spent(namespace, name, answer.spend)
        now = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        entries = []
        for entry in (wl.get("status") or {}).get("admissionChecks") or []:
            if entry.get("name") == check.get("name"):
                entry = {**entry, "state": answer.state, "message": answer.message}  # noqa: PLW2901
                if answer.state != check.get("state"):
                    entry["lastTransitionTime"] = now
            entries.append(entry)
        self.api.patch(
            "workloads/status",
            namespace,
            name,
            {
                "metadata": {"resourceVersion": rv},
                "status": {"admissionChecks": entries},
            },
        )
        self.writes += 1
        log.info(
            "workload %s/%s: check %s %s: %s",
            namespace,
            name,
            check.get("name"),
            answer.state,
            answer.message,
        )

    def run(self, *, interval: float = 1.0, stop: Callable[[], bool] = lambda: False) -> None:
        """Follow (:meth:`follow`), then rounds until ``stop`` says so; the lease is released
        and the followers stopped at the end."""
        self.follow()
        try:
            while not stop():
                started = time.monotonic()
                if self.lease.round():
                    try:
                        self.reconcile()
                    except (Unreachable, OutcomeUnknown, Unauthorized) as exc:
                        log.warning("round failed: %s", exc)
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
        finally:
            self.unfollow()
            self.lease.release()


def _owner(wl: Mapping[str, Any], trainjobs: Mapping[str, Obj]) -> Obj | None:
    for ref in (wl.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "TrainJob" and ref.get("uid") in trainjobs:
            return trainjobs[ref["uid"]]
    uid = ((wl.get("metadata") or {}).get("labels") or {}).get(JOB_UID)
    return trainjobs.get(uid) if uid else None


# ---------------------------------------------------------------------------- RBAC, CLI


def rbac_manifest(
    namespace: str, service_account: str, name: str = "jobdispatch-kueue-admission"
) -> str:
    """The RBAC the controller needs, as YAML: a ServiceAccount, a ClusterRole (read
    AdmissionChecks and mark them Active; read and annotate Workloads and write their status;
    read TrainJobs), its binding, and a Role on Leases in ``namespace``."""
    docs: list[Obj] = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": service_account, "namespace": namespace},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["admissionchecks"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["admissionchecks/status"],
                    "verbs": ["get", "patch", "update"],
                },
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["workloads"],
                    "verbs": ["get", "list", "watch", "patch"],
                },
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["workloads/status"],
                    "verbs": ["get", "patch", "update"],
                },
                {
                    "apiGroups": ["trainer.kubeflow.org"],
                    "resources": ["trainjobs"],
                    "verbs": ["get", "list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["get", "create", "update", "patch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [
                {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
            ],
        },
    ]
    # JSON is YAML: no YAML library is needed to print a manifest kubectl applies.
    return "".join(f"---\n{json.dumps(d, indent=2)}\n" for d in docs)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jobdispatch-kueue-admission",
        description="Answer the Kueue AdmissionCheck that gates dispatch's submissions "
        "(admission and readmission wait for dispatch's open).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the controller (leader-elected)")
    where = run.add_mutually_exclusive_group()
    where.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
    )
    where.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    run.add_argument("--context", help="kubeconfig context")
    run.add_argument("--token-file", help="bearer token file, read on every request")
    run.add_argument("--lease-namespace", required=True, help="namespace of the leader Lease")
    run.add_argument("--lease-name", default="jobdispatch-kueue-admission")
    run.add_argument("--identity", help="this replica's name (default: host and pid)")
    run.add_argument("--lease-duration", type=float, default=15.0, help="seconds (default 15)")
    run.add_argument("--renew-deadline", type=float, default=10.0, help="seconds (default 10)")
    run.add_argument("--interval", type=float, default=1.0, help="seconds between rounds")
    run.add_argument("--controller-name", default=CONTROLLER_NAME)
    rbac = sub.add_parser("rbac", help="print the RBAC manifest the controller needs")
    rbac.add_argument("--namespace", required=True, help="of the ServiceAccount and the Lease")
    rbac.add_argument("--service-account", default="jobdispatch-kueue-admission")
    return p


def main(argv: Sequence[str] | None = None, *, controller: type[Controller] = Controller) -> int:
    """Console script ``jobdispatch-kueue-admission``: ``run`` or ``rbac``. Exit 2 on bad
    arguments (argparse), 1 when the controller cannot start. ``controller``: the class run
    (the tests' fault points are subclasses of their own)."""
    args = _parser().parse_args(argv)
    if args.command == "rbac":
        sys.stdout.write(rbac_manifest(args.namespace, args.service_account))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.interval <= 0 or args.lease_duration <= 0:
        print(
            "jobdispatch-kueue-admission: --interval and --lease-duration must be positive",
            file=sys.stderr,
        )
        return 2
    try:
        lease_args = {"duration": args.lease_duration, "renew_deadline": args.renew_deadline}
        client = kapi.KubeApi(
            kubeconfig=args.kubeconfig,
            context=args.context,
            in_cluster=args.in_cluster,
            token=kapi.file_token(args.token_file) if args.token_file else None,
        )
        identity = args.identity or f"{socket.gethostname()}-{os.getpid()}"
        lease = Lease(client, args.lease_namespace, args.lease_name, identity, **lease_args)
    except ValueError as exc:
        print(f"jobdispatch-kueue-admission: {exc}", file=sys.stderr)
        return 2
    stopping: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _f: stopping.append(s))
    running = controller(client, lease, controller_name=args.controller_name)
    log.info(
        "jobdispatch-kueue-admission %s starting (lease %s/%s)",
        identity,
        args.lease_namespace,
        args.lease_name,
    )
    running.run(interval=args.interval, stop=lambda: bool(stopping))
    return 0


if __name__ == "__main__":
    sys.exit(main())
