"""``jobdispatch plugins`` shows the adapter SPI this core speaks, the one each adapter declares,
and refuses an adapter written for another, naming both versions."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.plugins import ADAPTER_SPI

Invoke = Callable[..., Any]


@pytest.fixture
def adapter_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Install, for this test only, a distribution whose adapter declares the SPI version given."""

    def install(spi: str) -> None:
        site = tmp_path / "site"
        site.mkdir()
        (site / "jdtest_future.py").write_text(
            textwrap.dedent(f"""\
                from jobdispatch.hookspecs import hookimpl

                @hookimpl
                def jobdispatch_register_adapters(registry):
                    registry.add("future", lambda config, token: None, spi={spi!r})
                """)
        )
        info = site / "jdtest_future-9.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jdtest-future\nVersion: 9.0\n")
        (info / "entry_points.txt").write_text("[jobdispatch]\njdtest-future = jdtest_future\n")
        monkeypatch.syspath_prepend(str(site))

    yield install
    sys.modules.pop("jdtest_future", None)


def test_each_adapter_shows_its_spi_beside_the_core_s(invoke: Invoke) -> None:
    data = invoke("plugins", "--json").json()
    assert data["adapter_spi"] == ADAPTER_SPI
    assert data["core_version"] == metadata.version("jobdispatch")
    adapters = {e["name"]: e for e in data["registries"]["adapter"]}
    assert adapters["local"]["spi"] == "1.1"
    assert all("spi" not in e for e in data["registries"]["record-store"])
    table = invoke("plugins").out
    assert f"adapter SPI {ADAPTER_SPI}" in table


def test_an_adapter_for_another_spi_is_refused_and_listed(
    invoke: Invoke, adapter_for: Callable[[str], None]
) -> None:
    adapter_for("2.0")
    ran = invoke("plugins", "--json")
    assert ran.code == 0, ran.err
    data = ran.json()
    assert "future" not in {e["name"] for e in data["registries"]["adapter"]}
    (failure,) = [f for f in data["failures"] if f["plugin"] == "jdtest-future"]
    assert "adapter SPI 2.0" in failure["error"]
    assert f"speaks adapter SPI {ADAPTER_SPI}" in failure["error"]
    text = invoke("plugins")
    assert "failed: jdtest-future" in " ".join(text.out.split())
