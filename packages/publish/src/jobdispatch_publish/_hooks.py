"""Registers the built-in credential sources with the core's plugin manager.

Listed under the ``jobdispatch`` entry-point group as ``publish``. Importing it costs the source
modules only (their schemas and classes); boto3, botocore and hvac are imported when a source
is first asked for credentials.
"""

from __future__ import annotations

from typing import Any

from jobdispatch.hookspecs import hookimpl
from jobdispatch.plugins import Registry

from jobdispatch_publish.credentials import aws, env, shared_file, vault


def _env(config: dict[str, Any]) -> env.EnvSource:
    return env.EnvSource(config)


def _shared_file(config: dict[str, Any]) -> shared_file.SharedFileSource:
    return shared_file.SharedFileSource(config)


def _container(config: dict[str, Any]) -> aws.ContainerSource:
    return aws.ContainerSource(config)


def _instance(config: dict[str, Any]) -> aws.InstanceSource:
    return aws.InstanceSource(config)


def _vault(config: dict[str, Any]) -> vault.VaultSource:
    return vault.VaultSource(config)


@hookimpl
def jobdispatch_register_credential_sources(registry: Registry) -> None:
    registry.add("env", _env, schema=env.SCHEMA, summary="AWS_ACCESS_KEY_ID and friends")
    registry.add(
        "shared-file",
        _shared_file,
        schema=shared_file.SCHEMA,
        summary="a shared credentials file and a profile in it",
    )
    registry.add(
        "container",
        _container,
        schema=aws.CONTAINER_SCHEMA,
        summary="the ECS/EKS container credential endpoint",
    )
    registry.add(
        "instance",
        _instance,
        schema=aws.INSTANCE_SCHEMA,
        summary="the EC2 instance metadata service",
    )
    registry.add(
        "vault",
        _vault,
        schema=vault.SCHEMA,
        summary="a Vault KV v2 secret, after a Kubernetes or AppRole login",
    )
