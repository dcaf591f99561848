"""The start-time refusal of what the cluster cannot do, written once for every adapter.

The plan refuses a spec that needs a capability the cluster answers no for, before anything is
recorded. ``start`` must refuse it too (spec 0003, D2 and D4): a caller may start without
planning (the conformance suite does), and the cluster's answer may have changed since the plan
(a site's declaration, a probe that expired). Each adapter used to compare the spec's needs with
its answers itself, in four copies with four messages; here it is one comparison, used by the
plan, and one refusal, applied to an adapter's ``start`` and ``preview`` by
:func:`refuses_unsupported`, so the core's check runs before the adapter's code does.

A refusal is :class:`~jobdispatch.errors.Unsupported`: the Start step records it as a refused
attempt, with nothing created, like any refusal of the scheduler's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from jobdispatch.errors import Unsupported
from jobdispatch.plan import unsupported_need
from jobdispatch.spi import StartRequest
from jobdispatch.types import Capability, JobSpec, Support

__all__ = ["refuse_unsupported", "refuses_unsupported"]


def refuse_unsupported(request: StartRequest, capabilities: Mapping[Capability, Support]) -> None:
    """Raise Unsupported, naming the object, the field and the capability, when ``request``
    needs what ``capabilities`` answers no for."""
    need = unsupported_need(request.spec, capabilities)
    if need is None:
        return
    capability, field, answer = need
    msg = (
        f"cannot start {request.name}: {field} needs {capability}, which this cluster does "
        f"not support ({answer.detail or answer})"
    )
    raise Unsupported(msg)


class _Answers(Protocol):
    def capabilities(self, spec: JobSpec | None = None) -> Mapping[Capability, Support]: ...


B = TypeVar("B", bound=_Answers)
R = TypeVar("R")


def refuses_unsupported(
    method: Callable[[B, StartRequest], R],
) -> Callable[[B, StartRequest], R]:
    """Decorate a backend's ``start`` (or ``preview``): the request is refused, by
    :func:`refuse_unsupported` over the backend's own answers for its spec, before the method
    runs."""

    @functools.wraps(method)
    def checked(backend: B, request: StartRequest) -> R:
        refuse_unsupported(request, backend.capabilities(request.spec))
        return method(backend, request)

    return checked
