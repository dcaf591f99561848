"""How a TrainJob is kept from running until dispatch opens it, and held: one strategy per way
of submitting, chosen once from the settings (:func:`of`).

- :class:`Suspend` (plain TrainJobs, spec 0010 §2-§3): dispatch owns ``spec.suspend``. Creation
  suspends; ``open`` unsuspends; a hold suspends with its instance in an annotation; a release
  goes back to the gate.
- :class:`ThroughKueue` (spec 0012 §3, §7, §8): Kueue owns ``spec.suspend``. Creation puts the
  TrainJob in a LocalQueue behind ``kueue.x-k8s.io/admission-gated-by``; ``open`` removes that
  gate and writes a fresh ``jobdispatch.dev/open`` for the admission controller; a hold is the
  instance annotation and ``Workload.spec.active: false``; Kueue's own requeuing is named in
  the answers to recovery rules.

Each strategy carries the same four things: what creation writes (:meth:`Gating.gate`), how
``open`` lifts the gate (:meth:`Gating.open`), how holds are placed and lifted
(:meth:`Gating.hold`, :meth:`Gating.release`, and the writes after them), and how rules are
answered (:meth:`Gating.rule`). The backend calls them without asking which one it has.
Everything but the Workload writes is pure: an object as read in, the patch to write out.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from jobdispatch.errors import Conflict, NotFound, Rejected
from jobdispatch.spi import ObjectRef
from jobdispatch.types import Action, CallMeta, CauseKind, Rule, RuleSupport, Source, Support

from jobdispatch_kubeflow import admission, names
from jobdispatch_kubeflow.api import Api
from jobdispatch_kubeflow.config import Kueue, Settings

__all__ = ["ADMISSION_GATE", "Gating", "Suspend", "ThroughKueue", "of"]

Obj = dict[str, Any]

#: The gate dispatch puts in kueue.x-k8s.io/admission-gated-by (the admission controller's name).
ADMISSION_GATE = "jobdispatch.dev/admission"

#: The causes Kueue requeues an evicted Workload on by itself (spec 0012 §5): a preemption
#: (always), a pods-ready timeout (no-capacity, with the back-off and ``backoffLimitCount`` of
#: its ``waitForPodsReady.requeuingStrategy``, then it deactivates the Workload).
KUEUE_REQUEUES = frozenset({CauseKind.PREEMPTED, CauseKind.NO_CAPACITY})


def _annotations(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


class Gating(Protocol):
    """One way of gating and holding TrainJobs (see the module doc)."""

    #: Whether TrainJobs go through Kueue (the probe words its answers for holds by it).
    through_kueue: bool

    def gate(self, body: Obj) -> Obj:
        """``body``, a TrainJob about to be created, with the gate written in."""
        ...

    def open(self, obj: Obj, meta: CallMeta | None) -> Obj | None:
        """The patch that lifts the gate of ``obj`` as read (not ended, not stopped), or None
        when there is nothing to lift."""
        ...

    def hold(self, instance: int) -> Obj:
        """The patch of the TrainJob that places hold ``instance``."""
        ...

    def held(self, api: Api, ref: ObjectRef, check: Callable[[], None]) -> None:
        """What follows the TrainJob's hold patch; ``check`` refuses past the deadline."""
        ...

    def release(self, obj: Obj, meta: CallMeta) -> Obj:
        """The patch of ``obj`` that lifts the hold standing on it."""
        ...

    def released(self, api: Api, ref: ObjectRef) -> None:
        """What follows the TrainJob's release patch."""
        ...

    def rule(self, rule: Rule, perform: Support) -> RuleSupport | None:
        """What this way of submitting says of ``rule`` (None: nothing; the adapter's own
        answer stands)."""
        ...

    def workloads(
        self,
        api: Api,
        namespace: str,
        trainjobs: Sequence[Obj],
        *,
        listed: Sequence[Obj] | None = None,
    ) -> dict[str, Obj]:
        """The Workloads of ``trainjobs`` by their owner's uid (the evidence of a suspension
        that is not dispatch's); ``listed``: the namespace's Workloads as a shared cache holds
        them, read instead of the API server."""
        ...


def of(settings: Settings) -> Gating:
    """The strategy the settings choose: through Kueue when they name a queue."""
    return Suspend() if settings.kueue is None else ThroughKueue(settings.kueue)


class Suspend:
    """Plain TrainJobs: dispatch owns ``spec.suspend`` (spec 0010 §2-§3)."""

    through_kueue = False

    def gate(self, body: Obj) -> Obj:
        body["metadata"].setdefault("annotations", {})[names.GATE] = "closed"
        body["spec"]["suspend"] = True
        return body

    def open(self, obj: Obj, meta: CallMeta | None) -> Obj | None:
        annotations = _annotations(obj)
        if annotations.get(names.GATE) != "closed":
            return None
        body: Obj = {"metadata": {"annotations": {names.GATE: "open"}}}
        if names.HOLD not in annotations:  # opening never lifts a hold
            body["spec"] = {"suspend": False}
        return body

    def hold(self, instance: int) -> Obj:
        return {"metadata": {"annotations": {names.HOLD: str(instance)}}, "spec": {"suspend": True}}

    def held(self, api: Api, ref: ObjectRef, check: Callable[[], None]) -> None:
        return None

    def release(self, obj: Obj, meta: CallMeta) -> Obj:
        gated = _annotations(obj).get(names.GATE) == "closed"
        return {"metadata": {"annotations": {names.HOLD: None}}, "spec": {"suspend": gated}}

    def released(self, api: Api, ref: ObjectRef) -> None:
        return None

    def rule(self, rule: Rule, perform: Support) -> RuleSupport | None:
        return None

    def workloads(
        self,
        api: Api,
        namespace: str,
        trainjobs: Sequence[Obj],
        *,
        listed: Sequence[Obj] | None = None,
    ) -> dict[str, Obj]:
        return {}


class ThroughKueue:
    """TrainJobs submitted through a Kueue LocalQueue: Kueue owns ``spec.suspend`` (spec 0012).

    Args:
        kueue: the LocalQueue (and priority class) every TrainJob goes to.
    """

    through_kueue = True

    def __init__(self, kueue: Kueue) -> None:
        self.kueue = kueue

    def gate(self, body: Obj) -> Obj:
        """Suspended (Kueue's webhook would suspend it anyway), in the LocalQueue, and kept
        from reserving quota by ``admission-gated-by``, which can be set at creation only.
        A queue or priority class the job names itself (already in ``body``) wins over the
        cluster entry's."""
        Suspend().gate(body)
        md = body["metadata"]
        md.setdefault("labels", {}).setdefault(names.QUEUE_NAME, self.kueue.queue)
        if self.kueue.priority_class:
            md["labels"].setdefault(names.PRIORITY_CLASS, self.kueue.priority_class)
        md["annotations"][names.ADMISSION_GATED_BY] = ADMISSION_GATE
        return body

    def open(self, obj: Obj, meta: CallMeta | None) -> Obj | None:
        """Under a hold, only ``gate: open``: Kueue's gate stays until the release. Otherwise
        :meth:`_admit`."""
        annotations = _annotations(obj)
        if names.HOLD in annotations:
            if annotations.get(names.GATE) == "open":
                return None
            return {"metadata": {"annotations": {names.GATE: "open"}}}
        return self._admit(obj, meta)

    def _admit(self, obj: Obj, meta: CallMeta | None) -> Obj | None:
        """The first open removes dispatch's gate from ``admission-gated-by`` (Kueue may then
        reserve quota); every open writes a fresh ``jobdispatch.dev/open`` (an id and the
        deadline), which the admission controller answers Ready for once, before the
        deadline. An open of a TrainJob that runs (Kueue admitted it) changes nothing; one of
        an open TrainJob that Kueue suspended again (an eviction) is the readmission the
        controller waits for."""
        annotations = _annotations(obj)
        if annotations.get(names.GATE) != "closed" and not (obj.get("spec") or {}).get("suspend"):
            return None
        new: dict[str, str | None] = {
            names.GATE: "open",
            names.OPEN: admission.open_annotation(
                uuid.uuid4().hex[:16], meta.deadline if meta is not None else None
            ),
        }
        gates = [g.strip() for g in annotations.get(names.ADMISSION_GATED_BY, "").split(",")]
        if ADMISSION_GATE in gates:
            rest = [g for g in gates if g and g != ADMISSION_GATE]
            new[names.ADMISSION_GATED_BY] = ",".join(rest) if rest else None
        return {"metadata": {"annotations": new}}

    def hold(self, instance: int) -> Obj:
        return {"metadata": {"annotations": {names.HOLD: str(instance)}}}

    def held(self, api: Api, ref: ObjectRef, check: Callable[[], None]) -> None:
        """Deactivate the Workload, the deadline checked again first (spec 0012 §8)."""
        check()
        self._set_active(api, ref, False)

    def release(self, obj: Obj, meta: CallMeta) -> Obj:
        """Remove the instance; an object opened while held gets the open it was held from."""
        body: Obj = {"metadata": {"annotations": {names.HOLD: None}}}
        if _annotations(obj).get(names.GATE) != "closed":
            opened = self._admit(obj, meta)
            if opened is not None:
                body["metadata"]["annotations"].update(opened["metadata"]["annotations"])
        return body

    def released(self, api: Api, ref: ObjectRef) -> None:
        self._set_active(api, ref, True)

    def rule(self, rule: Rule, perform: Support) -> RuleSupport | None:
        """What Kueue does by itself for ``rule`` (spec 0012 §7), None when Kueue changes
        nothing for it. Kueue requeues a preempted or pods-ready-timed-out Workload on its own,
        but never as a new execution the plan could count on: dispatch's admission check holds
        each readmission, so a rule on those causes is the supervisor's."""
        kueue_causes = sorted(str(k) for k in rule.on if k in KUEUE_REQUEUES)
        if rule.action is Action.REQUEUE:
            return RuleSupport(
                Support.no(
                    Source.CATALOGUE,
                    "Kueue requeues an evicted Workload by itself, but dispatch's admission "
                    "check holds its readmission: the supervisor decides (resubmit)",
                ),
                Support.no(Source.CATALOGUE, "a requeue on request is not mapped under Kueue"),
            )
        if not kueue_causes:
            return None
        return RuleSupport(
            Support.no(
                Source.CATALOGUE,
                f"Kueue requeues on {', '.join(kueue_causes)} by itself (a pods-ready timeout "
                "within its backoffLimitCount, then it deactivates), but dispatch's admission "
                "check holds the readmission: the supervisor enforces the rule",
            ),
            perform,
        )

    def workloads(
        self,
        api: Api,
        namespace: str,
        trainjobs: Sequence[Obj],
        *,
        listed: Sequence[Obj] | None = None,
    ) -> dict[str, Obj]:
        """From ``listed`` or one LIST, made only when a TrainJob is suspended (all a Workload
        explains)."""
        if not any((tj.get("spec") or {}).get("suspend") for tj in trainjobs):
            return {}
        items = list(listed) if listed is not None else api.list("workloads", namespace)[0]
        out: dict[str, Obj] = {}
        for wl in items:
            for owner in (wl.get("metadata") or {}).get("ownerReferences") or ():
                if owner.get("kind") == "TrainJob":
                    out[str(owner.get("uid"))] = wl
        return out

    def _set_active(self, api: Api, ref: ObjectRef, active: bool) -> bool:
        """Write ``spec.active`` on the TrainJob's Workload, conditional on the version read.
        False when there is no Workload (yet): the gate or the hold annotation then keeps it
        from admission (an open under a hold does not lift the Kueue gate)."""
        namespace, name = names.split_ref(ref)
        for _ in range(5):
            tj = api.get("trainjobs", namespace, name)
            if tj is None:
                raise NotFound(f"no TrainJob {ref}")
            wl = self.workloads(api, namespace, [{**tj, "spec": {"suspend": True}}]).get(
                str(tj["metadata"].get("uid"))
            )
            if wl is None:
                return False
            if (wl.get("spec") or {}).get("active", True) is active:
                return True
            body = {
                "metadata": {"resourceVersion": wl["metadata"]["resourceVersion"]},
                "spec": {"active": active},
            }
            try:
                api.patch("workloads", namespace, str(wl["metadata"]["name"]), body)
                return True
            except Conflict:
                continue
        raise Rejected(f"the Workload of {ref} kept changing under five attempts to update it")
