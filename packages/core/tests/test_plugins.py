"""Plugins are found through entry points, registered once, and configured strictly."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import cast

import jobdispatch
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch import AlreadyRegistered, NotFound, ValidationError, plugins


@pytest.fixture
def distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str, str, str], None]]:
    """A small distribution installed for the test: a module and its dist-info with an entry
    point in the jobdispatch group, found by importlib.metadata as any installed one is."""

    def install(name: str, module: str, body: str) -> None:
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(body))
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[jobdispatch]\n{name} = {module}\n")

    monkeypatch.syspath_prepend(str(tmp_path))
    yield install
    for mod in [m for m in sys.modules if m.startswith("jdtest_")]:
        del sys.modules[mod]


def test_a_plugin_declared_by_an_installed_distribution_is_discovered(
    distribution: Callable[[str, str, str], None],
) -> None:
    distribution(
        "jdtest-fake",
        "jdtest_fake",
        """
        from jobdispatch.hookspecs import hookimpl

        @hookimpl
        def jobdispatch_register_adapters(registry):
            registry.add("fake", lambda config, token: ("fake", config), summary="a fake",
                         spi="1.0",
                         schema={"type": "object", "properties": {"depth": {"type": "integer"}}})
    """,
    )
    assert any(ep.name == "jdtest-fake" for ep in metadata.entry_points(group="jobdispatch"))
    loaded = plugins.load()
    entry = loaded.registry("adapter").get("fake")
    assert entry.summary == "a fake" and "jdtest-fake 1.0" in entry.provider
    assert "memory" in loaded.registry("adapter")


def test_a_second_registration_of_a_name_is_refused_and_the_first_stays(
    distribution: Callable[[str, str, str], None],
) -> None:
    distribution(
        "jdtest-thief",
        "jdtest_thief",
        """
        from jobdispatch.hookspecs import hookimpl

        @hookimpl
        def jobdispatch_register_adapters(registry):
            registry.add("memory", lambda config, token: "stolen", spi="1.0")
    """,
    )
    loaded = plugins.load()
    entry = loaded.registry("adapter").get("memory")
    assert entry.provider == "jobdispatch (built-in)"
    failure = next(f for f in loaded.failures if f.plugin == "jdtest-thief")
    assert "already registered" in failure.error
    registry = plugins.Registry("adapter")
    registry.add("x", lambda: 1, spi="1.0")
    with pytest.raises(AlreadyRegistered):
        registry.add("x", lambda: 2, spi="1.0")
    assert registry.get("x").factory() == 1


def test_a_plugin_that_fails_to_import_is_recorded_and_the_rest_load(
    distribution: Callable[[str, str, str], None],
) -> None:
    distribution("jdtest-broken", "jdtest_broken", "raise ImportError('needs libfoo')\n")
    loaded = plugins.load()
    failure = next(f for f in loaded.failures if f.plugin == "jdtest-broken")
    assert "needs libfoo" in failure.error and "jdtest-broken 1.0" in failure.distribution
    assert "memory" in loaded.registry("adapter")


def test_blocked_plugins_are_not_loaded(distribution: Callable[[str, str, str], None]) -> None:
    distribution(
        "jdtest-fake2",
        "jdtest_fake2",
        """
        from jobdispatch.hookspecs import hookimpl

        @hookimpl
        def jobdispatch_register_adapters(registry):
            registry.add("fake2", lambda config, token: None, spi="1.0")
    """,
    )
    loaded = plugins.load(env={"JOBDISPATCH_DISABLED_PLUGINS": "jdtest-fake2"})
    assert "fake2" not in loaded.registry("adapter")


def test_unknown_adapters_and_config_keys_are_refused_with_their_path() -> None:
    with pytest.raises(NotFound, match="no adapter named 'nope'"):
        jobdispatch.new_backend("nope", {})
    with pytest.raises(ValidationError) as err:
        jobdispatch.new_backend("memory", {"shape": "slurm", "colour": "blue"})
    assert err.value.paths == ["colour"]
    backend = jobdispatch.new_backend("memory", {"shape": "kubeflow"})
    assert backend.name == "memory"


def test_nested_unknown_keys_are_refused_at_every_level() -> None:
    schema = {
        "type": "object",
        "properties": {"transport": {"type": "object", "properties": {"host": {"type": "string"}}}},
    }
    with pytest.raises(ValidationError) as err:
        jobdispatch.config.validate_config(
            {"transport": {"host": "h", "prot": 22}}, schema, subject="x"
        )
    assert err.value.paths == ["transport.prot"]


def test_the_token_callable_reaches_the_adapter_uncalled(
    distribution: Callable[[str, str, str], None],
) -> None:
    distribution(
        "jdtest-tok",
        "jdtest_tok",
        """
        from jobdispatch.hookspecs import hookimpl

        @hookimpl
        def jobdispatch_register_adapters(registry):
            registry.add("tok", lambda config, token: token, spi="1.0")
    """,
    )
    calls = []

    def token() -> str:
        calls.append(1)
        return "secret"

    plugins.reset_default()
    try:
        got = jobdispatch.new_backend("tok", {}, token=token)
    finally:
        plugins.reset_default()
    assert cast(object, got) is token and calls == []  # the fake factory hands the token back


def _adapter_declaring(spi: str | None) -> str:
    argument = "" if spi is None else f", spi={spi!r}"
    return f"""
        from jobdispatch.hookspecs import hookimpl

        @hookimpl
        def jobdispatch_register_adapters(registry):
            registry.add("versioned", lambda config, token: None{argument})
    """


@pytest.mark.parametrize(
    ("declared", "says"),
    [
        ("2.0", "was written for adapter SPI 2.0"),
        ("0.9", "was written for adapter SPI 0.9"),
        (f"1.{int(plugins.ADAPTER_SPI.split('.')[1]) + 1}", "was written for adapter SPI 1."),
        (None, "declares no adapter SPI version"),
        ("one", "MAJOR.MINOR"),
    ],
)
def test_an_adapter_for_another_spi_is_refused_naming_both_versions(
    distribution: Callable[[str, str, str], None], declared: str | None, says: str
) -> None:
    distribution("jdtest-versioned", "jdtest_versioned", _adapter_declaring(declared))
    loaded = plugins.load()
    assert "versioned" not in loaded.registry("adapter")
    failure = next(f for f in loaded.failures if f.plugin == "jdtest-versioned")
    assert "IncompatibleAdapter" in failure.error and says in failure.error, failure.error
    assert "jdtest-versioned 1.0" in failure.error
    if declared is not None and declared != "one":
        core = metadata.version("jobdispatch")
        assert f"jobdispatch {core} speaks adapter SPI {plugins.ADAPTER_SPI}" in failure.error
    assert "memory" in loaded.registry("adapter"), "one refused adapter stopped the others"


def test_an_adapter_for_an_older_minor_of_the_same_spi_is_accepted(
    distribution: Callable[[str, str, str], None],
) -> None:
    major = plugins.ADAPTER_SPI.split(".")[0]
    distribution("jdtest-versioned", "jdtest_versioned", _adapter_declaring(f"{major}.0"))
    entry = plugins.load().registry("adapter").get("versioned")
    assert entry.spi == f"{major}.0"
    assert plugins.load().registry("adapter").get("memory").spi == plugins.ADAPTER_SPI


@given(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5), st.integers(0, 5))
def test_spi_compatibility_is_same_major_and_no_newer_minor(
    dmaj: int, dmin: int, smaj: int, smin: int
) -> None:
    fits = plugins.spi_compatible(f"{dmaj}.{dmin}", f"{smaj}.{smin}")
    assert fits == (dmaj == smaj and dmin <= smin)
    # A core always drives adapters written for exactly its own SPI.
    assert plugins.spi_compatible(f"{smaj}.{smin}", f"{smaj}.{smin}")


def test_other_kinds_carry_no_spi_version() -> None:
    registry = plugins.Registry("record-store")
    registry.add("x", lambda config: None)
    assert registry.get("x").spi == ""


def test_a_factory_and_schema_registered_by_string_are_imported_when_first_used(
    distribution: Callable[[str, str, str], None], tmp_path: Path
) -> None:
    """Registration by ``"module:attribute"`` imports nothing; reading the entry's factory or
    schema imports the module then."""
    distribution(
        "jdtest-bystring",
        "jdtest_bystring",
        """
        from jobdispatch.hookspecs import hookimpl

        @hookimpl
        def jobdispatch_register_record_stores(registry):
            registry.add("bystring", "jdtest_bystring_impl:Store.build",
                         schema="jdtest_bystring_impl:SCHEMA")
        """,
    )
    (tmp_path / "jdtest_bystring_impl.py").write_text(
        textwrap.dedent(
            """
            SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}}

            class Store:
                @staticmethod
                def build(config):
                    return ("built", config)
            """
        )
    )
    entry = plugins.load().registry("record-store").get("bystring")
    assert "jdtest_bystring_impl" not in sys.modules
    assert entry.schema == {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert entry.factory({"x": 1}) == ("built", {"x": 1})


@pytest.mark.parametrize("target", ["no_colon", ":attr", "module:"])
def test_a_target_that_is_not_module_colon_attribute_is_refused(target: str) -> None:
    with pytest.raises(ValueError, match="module:attribute"):
        plugins.resolve(target)
