"""What ``plan`` says of the sinks a job's notices would go to: each sink made from the
configuration (so a bad setting is an error naming its key), what it would get of this job,
and a probe of it (configured; reachable, where a connection can tell), all probes at once so
that ``plan`` waits for the slowest only."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
from jobdispatch.types import JobSpec

__all__ = ["SinkReport", "sink_reports"]


@attrs.frozen
class SinkReport:
    """One sink as ``plan`` shows it."""

    name: str
    sink: str
    gets: tuple[str, ...]
    configured: bool
    reachable: bool | None
    detail: str

    def as_data(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=False) | {"gets": list(self.gets)}


def sink_reports(sinks: list[Any], kinds: dict[str, str], spec: JobSpec) -> list[SinkReport]:
    """A report per sink (``kinds``: each sink's registered kind by name)."""
    from jobdispatch_supervise.messages import Probe
    from jobdispatch_supervise.outbox import wanted_kinds

    def probe(sink: Any) -> Probe:
        try:
            found = sink.probe()
        except Exception as exc:  # a probe that breaks says so; plan still shows the rest
            return Probe(False, None, f"probe failed: {type(exc).__name__}")
        return found if isinstance(found, Probe) else Probe(True, None, "")

    with ThreadPoolExecutor(max_workers=max(1, len(sinks))) as pool:
        probes = list(pool.map(probe, sinks))
    out = []
    for sink, found in zip(sinks, probes, strict=True):
        gets = sorted(str(k) for k in wanted_kinds(sink, spec.notify))
        out.append(
            SinkReport(
                name=sink.name,
                sink=kinds.get(sink.name, sink.name),
                gets=tuple(gets),
                configured=found.configured,
                reachable=found.reachable,
                detail=found.detail,
            )
        )
    return out


def unknown_sinks(sinks: list[Any], spec: JobSpec) -> list[str]:
    """The sinks the job's ``notify_sinks`` names that this cluster's supervisors lack."""
    have = {s.name for s in sinks}
    return [n for n in spec.notify.sinks if n not in have]
