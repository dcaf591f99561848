"""Native restart: a rule's budget enforced by the JobSet's own failure policy.

A TrainJob cannot carry a JobSet failure policy (``runtimePatches`` has no such field, Trainer
v2.3.0), so the policy lives in a training runtime: the adapter derives a namespaced
TrainingRuntime from the configured one, named by a hash of its content, and the TrainJob refers
to it. The derived runtime makes failures precise, which JobSet's defaults do not:

- every Job gets ``backoffLimit: 0`` and pods ``restartPolicy: Never`` (no rank rerun in place);
- a Job ``podFailurePolicy`` fails the Job at once and says why, by rule index, in the Job's
  failure message ("... matching FailJob rule at index N"): index 0 a ``DisruptionTarget``
  condition (preemption, eviction, node loss), index 1 exit code 137 (an OOM kill or any other
  SIGKILL), index 2 any other non-zero exit;
- the JobSet ``failurePolicy`` restarts the JobSet (``RestartJobSet``) only for the indices the
  offered rules cover, at most ``maxRestarts`` times (the smallest remaining budget: JobSet keeps
  one counter), and fails it (``FailJobSet``) for everything else.

Only causes a policy can tell apart exactly are offered: ``non-zero-exit`` (index 2), the pair
``preempted`` + ``node-lost`` (index 0, one pod condition for both), and ``out-of-memory``
together with ``non-zero-exit`` (index 1 is any SIGKILL). The backend may do less than a rule
allows (a non-OOM exit 137 is not restarted), never more. Pure: dicts in, dicts out.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from jobdispatch.types import CauseKind, Rule

from jobdispatch_kubeflow import helper
from jobdispatch_kubeflow.config import Publish

__all__ = ["RESTARTABLE", "covered", "indices", "runtime_body"]

_DISRUPTION = frozenset({CauseKind.PREEMPTED, CauseKind.NODE_LOST})
#: Every cause a derived runtime can restart on.
RESTARTABLE = frozenset({*_DISRUPTION, CauseKind.OUT_OF_MEMORY, CauseKind.NON_ZERO_EXIT})

_POD_FAILURE_POLICY = {
    "rules": [
        {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [137]}},
        {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}},
    ]
}


def indices(causes: Iterable[CauseKind]) -> tuple[int, ...] | None:
    """The podFailurePolicy rule indices that restart exactly on ``causes``, or None when no
    policy can restart on exactly those."""
    on = set(causes)
    if not on or not on <= RESTARTABLE:
        return None
    chosen = set()
    if on & _DISRUPTION:
        if not on >= _DISRUPTION:
            return None
        chosen.add(0)
    if CauseKind.OUT_OF_MEMORY in on:
        if CauseKind.NON_ZERO_EXIT not in on:
            return None
        chosen.add(1)
    if CauseKind.NON_ZERO_EXIT in on:
        chosen.add(2)
    return tuple(sorted(chosen))


def covered(rule: Rule) -> bool:
    """Whether a derived runtime can enforce ``rule`` (a restart on exactly its causes)."""
    return indices(rule.on) is not None


def runtime_body(
    base: Mapping[str, Any],
    *,
    namespace: str,
    restart_on: Iterable[int] | None = None,
    max_restarts: int = 0,
    publish: Publish | None = None,
) -> dict[str, Any]:
    """The TrainingRuntime derived from ``base`` (a ClusterTrainingRuntime or TrainingRuntime as
    the API returned it), named by a hash of what it holds: with the failure policy above when
    ``restart_on`` is given, and with the publish image's init container when ``publish`` is
    (:mod:`helper`)."""
    spec = copy.deepcopy(dict(base.get("spec") or {}))
    template = spec.setdefault("template", {}).setdefault("spec", {})
    base_name = str((base.get("metadata") or {}).get("name") or "")
    if restart_on is not None:
        _fail_precisely(template, restart_on, max_restarts)
    if publish is not None:
        helper.with_helper(spec, publish, runtime=base_name)
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    labels = dict((base.get("metadata") or {}).get("labels") or {})
    labels["jobdispatch.dev/managed"] = "true"
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": f"jd-rt-{digest}", "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def _fail_precisely(template: dict[str, Any], restart_on: Iterable[int], max_restarts: int) -> None:
    """The JobSet ``template`` (changed in place) with the failure policy of the module's doc."""
    for rjob in template.get("replicatedJobs") or ():
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec["backoffLimit"] = 0
        job_spec["podFailurePolicy"] = copy.deepcopy(_POD_FAILURE_POLICY)
        job_spec.setdefault("template", {}).setdefault("spec", {})["restartPolicy"] = "Never"
    rules: list[dict[str, Any]] = [
        {
            "name": f"dispatch-restart-{i}",
            "action": "RestartJobSet",
            "onJobFailureReasons": ["PodFailurePolicy"],
            "onJobFailureMessagePatterns": [f"FailJob rule at index {i}"],
        }
        for i in sorted(set(restart_on))
    ]
    rules.append({"name": "dispatch-otherwise", "action": "FailJobSet"})
    template["failurePolicy"] = {"maxRestarts": max_restarts, "rules": rules}
