"""The credential sources reach the core's plugin manager through the entry point."""

from __future__ import annotations

import pytest
from jobdispatch import plugins
from jobdispatch.errors import AlreadyRegistered
from jobdispatch.testing import imported_with
from jobdispatch_publish import _hooks


def test_the_entry_point_registers_every_source() -> None:
    loaded = plugins.load()
    registry = loaded.registry("credential-source")
    assert {"aws", "vault"} <= set(registry.names())
    assert all(registry.get(n).schema for n in ("aws", "vault"))
    assert registry.get("vault").provider.startswith("jobdispatch-publish")
    assert not [f for f in loaded.failures if "publish" in f.plugin]


def test_a_second_registration_of_a_name_is_refused() -> None:
    registry = plugins.Registry("credential-source")
    _hooks.jobdispatch_register_credential_sources(registry)
    with pytest.raises(AlreadyRegistered):
        _hooks.jobdispatch_register_credential_sources(registry)


def test_the_hooks_module_is_cheap_to_import() -> None:
    heavy = ("boto3", "botocore", "hvac", "requests")
    assert imported_with("jobdispatch_publish._hooks", heavy) == []
