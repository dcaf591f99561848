"""The publish image in the training pods: the ``publish`` option (docs/how-to/publish-image.md).

A TrainJob's runtime patches can change the containers a runtime has, never add one (Trainer
v2.2's ``ContainerPatch``: "Runtime must have this container"), so the init container lives in a
TrainingRuntime the adapter derives from the configured one, as for native restarts
(:mod:`restart`), named by a hash of its content. What is the same for every job goes there:

- an emptyDir ``jobdispatch-shared``, mounted at ``publish.path`` in the training container
  ``node`` and in the init container;
- the init container ``jobdispatch-resume``, the publish image, running its
  ``jobdispatch-publish-init`` (which copies the self-contained helper onto the emptyDir and
  resolves the checkpoint to resume from into it), with the runtime's volumes
  ``publish.mounts`` (where a POSIX checkpoint root is);
- ``JOBDISPATCH_EXECUTION`` from the pod's JobSet restart attempt, in the init container.

What differs per job (its id, submission, checkpoint root, the spec's environment) reaches the
init container through the TrainJob's runtime patch (:func:`init_patch`): the training
container gets it through ``trainer.env`` as always. Pure: dicts in, dicts out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobdispatch.errors import Rejected

from jobdispatch_kubeflow import names
from jobdispatch_kubeflow.config import Publish

__all__ = ["CONTAINER", "INIT", "VOLUME", "init_patch", "with_helper"]

#: The init container's name, in the derived runtime and in the TrainJob's patch.
CONTAINER = "jobdispatch-resume"
#: The emptyDir the init container and the training container share.
VOLUME = "jobdispatch-shared"
#: What the init container runs (tools/kube/publish-init, in the image).
INIT = "/opt/jobdispatch-publish/bin/jobdispatch-publish-init"
#: Trainer's training container, in the replicated job of the same name.
TRAINER_CONTAINER = "node"


def _pod_spec(runtime_spec: dict[str, Any], job: str, runtime: str) -> dict[str, Any]:
    for rjob in (runtime_spec.get("template") or {}).get("spec", {}).get("replicatedJobs") or ():
        if rjob.get("name") == job:
            job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
            pod: dict[str, Any] = job_spec.setdefault("template", {}).setdefault("spec", {})
            return pod
    raise Rejected(f"the training runtime {runtime} has no replicated job {job!r}")


def with_helper(runtime_spec: dict[str, Any], publish: Publish, *, runtime: str) -> None:
    """Add the init container, the shared emptyDir and its mounts to the training pods of
    ``runtime_spec`` (a runtime's ``spec``, changed in place). Rejected when the runtime has no
    training container, or lacks a volume ``publish.mounts`` names."""
    pod = _pod_spec(runtime_spec, TRAINER_CONTAINER, runtime)
    volumes = pod.setdefault("volumes", [])
    have = {v.get("name") for v in volumes}
    missing = sorted({v for v, _ in publish.mounts} - have)
    if missing:
        raise Rejected(
            f"the training runtime {runtime} has no volume {', '.join(missing)} "
            "(publish.mounts names volumes of its training pods)"
        )
    shared = {"name": VOLUME, "mountPath": publish.path}
    trainers = [c for c in pod.get("containers") or () if c.get("name") == TRAINER_CONTAINER]
    if not trainers:
        raise Rejected(f"the training runtime {runtime} has no container {TRAINER_CONTAINER!r}")
    volumes.append({"name": VOLUME, "emptyDir": {}})
    trainers[0].setdefault("volumeMounts", []).append(dict(shared))
    mounts = [shared, *({"name": v, "mountPath": p} for v, p in publish.mounts)]
    pod.setdefault("initContainers", []).append(
        {
            "name": CONTAINER,
            "image": publish.image,
            "command": [INIT],
            "env": [
                {"name": "JOBDISPATCH_SHARED", "value": publish.path},
                dict(names.EXECUTION_ENV),
            ],
            "volumeMounts": mounts,
        }
    )


def init_patch(env: Mapping[str, str]) -> dict[str, Any]:
    """The TrainJob's patch of the init container: the job's own environment, as the training
    container gets it (its id, submission, checkpoint root, the spec's variables)."""
    return {
        "name": CONTAINER,
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
    }
