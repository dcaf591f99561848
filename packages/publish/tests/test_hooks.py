"""The credential sources reach the core's plugin manager through the entry point."""

from __future__ import annotations

import pytest
from jobdispatch import plugins
from jobdispatch.errors import AlreadyRegistered
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
    import subprocess
    import sys

    code = (
        "import sys, jobdispatch_publish._hooks\n"
        "print(sorted(m for m in ('boto3', 'botocore', 'hvac', 'requests') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
