"""Which adapters a cluster may name: a missing first-party one says what to install, and the
core's test-only memory adapter is no cluster."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from jobdispatch import plugins

from .conftest import Invoke, add_to_config


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

    def entry_points(*, group: str) -> metadata.EntryPoints:
        found = real(group=group)
        return metadata.EntryPoints(ep for ep in found if ep.name != "slurm")

    # The plugin machinery's own reference to importlib.metadata is this same module.
    assert plugins.metadata is metadata  # type: ignore[attr-defined]
    monkeypatch.setattr(metadata, "entry_points", entry_points)


@pytest.mark.usefixtures("without_slurm")
def test_a_cluster_of_an_adapter_not_installed_names_the_distribution(
    invoke: Invoke, home: Path
) -> None:
    config = add_to_config(home, '[clusters.hpc]\nadapter = "slurm"\n')
    ran = invoke("--cluster", "hpc", "list")
    assert ran.code == 2
    assert (
        f"{config}:7: clusters.hpc.adapter: adapter 'slurm' is not installed: "
        "pip install jobdispatch-slurm"
    ) in ran.err


@pytest.mark.usefixtures("without_slurm")
def test_a_cluster_of_an_adapter_not_installed_blocks_only_itself(
    invoke: Invoke, home: Path
) -> None:
    """A team's file names a cluster whose adapter this user never installed: the other
    clusters (the built-in local one too) still work, ``clusters`` lists them and warns about
    the one that cannot be used, and only choosing that one fails, with the install hint."""
    config = add_to_config(
        home, '[clusters.hpc]\nadapter = "slurm"\n[clusters.other]\nadapter = "local"\n'
    )
    hint = (
        f"{config}:7: clusters.hpc.adapter: adapter 'slurm' is not installed: "
        "pip install jobdispatch-slurm"
    )
    for cluster in ("local", "other"):
        ran = invoke("--cluster", cluster, "list")
        assert ran.code == 0, ran.err
    listed = invoke("clusters")
    assert listed.code == 0, listed.err
    assert "warning: cluster 'hpc' cannot be used" in listed.err
    assert hint in listed.err
    data = invoke("clusters", "--json").json()
    assert [c["name"] for c in data["clusters"]] == ["local", "other"]
    assert data["unusable"] == [{"name": "hpc", "problems": [hint]}]
    chosen = invoke("--cluster", "hpc", "list")
    assert chosen.code == 2
    assert hint in chosen.err


@pytest.mark.usefixtures("without_slurm")
def test_a_default_cluster_that_cannot_be_used_says_why(invoke: Invoke, home: Path) -> None:
    add_to_config(home, '[clusters.hpc]\nadapter = "slurm"\n')
    config = home / "config" / "jobdispatch" / "config.toml"
    config.write_text('default_cluster = "hpc"\n' + config.read_text())
    ran = invoke("list")
    assert ran.code == 2
    assert "clusters.hpc.adapter: adapter 'slurm' is not installed" in ran.err
    assert invoke("--cluster", "local", "list").code == 0


def test_the_memory_adapter_is_no_cluster(invoke: Invoke, home: Path) -> None:
    config = add_to_config(home, '[clusters.mem]\nadapter = "memory"\n')
    ran = invoke("--cluster", "mem", "list")
    assert ran.code == 2
    assert f"{config}:7: clusters.mem.adapter: adapter 'memory' is an in-process" in ran.err
    assert "memory" not in ran.err.split("(adapters: ")[1]


def test_an_unknown_adapter_lists_only_the_ones_users_may_name(invoke: Invoke, home: Path) -> None:
    add_to_config(home, '[clusters.odd]\nadapter = "nosuch"\n[clusters.bare]\ngrace = 1\n')
    ran = invoke("clusters")
    assert ran.code == 0
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
    add_to_config(home, '[clusters.hpc]\nadapter = "slurm"\n')
    ran = invoke("--cluster", "hpc", "list")
    assert ran.code == 2
    assert "adapter 'slurm' is installed but not loaded: JOBDISPATCH_DISABLED_PLUGINS" in ran.err
