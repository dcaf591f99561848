"""What a job file may set for a TrainJob in ``[resources.kubeflow]``: each key declared once
with its schema and meaning (:mod:`jobdispatch.kit.settings`), so the plan refuses an unknown
key by its name and a malformed value by its key, and the manifest reads the same declaration.

A job file's adapter table holds strings, numbers, booleans and lists of strings only (the core
schema, so one job file can carry tables for every cluster it may run on). Each Kubernetes
structure is therefore written in the short form Kubernetes users already type: a toleration
as ``kubectl taint`` writes a taint (``key=value:Effect``), a label as ``key=value``, a claim
as ``docker -v`` writes a mount (``claim:/path[:ro]``), an environment value from a Secret as
``NAME=secret:key``. Every form is checked by a pattern in the schema and parsed here.

What reaches the pods goes through the adapter's own runtime patch (Trainer v2.2.1's
``PodSpecPatch``: ``nodeSelector``, ``tolerations``, ``volumes``, ``serviceAccountName``,
``imagePullSecrets``, ``securityContext``, and ``volumeMounts`` of the ``node`` container);
environment values from Secrets and ConfigMaps go through ``trainer.env``, since Trainer
refuses ``env`` in a patch of the ``node`` container. The pod security context is written as
its own flat keys (``run_as_user``...), since the table holds no nested tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar

import attrs
from jobdispatch.errors import Problem
from jobdispatch.kit.settings import ConfigSection, json_schema, setting
from jobdispatch.types import JobSpec

__all__ = [
    "DNS_LABEL",
    "GPU_RESOURCE",
    "RESOURCE_NAME",
    "RESOURCE_SCHEMA",
    "SECURITY_CONTEXT",
    "SHM_PATH",
    "TABLE",
    "Claim",
    "EnvRef",
    "JobSettings",
    "Toleration",
    "node_selector",
    "of",
]

#: A DNS label (RFC 1123): a namespace, a queue, a runtime, a priority class.
DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
#: A DNS subdomain (RFC 1123): a Secret, a ConfigMap, a claim, a service account.
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
#: The name of a qualified name, and a label value: at most 63 characters.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
#: A qualified name, the key of a label, annotation or taint: ``[prefix/]name``.
_QUALIFIED = rf"({_SUBDOMAIN}/)?{_NAME}"
#: A label value (may be empty).
_LABEL_VALUE = rf"({_NAME})?"
#: An extended resource name: ``amd.com/gpu``, ``nvidia.com/mig-1g.5gb``.
RESOURCE_NAME = rf"{_SUBDOMAIN}/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
#: Where a job's memory-backed shared memory is mounted in the pod (not a file of this host).
SHM_PATH = "/dev/shm"  # noqa: S108
#: The accelerator GPUs are asked for by unless the cluster entry or the job names another.
GPU_RESOURCE = "nvidia.com/gpu"
_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_EFFECT = r"NoSchedule|PreferNoSchedule|NoExecute"
_QUANTITY = r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?"
#: Label and annotation keys dispatch writes itself, or Kueue reads: a job may not set them.
_RESERVED = ("jobdispatch.dev/", "kueue.x-k8s.io/", "trainer.kubeflow.org/", "jobset.sigs.k8s.io/")

_TOLERATION = re.compile(
    rf"^(?P<key>{_QUALIFIED})(=(?P<value>{_LABEL_VALUE}))?(:(?P<effect>{_EFFECT}))?$"
)
_PAIR = re.compile(rf"^(?P<key>{_QUALIFIED})=(?P<value>.*)$", re.DOTALL)
_LABEL = re.compile(rf"^(?P<key>{_QUALIFIED})=(?P<value>{_LABEL_VALUE})$")
_CLAIM = re.compile(rf"^(?P<claim>{_SUBDOMAIN}):(?P<path>/[^:\x00\n]*)(?P<ro>:ro)?$")
_ENV_REF = re.compile(rf"^(?P<name>{_ENV_NAME})=(?P<object>{_SUBDOMAIN}):(?P<key>[-._A-Za-z0-9]+)$")


#: A list of strings, each parsed by the key's ``read``, which names a malformed one by its
#: index and the form it should have (a schema pattern would only quote the regex).
_STRINGS: Mapping[str, Any] = {
    "type": "array",
    "items": {"type": "string", "maxLength": 1024},
    "maxItems": 128,
}
_STRING: Mapping[str, Any] = {"type": "string", "maxLength": 253}
#: A user or group id, as the API server takes it in a pod's security context.
_ID: Mapping[str, Any] = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
#: The security-context keys of the table, as the ``PodSecurityContext`` fields they become.
SECURITY_CONTEXT: Mapping[str, str] = {
    "run_as_user": "runAsUser",
    "run_as_group": "runAsGroup",
    "fs_group": "fsGroup",
    "run_as_non_root": "runAsNonRoot",
}


def _each(values: Iterable[str], pattern: re.Pattern[str], form: str) -> Iterator[re.Match[str]]:
    """The match of each value, or ValueError naming the first that is not ``form``."""
    for i, v in enumerate(values):
        m = pattern.fullmatch(v)
        if m is None:
            raise ValueError(f"[{i}] {v!r} is not {form}")
        yield m


def _matching(pattern: str, form: str) -> Callable[[str], str]:
    """A ``read`` accepting a string that is ``form`` (``pattern``), naming it otherwise."""
    compiled = re.compile(pattern)

    def read(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"{value!r} is not {form}")
        return value

    return read


@attrs.frozen
class Toleration:
    """One toleration: ``key`` with ``value`` (operator Equal) or any value (Exists), for
    ``effect`` or every effect."""

    key: str
    value: str | None
    effect: str | None

    def body(self) -> dict[str, str]:
        """The ``corev1.Toleration``."""
        out = {"key": self.key, "operator": "Exists" if self.value is None else "Equal"}
        if self.value is not None:
            out["value"] = self.value
        if self.effect is not None:
            out["effect"] = self.effect
        return out


@attrs.frozen
class Claim:
    """A PersistentVolumeClaim mounted at ``path`` in the training container."""

    claim: str
    path: str
    read_only: bool


@attrs.frozen
class EnvRef:
    """An environment variable ``name`` read from key ``key`` of Secret or ConfigMap ``of``."""

    name: str
    of: str
    key: str


def _tolerations(values: Iterable[str]) -> tuple[Toleration, ...]:
    found = _each(values, _TOLERATION, "key[=value][:NoSchedule|PreferNoSchedule|NoExecute]")
    return tuple(Toleration(m["key"], m["value"], m["effect"]) for m in found)


def _pairs(values: Iterable[str], pattern: re.Pattern[str], form: str) -> Mapping[str, str]:
    out: dict[str, str] = {}
    for m in _each(values, pattern, form):
        key = m["key"]
        if key in out:
            raise ValueError(f"{key!r} is given twice")
        if key.startswith(_RESERVED):
            raise ValueError(f"{key!r} is written by dispatch, Kueue, Trainer or JobSet")
        out[key] = m["value"]
    return out


def _labels(values: Iterable[str]) -> Mapping[str, str]:
    return _pairs(values, _LABEL, "a label key=value (value: up to 63 letters, digits, -_.)")


def _annotations(values: Iterable[str]) -> Mapping[str, str]:
    return _pairs(values, _PAIR, "an annotation key=value")


def _claims(values: Iterable[str]) -> tuple[Claim, ...]:
    out: list[Claim] = []
    for m in _each(values, _CLAIM, "claim:/path or claim:/path:ro"):
        if m["path"] == SHM_PATH or any(c.path == m["path"] for c in out):
            raise ValueError(f"{m['path']!r} is mounted twice (or is /dev/shm: use shm_size)")
        out.append(Claim(m["claim"], m["path"], m["ro"] is not None))
    return tuple(out)


def _env_refs(values: Iterable[str]) -> tuple[EnvRef, ...]:
    out: list[EnvRef] = []
    for m in _each(values, _ENV_REF, "NAME=object:key"):
        if any(e.name == m["name"] for e in out):
            raise ValueError(f"{m['name']!r} is given twice")
        out.append(EnvRef(m["name"], m["object"], m["key"]))
    return tuple(out)


def _secret_names(values: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for m in _each(values, re.compile(_SUBDOMAIN), "a Secret name"):
        if m[0] in out:
            raise ValueError(f"{m[0]!r} is given twice")
        out.append(m[0])
    return tuple(out)


def _id(description: str) -> Any:
    """An optional user or group id of the pods' security context."""
    return setting(schema=_ID, default=None, description=description)


def _listed(read: Callable[[Any], Any], description: str, *, mapping: bool = False) -> Any:
    """A list of strings, each parsed by ``read``: empty (a tuple, or a mapping with
    ``mapping``) when not given."""
    if mapping:
        return setting(schema=_STRINGS, factory=dict, read=read, description=description)
    return setting(schema=_STRINGS, default=(), read=read, description=description)


def _named(pattern: str, form: str, description: str) -> Any:
    """An optional name (of a runtime, a service account...) that must be ``form``."""
    return setting(
        schema=_STRING, default=None, read=_matching(pattern, form), description=description
    )


@attrs.frozen(kw_only=True)
class JobSettings(ConfigSection):
    """The ``[resources.kubeflow]`` table of a job file."""

    subject: ClassVar[str] = "resources.kubeflow"

    tolerations: tuple[Toleration, ...] = _listed(
        _tolerations,
        "taints the pods tolerate, as kubectl taint writes them: key=value:Effect "
        "(Equal), key:Effect or key (Exists); no effect tolerates every effect",
    )
    labels: Mapping[str, str] = _listed(
        _labels,
        "labels (key=value) on the TrainJob, its JobSet and the training pods, "
        "for chargeback and selection",
        mapping=True,
    )
    annotations: Mapping[str, str] = _listed(
        _annotations,
        "annotations (key=value) on the TrainJob, its JobSet and the training pods",
        mapping=True,
    )
    volumes: tuple[Claim, ...] = _listed(
        _claims,
        "PersistentVolumeClaims of the namespace mounted in the training "
        "container: claim:/path, or claim:/path:ro read-only",
    )
    shm_size: str | None = _named(
        _QUANTITY,
        "a Kubernetes quantity (16Gi, 512Mi)",
        "a memory-backed /dev/shm of this size (a Kubernetes quantity: 16Gi)",
    )
    secret_env: tuple[EnvRef, ...] = _listed(
        _env_refs,
        "environment variables read from Secrets: NAME=secret:key",
    )
    config_map_env: tuple[EnvRef, ...] = _listed(
        _env_refs,
        "environment variables read from ConfigMaps: NAME=configmap:key",
    )
    priority_class: str | None = _named(
        DNS_LABEL,
        "a WorkloadPriorityClass name",
        "the Kueue WorkloadPriorityClass of this job (a cluster entry with kueue "
        "only), in place of the cluster entry's",
    )
    runtime: str | None = _named(
        DNS_LABEL,
        "a training runtime name",
        "the training runtime of this job, of the kind the cluster entry names, "
        "in place of the cluster entry's",
    )
    service_account: str | None = _named(
        _SUBDOMAIN,
        "a service account name",
        "the service account the training pods run as",
    )
    gpu_resource: str | None = _named(
        RESOURCE_NAME,
        "an extended resource name (vendor.domain/name)",
        "the extended resource gpus_per_node asks for (amd.com/gpu, "
        "nvidia.com/mig-1g.5gb), in place of the cluster entry's gpu_resource",
    )

    image_pull_secrets: tuple[str, ...] = _listed(
        _secret_names,
        "Secrets of the namespace (of type kubernetes.io/dockerconfigjson) the kubelet pulls "
        "the training image with, from a private registry",
    )
    run_as_user: int | None = _id("the user id the training pods' containers run as")
    run_as_group: int | None = _id("the primary group id the training pods' containers run as")
    fs_group: int | None = _id(
        "a supplementary group id of the pods' containers that owns the volumes Kubernetes "
        "mounts (claims, /dev/shm)"
    )
    run_as_non_root: bool | None = setting(
        schema={"type": "boolean"},
        default=None,
        description="the kubelet refuses to start a container that would run as root (uid 0)",
    )

    def security_context(self) -> dict[str, int | bool]:
        """The pods' ``PodSecurityContext``: each key the job file gives; empty when none."""
        given = {api: getattr(self, key) for key, api in SECURITY_CONTEXT.items()}
        return {api: value for api, value in given.items() if value is not None}

    @classmethod
    def conflicts(cls, config: Mapping[str, Any]) -> Iterable[Problem]:
        if config.get("run_as_non_root") is True and config.get("run_as_user") == 0:
            yield Problem(
                "run_as_user",
                "is 0 (root) while run_as_non_root is true: the kubelet would refuse to start "
                "every container",
            )
        secret = {v.split("=", 1)[0] for v in config.get("secret_env", ())}
        for v in config.get("config_map_env", ()):
            name = v.split("=", 1)[0]
            if name in secret:
                yield Problem("config_map_env", f"{name!r} is also in secret_env")


#: The JSON Schema of ``[resources.kubeflow]``, which the plan checks a job file against.
RESOURCE_SCHEMA: Mapping[str, Any] = json_schema(JobSettings)
#: The job file's table this adapter reads.
TABLE = "kubeflow"


def of(spec: JobSpec) -> JobSettings:
    """The spec's ``[resources.kubeflow]``, read. Raises ValidationError naming each bad key."""
    table = spec.resources.adapter.get(TABLE, {})
    return JobSettings.from_config(
        {k: list(v) if isinstance(v, tuple) else v for k, v in table.items()}
    )


def node_selector(constraints: Iterable[str]) -> dict[str, str]:
    """``resources.constraints`` as a node selector: each ``key=value`` a label every node must
    have. Raises ValueError naming a constraint that is not one (a bare Slurm feature)."""
    out: dict[str, str] = {}
    for i, c in enumerate(constraints):
        m = _LABEL.fullmatch(c)
        if m is None:
            msg = f"[{i}] {c!r} is not a node label key=value"
            raise ValueError(msg)
        if out.get(m["key"], m["value"]) != m["value"]:
            msg = f"[{i}] {c!r} asks label {m['key']!r} for a second value"
            raise ValueError(msg)
        out[m["key"]] = m["value"]
    return out
