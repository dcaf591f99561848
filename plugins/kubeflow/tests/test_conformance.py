"""The adapter conformance suite: its configuration checks here, and every area against the real
control plane (tools/kube/up) with a driver that ends pods through kwok's stages and deletes
nodes. Without the control plane the real-cluster class skips with the reason; under
JOBDISPATCH_REQUIRE_SERVICES=1 it fails instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from jobdispatch.spi import Backend
from jobdispatch_conformance.adapter import (
    AdapterSuite,
    ConfigurationTests,
    Driver,
    EndingTests,
    LifecycleTests,
    Timeouts,
)
from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT


def drivers(kind: Callable[[Any], Any]) -> Iterator[Callable[[Backend], Driver]]:
    """A driver factory for the control plane's drivers (``KubeDriver``, ``RealNodeDriver``):
    each driver it made cleans up after the test."""
    from jobdispatch_kubeflow import KubeflowBackend

    made: list[Any] = []

    def make(backend: Backend) -> Driver:
        assert isinstance(backend, KubeflowBackend)
        driver = kind(backend)
        made.append(driver)
        assert isinstance(driver, Driver)
        return driver

    yield make
    for driver in made:
        driver.cleanup()


def following(backend: Any) -> Backend:
    """``backend`` with its pod sentinel started, as a supervisor's first watch starts it: the
    harness only inspects, and a pod the scheduler preempts shows why for about a second before
    it is deleted, so without the sentinel whether a cause is read would depend on whether a
    look fell in that second."""
    from jobdispatch_kubeflow import KubeflowBackend

    assert isinstance(backend, KubeflowBackend)
    backend.follow_dying_pods()
    return backend


class _KubeflowConfig:
    """The adapter's name and a configuration of it that every class below registers."""

    @pytest.fixture
    def adapter_name(self) -> str | None:
        return "kubeflow"

    @pytest.fixture
    def adapter_config(self) -> Mapping[str, Any] | None:
        return {"namespace": "dispatch", "runtime": {"name": "dispatch-torch-test"}}


class TestKubeflowConfiguration(_KubeflowConfig, ConfigurationTests):
    """The registered schema is closed at every level, and new_backend refuses unknown keys:
    no cluster needed."""


@pytest.mark.kube
class TestKubeflowContract(_KubeflowConfig, AdapterSuite):
    """Every area of the contract on the real control plane."""

    @pytest.fixture
    def backend_factory(self, kube_cluster: None) -> Callable[[], Backend]:
        from jobdispatch_kubeflow import KubeflowBackend
        from jobdispatch_kubeflow.testing import settings

        return lambda: following(KubeflowBackend(settings()))

    @pytest.fixture
    def driver_factory(self) -> Iterator[Callable[[Backend], Driver]]:
        from jobdispatch_kubeflow.testing import KubeDriver

        yield from drivers(KubeDriver)

    @pytest.fixture
    def timeouts(self) -> Timeouts:
        return Timeouts(settle=120.0, poll=0.5, quiet=5.0)


@pytest.mark.kube
class TestKubeflowKueueContract(TestKubeflowContract):
    """The same on a Kueue-flavoured cluster: every TrainJob goes through real Kueue v0.19.2's
    LocalQueue ``jobdispatch`` (no admission check there: the open removes the adapter's
    admission-gated-by gate and Kueue admits), so suspend is Kueue's throughout (spec 0012).

    The areas Kueue cannot change (output, watch, errors of reach, native reruns, lost replies)
    are TestKubeflowContract's alone: they run through the same code with or without Kueue, and
    running them twice would add minutes of CI for nothing.
    """

    SAME_WITHOUT_KUEUE = frozenset(
        {
            "test_output_is_read",
            "test_output_follows_until_the_end",
            "test_watch_shows_the_job",
            "test_unreachable_is_reported",
            "test_unauthorized_is_reported",
            "test_native_rerun_tells_executions_apart",
            "test_requeue_reruns_as_a_new_execution",
            "test_requeue_refuses_past_deadline",
            "test_requeue_bit_is_restored",
            "test_find_includes_lost_replies",
            "test_preview_is_what_start_creates",
        }
    )

    @pytest.fixture(autouse=True)
    def _kueue_areas(self, request: pytest.FixtureRequest) -> None:
        if request.node.originalname in self.SAME_WITHOUT_KUEUE:
            pytest.skip("not changed by Kueue: checked by TestKubeflowContract")

    @pytest.fixture
    def backend_factory(self, kube_cluster: None) -> Callable[[], Backend]:
        from jobdispatch_kubeflow import KubeflowBackend
        from jobdispatch_kubeflow.config import Kueue
        from jobdispatch_kubeflow.testing import settings

        return lambda: following(KubeflowBackend(settings(kueue=Kueue(queue="jobdispatch"))))

    @pytest.fixture
    def adapter_config(self) -> Mapping[str, Any] | None:
        return {
            "namespace": "dispatch",
            "runtime": {"name": "dispatch-torch-test"},
            "kueue": {"queue": "jobdispatch"},
        }


class _RealNode:
    """The adapter and the driver of the real node (tools/kube/up --real-node): real processes
    in real containers, ended by their own exit, the kernel's OOM killer, the scheduler's
    preemption, the Trainer's deadline and the container runtime (jobdispatch_kubeflow.testing's
    RealNodeDriver says what it drives and why not the rest)."""

    @pytest.fixture
    def backend_factory(self, kube_cluster: None) -> Callable[[], Backend]:
        import os

        from jobdispatch_kubeflow import KubeflowBackend
        from jobdispatch_kubeflow.config import Runtime
        from jobdispatch_kubeflow.testing import real_node_problem, require, settings

        require(real_node_problem())
        return lambda: following(
            KubeflowBackend(
                settings(
                    runtime=Runtime(name=os.environ["JOBDISPATCH_KUBE_REAL_RUNTIME"]),
                    image=os.environ["JOBDISPATCH_KUBE_REAL_IMAGE"],
                )
            )
        )

    @pytest.fixture
    def driver_factory(self) -> Iterator[Callable[[Backend], Driver]]:
        from jobdispatch_kubeflow.testing import RealNodeDriver

        yield from drivers(RealNodeDriver)

    @pytest.fixture
    def timeouts(self) -> Timeouts:
        # A pod's start on the loaded real node takes seconds; a preemption tens of them.
        return Timeouts(settle=300.0, poll=1.0, quiet=5.0)


@pytest.mark.kube
class TestKubeflowRealNodeEndings(_RealNode, EndingTests):
    """The endings on the real node, every one the driver can cause."""


@pytest.mark.kube
class TestKubeflowRealNodeLifecycle(_RealNode, LifecycleTests):
    """Gate, open and stop on the real node: a gated TrainJob never starts a container, and a
    stop ends a real process (Python as PID 1 has no handler for SIGTERM, which the kernel then
    ignores: the kubelet kills it at the end of the grace period)."""


class TestKubeflowOverFakeCluster(_KubeflowConfig, AdapterSuite):
    """Every area of the contract over the in-memory API and its stand-in for the controllers
    (jobdispatch_kubeflow.fake): the adapter's own side of the SPI, checked on every run. The
    real control plane is TestKubeflowContract's."""

    @pytest.fixture
    def backend_factory(self) -> Callable[[], Backend]:
        from jobdispatch_kubeflow import KubeflowBackend, Settings, probe
        from jobdispatch_kubeflow.config import Runtime
        from jobdispatch_kubeflow.fake import FakeCluster

        probe.forget()
        cluster = FakeCluster()
        cluster.put("clustertrainingruntimes", None, FAKE_RUNTIME)
        settings = Settings(namespace="dispatch", runtime=Runtime(name="dispatch-torch-test"))
        return lambda: KubeflowBackend(settings, api=cluster)

    @pytest.fixture
    def driver_factory(self) -> Callable[[Backend], Driver]:
        from jobdispatch_kubeflow.fake import FakeDriver

        def make(backend: Backend) -> Driver:
            driver: Driver = FakeDriver(backend)
            return driver

        return make

    @pytest.fixture
    def timeouts(self) -> Timeouts:
        return Timeouts(settle=5.0, poll=0.001, quiet=0.0)


FAKE_RUNTIME = TEST_RUNTIME_OBJECT
