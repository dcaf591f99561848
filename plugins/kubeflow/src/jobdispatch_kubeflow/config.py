"""The Kubeflow adapter's configuration: what a site may set, and nothing else, each key
declared once with its schema, default and meaning (:mod:`jobdispatch.kit.settings`).

An allow-list checked by JSON Schema (unknown keys are refused at every level). Nothing is
passed through to the kubernetes client as free-form keyword arguments: a configuration names a
kubeconfig and its context, or asks for the in-cluster service account, and may name a token
file that is read on every request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import attrs
from jobdispatch.errors import Problem
from jobdispatch.kit.settings import (
    ConfigSection,
    capabilities_setting,
    json_schema,
    path_setting,
    probe_setting,
    probe_ttl_setting,
    seconds_setting,
    section,
    setting,
)
from jobdispatch.types import Capability, Support

from jobdispatch_kubeflow.job_settings import GPU_RESOURCE, RESOURCE_NAME

__all__ = ["CONFIG_SCHEMA", "Kueue", "Publish", "Runtime", "Settings"]

_DNS = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}


@attrs.frozen
class Runtime(ConfigSection):
    """The training runtime every TrainJob refers to."""

    subject: ClassVar[str] = "kubeflow adapter configuration, runtime"

    name: str = setting(
        schema=_DNS,
        default="torch-distributed",
        required=True,
        description="the runtime's name",
    )
    kind: str = setting(
        schema={"enum": ["ClusterTrainingRuntime", "TrainingRuntime"]},
        default="ClusterTrainingRuntime",
        description="cluster-wide, or in the namespace",
    )


@attrs.frozen
class Kueue(ConfigSection):
    """Kueue mode: every TrainJob goes to this LocalQueue (with this priority class)."""

    subject: ClassVar[str] = "kubeflow adapter configuration, kueue"

    queue: str = setting(schema=_DNS, description="the LocalQueue")
    priority_class: str | None = setting(
        schema=_DNS, default=None, description="the WorkloadPriorityClass"
    )


#: An absolute path inside a container, without ':' (a volume mount's path).
_MOUNT_PATH = {"type": "string", "pattern": "^/[^:]*$", "maxLength": 1024}


@attrs.frozen
class Publish(ConfigSection):
    """The publish image in every training pod: an init container that copies the checkpoint
    helper onto a shared emptyDir and resolves the checkpoint to resume from
    (docs/how-to/publish-image.md)."""

    subject: ClassVar[str] = "kubeflow adapter configuration, publish"

    image: str = setting(
        schema={"type": "string", "minLength": 1},
        description="the publish image (tools/kube/build-publish-image names it)",
    )
    path: str = setting(
        schema=_MOUNT_PATH,
        default="/jobdispatch",
        description="where the shared emptyDir is mounted, in the init container and in the "
        "training container: the helper is bin/jobdispatch-publish under helper/, the "
        "checkpoint to resume from is named in resume.env",
    )
    mounts: tuple[tuple[str, str], ...] = setting(
        schema={
            "type": "array",
            "maxItems": 16,
            "items": {
                "type": "object",
                "properties": {"volume": _DNS, "path": _MOUNT_PATH},
                "required": ["volume", "path"],
                "additionalProperties": False,
            },
        },
        default=(),
        read=lambda mounts: tuple((m["volume"], m["path"]) for m in mounts),
        description="volumes of the runtime's training pods the init container mounts too, "
        "each {volume, path}: the volume a POSIX checkpoint root is on",
    )


@attrs.frozen(kw_only=True)
class Settings(ConfigSection):
    """The validated configuration."""

    subject: ClassVar[str] = "kubeflow adapter configuration"

    kubeconfig: str | None = path_setting("path of a kubeconfig file")
    context: str | None = setting(
        schema={"type": "string", "minLength": 1}, default=None, description="its context"
    )
    in_cluster: bool = setting(
        schema={"type": "boolean"},
        default=False,
        description="use the pod's service account instead of a kubeconfig",
    )
    namespace: str = setting(
        schema=_DNS, default="default", description="where TrainJobs are created and found"
    )
    token_file: str | None = path_setting(
        "bearer token file, read on every request (rotation-safe)"
    )
    runtime: Runtime = section(
        Runtime, factory=Runtime, description="the training runtime every TrainJob refers to"
    )
    image: str = setting(
        schema={"type": "string", "minLength": 1},
        default="busybox:stable",
        description="image when a spec has none",
    )
    gpu_resource: str = setting(
        schema={"type": "string", "pattern": f"^{RESOURCE_NAME}$", "maxLength": 253},
        default=GPU_RESOURCE,
        description="the extended resource gpus_per_node asks for (amd.com/gpu, "
        "nvidia.com/mig-1g.5gb); a job file may name another in resources.kubeflow",
    )
    request_timeout: float = seconds_setting(
        30.0, most=600, description="how long one API request may take"
    )
    probe_ttl: float = probe_ttl_setting(300.0)
    #: False: capabilities and rule support come from the catalogue and ``declared`` alone, so
    #: a job file can be planned where the API server is out of reach.
    probe: bool = probe_setting()
    allow_rank_restart: bool = setting(
        schema={"type": "boolean"},
        default=False,
        description="the site accepts ranks rerun in place (the runtime's Job retries)",
    )
    kueue: Kueue | None = section(
        Kueue,
        default=None,
        description="submit through Kueue (spec 0012): the LocalQueue, and optionally the "
        "WorkloadPriorityClass, of every TrainJob; admission is gated by "
        "jobdispatch-kueue-admission",
    )
    publish: Publish | None = section(
        Publish,
        default=None,
        description="the publish image's init container in every training pod: the checkpoint "
        "helper copied onto a shared volume, and the checkpoint to resume from resolved",
    )
    declared: Mapping[Capability, Support] = capabilities_setting()

    @classmethod
    def conflicts(cls, config: Mapping[str, Any]) -> Iterable[Problem]:
        if config.get("in_cluster") and ("kubeconfig" in config or "context" in config):
            yield Problem("in_cluster", "in_cluster excludes kubeconfig and context")


#: The JSON Schema of the Kubeflow adapter's configuration, derived from :class:`Settings`.
CONFIG_SCHEMA: Mapping[str, Any] = json_schema(Settings)
