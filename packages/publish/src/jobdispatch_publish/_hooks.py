"""Registers the built-in credential sources with the core's plugin manager.

Listed under the ``jobdispatch`` entry-point group as ``publish``. Importing it imports none
of the sources: each is named by string and imported when first asked for (botocore and hvac
later still, when a source first fetches credentials).
"""

from __future__ import annotations

from jobdispatch.plugins import Registration, registers

jobdispatch_register_credential_sources = registers(
    Registration(
        "aws",
        "jobdispatch_publish.credentials.aws:AwsSource",
        schema="jobdispatch_publish.credentials.aws:SCHEMA",
        summary="botocore's default chain: variables, profiles, web identity, process, metadata",
    ),
    Registration(
        "vault",
        "jobdispatch_publish.credentials.vault:VaultSource",
        schema="jobdispatch_publish.credentials.vault:SCHEMA",
        summary="a Vault KV v2 secret, after a Kubernetes or AppRole login",
    ),
)
