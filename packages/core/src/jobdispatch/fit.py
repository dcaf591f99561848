"""Whether a cluster's nodes can hold a spec: the plan's resource check, pure.

A spec that no node could ever satisfy (a GPU type the cluster lacks, more GPUs per node than
any node has, a partition that does not exist) would otherwise sit pending for ever, or be
refused by the scheduler long after the record was written. ``fit`` compares the spec with the
cluster's :class:`~jobdispatch.types.Inventory` before anything is created and says, for each
field it cannot satisfy, what the cluster has instead. Whatever the inventory leaves unsaid
(``None``) is not held against the spec: the scheduler is then the judge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jobdispatch.errors import Problem
from jobdispatch.types import Inventory, JobSpec, NodeGroup, Resources

__all__ = ["describe_group", "fit", "format_mib"]


def format_mib(mib: int) -> str:
    """Memory as people write it: 512M, 2G, 1.5T (binary units, as Slurm reads them)."""
    for unit, size in (("T", 1024 * 1024), ("G", 1024)):
        if mib >= size:
            value = mib / size
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{mib}M"


def describe_group(group: NodeGroup) -> str:
    """One node group in a line: ``2 nodes: 4 CPUs, 2G, 2 GPUs (tesla), features ib``."""
    parts = []
    if group.cpus is not None:
        parts.append(f"{group.cpus} CPUs")
    if group.memory_mib is not None:
        parts.append(format_mib(group.memory_mib))
    if group.gpus:
        kind = f" ({group.gpu_type})" if group.gpu_type else ""
        parts.append(f"{group.gpus} GPU{'s' if group.gpus != 1 else ''}{kind}")
    else:
        parts.append("no GPUs")
    if group.features:
        parts.append("features " + ",".join(group.features))
    noun = "node" if group.count == 1 else "nodes"
    return f"{group.count} {noun}: " + ", ".join(parts)


def _cpus_needed(spec: JobSpec) -> int | None:
    per_proc = spec.resources.cpus_per_proc
    return None if per_proc is None else per_proc * spec.procs_per_node


#: Each per-node demand: the field it comes from, whether a group meets it, and how to say what
#: the cluster has when no group does. Checked in this order; the first unmet one is reported.
_Demand = tuple[
    str,
    Callable[[JobSpec, NodeGroup], bool],
    Callable[[JobSpec], str],
    Callable[[Sequence[NodeGroup]], str],
]


def _types(groups: Sequence[NodeGroup]) -> str:
    found = sorted({g.gpu_type for g in groups if g.gpus and g.gpu_type})
    return "GPU types present: " + (", ".join(found) if found else "none named")


def _most(attr: str, show: Callable[[int], str]) -> Callable[[Sequence[NodeGroup]], str]:
    def say(groups: Sequence[NodeGroup]) -> str:
        values = [getattr(g, attr) for g in groups if getattr(g, attr) is not None]
        return f"the most any node has is {show(max(values))}" if values else "nodes do not say"

    return say


_DEMANDS: tuple[_Demand, ...] = (
    (
        "resources.gpu_type",
        lambda s, g: s.resources.gpu_type is None or g.gpu_type == s.resources.gpu_type,
        lambda s: f"GPUs of type {s.resources.gpu_type!r}",
        _types,
    ),
    (
        "resources.gpus_per_node",
        lambda s, g: g.gpus >= s.resources.gpus_per_node,
        lambda s: f"{s.resources.gpus_per_node} GPUs",
        _most("gpus", lambda n: f"{n} GPUs"),
    ),
    (
        "resources.memory_per_node",
        lambda s, g: (
            s.resources.memory_per_node_mib is None
            or g.memory_mib is None
            or g.memory_mib >= s.resources.memory_per_node_mib
        ),
        lambda s: format_mib(s.resources.memory_per_node_mib or 0) + " of memory",
        _most("memory_mib", format_mib),
    ),
    (
        "resources.cpus_per_proc",
        lambda s, g: (need := _cpus_needed(s)) is None or g.cpus is None or g.cpus >= need,
        lambda s: (
            f"{_cpus_needed(s)} CPUs ({s.resources.cpus_per_proc} for each of "
            f"{s.procs_per_node} processes)"
        ),
        _most("cpus", lambda n: f"{n} CPUs"),
    ),
    (
        "resources.constraints",
        lambda s, g: set(s.resources.constraints) <= set(g.features),
        lambda s: "features " + ", ".join(s.resources.constraints),
        lambda groups: (
            "features present: "
            + (", ".join(sorted({f for g in groups for f in g.features})) or "none")
        ),
    ),
)


def _in_queue(inventory: Inventory, queue: str | None) -> list[NodeGroup]:
    groups = list(inventory.groups or ())
    name = queue or inventory.default_queue
    if name is None:
        return groups
    return [g for g in groups if not g.queues or name in g.queues]


def fit(spec: JobSpec, inventory: Inventory) -> list[Problem]:
    """Every reason no set of ``spec.nodes`` nodes of the cluster could run ``spec``.

    Empty when the spec fits, or when the inventory does not say enough to tell.
    """
    res: Resources = spec.resources
    out: list[Problem] = []
    queues = inventory.queues
    if res.queue is not None and queues is not None and res.queue not in queues:
        listed = ", ".join(queues) if queues else "none"
        out.append(Problem("resources.queue", f"no queue {res.queue!r} here (queues: {listed})"))
        return out
    if inventory.groups is None:
        return out
    candidates = _in_queue(inventory, res.queue)
    queue = res.queue or inventory.default_queue
    where = f" in queue {queue!r}" if queue else ""
    if res.gpus_per_node and not any(g.gpus for g in candidates):
        out.append(Problem("resources.gpus_per_node", f"no node{where} has GPUs"))
        return out
    remaining = candidates
    for field, meets, need, have in _DEMANDS:
        matching = [g for g in remaining if meets(spec, g)]
        if not matching:
            out.append(Problem(field, f"no node{where} has {need(spec)}; {have(remaining)}"))
            return out
        remaining = matching
    available = sum(g.count for g in remaining)
    if available < spec.nodes:
        shown = "; ".join(describe_group(g) for g in candidates) or "no nodes"
        out.append(
            Problem(
                "nodes",
                f"{spec.nodes} nodes asked, but only {available} node"
                f"{'s' if available != 1 else ''}{where} can hold one rank group of this job "
                f"(the cluster has {shown})",
            )
        )
    return out
