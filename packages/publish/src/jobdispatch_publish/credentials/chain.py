"""The ordered list of credential sources, built from configuration through the plugin registry."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from jobdispatch.errors import NotFound, Problem, ValidationError

from jobdispatch_publish.credentials.base import Credentials, CredentialSource
from jobdispatch_publish.errors import MissingCredentials
from jobdispatch_publish.proxy import ProxyRule
from jobdispatch_publish.validate import problems

__all__ = ["DEFAULT_SOURCES", "CredentialChain", "build_chain", "credential_sources"]

log = logging.getLogger(__name__)

#: botocore's default chain, which covers every place AWS credentials are usually found.
DEFAULT_SOURCES: tuple[Mapping[str, Any], ...] = ({"source": "aws"},)

#: Sources of earlier versions, each now one link of botocore's chain in the ``aws`` source.
_REPLACED = ("env", "shared-file", "container", "instance")


class CredentialChain:
    """Tries each source in order; the first that has credentials wins."""

    def __init__(self, sources: Sequence[tuple[str, CredentialSource]]) -> None:
        self.sources = list(sources)

    def resolve(self) -> Credentials:
        tried: list[str] = []
        for name, source in self.sources:
            found = source.credentials()
            if found is not None:
                log.info("credentials: using %r", found)
                return found
            tried.append(f"{name}: {getattr(source, 'why_none', '') or 'none found'}")
        msg = "no credentials found; tried " + ("; ".join(tried) if tried else "no sources")
        raise MissingCredentials(msg)


class StaticChain(CredentialChain):
    """A chain of exactly these credentials (the probe's deliberately wrong secret)."""

    def __init__(self, credentials: Credentials) -> None:
        super().__init__([])
        self.fixed = credentials

    def resolve(self) -> Credentials:
        return self.fixed


def credential_sources() -> Any:
    """The ``credential-source`` registry, loading plugins on first use.

    When this package's own entry point is not visible (run from a source tree that was never
    installed), its hooks are registered directly so the built-in sources are still there.
    """
    from jobdispatch import plugins

    registry = plugins.default().registry("credential-source")
    if "aws" not in registry:
        from jobdispatch_publish import _hooks

        registry = plugins.load(entry_points=False, extra=(_hooks,)).registry("credential-source")
    return registry


def build_chain(
    specs: Sequence[Mapping[str, Any]],
    proxy: ProxyRule,
    *,
    registry: Any = None,
    prefix: str = "credentials",
    env: Mapping[str, str] | None = None,
) -> CredentialChain:
    """Validate every source's section against its schema, then build the sources in order."""
    registry = credential_sources() if registry is None else registry
    found: list[Problem] = []
    planned = []
    for i, spec in enumerate(specs):
        where = f"{prefix}[{i}]"
        name = str(spec.get("source"))
        try:
            entry = registry.get(name)
        except NotFound:
            known = ", ".join(registry.names())
            hint = (
                "; it is now part of 'aws', botocore's default chain" if name in _REPLACED else ""
            )
            found.append(
                Problem(f"{where}.source", f"{name!r} is not a credential source ({known}){hint}")
            )
            continue
        section = {k: v for k, v in spec.items() if k != "source"}
        schema = entry.schema or {"type": "object", "additionalProperties": False}
        found += problems(section, schema, prefix=where)
        planned.append((name, entry, section))
    if found:
        raise ValidationError(found, subject="configuration")
    sources = []
    for name, entry, section in planned:
        source = entry.factory(section)
        if hasattr(source, "bind"):
            source.bind(proxy=proxy, env=os.environ if env is None else env)
        sources.append((name, source))
    return CredentialChain(sources)
