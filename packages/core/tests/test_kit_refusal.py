"""The one start-time refusal: a request needing what the cluster answers no for is refused,
before the adapter's own code runs, with a message naming the object, the field and the
capability; unknown is tried, never refused."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.errors import Unsupported
from jobdispatch.kit.refusal import refuse_unsupported, refuses_unsupported
from jobdispatch.plan import required_capabilities, unsupported_need
from jobdispatch.spi import StartRequest
from jobdispatch.types import Capability, JobSpec, Resources, Source, Support

ALL_YES = {c: Support.yes(Source.PROBED) for c in Capability}


def _request(spec: JobSpec) -> StartRequest:
    return StartRequest(job="j1", submission=1, attempt=1, spec=spec)


class _Backend:
    def __init__(self, answers: Mapping[Capability, Support]) -> None:
        self.answers = answers
        self.started: list[StartRequest] = []

    def capabilities(self, spec: JobSpec | None = None) -> Mapping[Capability, Support]:
        return self.answers

    @refuses_unsupported
    def start(self, request: StartRequest) -> str:
        self.started.append(request)
        return "ref"


def test_a_need_answered_no_is_refused_before_the_adapter_runs() -> None:
    answers = {**ALL_YES, Capability.QUEUES: Support.no(Source.PROBED, "queues: a, b")}
    backend = _Backend(answers)
    request = _request(JobSpec(command=["true"], resources=Resources(queue="gpu")))
    with pytest.raises(Unsupported) as err:
        backend.start(request)
    assert str(err.value) == (
        f"unsupported: cannot start {request.name}: resources.queue needs queues, which this "
        "cluster does not support (queues: a, b)"
    )
    assert backend.started == []


def test_unknown_and_unanswered_are_tried() -> None:
    spec = JobSpec(command=["true"], image="busybox", resources=Resources(queue="gpu"))
    backend = _Backend({Capability.CONTAINER_IMAGE: Support.unknown()})
    assert backend.start(_request(spec)) == "ref"
    assert len(backend.started) == 1


_NEEDS = st.builds(
    JobSpec,
    command=st.just(["true"]),
    image=st.none() | st.just("busybox"),
    working_dir=st.none() | st.just("/w"),
    procs_per_node=st.integers(1, 3),
    resources=st.builds(
        Resources,
        gpus_per_node=st.integers(0, 2),
        queue=st.none() | st.just("q"),
        exclusive=st.booleans(),
    ),
)


@given(spec=_NEEDS, refused=st.sets(st.sampled_from(list(Capability))))
def test_refused_exactly_when_some_need_is_answered_no(
    spec: JobSpec, refused: set[Capability]
) -> None:
    answers = {c: Support.no(Source.DECLARED) if c in refused else ALL_YES[c] for c in Capability}
    needs = {c for c, _field in required_capabilities(spec)}
    need = unsupported_need(spec, answers)
    assert (need is None) == (not needs & refused)
    if need is None:
        refuse_unsupported(_request(spec), answers)
    else:
        assert need[0] in refused & needs
        with pytest.raises(Unsupported, match=need[1].replace(".", r"\.")):
            refuse_unsupported(_request(spec), answers)
