"""Notice sinks that speak HTTP: a generic signed webhook, Slack's incoming webhook, and
PagerDuty's Events API v2.

Each is checked when made (the URL's scheme and host, the secret file readable and not empty),
so a bad configuration is an error naming its key before a supervisor serves anything, never a
failure at the first notice. Secrets (the webhook's signing key, Slack's URL, PagerDuty's
routing key) are read from files and kept out of every message, log line and ``repr``: what a
sink ever prints of its URL is its scheme and host.

Every request has a connect and a read timeout and no retries of urllib3's own: a failed send
raises, and the outbox tries it again later with backoff (:mod:`jobdispatch_supervise.outbox`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import ssl
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypedDict, Unpack
from urllib.parse import urlsplit

import urllib3
from jobdispatch.errors import Invalid
from jobdispatch.types import NoticeKind

from jobdispatch_supervise.__about__ import __version__
from jobdispatch_supervise.messages import NoticeMessage, Probe

__all__ = [
    "PAGERDUTY_EVENTS_URL",
    "SIGNATURE_HEADER",
    "DeliveryFailed",
    "PagerDutySink",
    "SinkOptions",
    "SlackSink",
    "WebhookSink",
    "read_secret",
    "sign",
]

#: The header carrying ``sha256=HEX``: HMAC-SHA256 of the exact body bytes under the secret.
SIGNATURE_HEADER = "X-Jobdispatch-Signature"
PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
#: The longest time a probe waits for a connection.
PROBE_TIMEOUT = 5.0
USER_AGENT = f"jobdispatch/{__version__}"


class _RedactSecretUrls(logging.Filter):
    """urllib3 logs each request's path at DEBUG; a URL that is a secret (Slack's, a dead-man
    monitor's: their path is the token) must not reach a log that way either."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.paths:
            text = record.getMessage()
            hidden = text
            for path in self.paths:
                hidden = hidden.replace(path, "/<secret>")
            if hidden != text:
                record.msg, record.args = hidden, ()
        return True


_REDACT = _RedactSecretUrls()
logging.getLogger("urllib3.connectionpool").addFilter(_REDACT)


def keep_secret(url: str) -> None:
    """Keep ``url``'s path out of urllib3's log lines (it is a token)."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    if len(path) > 1:
        _REDACT.paths.add(path)


class DeliveryFailed(RuntimeError):
    """A receiver did not take a notice: refused, unreachable, an error status, too slow."""


def read_secret(path: str | Path, key: str) -> str:
    """The secret in file ``path`` (surrounding whitespace stripped), named by config key
    ``key`` in any error; the secret itself is never part of one."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        msg = f"{key}: {p} does not exist"
        raise Invalid(msg) from None
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{key}: {p} cannot be read ({type(exc).__name__}: {getattr(exc, 'strerror', '')})"
        raise Invalid(msg) from None
    if not text:
        msg = f"{key}: {p} is empty"
        raise Invalid(msg)
    return text


def sign(secret: str, body: bytes) -> str:
    """The signature header's value for ``body``: ``sha256=`` and the HMAC's hex digest."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def checked_url(url: Any, key: str) -> str:
    """``url`` if it is an http(s) URL with a host; Invalid naming ``key`` otherwise (the URL
    itself is not repeated: it may hold a token)."""
    if not isinstance(url, str) or not url:
        msg = f"{key}: must be an http:// or https:// URL"
        raise Invalid(msg)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        msg = f"{key}: must be an http:// or https:// URL, not {parts.scheme or 'a bare'}:"
        raise Invalid(msg)
    if not parts.hostname:
        msg = f"{key}: the URL names no host"
        raise Invalid(msg)
    try:
        parts.port  # noqa: B018  # a port that is not a number raises here
    except ValueError:
        msg = f"{key}: the URL's port is not a number"
        raise Invalid(msg) from None
    return url


def printable_url(url: str) -> str:
    """What may be printed of a URL: its scheme and host (and port)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def checked_timeout(value: float, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 300:
        msg = f"{key}: must be a number of seconds in (0, 300], got {value!r}"
        raise Invalid(msg)
    return float(value)


def _kinds(values: Iterable[str | NoticeKind], key: str) -> frozenset[NoticeKind]:
    out = set()
    for v in values:
        try:
            out.add(v if isinstance(v, NoticeKind) else NoticeKind(v))
        except ValueError:
            known = ", ".join(str(k) for k in NoticeKind)
            msg = f"{key}: {v!r} is not a notice kind (kinds: {known})"
            raise Invalid(msg) from None
    return frozenset(out)


def probe_url(url: str, timeout: float) -> Probe:
    """Whether ``url``'s host takes a connection (and, for https, completes a verified TLS
    handshake) within ``timeout``: nothing is sent."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    where = printable_url(url)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if parts.scheme == "https":
                context = ssl.create_default_context()
                with context.wrap_socket(sock, server_hostname=host):
                    pass
    except ssl.SSLError as exc:
        return Probe(True, False, f"{where}: TLS refused ({exc.reason or exc})")
    except OSError as exc:
        return Probe(True, False, f"{where}: not reachable ({exc.strerror or exc})")
    return Probe(True, True, f"{where} reachable")


class SinkOptions(TypedDict, total=False):
    """What every HTTP sink takes besides its own settings, each left out taking the sink's
    default: its ``name`` (default: its kind), its ``timeout`` in seconds (10), the notice kinds
    it is sent (``events``, from the configuration's ``notify``; default: its kind's), its
    ``rate_per_minute`` (60; Slack's 20) and its ``cooldown`` in seconds (60)."""

    name: str
    timeout: float
    events: Iterable[str | NoticeKind]
    rate_per_minute: float
    cooldown: float


def _where(kind: str, options: SinkOptions) -> str:
    """Where a sink's settings are in the configuration, for its errors."""
    return f"escalations.{options.get('name', kind)}"


class _HttpSink:
    """What the three share: the common settings checked once, one connection pool, timeouts,
    and the POST that raises unless the receiver answers 2xx."""

    kind = "http"
    #: The notices a minute a sink of this kind sends at most, unless configured.
    default_rate = 60.0

    def __init__(self, url: str | None, *, url_key: str, **options: Unpack[SinkOptions]) -> None:
        self.name = options.get("name", self.kind)
        self.where = where = _where(self.kind, options)
        self.url = checked_url(url, f"{where}.{url_key}")
        self.timeout = checked_timeout(options.get("timeout", 10.0), f"{where}.timeout")
        self.events = _kinds(options.get("events", ()), f"{where}.notify")
        self.rate_per_minute = float(options.get("rate_per_minute", self.default_rate))
        self.cooldown = float(options.get("cooldown", 60.0))
        self._pool = urllib3.PoolManager(
            retries=False,
            timeout=urllib3.Timeout(connect=min(self.timeout, PROBE_TIMEOUT), read=self.timeout),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, url={printable_url(self.url)!r})"

    def _post(self, body: bytes, headers: Mapping[str, str], url: str | None = None) -> bytes:
        target = url or self.url
        try:
            response = self._pool.request(
                "POST",
                target,
                body=body,
                headers={"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers},
            )
        except urllib3.exceptions.HTTPError as exc:
            # The exception's text may quote the URL (and its token): only its kind is told.
            reason = getattr(exc, "reason", None)
            detail = type(reason or exc).__name__
            msg = f"sink {self.name}: {printable_url(target)} did not answer ({detail})"
            raise DeliveryFailed(msg) from None
        if not 200 <= response.status < 300:
            msg = f"sink {self.name}: {printable_url(target)} answered HTTP {response.status}"
            raise DeliveryFailed(msg)
        return bytes(response.data)

    def probe(self) -> Probe:
        return probe_url(self.url, min(self.timeout, PROBE_TIMEOUT))


class WebhookSink(_HttpSink):
    """POSTs each notice's JSON body (``jobdispatch.notice/1``) to a URL, signed with
    HMAC-SHA256 under a secret read from a file (``X-Jobdispatch-Signature: sha256=HEX``)."""

    kind = "webhook"

    def __init__(
        self, url: str, *, secret_file: str | None = None, **options: Unpack[SinkOptions]
    ) -> None:
        super().__init__(url, url_key="url", **options)
        self.secret_file = secret_file
        self._secret = (
            read_secret(secret_file, f"{self.where}.secret_file")
            if secret_file is not None
            else None
        )

    def send(self, message: NoticeMessage) -> None:
        body = message.encoded()
        headers = {
            "X-Jobdispatch-Key": message.notice.key,
            "X-Jobdispatch-Kind": str(message.notice.kind),
            "X-Jobdispatch-Schema": "jobdispatch.notice/1",
        }
        if message.sender:
            headers["X-Jobdispatch-Sender"] = message.sender
        if self._secret is not None:
            headers[SIGNATURE_HEADER] = sign(self._secret, body)
        self._post(body, headers)

    def probe(self) -> Probe:
        found = super().probe()
        signed = f"signed with the secret in {self.secret_file}" if self.secret_file else "unsigned"
        return Probe(found.configured, found.reachable, f"{found.detail}; {signed}")


class SlackSink(_HttpSink):
    """Posts each notice's line to a Slack incoming webhook. The webhook's URL is a secret (it
    is all it takes to post), so it is best given as ``url_file``."""

    kind = "slack"
    default_rate = 20.0

    def __init__(
        self, url: str | None = None, *, url_file: str | None = None, **options: Unpack[SinkOptions]
    ) -> None:
        where = _where(self.kind, options)
        if (url is None) == (url_file is None):
            msg = f"{where}: give exactly one of url and url_file"
            raise Invalid(msg)
        key = "url"
        if url_file is not None:
            url = read_secret(url_file, f"{where}.url_file")
            key = "url_file"
        keep_secret(url or "")
        super().__init__(url, url_key=key, **options)

    @staticmethod
    def payload(message: NoticeMessage) -> dict[str, Any]:
        """The incoming-webhook payload: the line, with the dashboard link when one is set."""
        text = message.text
        if message.link:
            text += f" <{message.link}|open>"
        mark = ":rotating_light: " if message.notice.alert else ""
        return {"text": mark + text}

    def send(self, message: NoticeMessage) -> None:
        self._post(json.dumps(self.payload(message)).encode(), {})


class PagerDutySink(_HttpSink):
    """Pages through PagerDuty's Events API v2: an alert notice (an end with a problem cause,
    an escalation, a stall) triggers an incident whose dedup key is the notice's key; a notice
    that resolves alerts (a recovery, the settling of a job that did not fail) resolves each of
    them by that key. Other notices send nothing (there is nothing to page)."""

    kind = "pagerduty"

    def __init__(
        self,
        *,
        routing_key_file: str,
        url: str = PAGERDUTY_EVENTS_URL,
        severity: str = "error",
        **options: Unpack[SinkOptions],
    ) -> None:
        super().__init__(url, url_key="url", **options)
        if severity not in SEVERITIES:
            msg = f"{self.where}.severity: must be one of {', '.join(SEVERITIES)}, got {severity!r}"
            raise Invalid(msg)
        self.severity = severity
        self.routing_key_file = routing_key_file
        self._key = read_secret(routing_key_file, f"{self.where}.routing_key_file")

    def events_for(self, message: NoticeMessage) -> list[dict[str, Any]]:
        """The Events API v2 bodies one notice sends: resolves first, then its own trigger."""
        n = message.notice
        out: list[dict[str, Any]] = [
            {"routing_key": self._key, "event_action": "resolve", "dedup_key": f"{n.job}/{i}"}
            for i in n.resolves
        ]
        if n.alert:
            trigger: dict[str, Any] = {
                "routing_key": self._key,
                "event_action": "trigger",
                "dedup_key": n.key,
                "payload": {
                    "summary": message.text[:1024],
                    "source": message.cluster,
                    "severity": self.severity,
                    "timestamp": n.at.isoformat(),
                    "component": n.job,
                    "group": n.name or n.job,
                    "class": str(n.kind),
                    "custom_details": message.body(),
                },
            }
            if message.link:
                trigger["links"] = [{"href": message.link, "text": "job"}]
            out.append(trigger)
        return out

    def send(self, message: NoticeMessage) -> None:
        for event in self.events_for(message):
            self._post(json.dumps(event).encode(), {})

    def probe(self) -> Probe:
        found = super().probe()
        detail = f"{found.detail}; routing key from {self.routing_key_file}"
        return Probe(found.configured, found.reachable, detail)


SEVERITIES = ("critical", "error", "warning", "info")

#: Keys every sink's table may hold besides its own (read by the sink or its outbox lane).
COMMON_PROPERTIES: dict[str, Any] = {
    "notify": {
        "type": "array",
        "items": {"enum": [str(k) for k in NoticeKind]},
        "description": "the lifecycle notices this sink gets of every job, besides the "
        "escalations and what each job asks for (docs/reference/notices.md)",
    },
    "timeout": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 300,
        "description": "seconds a send may take (connect and read); default 10",
    },
    "rate_per_minute": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 6000,
        "description": "the most sends a minute (a token bucket); default 60, Slack 20",
    },
    "cooldown": {
        "type": "number",
        "minimum": 0,
        "maximum": 86400,
        "description": "seconds the sink rests after 3 failed sends in a row; default 60",
    },
    "name": {"type": "string", "minLength": 1},
}

WEBHOOK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {
            "type": "string",
            "minLength": 1,
            "description": "where each notice's JSON body is POSTed (http or https)",
        },
        "secret_file": {
            "type": "string",
            "minLength": 1,
            "description": "a file holding the HMAC-SHA256 key the X-Jobdispatch-Signature "
            "header is made with; without it, bodies go unsigned",
        },
        **COMMON_PROPERTIES,
    },
    "required": ["url"],
    "additionalProperties": False,
}
SLACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {
            "type": "string",
            "minLength": 1,
            "description": "the incoming webhook's URL (a secret: prefer url_file)",
        },
        "url_file": {
            "type": "string",
            "minLength": 1,
            "description": "a file holding the incoming webhook's URL",
        },
        **COMMON_PROPERTIES,
    },
    "additionalProperties": False,
}
PAGERDUTY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "routing_key_file": {
            "type": "string",
            "minLength": 1,
            "description": "a file holding the Events API v2 integration's routing key",
        },
        "url": {
            "type": "string",
            "minLength": 1,
            "description": f"the Events API endpoint; default {PAGERDUTY_EVENTS_URL}",
        },
        "severity": {
            "enum": list(SEVERITIES),
            "description": "the severity of the incidents triggered; default error",
        },
        **COMMON_PROPERTIES,
    },
    "required": ["routing_key_file"],
    "additionalProperties": False,
}
