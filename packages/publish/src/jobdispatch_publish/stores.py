"""Opening the store a root names, with the configuration's client settings and credentials."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from jobdispatch_publish.config import S3Settings, Settings
from jobdispatch_publish.credentials.base import Credentials
from jobdispatch_publish.credentials.chain import StaticChain, build_chain
from jobdispatch_publish.extras import require
from jobdispatch_publish.posix import PosixStore
from jobdispatch_publish.proxy import ProxyRule
from jobdispatch_publish.root import PosixRoot, Root, S3Root
from jobdispatch_publish.store import Store

__all__ = ["open_store", "wrong_secret_store"]


def _s3_settings(
    settings: Settings, env: Mapping[str, str], max_bandwidth: int | None
) -> S3Settings:
    s3 = settings.s3
    endpoint = s3.endpoint_url or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    region = s3.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    bandwidth = max_bandwidth if max_bandwidth is not None else s3.max_bandwidth
    return attrs.evolve(s3, endpoint_url=endpoint, region=region, max_bandwidth=bandwidth)


def open_store(
    root: Root, settings: Settings, env: Mapping[str, str], *, max_bandwidth: int | None = None
) -> Store:
    """A POSIX store, or an S3 store whose client is built (and whose credentials are resolved)
    now, so a missing credential is reported before any work starts."""
    if isinstance(root, PosixRoot):
        return PosixStore(root.path, max_bandwidth=max_bandwidth)
    require("boto3", feature=f"the S3 checkpoint root {root}", extra="s3")
    from jobdispatch_publish.s3 import S3Store
    from jobdispatch_publish.s3client import make_client

    s3 = _s3_settings(settings, env, max_bandwidth)
    proxy = ProxyRule.from_config(settings.proxy, env)
    chain = build_chain(settings.credentials, proxy, env=env)
    chain.resolve()  # fail early, naming every source tried
    return S3Store(root, make_client(s3, chain, proxy), s3)


def wrong_secret_store(
    root: S3Root, settings: Settings, env: Mapping[str, str]
) -> Callable[[], Store]:
    """For the probe: the same store, signed with the right access key and a wrong secret."""

    def build() -> Store:
        from jobdispatch_publish.s3 import S3Store
        from jobdispatch_publish.s3client import make_client

        s3 = _s3_settings(settings, env, None)
        proxy = ProxyRule.from_config(settings.proxy, env)
        real = build_chain(settings.credentials, proxy, env=env).resolve()
        wrong = Credentials(
            real.access_key, real.secret_key[::-1] + "x", real.session_token, None, "probe"
        )
        return S3Store(root, make_client(s3, StaticChain(wrong), proxy), s3)

    return build
