"""Plugins are found through entry points, registered once, and configured strictly."""

from __future__ import annotations

import sys
import textwrap
from importlib import metadata

import jobdispatch
import pytest
from jobdispatch import AlreadyRegistered, NotFound, ValidationError, plugins


@pytest.fixture
def distribution(tmp_path, monkeypatch):
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


def test_a_plugin_declared_by_an_installed_distribution_is_discovered(distribution):
    distribution(
        "jdtest-fake",
        "jdtest_fake",
        """
        from jobdispatch.hookspecs import hookimpl

        @hookimpl
        def jobdispatch_register_adapters(registry):
            registry.add("fake", lambda config, token: ("fake", config), summary="a fake",
                         schema={"type": "object", "properties": {"depth": {"type": "integer"}}})
    """,
    )
    assert any(ep.name == "jdtest-fake" for ep in metadata.entry_points(group="jobdispatch"))
    loaded = plugins.load()
    entry = loaded.registry("adapter").get("fake")
    assert entry.summary == "a fake" and "jdtest-fake 1.0" in entry.provider
    assert "memory" in loaded.registry("adapter")


def test_a_second_registration_of_a_name_is_refused_and_the_first_stays(distribution):
    distribution(
        "jdtest-thief",
        "jdtest_thief",
        """
        from jobdispatch.hookspecs import hookimpl

        @hookimpl
        def jobdispatch_register_adapters(registry):
            registry.add("memory", lambda config, token: "stolen")
    """,
    )
    loaded = plugins.load()
    entry = loaded.registry("adapter").get("memory")
    assert entry.provider == "jobdispatch (built-in)"
    failure = next(f for f in loaded.failures if f.plugin == "jdtest-thief")
    assert "already registered" in failure.error
    registry = plugins.Registry("adapter")
    registry.add("x", lambda: 1)
    with pytest.raises(AlreadyRegistered):
        registry.add("x", lambda: 2)
    assert registry.get("x").factory() == 1


def test_a_plugin_that_fails_to_import_is_recorded_and_the_rest_load(distribution):
    distribution("jdtest-broken", "jdtest_broken", "raise ImportError('needs libfoo')\n")
    loaded = plugins.load()
    failure = next(f for f in loaded.failures if f.plugin == "jdtest-broken")
    assert "needs libfoo" in failure.error and "jdtest-broken 1.0" in failure.distribution
    assert "memory" in loaded.registry("adapter")


def test_blocked_plugins_are_not_loaded(distribution):
    distribution(
        "jdtest-fake2",
        "jdtest_fake2",
        """
        from jobdispatch.hookspecs import hookimpl

        @hookimpl
        def jobdispatch_register_adapters(registry):
            registry.add("fake2", lambda config, token: None)
    """,
    )
    loaded = plugins.load(env={"JOBDISPATCH_DISABLED_PLUGINS": "jdtest-fake2"})
    assert "fake2" not in loaded.registry("adapter")


def test_unknown_adapters_and_config_keys_are_refused_with_their_path():
    with pytest.raises(NotFound, match="no adapter named 'nope'"):
        jobdispatch.new_backend("nope", {})
    with pytest.raises(ValidationError) as err:
        jobdispatch.new_backend("memory", {"shape": "slurm", "colour": "blue"})
    assert err.value.paths == ["colour"]
    backend = jobdispatch.new_backend("memory", {"shape": "kubeflow"})
    assert backend.name == "memory"


def test_nested_unknown_keys_are_refused_at_every_level():
    schema = {
        "type": "object",
        "properties": {"transport": {"type": "object", "properties": {"host": {"type": "string"}}}},
    }
    with pytest.raises(ValidationError) as err:
        jobdispatch.config.validate_config(
            {"transport": {"host": "h", "prot": 22}}, schema, subject="x"
        )
    assert err.value.paths == ["transport.prot"]


def test_the_token_callable_reaches_the_adapter_uncalled(distribution):
    distribution(
        "jdtest-tok",
        "jdtest_tok",
        """
        from jobdispatch.hookspecs import hookimpl

        @hookimpl
        def jobdispatch_register_adapters(registry):
            registry.add("tok", lambda config, token: token)
    """,
    )
    calls = []

    def token():
        calls.append(1)
        return "secret"

    plugins.reset_default()
    try:
        got = jobdispatch.new_backend("tok", {}, token=token)
    finally:
        plugins.reset_default()
    assert got is token and calls == []
