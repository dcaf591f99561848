"""Whether a TrainJob could ever be placed: the plan's refusal of what can never fit (issue 35).

A TrainJob no node can hold (16 GPUs a node on 8-GPU nodes, a node selector no node matches) or
that its Kueue ClusterQueue can never admit (more than its nominal quota plus what it may borrow)
would otherwise wait pending for ever: the scheduler and Kueue name it at once, but nothing ends
it. :func:`never_fits` compares what the TrainJob asks with the cluster's figures before
anything is created, and says what exists instead:

- **nodes**: the largest allocatable of each requested resource across the nodes (those the
  node selector matches, when the TrainJob has one), and how many nodes could hold one pod;
- **the ClusterQueue** (under Kueue): for each requested resource, the most any flavor offers:
  its ``nominalQuota``, plus what it may borrow, no more than its ``borrowingLimit`` and than
  what the other ClusterQueues of its cohort may lend (each one's ``lendingLimit``, else its
  nominal quota). Quota a hierarchical Cohort object itself holds is not read: a site that
  gives its cohorts quota of their own should set ``borrowingLimit``.

It reads the request from the TrainJob the adapter would create (:mod:`manifest`), whatever
resource names and selectors that carries, so it is generic over them. Pure: objects in,
problems out. Whatever the cluster does not say (a node without an allocatable figure for a
resource counts as having none of it; a cluster without nodes refuses nothing, since nodes may
join) refuses nothing else: the scheduler is then the judge. A cordoned or tainted node counts,
since that is the cluster's state, which changes; only a request that no node of the cluster's
kinds could ever satisfy is the job file's mistake.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from jobdispatch.errors import Problem

__all__ = ["never_fits", "quantity", "requested", "selector"]

Obj = Mapping[str, Any]

#: The suffixes of a quantity: milli, the decimal powers of 1000 and the binary powers of 1024.
_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    **{p: Decimal(1000) ** n for n, p in enumerate("kMGTPE", start=1)},
    **{f"{p}i": Decimal(1024) ** n for n, p in enumerate("KMGTPE", start=1)},
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


def quantity(value: object) -> Decimal | None:
    """A Kubernetes resource quantity (``500m``, ``16Gi``, ``8``, ``1e3``) as a number; None when
    it is not one."""
    found = _QUANTITY.match(str(value).strip())
    if found is None:
        return None
    try:
        return Decimal(found[1]) * _SUFFIX[found[2] or ""]
    except InvalidOperation:
        return None


#: The job-file field each resource the adapter asks for comes from (any other: the
#: accelerators, whatever their resource name).
_FIELDS = {"cpu": "resources.cpus_per_proc", "memory": "resources.memory_per_node"}


def _field(resource: str) -> str:
    return _FIELDS.get(resource, "resources.gpus_per_node")


def _show(resource: str, amount: Decimal) -> str:
    if resource == "memory":
        mib = amount / (2**20)
        return f"{mib:.0f}Mi" if mib == int(mib) else f"{amount:.0f} bytes"
    return f"{amount.normalize():f}"


def requested(trainjob: Obj) -> dict[str, Decimal]:
    """What each node (pod) of ``trainjob`` requests: ``trainer.resourcesPerNode``'s requests,
    else its limits (Kubernetes takes the limit as the request when only a limit is set)."""
    per_node = ((trainjob.get("spec") or {}).get("trainer") or {}).get("resourcesPerNode") or {}
    asked = {**(per_node.get("limits") or {}), **(per_node.get("requests") or {})}
    out: dict[str, Decimal] = {}
    for name, value in asked.items():
        amount = quantity(value)
        if amount is not None and amount > 0:
            out[str(name)] = amount
    return out


def _walk(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def selector(trainjob: Obj) -> dict[str, str]:
    """Every ``nodeSelector`` the TrainJob writes for its pods (in its runtime patches or
    elsewhere), merged; empty when it writes none."""
    out: dict[str, str] = {}
    for mapping in _walk(trainjob.get("spec") or {}):
        chosen = mapping.get("nodeSelector")
        if isinstance(chosen, Mapping):
            out.update({str(k): str(v) for k, v in chosen.items()})
    return out


def _labels(node: Obj) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def _allocatable(node: Obj, resource: str) -> Decimal:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
    amount = None if value is None else quantity(value)
    return Decimal(0) if amount is None else amount


def _pairs(chosen: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(chosen.items()))


def _nodes(
    asked: Mapping[str, Decimal], count: int, chosen: Mapping[str, str], nodes: Sequence[Obj]
) -> list[Problem]:
    if not nodes:
        return []
    matching = [n for n in nodes if all(_labels(n).get(k) == v for k, v in chosen.items())]
    if not matching:
        present = sorted({f"{k}={_labels(n)[k]}" for n in nodes for k in chosen if k in _labels(n)})
        have = ", ".join(present) if present else "no node has any of its labels"
        return [
            Problem(
                "node selector",
                f"{_pairs(chosen)} matches none of the cluster's {len(nodes)} nodes ({have})",
            )
        ]
    where = f" matching {_pairs(chosen)}" if chosen else ""
    for resource, amount in asked.items():
        most = max(_allocatable(n, resource) for n in matching)
        if most < amount:
            return [
                Problem(
                    _field(resource),
                    f"each node asks {_show(resource, amount)} {resource}, but the most any "
                    f"node{where} has allocatable is {_show(resource, most)} "
                    f"({len(matching)} node{'s' if len(matching) != 1 else ''})",
                )
            ]
    # Kubernetes may place two pods of a TrainJob on one node (nothing keeps them apart), so
    # what can never fit is more pods than the matching nodes hold together, not more pods
    # than nodes that hold one.
    room = sum(_pods_held(n, asked, count) for n in matching)
    if room < count:
        wants = ", ".join(f"{_show(r, a)} {r}" for r, a in asked.items())
        return [
            Problem(
                "nodes",
                f"{count} nodes asked, but the {len(matching)} node"
                f"{'s' if len(matching) != 1 else ''}{where} can hold only {room} pod"
                f"{'s' if room != 1 else ''} of {wants} each",
            )
        ]
    return []


def _pods_held(node: Obj, asked: Mapping[str, Decimal], count: int) -> int:
    """How many pods asking ``asked`` ``node``'s allocatable holds side by side (``count``,
    all that are asked, when they ask nothing)."""
    return min((int(_allocatable(node, r) // a) for r, a in asked.items() if a > 0), default=count)


def _resources(queue: Obj) -> Iterator[tuple[str, Obj]]:
    """Each (flavor, resource entry) of a ClusterQueue's resource groups."""
    for group in (queue.get("spec") or {}).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for res in flavor.get("resources") or ():
                yield str(flavor.get("name")), res


def _cohort(queue: Obj) -> str:
    spec = queue.get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")


def _lendable(peers: Sequence[Obj] | None, cohort: str, flavor: str, name: str) -> Decimal | None:
    """What the other ClusterQueues of ``cohort`` may lend of ``flavor``'s resource ``name``:
    each one's ``lendingLimit``, else its whole ``nominalQuota``; None when they were not read."""
    if peers is None:
        return None
    total = Decimal(0)
    for peer in peers:
        if _cohort(peer) != cohort:
            continue
        for peer_flavor, res in _resources(peer):
            if peer_flavor == flavor and str(res.get("name")) == name:
                limit = res.get("lendingLimit")
                amount = quantity(res.get("nominalQuota", 0) if limit is None else limit)
                total += amount or Decimal(0)
    return total


def _offer(
    flavor: str, res: Obj, cohort: str, peers: Sequence[Obj] | None
) -> tuple[Decimal | None, str]:
    """The most one flavor's resource can ever give a workload of the queue: its nominal quota,
    plus what it may borrow (its ``borrowingLimit``, and no more than its cohort's peers may
    lend); None when no bound can be told."""
    name = str(res.get("name"))
    nominal = quantity(res.get("nominalQuota", 0)) or Decimal(0)
    quota = f"flavor {flavor}: nominal quota {_show(name, nominal)}"
    if not cohort:
        return nominal, f"{quota}, and no cohort to borrow from"
    limit = res.get("borrowingLimit")
    bound = None if limit is None else quantity(limit) or Decimal(0)
    lend = _lendable(peers, cohort, flavor, name)
    if bound is None and lend is None:
        return None, f"{quota}, and it may borrow from cohort {cohort} without a limit"
    parts = [] if bound is None else [f"borrowing limit {limit}"]
    if lend is not None:
        parts.append(f"cohort {cohort}'s other queues lend at most {_show(name, lend)}")
    borrow = min(b for b in (bound, lend) if b is not None)
    return nominal + borrow, f"{quota}; {'; '.join(parts)}"


def _quota(
    asked: Mapping[str, Decimal], count: int, cluster_queue: Obj, peers: Sequence[Obj] | None
) -> list[Problem]:
    name = str((cluster_queue.get("metadata") or {}).get("name") or "")
    cohort = _cohort(cluster_queue)
    offered: dict[str, list[tuple[Decimal | None, str]]] = {}
    for flavor, res in _resources(cluster_queue):
        offer = _offer(flavor, res, cohort, peers)
        offered.setdefault(str(res.get("name")), []).append(offer)
    for resource, amount in asked.items():
        total = amount * count
        if resource not in offered:
            return [
                Problem(
                    _field(resource),
                    f"Kueue ClusterQueue {name} does not cover {resource}: it can never admit "
                    "a job asking for it",
                )
            ]
        bounded = [(most, how) for most, how in offered[resource] if most is not None]
        if len(bounded) < len(offered[resource]):
            continue
        best, how = max(bounded, key=lambda o: o[0])
        if best < total:
            return [
                Problem(
                    _field(resource),
                    f"the job asks {_show(resource, total)} {resource} in all ({count} × "
                    f"{_show(resource, amount)}), but Kueue ClusterQueue {name} can admit at "
                    f"most {_show(resource, best)} ({how})",
                )
            ]
    return []


def never_fits(
    trainjob: Obj,
    nodes: Sequence[Obj],
    cluster_queue: Obj | None = None,
    cluster_queues: Sequence[Obj] | None = None,
) -> list[Problem]:
    """Why ``trainjob`` could never run on a cluster of ``nodes``, or be admitted by Kueue
    ``cluster_queue`` (None: not through Kueue), whose cohort's queues are among
    ``cluster_queues`` (None: not read, and then a queue in a cohort without a borrowing limit
    refuses nothing); empty when it could (see the module doc)."""
    asked = requested(trainjob)
    count = int(((trainjob.get("spec") or {}).get("trainer") or {}).get("numNodes") or 1)
    found = _nodes(asked, count, selector(trainjob), nodes)
    if not found and cluster_queue is not None:
        name = (cluster_queue.get("metadata") or {}).get("name")
        peers = (
            None
            if cluster_queues is None
            else [q for q in cluster_queues if (q.get("metadata") or {}).get("name") != name]
        )
        found = _quota(asked, count, cluster_queue, peers)
    return found
