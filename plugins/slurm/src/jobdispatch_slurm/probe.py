"""Capabilities asked of the cluster at hand, never assumed from the adapter's name.

One probe reads ``scontrol show config`` (version, JobRequeue, PreemptType and PreemptMode,
KillWait, AccountingStorageType, MinJobAge), ``scontrol -o show partition`` (each partition's
PreemptMode and GraceTime) and asks sacct one empty question (does slurmdbd answer?). Facts are
cached per cluster, keyed by ClusterName and the controller host, for ``probe_ttl`` seconds, so
every backend of one process shares one probe per cluster.

Each answer says where it came from: ``probed`` when it rests on what the cluster said,
``catalogue`` when it is what Slurm itself can or cannot do whatever the configuration, and
``declared`` when the site's configuration overrides it. With ``probe = false`` the cluster is
not asked, :data:`UNPROBED` stands in for its facts, and the kit's
:func:`~jobdispatch.kit.facts.unprobed` makes each answer resting on them ``unknown``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from jobdispatch.kit.facts import NOT_PROBED, FactsCache, unprobed
from jobdispatch.types import Capability, Inventory, NodeGroup, Source, Support

from jobdispatch_slurm.commands import Slurm

__all__ = [
    "UNPROBED",
    "ClusterFacts",
    "capabilities",
    "forget",
    "inventory",
    "node_group",
    "probe",
]


@attrs.frozen
class ClusterFacts:
    """What the cluster said about itself."""

    cluster: str
    controller: str
    version: str
    job_requeue: bool
    preempt_type: str
    preempt_mode: str
    kill_wait: str
    accounting_type: str
    min_job_age: str
    sacct_answers: bool
    sacct_detail: str
    #: partition name → (PreemptMode, GraceTime); the default partition under "".
    partitions: Mapping[str, tuple[str, str]] = attrs.field(factory=dict)
    #: The default partition's name, when one is marked Default=YES.
    default_partition: str | None = None
    #: The nodes, grouped by what they have (``scontrol -o show node``).
    nodes: tuple[NodeGroup, ...] = ()
    select_params: str = ""
    #: False for :data:`UNPROBED`: nothing here was said by the cluster.
    probed: bool = True

    @property
    def version_tuple(self) -> tuple[int, ...]:
        parts = []
        for p in self.version.split(".")[:3]:
            digits = "".join(c for c in p if c.isdigit())
            parts.append(int(digits) if digits else 0)
        return tuple(parts)

    @property
    def accounting(self) -> bool:
        """Whether the cluster keeps accounting at all."""
        return not self.accounting_type.endswith("/none") and self.accounting_type != ""

    def partition(self, name: str | None) -> tuple[str, str] | None:
        return self.partitions.get(name or "")

    @property
    def json(self) -> Support:
        """Whether squeue/sacct speak JSON here, and whether the adapter trusts it."""
        v = self.version_tuple
        if v < (21, 8):
            return Support.no(Source.PROBED, f"Slurm {self.version} has no --json")
        if v < (23, 2):
            return Support.yes(
                Source.PROBED,
                f"Slurm {self.version}: openapi v0.0.38, but sacct --json loses non-zero exit "
                "statuses and squeue --json ignores its filters (0007), so text is used",
            )
        return Support.yes(Source.PROBED, f"Slurm {self.version}: data_parser JSON")


#: The facts of a cluster that was not asked (``probe = false``).
UNPROBED = ClusterFacts(
    cluster="",
    controller="",
    version="",
    job_requeue=True,
    preempt_type="",
    preempt_mode="",
    kill_wait="",
    accounting_type="",
    min_job_age="",
    sacct_answers=False,
    sacct_detail=NOT_PROBED,
    probed=False,
)


#: Facts per cluster (ClusterName, controller host), shared by every backend of the process.
_CACHE: FactsCache[tuple[str, str], ClusterFacts] = FactsCache()

#: Drop every cached probe (tests that change a cluster's answers).
forget = _CACHE.forget


def probe(slurm: Slurm, *, ttl: float = 600.0) -> ClusterFacts:
    """The facts of the cluster ``slurm`` reaches, from the cache when fresh. Unreachable when
    scontrol cannot reach the controller."""
    config = slurm.show("config") or {}
    cluster = config.get("ClusterName", "")
    controller = config.get("SlurmctldHost[0]", config.get("ControlMachine", ""))
    return _CACHE.get((cluster, controller), ttl, lambda: _ask(slurm, config, cluster, controller))


def _ask(slurm: Slurm, config: Mapping[str, Any], cluster: str, controller: str) -> ClusterFacts:
    """Everything else the probe asks, once ``scontrol show config`` has named the cluster."""
    partitions: dict[str, tuple[str, str]] = {}
    parts = slurm.partitions()
    for part in parts:
        entry = (part.get("PreemptMode", ""), part.get("GraceTime", ""))
        partitions[part.get("PartitionName", "")] = entry
        if part.get("Default") == "YES":
            partitions[""] = entry
    default = next((p.get("PartitionName") for p in parts if p.get("Default") == "YES"), None)
    groups: dict[NodeGroup, int] = {}
    for node in slurm.nodes():
        group = node_group(node)
        groups[group] = groups.get(group, 0) + 1
    answers, detail = slurm.sacct_answers()
    return ClusterFacts(
        cluster=cluster,
        controller=controller,
        version=config.get("SLURM_VERSION", ""),
        job_requeue=config.get("JobRequeue", "1") == "1",
        preempt_type=config.get("PreemptType", ""),
        preempt_mode=config.get("PreemptMode", ""),
        kill_wait=config.get("KillWait", ""),
        accounting_type=config.get("AccountingStorageType", ""),
        min_job_age=config.get("MinJobAge", ""),
        sacct_answers=answers,
        sacct_detail=detail,
        partitions=partitions,
        default_partition=default,
        nodes=tuple(attrs.evolve(g, count=n) for g, n in groups.items()),
        select_params=config.get("SelectTypeParameters", ""),
    )


def _number(text: str) -> int | None:
    digits = text.strip()
    return int(digits) if digits.isdigit() else None


def _gpus(gres: str) -> tuple[int, str | None]:
    """GPUs in a node's ``Gres`` (``gpu:tesla:2(S:0-1),gpu:1``): the count, and the type of the
    most numerous kind (a node with several kinds is placed by its largest)."""
    kinds: dict[str | None, int] = {}
    for item in gres.split(","):
        parts = item.split("(", 1)[0].split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        count = _number(parts[-1])
        if count is None:
            continue
        kind = parts[1] if len(parts) == 3 else None
        kinds[kind] = kinds.get(kind, 0) + count
    if not kinds:
        return 0, None
    kind = max(kinds, key=lambda k: kinds[k])
    return sum(kinds.values()), kind


def node_group(node: Mapping[str, str]) -> NodeGroup:
    """One node of ``scontrol -o show node`` as a group of one."""
    gpus, kind = _gpus(node.get("Gres", ""))
    features = node.get("AvailableFeatures", "")
    partitions = node.get("Partitions", "")
    return NodeGroup(
        count=1,
        cpus=_number(node.get("CPUTot", "")),
        memory_mib=_number(node.get("RealMemory", "")),
        gpus=gpus,
        gpu_type=kind,
        features=tuple(f for f in features.split(",") if f and f != "(null)"),
        queues=tuple(p for p in partitions.split(",") if p),
    )


def inventory(facts: ClusterFacts) -> Inventory:
    """Partitions and nodes as the plan's resource check reads them (nothing, unprobed)."""
    if not facts.probed:
        return Inventory(source=Source.DECLARED, detail=NOT_PROBED)
    return Inventory(
        source=Source.PROBED,
        groups=facts.nodes,
        queues=tuple(name for name in facts.partitions if name),
        default_queue=facts.default_partition,
        detail=f"scontrol show node and partition on {facts.cluster or 'the cluster'}",
    )


def preempt_requeues(facts: ClusterFacts, partition: str | None) -> tuple[bool, str]:
    """Whether preemption in ``partition`` requeues the victim (rather than cancel, suspend or
    nothing), and why."""
    if not facts.probed:
        return False, NOT_PROBED
    if facts.preempt_type.endswith("/none") or not facts.preempt_type:
        return False, f"PreemptType={facts.preempt_type or 'none'}: nothing is preempted"
    part = facts.partition(partition)
    mode = part[0] if part is not None and part[0] not in ("", "GANG") else facts.preempt_mode
    if "REQUEUE" in mode.upper():
        return True, f"PreemptMode={mode} in partition {partition or '(default)'}"
    return False, f"PreemptMode={mode} in partition {partition or '(default)'} does not requeue"


def _kinds(facts: ClusterFacts) -> str:
    return ", ".join(sorted({g.gpu_type for g in facts.nodes if g.gpus and g.gpu_type})) or "none"


def capabilities(
    facts: ClusterFacts,
    *,
    partition: str | None,
    output_dir_known: bool,
    declared: Mapping[Capability, Support],
) -> dict[Capability, Support]:
    """Every capability, answered from ``facts``, then overridden by ``declared``."""
    P, C = Source.PROBED, Source.CATALOGUE
    _, why = preempt_requeues(facts, partition)
    answers: dict[Capability, Support] = {
        Capability.CONTAINER_IMAGE: Support.no(
            C, "sbatch --container needs an OCI runtime the site must declare (oci.conf)"
        ),
        Capability.NATIVE_REQUEUE: Support.yes(
            P, f"--requeue reruns after a node failure; preemption: {why}"
        ),
        Capability.NATIVE_RESTART: Support.no(C, "Slurm reruns whole jobs, never ranks in place"),
        Capability.HOLD: Support.yes(C, "a begin time encodes the hold instance (0008 §3)"),
        Capability.PRE_TERMINATION_SIGNAL: Support.yes(
            C, "sbatch --signal; Slurm may send it up to 60 s early"
        ),
        Capability.ACCOUNTING_HISTORY: (
            Support.yes(P, f"{facts.accounting_type}, sacct answers")
            if facts.accounting and facts.sacct_answers
            else Support.no(P, f"{facts.accounting_type or 'no accounting'}")
            if not facts.accounting
            else Support.unknown(P, f"sacct did not answer: {facts.sacct_detail}")
        ),
        Capability.ATTEMPT_INJECTION: Support.yes(
            C, "JOBDISPATCH_* and SLURM_RESTART_COUNT are set in the job's environment"
        ),
        Capability.READMISSION_GATE: Support.no(
            C, "a requeued job is eligible again after cred_expire; no gate can close first"
        ),
        Capability.WORKING_DIRECTORY: Support.yes(
            C, "sbatch --chdir (a missing directory is not an error on 22.05, 0007 §8)"
        ),
        Capability.PROCS_PER_NODE: Support.yes(C, "--ntasks-per-node, launched with srun"),
        Capability.OUTPUT_PATH: Support.yes(C, "--output, --error"),
        Capability.OUTPUT_READ: (
            Support.yes(C, "the output files, read through the transport")
            if output_dir_known
            else Support.unknown(C, "no output directory is known")
        ),
        Capability.OUTPUT_FOLLOW: (
            Support.yes(C, "the output files, polled through the transport until the job ends")
            if output_dir_known
            else Support.unknown(C, "no output directory is known")
        ),
        Capability.OUTPUT_GROWTH: (
            Support.yes(C, "the output files' sizes and times: one squeue and one stat a poll")
            if output_dir_known
            else Support.unknown(C, "no output directory is known")
        ),
        Capability.OUTPUT_RETAINED: Support.unknown(
            C, "files stay as long as the site's filesystem keeps them"
        ),
        Capability.GPUS: (
            Support.yes(P, f"--gpus-per-node; GPU types: {_kinds(facts)}")
            if any(g.gpus for g in facts.nodes)
            else Support.no(P, "no node has gpu Gres")
        ),
        Capability.MEMORY_LIMIT: (
            Support.yes(P, f"--mem, a consumable resource ({facts.select_params})")
            if "MEMORY" in facts.select_params.upper()
            else Support.no(
                P, f"SelectTypeParameters={facts.select_params or 'none'}: memory is not scheduled"
            )
        ),
        Capability.CPUS_PER_PROC: Support.yes(C, "--cpus-per-task"),
        Capability.QUEUES: Support.yes(
            P, "partitions: " + ", ".join(n for n in facts.partitions if n)
        ),
        Capability.ACCOUNTS: Support.yes(C, "--account and --qos, checked by Slurm at sbatch"),
        Capability.NODE_CONSTRAINTS: Support.yes(C, "--constraint, the features ANDed"),
        Capability.EXCLUSIVE_NODES: Support.yes(C, "--exclusive"),
    }
    if not facts.job_requeue:
        answers[Capability.NATIVE_REQUEUE] = Support.yes(
            P, f"JobRequeue=0, but the adapter passes --requeue; preemption: {why}"
        )
    if not facts.probed:
        answers = unprobed(answers)
    answers.update(declared)
    return answers
