"""Credentials kept in Vault's KV version 2 engine, read after a Kubernetes or AppRole login.

The S3 keys live in one KV v2 secret; ``fields`` says which of its keys hold the access key, the
secret and (optionally) a session token. The login secret itself (the service account's JWT, or
AppRole's secret id) is read from a file or a variable named in the configuration, never written
in it, so a configuration file can be shared and logged.

If ``refresh_after`` is set, the credentials are read again after that many seconds, so keys
rotated in Vault are picked up by a long-running ``watch``.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobdispatch.errors import Invalid, NotFound, Unauthorized, Unreachable

from jobdispatch_publish.credentials.base import Credentials, redact
from jobdispatch_publish.extras import require
from jobdispatch_publish.proxy import ProxyRule

__all__ = ["SCHEMA", "VaultSource"]

_NAME = {"type": "string", "minLength": 1}
_KUBERNETES = {
    "type": "object",
    "additionalProperties": False,
    "required": ["method", "role"],
    "properties": {
        "method": {"const": "kubernetes"},
        "role": _NAME,
        "mount": _NAME,
        "jwt_file": _NAME,
    },
}
_APPROLE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["method", "role_id"],
    "properties": {
        "method": {"const": "approle"},
        "role_id": _NAME,
        "mount": _NAME,
        "secret_id_file": _NAME,
        "secret_id_var": _NAME,
    },
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["url", "path", "auth"],
    "properties": {
        "url": {"type": "string", "pattern": "^https?://"},
        "namespace": _NAME,
        "mount": _NAME,
        "path": _NAME,
        "fields": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"access_key": _NAME, "secret_key": _NAME, "session_token": _NAME},
        },
        "ca_bundle": _NAME,
        "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 300},
        "refresh_after": {"type": "integer", "minimum": 60, "maximum": 31_536_000},
        "auth": {
            "type": "object",
            "required": ["method"],
            "properties": {"method": {"enum": ["kubernetes", "approle"]}},
            # Pick the schema by method, so an unknown key is reported at its own path rather
            # than as "matches none of the alternatives".
            "allOf": [
                {"if": {"properties": {"method": {"const": "kubernetes"}}}, "then": _KUBERNETES},
                {"if": {"properties": {"method": {"const": "approle"}}}, "then": _APPROLE},
            ],
        },
    },
}

DEFAULT_JWT = "/var/run/secrets/kubernetes.io/serviceaccount/token"


class VaultSource:
    """Logs in, reads one KV v2 secret, and maps three of its fields to credentials."""

    def __init__(self, config: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
        self.url: str = config["url"].rstrip("/")
        self.namespace: str | None = config.get("namespace")
        self.mount: str = config.get("mount", "secret")
        self.path: str = config["path"].strip("/")
        fields = config.get("fields", {})
        self.field_access = fields.get("access_key", "access_key_id")
        self.field_secret = fields.get("secret_key", "secret_access_key")
        self.field_token: str | None = fields.get("session_token")
        self.ca_bundle: str | None = config.get("ca_bundle")
        self.timeout = float(config.get("timeout", 10))
        self.refresh_after: int | None = config.get("refresh_after")
        self.auth: Mapping[str, Any] = config["auth"]
        self.env = os.environ if env is None else env
        self.proxy = ProxyRule()
        self.why_none = ""

    def bind(self, *, proxy: ProxyRule, env: Mapping[str, str]) -> None:
        self.proxy = proxy
        self.env = dict(env)

    @property
    def where(self) -> str:
        return f"{self.url} {self.mount}/{self.path}"

    def _login_secret(self) -> tuple[str, dict[str, str]]:
        """The auth method's mount, and the login parameters (which hold a secret)."""
        method = self.auth["method"]
        if method == "kubernetes":
            jwt_file = Path(self.auth.get("jwt_file", DEFAULT_JWT))
            try:
                jwt = jwt_file.read_text().strip()
            except OSError as exc:
                msg = f"vault: the service account token {jwt_file} cannot be read ({exc.strerror})"
                raise Unauthorized(msg) from None
            return self.auth.get("mount", "kubernetes"), {"role": self.auth["role"], "jwt": jwt}
        secret_id = ""
        if "secret_id_file" in self.auth:
            f = Path(self.auth["secret_id_file"])
            try:
                secret_id = f.read_text().strip()
            except OSError as exc:
                msg = f"vault: the AppRole secret id file {f} cannot be read ({exc.strerror})"
                raise Unauthorized(msg) from None
        elif "secret_id_var" in self.auth:
            var = self.auth["secret_id_var"]
            secret_id = self.env.get(var, "")
            if not secret_id:
                msg = f"vault: {var} (the AppRole secret id) is not set"
                raise Unauthorized(msg)
        params = {"role_id": self.auth["role_id"], "secret_id": secret_id}
        return self.auth.get("mount", "approle"), params

    def credentials(self) -> Credentials | None:
        require("hvac", feature="the 'vault' credential source", extra="vault")
        import hvac
        import hvac.exceptions
        import requests

        mount, login = self._login_secret()
        hidden = [login.get("jwt"), login.get("secret_id")]
        session = requests.Session()
        session.trust_env = False  # the proxy rule decides, not requests' own environment lookup
        session.proxies.update(self.proxy.proxies_for(self.url))
        client = hvac.Client(
            url=self.url,
            namespace=self.namespace,
            verify=self.ca_bundle or True,
            timeout=self.timeout,
            session=session,
        )
        step = f"login ({self.auth['method']} at auth/{mount})"
        try:
            if self.auth["method"] == "kubernetes":
                client.auth.kubernetes.login(
                    role=login["role"], jwt=login["jwt"], mount_point=mount
                )
            else:
                client.auth.approle.login(
                    role_id=login["role_id"],
                    secret_id=login["secret_id"] or None,
                    mount_point=mount,
                )
            hidden.append(client.token)
            step = f"reading {self.mount}/{self.path}"
            reply = client.secrets.kv.v2.read_secret_version(
                path=self.path, mount_point=self.mount, raise_on_deleted_version=True
            )
        except hvac.exceptions.InvalidPath:
            msg = f"vault at {self.url}: no secret at {self.mount}/{self.path} ({step})"
            raise NotFound(msg) from None
        except (hvac.exceptions.Forbidden, hvac.exceptions.Unauthorized) as exc:
            detail = redact(_errors(exc), hidden)
            msg = f"vault at {self.url} refused the {step}: {detail}"
            raise Unauthorized(msg) from None
        except hvac.exceptions.InvalidRequest as exc:
            detail = redact(_errors(exc), hidden)
            msg = f"vault at {self.url} rejected the {step}: {detail}"
            raise Unauthorized(msg) from None
        except hvac.exceptions.VaultError as exc:
            detail = redact(_errors(exc), hidden)
            msg = f"vault at {self.url} failed the {step}: {type(exc).__name__}: {detail}"
            raise Unreachable(msg) from None
        except requests.RequestException as exc:
            msg = f"vault at {self.url} cannot be reached ({step}): {type(exc).__name__}"
            raise Unreachable(msg) from None
        finally:
            session.close()
        data = reply.get("data", {}).get("data") or {}
        missing = [f for f in (self.field_access, self.field_secret) if not data.get(f)]
        if self.field_token and not data.get(self.field_token):
            missing.append(self.field_token)
        if missing:
            names = ", ".join(map(repr, missing))
            msg = f"vault secret {self.mount}/{self.path} has no field {names}"
            raise Invalid(msg)
        expires = None
        if self.refresh_after:
            expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=self.refresh_after)
        return Credentials(
            str(data[self.field_access]),
            str(data[self.field_secret]),
            str(data[self.field_token]) if self.field_token else None,
            expires,
            f"vault ({self.where})",
        )


def _errors(exc: Exception) -> str:
    """The server's error list, without the request URL hvac appends to its messages."""
    errors = getattr(exc, "errors", None)
    if errors:
        return "; ".join(str(e) for e in errors)
    return type(exc).__name__
