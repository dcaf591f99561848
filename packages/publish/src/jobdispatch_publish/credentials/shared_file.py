"""Credentials from a shared credentials file (``~/.aws/credentials``) and a profile in it.

Read with the standard library's INI parser rather than botocore's loader, so that this source
costs nothing to import and reads the file (and only the file) the configuration names.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobdispatch.errors import Invalid

from jobdispatch_publish.credentials.base import Credentials
from jobdispatch_publish.proxy import ProxyRule

__all__ = ["SCHEMA", "SharedFileSource"]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "profile": {"type": "string", "minLength": 1},
    },
}


class SharedFileSource:
    """The ``[profile]`` section of the file; a named but missing profile is an error."""

    def __init__(self, config: Mapping[str, Any], env: Mapping[str, str] | None = None) -> None:
        self.config = config
        self._configure(os.environ if env is None else env)
        self.why_none = ""

    def _configure(self, env: Mapping[str, str]) -> None:
        config = self.config
        self.path = Path(
            os.path.expanduser(
                config.get("path") or env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials"
            )
        )
        self.profile_named = "profile" in config or "AWS_PROFILE" in env
        self.profile = config.get("profile") or env.get("AWS_PROFILE") or "default"

    def bind(self, *, proxy: ProxyRule, env: Mapping[str, str]) -> None:
        self._configure(env)

    def credentials(self) -> Credentials | None:
        if not self.path.is_file():
            self.why_none = f"{self.path} does not exist"
            return None
        parser = configparser.RawConfigParser()
        try:
            parser.read(self.path)
        except configparser.Error as exc:
            # The parser's message quotes lines of the file, which may hold secrets: keep the
            # kind of problem and the line number only.
            line = getattr(exc, "lineno", None)
            where = f" at line {line}" if line else ""
            msg = f"{self.path} is not a valid credentials file ({type(exc).__name__}{where})"
            raise Invalid(msg) from None
        if not parser.has_section(self.profile):
            if self.profile_named:
                msg = f"profile {self.profile!r} is not in {self.path}"
                raise Invalid(msg)
            self.why_none = f"{self.path} has no [{self.profile}] profile"
            return None
        section = parser[self.profile]
        access = section.get("aws_access_key_id", "").strip()
        secret = section.get("aws_secret_access_key", "").strip()
        if not access or not secret:
            msg = (
                f"profile {self.profile!r} in {self.path} needs both aws_access_key_id and "
                "aws_secret_access_key"
            )
            raise Invalid(msg)
        token = section.get("aws_session_token", "").strip() or None
        return Credentials(
            access, secret, token, None, f"shared-file ({self.path} [{self.profile}])"
        )
