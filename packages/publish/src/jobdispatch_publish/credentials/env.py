"""Credentials from environment variables (``AWS_ACCESS_KEY_ID`` and friends by default)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from jobdispatch.errors import Invalid

from jobdispatch_publish.credentials.base import Credentials
from jobdispatch_publish.proxy import ProxyRule

__all__ = ["SCHEMA", "EnvSource"]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "access_key_var": {"type": "string", "minLength": 1},
        "secret_key_var": {"type": "string", "minLength": 1},
        "session_token_var": {"type": "string", "minLength": 1},
    },
}


class EnvSource:
    """Reads three variables; both key variables or neither must be set."""

    def __init__(self, config: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
        self.access_var = config.get("access_key_var", "AWS_ACCESS_KEY_ID")
        self.secret_var = config.get("secret_key_var", "AWS_SECRET_ACCESS_KEY")
        self.token_var = config.get("session_token_var", "AWS_SESSION_TOKEN")
        self.env = os.environ if env is None else env
        self.why_none = ""

    def bind(self, *, proxy: ProxyRule, env: Mapping[str, str]) -> None:
        self.env = env

    def credentials(self) -> Credentials | None:
        access = self.env.get(self.access_var, "")
        secret = self.env.get(self.secret_var, "")
        if not access and not secret:
            self.why_none = f"{self.access_var} and {self.secret_var} are not set"
            return None
        if not access or not secret:
            missing = self.access_var if not access else self.secret_var
            present = self.secret_var if not access else self.access_var
            msg = f"{present} is set but {missing} is not: set both or neither"
            raise Invalid(msg)
        token = self.env.get(self.token_var) or None
        return Credentials(access, secret, token, None, f"env ({self.access_var})")
