"""Registers the built-in credential sources with the core's plugin manager.

Listed under the ``jobdispatch`` entry-point group as ``publish``. Importing it costs the source
modules only (their schemas and classes); botocore and hvac are imported when a source is first
asked for credentials.
"""

from __future__ import annotations

from typing import Any

from jobdispatch.hookspecs import hookimpl
from jobdispatch.plugins import Registry

from jobdispatch_publish.credentials import aws, vault


def _aws(config: dict[str, Any]) -> aws.AwsSource:
    return aws.AwsSource(config)


def _vault(config: dict[str, Any]) -> vault.VaultSource:
    return vault.VaultSource(config)


@hookimpl
def jobdispatch_register_credential_sources(registry: Registry) -> None:
    registry.add(
        "aws",
        _aws,
        schema=aws.SCHEMA,
        summary="botocore's default chain: variables, profiles, web identity, process, metadata",
    )
    registry.add(
        "vault",
        _vault,
        schema=vault.SCHEMA,
        summary="a Vault KV v2 secret, after a Kubernetes or AppRole login",
    )
