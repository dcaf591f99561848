"""The publication entry: the one small record that makes a checkpoint visible.

An entry is written once, create-only, after every byte of the save it names is durable in the
store. It lists each file with its size, its SHA-256 digest (and, on S3, its ETag), so resolve
can tell a complete, untouched checkpoint from one whose data went missing or was rewritten after
publication. Entries written before digests were recorded have none; they still parse, and
resolve checks their sizes (and ETags) only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from jobdispatch_publish.errors import DamagedEntry
from jobdispatch_publish.identity import Identity

__all__ = ["FORMAT", "Entry", "FileRecord"]

FORMAT = 1


@attrs.frozen
class FileRecord:
    """One file of a save: its path relative to the save's folder, its size, its SHA-256 (hex;
    ``None`` in entries of older helpers) and, on S3, its ETag."""

    path: str
    size: int
    etag: str | None = None
    sha256: str | None = None


@attrs.frozen
class Entry:
    """A published checkpoint of ``job`` at ``step``, written by one execution."""

    job: str
    submission: int
    execution: str
    step: int
    data: str  # the data folder, relative to the root, ending in "/"
    files: tuple[FileRecord, ...]
    published_at: str  # ISO 8601, UTC, for people; ordering is by step
    host: str = ""
    pid: int = 0

    @property
    def identity(self) -> Identity:
        return Identity(self.job, self.submission, self.execution)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def describe(self) -> str:
        return f"step {self.step} (submission {self.submission}, execution {self.execution})"

    def to_json(self) -> bytes:
        doc = {
            "format": FORMAT,
            "job": self.job,
            "submission": self.submission,
            "execution": self.execution,
            "step": self.step,
            "data": self.data,
            "files": [
                {
                    "path": f.path,
                    "size": f.size,
                    **({"etag": f.etag} if f.etag else {}),
                    **({"sha256": f.sha256} if f.sha256 else {}),
                }
                for f in self.files
            ],
            "published_at": self.published_at,
            "host": self.host,
            "pid": self.pid,
        }
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes, *, key: str) -> Entry:
        """Parse an entry read from ``key``. Entries are only ever read back from a store, so
        anything malformed is :class:`DamagedEntry` (exit 8), naming the entry and the field."""
        try:
            doc = json.loads(raw)
        except ValueError as exc:  # includes bytes that are not UTF-8
            raise DamagedEntry(key, f"it is not JSON ({exc})") from None
        try:
            top = _object(doc, "the entry")
            if top.get("format") != FORMAT:
                msg = f"format {top.get('format')!r} is not {FORMAT}"
                raise ValueError(msg)
            files = _field(top, "files", "")
            if not isinstance(files, list):
                msg = f"field files is not a list: {files!r}"
                raise TypeError(msg)
            return cls(
                job=str(_field(top, "job", "")),
                submission=_whole(_field(top, "submission", ""), "submission"),
                execution=str(_field(top, "execution", "")),
                step=_whole(_field(top, "step", ""), "step"),
                data=str(_field(top, "data", "")),
                files=tuple(_file(f, f"files[{i}].") for i, f in enumerate(files)),
                published_at=str(_field(top, "published_at", "")),
                host=str(top.get("host", "")),
                pid=_whole(top.get("pid", 0), "pid"),
            )
        except (ValueError, TypeError) as exc:
            raise DamagedEntry(key, str(exc)) from None


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        msg = f"{what} is not a JSON object"
        raise TypeError(msg)
    return value


def _field(doc: Mapping[str, Any], name: str, where: str) -> Any:
    """``doc[name]``, or an error naming the field (``files[2].size``) rather than a bare
    ``KeyError``."""
    if name not in doc:
        msg = f"field {where}{name} is missing"
        raise ValueError(msg)
    return doc[name]


def _whole(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"field {name} is not a whole number: {value!r}"
        raise TypeError(msg)
    return value


def _file(value: Any, where: str) -> FileRecord:
    f = _object(value, where.rstrip("."))
    return FileRecord(
        str(_field(f, "path", where)),
        _whole(_field(f, "size", where), f"{where}size"),
        f.get("etag"),
        _digest(f.get("sha256")),
    )


def _digest(value: Any) -> str | None:
    """A recorded digest: 64 lower-case hex digits, or absent (an entry of an older helper)."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) != 64 or value.strip("0123456789abcdef"):
        msg = f"sha256 {value!r} is not 64 hex digits"
        raise ValueError(msg)
    return value
