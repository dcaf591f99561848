"""The memory adapter built through the plugin manager and its configuration; determinism and
thread safety."""

from __future__ import annotations

import threading

import jobdispatch
import jsonschema
import pytest
from jobdispatch import (
    Capability,
    CauseKind,
    JobSpec,
    ManualClock,
    StartRequest,
    Tristate,
    ValidationError,
)
from jobdispatch.memory import CONFIG_SCHEMA, MemoryBackend, Shape


def test_the_plugin_manager_builds_it() -> None:
    entry = jobdispatch.plugins.load(entry_points=False).registry("adapter").get("memory")
    backend = entry.factory({"shape": "kubeflow", "auto_run": True}, None)
    assert isinstance(backend, MemoryBackend)
    assert (backend.shape, backend.name) == (Shape.KUBEFLOW, "memory")
    assert isinstance(backend, jobdispatch.Backend)
    for protocol in (
        jobdispatch.Holder,
        jobdispatch.Requeuer,
        jobdispatch.NativePolicyCompiler,
        jobdispatch.Watcher,
        jobdispatch.MultiFinder,
        jobdispatch.CessationSignal,
        jobdispatch.IdentityWeakener,
        jobdispatch.OutputReader,
    ):
        assert isinstance(backend, protocol), protocol


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"shape": "slurm", "colour": "red"}, "colour"),
        ({"capabilities": {"teleport": "yes"}}, "capabilities.teleport"),
        ({"capabilities": {"hold": {"answer": "no", "why": "x"}}}, "capabilities.hold"),
        ({"shape": "pbs"}, "shape"),
    ],
)
def test_a_bad_configuration_is_refused_naming_the_key(
    config: dict[str, object], path: str
) -> None:
    with pytest.raises(ValidationError) as info:
        MemoryBackend.from_config(config)
    assert any(p.startswith(path) for p in info.value.paths), info.value.paths
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(config, CONFIG_SCHEMA)
    if hasattr(jobdispatch, "new_backend"):
        with pytest.raises(ValidationError):
            jobdispatch.new_backend("memory", config)


def test_every_object_of_the_schema_refuses_additional_properties() -> None:
    def objects(node: object) -> list[dict[str, object]]:
        found = []
        if isinstance(node, dict):
            if node.get("type") == "object":
                found.append(node)
            for value in node.values():
                found.extend(objects(value))
        elif isinstance(node, list):
            for value in node:
                found.extend(objects(value))
        return found

    assert objects(CONFIG_SCHEMA)
    assert all(o.get("additionalProperties") is False for o in objects(CONFIG_SCHEMA))


def test_site_declarations_override_capability_answers() -> None:
    backend = MemoryBackend.from_config(
        {
            "shape": "kubeflow",
            "capabilities": {"output-retained": {"answer": "yes", "detail": "loki"}},
        }
    )
    support = backend.capabilities()[Capability.OUTPUT_RETAINED]
    assert (support.answer, support.detail) == (Tristate.YES, "loki")


def test_the_shapes_answer_every_capability() -> None:
    slurm = MemoryBackend(shape=Shape.SLURM).capabilities()
    kube = MemoryBackend(shape=Shape.KUBEFLOW).capabilities()
    assert set(slurm) == set(kube) == set(Capability)
    assert slurm[Capability.NATIVE_REQUEUE].answer is Tristate.YES
    assert slurm[Capability.CONTAINER_IMAGE].answer is Tristate.NO
    assert kube[Capability.NATIVE_RESTART].answer is Tristate.YES
    assert kube[Capability.OUTPUT_RETAINED].answer is Tristate.UNKNOWN


def scenario(seed: int) -> MemoryBackend:
    clock = ManualClock()
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock, seed=seed)
    spec = JobSpec(command=["x"], nodes=8)
    for n in range(1, 4):
        if n == 2:
            backend.env.lose_next_start_reply()
        try:
            ref = backend.start(StartRequest(job="abc", submission=n, attempt=1, spec=spec))
        except jobdispatch.OutcomeUnknown:
            (ref,) = [o.ref for o in backend.find("abc").objects if o.identity == ("abc", n, 1)]
        backend.open(ref)
        clock.advance(30)
        backend.env.lose_node(ref)
    return backend


def test_same_seed_and_clock_give_the_same_history() -> None:
    a, b = scenario(seed=3), scenario(seed=3)
    assert list(a.env.history) == list(b.env.history)
    assert a.env.history == b.env.history
    lost = [
        e.cause.detail
        for e in scenario(seed=4).env.history
        if isinstance(e, jobdispatch.memory.history.ExecutionEnded)
    ]
    assert len(lost) == 3


def test_calls_are_counted_per_method() -> None:
    backend = scenario(seed=0)
    assert backend.env.calls["start"] == 3
    assert backend.env.calls["open"] == 3
    assert backend.env.calls["find"] == 1


def test_another_thread_may_drive_it_while_one_polls() -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    spec = JobSpec(command=["x"])
    refs = []
    for k in range(50):
        ref = backend.start(StartRequest(job="abc", submission=1, attempt=k + 1, spec=spec))
        backend.open(ref)
        refs.append(ref)
    done = threading.Event()

    def drive() -> None:
        for ref in refs:
            backend.env.preempt(ref)
        done.set()

    thread = threading.Thread(target=drive)
    thread.start()
    while not done.is_set():
        for obs in backend.find("abc").objects:
            for e in obs.executions:
                assert e.cause is None or e.cause.kind is CauseKind.PREEMPTED
    thread.join()
    assert {o.state.value for o in backend.find("abc").objects} == {"ended"}
