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
from jobdispatch_conformance.adapter import AdapterSuite, ConfigurationTests, Driver, Timeouts
from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT


class TestKubeflowConfiguration(ConfigurationTests):
    """The registered schema is closed at every level, and new_backend refuses unknown keys:
    no cluster needed."""

    @pytest.fixture
    def adapter_name(self) -> str | None:
        return "kubeflow"

    @pytest.fixture
    def adapter_config(self) -> Mapping[str, Any] | None:
        return {"namespace": "dispatch", "runtime": {"name": "dispatch-torch-test"}}


@pytest.mark.kube
class TestKubeflowContract(AdapterSuite):
    """Every area of the contract on the real control plane."""

    @pytest.fixture
    def backend_factory(self, kube_cluster: None) -> Callable[[], Backend]:
        from jobdispatch_kubeflow import KubeflowBackend
        from jobdispatch_kubeflow.testing import settings

        return lambda: KubeflowBackend(settings())

    @pytest.fixture
    def driver_factory(self) -> Iterator[Callable[[Backend], Driver]]:
        from jobdispatch_kubeflow import KubeflowBackend
        from jobdispatch_kubeflow.testing import KubeDriver

        made: list[KubeDriver] = []

        def make(backend: Backend) -> Driver:
            assert isinstance(backend, KubeflowBackend)
            driver = KubeDriver(backend)
            made.append(driver)
            return driver

        yield make
        for driver in made:
            driver.cleanup()

    @pytest.fixture
    def timeouts(self) -> Timeouts:
        return Timeouts(settle=120.0, poll=0.5, quiet=5.0)

    @pytest.fixture
    def adapter_name(self) -> str | None:
        return "kubeflow"

    @pytest.fixture
    def adapter_config(self) -> Mapping[str, Any] | None:
        return {"namespace": "dispatch", "runtime": {"name": "dispatch-torch-test"}}


class TestKubeflowOverFakeCluster(AdapterSuite):
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

    @pytest.fixture
    def adapter_name(self) -> str | None:
        return "kubeflow"

    @pytest.fixture
    def adapter_config(self) -> Mapping[str, Any] | None:
        return {"namespace": "dispatch", "runtime": {"name": "dispatch-torch-test"}}


FAKE_RUNTIME = TEST_RUNTIME_OBJECT
