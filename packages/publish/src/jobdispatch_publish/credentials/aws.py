"""The ``aws`` credential source: botocore's default chain, the one every AWS SDK follows.

That chain knows every place a job finds AWS credentials, including the ones a job container
most often has: web identity (``AWS_ROLE_ARN`` with ``AWS_WEB_IDENTITY_TOKEN_FILE``, as EKS's IAM
roles for service accounts set), assume-role profiles (``role_arn`` with ``source_profile`` or
``credential_source``), ``credential_process``, SSO, the container endpoint (ECS, EKS pod
identity) and the instance metadata service, after the environment variables and the shared
files. Writing that chain again would only miss some of it, so this source asks botocore, and adds
two things: the one proxy rule for every HTTP request it makes (the metadata endpoints and STS),
and errors in this package's terms, with secrets kept out of them.

The environment the helper is given (which tests and embedders pass explicitly) is what the
variable-reading links of the chain see: the ``AWS_*`` keys, the container endpoint's variables
and ``AWS_EC2_METADATA_DISABLED``. Files, profiles and their settings are read by botocore's
session from the process's environment, as for any AWS program; ``profile`` in the configuration
picks a profile the way ``AWS_PROFILE`` does.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from typing import Any

from jobdispatch.errors import Invalid, Unauthorized, Unreachable

from jobdispatch_publish.credentials.base import Credentials, redact
from jobdispatch_publish.extras import require
from jobdispatch_publish.proxy import ProxyRule

__all__ = ["SCHEMA", "AwsSource"]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"profile": {"type": "string", "minLength": 1}},
}

#: Providers that fetch from a metadata endpoint: their failures are network failures.
_METADATA_PROVIDERS = ("container-role", "iam-role")


def _from_botocore(creds: Any, source: str) -> Credentials:
    frozen = creds.get_frozen_credentials()
    # botocore keeps the expiry on the refreshable object only, under a private name.
    expiry = getattr(creds, "_expiry_time", None)
    if expiry is not None and expiry.tzinfo is None:
        expiry = expiry.replace(tzinfo=dt.UTC)
    return Credentials(frozen.access_key, frozen.secret_key, frozen.token, expiry, source)


def _hidden(env: Mapping[str, str]) -> list[str | None]:
    """Values from the environment that an error message from botocore might quote."""
    names = ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
    return [v for n in names for v in (env.get(n), os.environ.get(n))]


class AwsSource:
    """Asks botocore's default credential resolver, with the proxy rule applied to it."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.profile: str | None = config.get("profile")
        self.proxy = ProxyRule()
        self.env: Mapping[str, str] = os.environ
        self.why_none = ""

    def bind(self, *, proxy: ProxyRule, env: Mapping[str, str]) -> None:
        self.proxy = proxy
        self.env = env

    def _resolver(self) -> Any:
        import botocore.session
        from botocore.config import Config
        from botocore.credentials import (
            ContainerProvider,
            EnvProvider,
            InstanceMetadataProvider,
            create_credential_resolver,
        )
        from botocore.httpsession import URLLib3Session

        session = botocore.session.Session(profile=self.profile)
        # STS (web identity, assume-role) is reached through a client of this session.
        env = self.env
        sts = env.get("AWS_ENDPOINT_URL_STS") or "https://sts.amazonaws.com"
        session.set_default_client_config(Config(proxies=self.proxy.proxies_for(sts)))
        resolver = create_credential_resolver(session)
        # The metadata fetchers build their HTTP sessions from the environment's proxies; give
        # them the rule's answer instead (the link-local endpoints always go direct).
        # The links that read variables read the environment given, not only the process's.
        for provider in resolver.providers:
            if isinstance(provider, EnvProvider):
                provider.environ = env
            elif isinstance(provider, ContainerProvider):
                provider._environ = env
                fetcher = provider._fetcher
                url = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") or "http://169.254.170.2"
                fetcher._session = URLLib3Session(
                    timeout=fetcher.TIMEOUT_SECONDS, proxies=self.proxy.proxies_for(url)
                )
            elif isinstance(provider, InstanceMetadataProvider):
                fetcher = provider._role_fetcher
                fetcher._disabled = env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true"
                fetcher._session = URLLib3Session(
                    timeout=fetcher._timeout, proxies=self.proxy.proxies_for(fetcher.get_base_url())
                )
        return resolver

    def credentials(self) -> Credentials | None:
        require("botocore", feature="the 'aws' credential source", extra="s3")
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            CredentialRetrievalError,
            MetadataRetrievalError,
            PartialCredentialsError,
            ProfileNotFound,
        )

        try:
            creds = self._resolver().load_credentials()
            # Web identity and assume-role credentials are fetched on first use: use them now.
            found = None if creds is None else _from_botocore(creds, f"aws ({creds.method})")
        except ProfileNotFound as exc:
            msg = f"aws: profile {exc.kwargs.get('profile')!r} is not in the AWS config files"
            raise Invalid(msg) from None
        except PartialCredentialsError as exc:
            raise Invalid(f"aws: {redact(str(exc), _hidden(self.env))}") from None
        except CredentialRetrievalError as exc:
            detail = redact(str(exc), _hidden(self.env))
            if exc.kwargs.get("provider") in _METADATA_PROVIDERS:
                raise Unreachable(f"aws: {detail}") from None
            raise Unauthorized(f"aws: {detail}") from None
        except MetadataRetrievalError as exc:
            raise Unreachable(f"aws: {redact(str(exc), _hidden(self.env))}") from None
        except ClientError as exc:  # STS refused the role or the token
            error = exc.response.get("Error", {})
            msg = f"aws: the role could not be assumed: {error.get('Code')}: {error.get('Message')}"
            raise Unauthorized(redact(msg, _hidden(self.env))) from None
        except BotoCoreError as exc:
            kind = type(exc).__name__
            detail = redact(str(exc), _hidden(self.env))
            if "Endpoint" in kind or "Connect" in kind or "Timeout" in kind:
                raise Unreachable(f"aws: {kind}: {detail}") from None
            raise Invalid(f"aws: {kind}: {detail}") from None
        if creds is None:
            profile = self.profile or os.environ.get("AWS_PROFILE") or "default"
            disabled = self.env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true"
            self.why_none = (
                "botocore's default chain found none (the AWS_* variables, profile "
                f"{profile!r} of the shared credentials and config files with assume-role, "
                "web identity, credential_process and SSO, the container endpoint, and the "
                "instance metadata service"
                + (", disabled by AWS_EC2_METADATA_DISABLED)" if disabled else ")")
            )
            return None
        return found
