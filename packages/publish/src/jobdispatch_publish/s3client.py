"""Builds the boto3 S3 client: the configured settings, the credential chain, the proxy rule.

botocore's own credential chain is replaced by a resolver holding a single provider that asks
:class:`~jobdispatch_publish.credentials.chain.CredentialChain`, so the configured order is the
only one consulted. Credentials that expire are wrapped in botocore's refreshable credentials,
which ask the chain again shortly before expiry.
"""

from __future__ import annotations

from typing import Any

from jobdispatch_publish.config import S3Settings
from jobdispatch_publish.credentials.chain import CredentialChain
from jobdispatch_publish.proxy import ProxyRule

__all__ = ["make_client", "target_url"]


def target_url(settings: S3Settings) -> str:
    """The URL the client will talk to, for the proxy rule and for messages."""
    if settings.endpoint_url:
        return settings.endpoint_url
    region = settings.region or "us-east-1"
    return f"https://s3.{region}.amazonaws.com"


def _provider(chain: CredentialChain) -> Any:
    from botocore.credentials import CredentialProvider, RefreshableCredentials
    from botocore.credentials import Credentials as BotoCredentials

    class ChainProvider(CredentialProvider):  # type: ignore[misc]
        METHOD = "jobdispatch-chain"
        CANONICAL_NAME = "JobdispatchChain"

        def load(self) -> Any:
            found = chain.resolve()
            if found.expires is None:
                return BotoCredentials(
                    found.access_key, found.secret_key, found.session_token, method=self.METHOD
                )
            return RefreshableCredentials.create_from_metadata(
                found.as_metadata(),
                refresh_using=lambda: chain.resolve().as_metadata(),
                method=self.METHOD,
            )

    return ChainProvider()


def make_client(settings: S3Settings, chain: CredentialChain, proxy: ProxyRule) -> Any:
    """A client that signs with the chain's credentials and goes through the proxy rule."""
    import boto3
    import botocore.session
    from botocore.config import Config
    from botocore.credentials import CredentialResolver

    core = botocore.session.Session()
    core.register_component("credential_provider", CredentialResolver(providers=[_provider(chain)]))
    session = boto3.session.Session(botocore_session=core)
    config = Config(
        signature_version="s3v4",
        s3={"addressing_style": settings.addressing_style},
        # An explicit (possibly empty) mapping: botocore then skips its own environment lookup.
        proxies=proxy.proxies_for(target_url(settings)),
        retries={"max_attempts": settings.max_attempts, "mode": "standard"},
        connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout,
        max_pool_connections=max(10, settings.max_concurrency + 2),
    )
    return session.client(
        "s3",
        endpoint_url=settings.endpoint_url,
        region_name=settings.region or core.get_config_variable("region") or "us-east-1",
        verify=settings.verify,
        config=config,
    )
