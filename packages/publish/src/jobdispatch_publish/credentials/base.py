"""Credentials and the contract every credential source keeps.

A source answers :meth:`CredentialSource.credentials` with :class:`Credentials` or ``None`` (it has
none to give, and :attr:`why_none` says why, for the message listing what was tried). A source
that is configured but broken (Vault refused the login, a file is half-filled) raises instead:
falling through to the next source would hide the mistake and sign with credentials nobody meant.

Secrets never reach a message or a log line: :class:`Credentials` hides them from ``repr``, and
sources build their messages from names and paths only, passing any text that came from a
server through :func:`redact` first.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from jobdispatch_publish.proxy import ProxyRule

__all__ = ["CredentialSource", "Credentials", "redact"]


def _mask(value: str) -> str:
    return f"{value[:4]}…" if len(value) > 8 else "…"


@attrs.frozen(repr=False)
class Credentials:
    """An access key, its secret, an optional session token and when they expire."""

    access_key: str
    secret_key: str = attrs.field(repr=False)
    session_token: str | None = attrs.field(default=None, repr=False)
    expires: dt.datetime | None = None
    source: str = ""

    def __repr__(self) -> str:
        until = f", expires {self.expires.isoformat()}" if self.expires else ""
        return f"Credentials({_mask(self.access_key)} from {self.source or 'unknown'}{until})"

    __str__ = __repr__

    def secrets(self) -> tuple[str, ...]:
        """The values that must never be shown (for :func:`redact`)."""
        return tuple(v for v in (self.secret_key, self.session_token) if v)

    def as_metadata(self) -> dict[str, Any]:
        """The shape botocore's refreshable credentials are built from."""
        expires = self.expires or (dt.datetime.now(dt.UTC) + dt.timedelta(hours=12))
        return {
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "token": self.session_token,
            "expiry_time": expires.isoformat(),
        }


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret in ``secrets`` replaced by ``***``."""
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return text


@runtime_checkable
class CredentialSource(Protocol):
    """What a credential-source factory returns."""

    #: Why the last call found nothing (for the error that lists every source tried).
    why_none: str

    def credentials(self) -> Credentials | None: ...


class Bindable(Protocol):
    """A source may take, before its first call, the one proxy rule every HTTP client follows and
    the environment the helper was given (which tests and embedders pass explicitly, rather than
    the process's). Sources without ``bind`` read ``os.environ`` and make no HTTP requests."""

    def bind(self, *, proxy: ProxyRule, env: Mapping[str, str]) -> None: ...
