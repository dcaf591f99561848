"""One proxy rule, applied the same way to every HTTP client the helper builds.

boto3, botocore's metadata fetchers and requests (under hvac) each read ``HTTPS_PROXY`` and
``NO_PROXY`` in their own way, or not at all. A job that must reach S3 through a proxy but Vault
directly (or the reverse) would then depend on which library honours what. So the rule is decided
once, from the configuration's ``proxy`` section or else from the environment, and every client
gets the answer of :meth:`ProxyRule.proxies_for` for its own URL, with the libraries' own
environment lookups turned off.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

__all__ = ["METADATA_HOSTS", "ProxyRule"]

#: Link-local credential endpoints (EC2 instance metadata, ECS and EKS container credentials):
#: always reached directly, as a proxy would see (and could not reach) them.
METADATA_HOSTS = (
    "169.254.169.254",
    "169.254.170.2",
    "169.254.170.23",
    "fd00:ec2::254",
    "fd00:ec2::23",
)


def _env(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        for spelled in (name.lower(), name.upper()):
            value = env.get(spelled)
            if value:
                return value
    return None


@attrs.frozen
class ProxyRule:
    """Send requests through ``url``, except to hosts that match ``no_proxy``.

    ``no_proxy`` entries are host names (matching the host and its sub-domains; a leading "."
    is allowed), IP addresses, CIDR networks, or ``*`` for everything.
    """

    url: str | None = None
    no_proxy: tuple[str, ...] = ()
    origin: str = "none"  # "config", "environment" or "none", for messages

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None, env: Mapping[str, str]) -> ProxyRule:
        if section is not None:
            return cls(section.get("url"), tuple(section.get("no_proxy", ())), "config")
        url = _env(env, "https_proxy", "http_proxy", "all_proxy")
        no_proxy = _env(env, "no_proxy") or ""
        entries = tuple(e.strip() for e in no_proxy.split(",") if e.strip())
        return cls(url, entries, "environment" if url else "none")

    def bypasses(self, target: str) -> bool:
        host = (urlsplit(target).hostname or "").lower()
        if host in METADATA_HOSTS:
            return True
        return any(_matches(host, entry) for entry in self.no_proxy)

    def proxies_for(self, target: str) -> dict[str, str]:
        """The proxies mapping for a client talking to ``target`` ({} means go direct)."""
        if not self.url or self.bypasses(target):
            return {}
        return {"http": self.url, "https": self.url}

    def describe(self) -> str:
        if not self.url:
            return "no proxy"
        # A proxy URL may carry a password: show the host only.
        parts = urlsplit(self.url)
        shown = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return (
            f"proxy {shown} (from {self.origin}), bypassed for {', '.join(self.no_proxy) or 'none'}"
        )


def _matches(host: str, entry: str) -> bool:
    entry = entry.lower().strip()
    if entry == "*":
        return True
    try:
        net = ipaddress.ip_network(entry, strict=False)
    except ValueError:
        net = None
    if net is not None:
        try:
            return ipaddress.ip_address(host) in net
        except ValueError:
            return False
    entry = entry.lstrip(".")
    if ":" in entry and not entry.startswith("["):
        entry = entry.split(":", 1)[0]
    return host == entry or host.endswith("." + entry)
