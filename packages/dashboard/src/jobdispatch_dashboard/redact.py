"""Keeping secrets out of every page and log line.

The pages never show a cluster's or a store's settings, only names and labels; but an error
message (a store that did not answer, an adapter that could not start) may quote a URL, and a
configuration may hold a secret inline. So everything the dashboard renders or logs goes
through a :class:`Redactor` last: it blanks the password of any ``scheme://user:password@``
URL, and every value it was told is secret (the values of settings whose names say so).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from markupsafe import Markup

__all__ = ["MASK", "Redactor", "secret_values"]

MASK = "***"
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+(?=@)")
#: Setting names whose values are secret wherever they appear in a configuration.
_SECRET_KEY = re.compile(r"password|passwd|secret|token|credential|api_?key|private", re.I)
#: Settings that name where a secret is, not the secret itself: shown as names, never read.
_REFERENCE = re.compile(r"_(file|env|path)$")


def _secret_key(key: str) -> bool:
    """Whether ``key`` names a secret itself (not a file or a variable holding one)."""
    return _SECRET_KEY.search(key) is not None and _REFERENCE.search(key) is None


def secret_values(settings: Mapping[str, Any]) -> Iterable[str]:
    """The inline secret values of ``settings`` (nested tables too): the string values of
    keys whose names say they are secret, leaving out those that only name a file or an
    environment variable holding one."""
    for key, value in settings.items():
        if isinstance(value, Mapping):
            yield from secret_values(value)
        elif isinstance(value, str) and value and _secret_key(key):
            yield value


class Redactor:
    """Blanks secrets out of text: URL passwords always, and ``secrets`` wherever found."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so that a secret containing another is blanked whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def add(self, secret: str) -> None:
        """Blank ``secret`` too (the dashboard's own token, once read)."""
        self.secrets = sorted({*self.secrets, secret}, key=len, reverse=True)

    def __call__(self, value: object) -> object:
        """``value`` with its secrets blanked if it is text; anything else as it is (a
        Jinja2 ``finalize`` sees every value a template prints)."""
        if isinstance(value, Markup):  # markup we made (the timeline): blanked, kept markup
            return Markup(self.text(str(value)))  # noqa: S704
        return self.text(value) if isinstance(value, str) else value

    def text(self, text: str) -> str:
        text = _URL_PASSWORD.sub(rf"\g<head>{MASK}", text)
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

    def filter(self) -> logging.Filter:
        """A logging filter that blanks secrets out of each record's message."""
        redactor = self

        class _Redacting(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                record.msg = redactor.text(record.getMessage())
                record.args = None
                return True

        return _Redacting()
