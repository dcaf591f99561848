"""The checkpoint root: one folder or one S3 prefix that holds every job's checkpoints.

Given as a path (``/shared/ckpt``, ``file:///shared/ckpt``) or as ``s3://bucket/prefix``, by the
``--root`` flag or ``JOBDISPATCH_CHECKPOINT_ROOT``. It is parsed here without touching the store,
so a typo is reported before any client is built.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.errors import Problem, ValidationError

__all__ = ["ENV_ROOT", "PosixRoot", "Root", "S3Root", "parse_root", "root_from", "root_of"]

ENV_ROOT = "JOBDISPATCH_CHECKPOINT_ROOT"

# S3's bucket naming rules, loosely: radosgw and other implementations accept a little more.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.\-_]{1,62}")


@attrs.frozen
class PosixRoot:
    """A folder on a (usually shared) file system."""

    path: Path

    def __str__(self) -> str:
        return str(self.path)


@attrs.frozen
class S3Root:
    """A bucket and a key prefix (no leading or trailing slash; empty for the bucket's top)."""

    bucket: str
    prefix: str

    def key(self, relative: str) -> str:
        """The full object key of a key relative to the root."""
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


Root = PosixRoot | S3Root


def parse_root(text: str, *, where: str = ENV_ROOT) -> Root:
    """Parse a root; :class:`ValidationError` names ``where`` (the flag or variable) and why."""
    text = text.strip()
    if not text:
        raise ValidationError([Problem(where, "is empty")])
    if text.startswith("s3://"):
        bucket, _, prefix = text.removeprefix("s3://").partition("/")
        prefix = prefix.strip("/")
        if not _BUCKET.fullmatch(bucket):
            raise ValidationError([Problem(where, f"{bucket!r} in {text!r} is not a bucket name")])
        parts = prefix.split("/") if prefix else []
        if any(p in ("", ".", "..") for p in parts):
            raise ValidationError(
                [Problem(where, f"{text!r} has an empty, '.' or '..' segment in its prefix")]
            )
        return S3Root(bucket, prefix)
    if text.startswith("file://"):
        text = text.removeprefix("file://")
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise ValidationError(
            [
                Problem(
                    where, f"scheme {scheme!r} is not supported: use a path or s3://bucket/prefix"
                )
            ]
        )
    return PosixRoot(Path(os.path.abspath(os.path.expanduser(text))))


def root_from(env: Mapping[str, str], flag: str | None = None) -> Root:
    """The root from ``--root`` or, failing that, ``JOBDISPATCH_CHECKPOINT_ROOT``."""
    if flag is not None:
        return parse_root(flag, where="--root")
    if ENV_ROOT not in env:
        raise ValidationError([Problem(ENV_ROOT, "not set (or pass --root)")])
    return parse_root(env[ENV_ROOT])


def root_of(settings: Any, env: Mapping[str, str], flag: str | None = None) -> Root:
    """The root a command uses: ``--root``, else ``JOBDISPATCH_CHECKPOINT_ROOT``, else the
    configuration file's ``root`` (``settings``, a :class:`~jobdispatch_publish.config.Settings`,
    named by its origin when it is wrong)."""
    if flag is None and settings.root and ENV_ROOT not in env:
        return parse_root(settings.root, where=f"{settings.origin}: root")
    return root_from(env, flag)
