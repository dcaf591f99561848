"""Which adapters a cluster may name: a missing first-party one says what to install, and the
core's test-only memory adapter is no cluster."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from jobdispatch import plugins

from .conftest import Invoke


def _add_cluster(home: Path, table: str) -> Path:
    config = home / "config" / "jobdispatch" / "config.toml"
    config.write_text(config.read_text() + table)
    return config


@pytest.fixture
def fresh_plugins() -> Iterator[None]:
    """The process keeps its loaded plugins; load them again for this test, and after it."""
    plugins.reset_default()
    yield
    plugins.reset_default()


@pytest.fixture
def without_slurm(monkeypatch: pytest.MonkeyPatch, fresh_plugins: None) -> None:
    """As if jobdispatch-slurm were not installed: its entry point is gone."""
    real = metadata.entry_points

    def entry_points(**params: str) -> metadata.EntryPoints:
        found = real(**params)
        return metadata.EntryPoints(ep for ep in found if ep.name != "slurm")

    monkeypatch.setattr(plugins.metadata, "entry_points", entry_points)


@pytest.mark.usefixtures("without_slurm")
def test_a_cluster_of_an_adapter_not_installed_names_the_distribution(
    invoke: Invoke, home: Path
) -> None:
    config = _add_cluster(home, '[clusters.hpc]\nadapter = "slurm"\n')
    ran = invoke("clusters")
    assert ran.code == 2
    assert (
        f"{config}:7: clusters.hpc.adapter: adapter 'slurm' is not installed: "
        "pip install jobdispatch-slurm"
    ) in ran.err


def test_the_memory_adapter_is_no_cluster(invoke: Invoke, home: Path) -> None:
    config = _add_cluster(home, '[clusters.mem]\nadapter = "memory"\n')
    ran = invoke("clusters", "--json")
    assert ran.code == 2
    assert f"{config}:7: clusters.mem.adapter: adapter 'memory' is an in-process" in ran.err
    assert "memory" not in ran.err.split("(adapters: ")[1]


def test_an_unknown_adapter_lists_only_the_ones_users_may_name(invoke: Invoke, home: Path) -> None:
    _add_cluster(home, '[clusters.odd]\nadapter = "nosuch"\n[clusters.bare]\ngrace = 1\n')
    ran = invoke("clusters")
    assert ran.code == 2
    unknown = next(line for line in ran.err.splitlines() if "clusters.odd.adapter" in line)
    assert "no adapter named 'nosuch' (adapters: kubeflow, local" in unknown
    assert "memory" not in unknown
    required = next(line for line in ran.err.splitlines() if "clusters.bare.adapter" in line)
    assert "is required: one of kubeflow, local" in required and "memory" not in required


def test_clusters_lists_no_test_adapter(invoke: Invoke) -> None:
    data = invoke("clusters", "--json").json()
    assert [c["adapter"] for c in data["clusters"]] == ["local"]


def test_an_installed_adapter_left_out_by_the_environment_says_so(
    invoke: Invoke, home: Path, monkeypatch: pytest.MonkeyPatch, fresh_plugins: None
) -> None:
    pytest.importorskip("jobdispatch_slurm")
    monkeypatch.setenv(plugins.BLOCKED_ENV, "slurm")
    _add_cluster(home, '[clusters.hpc]\nadapter = "slurm"\n')
    ran = invoke("clusters")
    assert ran.code == 2
    assert "adapter 'slurm' is installed but not loaded: JOBDISPATCH_DISABLED_PLUGINS" in ran.err
