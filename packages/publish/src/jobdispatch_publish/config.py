"""The helper's configuration file: S3 client settings, the proxy rule and the credential sources.

Optional: without one, the root comes from the environment and credentials from boto3's usual
places. Given by ``--config`` or ``JOBDISPATCH_PUBLISH_CONFIG``, as JSON or (``.toml``) TOML.
It is validated as a whole before anything is built; unknown keys are refused with their path.
It holds no secrets: sources read those from files, variables or Vault.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.errors import Invalid

from jobdispatch_publish.credentials.chain import DEFAULT_SOURCES
from jobdispatch_publish.validate import check

__all__ = ["ENV_CONFIG", "SCHEMA", "S3Settings", "Settings", "load_settings"]

ENV_CONFIG = "JOBDISPATCH_PUBLISH_CONFIG"
MiB = 1024 * 1024

_S3 = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "endpoint_url": {"type": "string", "pattern": "^https?://"},
        "region": {"type": "string", "minLength": 1},
        "addressing_style": {"enum": ["auto", "path", "virtual"]},
        "verify": {"type": ["boolean", "string"]},
        "multipart_threshold": {"type": "integer", "minimum": 5 * MiB},
        "multipart_chunksize": {"type": "integer", "minimum": 5 * MiB},
        "max_concurrency": {"type": "integer", "minimum": 1, "maximum": 128},
        "max_bandwidth": {"type": "integer", "minimum": 1},
        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 20},
        "connect_timeout": {"type": "number", "exclusiveMinimum": 0},
        "read_timeout": {"type": "number", "exclusiveMinimum": 0},
    },
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "root": {"type": "string", "minLength": 1},
        "s3": _S3,
        "progress": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"interval": {"type": "number", "exclusiveMinimum": 0}},
        },
        "proxy": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "url": {"type": ["string", "null"], "pattern": "^https?://"},
                "no_proxy": {"type": "array", "items": {"type": "string", "minLength": 1}},
            },
        },
        "credentials": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["source"],
                "properties": {"source": {"type": "string", "minLength": 1}},
            },
        },
    },
}


@attrs.frozen
class S3Settings:
    """How the S3 client is built. The transfer defaults are boto3's own."""

    endpoint_url: str | None = None
    region: str | None = None
    addressing_style: str = "auto"
    verify: bool | str = True
    multipart_threshold: int = 8 * MiB
    multipart_chunksize: int = 8 * MiB
    max_concurrency: int = 10
    max_bandwidth: int | None = None
    max_attempts: int = 5
    connect_timeout: float = 10.0
    read_timeout: float = 60.0


@attrs.frozen
class Settings:
    root: str | None = None
    s3: S3Settings = S3Settings()
    proxy: Mapping[str, Any] | None = None
    credentials: Sequence[Mapping[str, Any]] = DEFAULT_SOURCES
    origin: str = "defaults"
    #: Seconds between two progress marks of one execution (``[progress] interval``).
    progress_interval: float | None = None


def parse_settings(doc: Any, *, origin: str) -> Settings:
    check(doc, SCHEMA, subject=origin)
    return Settings(
        root=doc.get("root"),
        s3=S3Settings(**doc.get("s3", {})),
        proxy=doc.get("proxy"),
        credentials=tuple(doc.get("credentials", DEFAULT_SOURCES)),
        origin=origin,
        progress_interval=doc.get("progress", {}).get("interval"),
    )


def load_settings(path: str | None, env: Mapping[str, str]) -> Settings:
    """The settings from ``path`` (the flag), else ``JOBDISPATCH_PUBLISH_CONFIG``, else defaults."""
    where = "--config"
    if path is None:
        path = env.get(ENV_CONFIG) or None
        where = ENV_CONFIG
    if path is None:
        return Settings()
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        msg = f"{where}: configuration file {file} cannot be read ({exc.strerror})"
        raise Invalid(msg) from None
    try:
        if file.suffix == ".toml":
            import tomllib

            doc = tomllib.loads(text)
        else:
            doc = json.loads(text)
    except ValueError as exc:
        # Both parsers name the line and column; neither message quotes the file's content.
        msg = f"configuration file {file} does not parse: {exc}"
        raise Invalid(msg) from None
    return parse_settings(doc, origin=f"configuration file {file}")
