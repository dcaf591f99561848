"""The container (ECS/EKS pod identity) and instance (EC2 metadata) credential providers.

botocore's own providers do the protocol work (the token file, IMDSv2's session token, refresh
metadata); this module gives them the one proxy rule instead of their own reading of the
environment, and turns their answers and failures into this package's terms.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from typing import Any

from jobdispatch.errors import Unreachable

from jobdispatch_publish.credentials.base import Credentials, redact
from jobdispatch_publish.proxy import ProxyRule

__all__ = ["CONTAINER_SCHEMA", "INSTANCE_SCHEMA", "ContainerSource", "InstanceSource"]

_TIMING = {
    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 60},
    "attempts": {"type": "integer", "minimum": 1, "maximum": 10},
}
CONTAINER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": dict(_TIMING),
}
INSTANCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {**_TIMING, "endpoint": {"type": "string", "pattern": "^https?://"}},
}

_CONTAINER_HOST = "http://169.254.170.2"


def _from_botocore(creds: Any, source: str) -> Credentials:
    frozen = creds.get_frozen_credentials()
    # botocore keeps the expiry on the refreshable object only, under a private name.
    expiry = getattr(creds, "_expiry_time", None)
    if expiry is not None and expiry.tzinfo is None:
        expiry = expiry.replace(tzinfo=dt.UTC)
    return Credentials(frozen.access_key, frozen.secret_key, frozen.token, expiry, source)


class ContainerSource:
    """``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`` or ``..._FULL_URI`` (with its token file)."""

    def __init__(self, config: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
        self.env = dict(os.environ if env is None else env)
        self.timeout = float(config.get("timeout", 2))
        self.attempts = int(config.get("attempts", 3))
        self.proxy = ProxyRule()
        self.why_none = ""

    def bind(self, *, proxy: ProxyRule, env: Mapping[str, str]) -> None:
        self.proxy = proxy
        self.env = dict(env)

    def _url(self) -> str | None:
        if "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" in self.env:
            return _CONTAINER_HOST + self.env["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"]
        return self.env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")

    def credentials(self) -> Credentials | None:
        url = self._url()
        if url is None:
            self.why_none = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and _FULL_URI are not set"
            return None
        from botocore.credentials import ContainerProvider
        from botocore.httpsession import URLLib3Session
        from botocore.utils import ContainerMetadataFetcher

        session = URLLib3Session(timeout=self.timeout, proxies=self.proxy.proxies_for(url))
        fetcher = ContainerMetadataFetcher(session=session)
        fetcher.RETRY_ATTEMPTS = self.attempts
        fetcher.TIMEOUT_SECONDS = self.timeout
        try:
            creds = ContainerProvider(environ=self.env, fetcher=fetcher).load()
        except Exception as exc:
            token = self.env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
            detail = redact(str(exc), [token])
            kind = type(exc).__name__
            msg = f"container credentials at {url} could not be fetched: {kind}: {detail}"
            raise Unreachable(msg) from None
        if creds is None:
            self.why_none = f"{url} gave no credentials"
            return None
        return _from_botocore(creds, f"container ({url})")


class InstanceSource:
    """The EC2 instance metadata service (IMDSv2 with a fallback to v1, as botocore does)."""

    def __init__(self, config: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
        self.env = dict(os.environ if env is None else env)
        self.timeout = float(config.get("timeout", 1))
        self.attempts = int(config.get("attempts", 1))
        self.endpoint = config.get("endpoint") or self.env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT")
        self.proxy = ProxyRule()
        self.why_none = ""

    def bind(self, *, proxy: ProxyRule, env: Mapping[str, str]) -> None:
        self.proxy = proxy
        self.env = dict(env)

    def credentials(self) -> Credentials | None:
        if self.env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
            self.why_none = "AWS_EC2_METADATA_DISABLED is true"
            return None
        from botocore.credentials import InstanceMetadataProvider
        from botocore.httpsession import URLLib3Session
        from botocore.utils import InstanceMetadataFetcher

        config = {"ec2_metadata_service_endpoint": self.endpoint} if self.endpoint else {}
        fetcher = InstanceMetadataFetcher(
            timeout=self.timeout, num_attempts=self.attempts, env=self.env, config=config
        )
        base = fetcher.get_base_url()
        # botocore builds this session from the environment's proxies; apply the one rule instead.
        fetcher._session = URLLib3Session(
            timeout=self.timeout, proxies=self.proxy.proxies_for(base)
        )
        creds = InstanceMetadataProvider(iam_role_fetcher=fetcher).load()
        if creds is None:
            self.why_none = f"no instance metadata service gave credentials at {base}"
            return None
        return _from_botocore(creds, f"instance ({base})")
