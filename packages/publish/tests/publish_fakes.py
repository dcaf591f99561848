"""Fakes of the HTTP services the credential sources talk to, for tests only.

No Vault server can be installed from the registries this project uses, so ``FakeVault`` is a
faithful fake of the few endpoints hvac calls: Kubernetes and AppRole login, and reading a KV v2
secret. ``FakeCredentialEndpoint`` plays the ECS container credential endpoint and the EC2
instance metadata service (IMDSv2). ``FakeSts`` answers STS's AssumeRoleWithWebIdentity, the
call EKS's IAM roles for service accounts make. ``RecordingProxy`` is a plain-HTTP forward proxy
that records which hosts went through it. Each runs on 127.0.0.1 in a thread.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit


class _Server:
    """A threaded HTTP server whose handler calls ``self.handle(method, path, headers, body)``."""

    def __init__(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                outer.requests.append((self.command, self.path, dict(self.headers)))
                status, headers, payload = outer.handle(self.command, self.path, self.headers, body)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Self:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(
        self, method: str, path: str, headers: Any, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        raise NotImplementedError


def _json(status: int, doc: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(doc).encode()


class FakeVault(_Server):
    """A fake of Vault's HTTP API: ``auth/<mount>/login`` for kubernetes and approle, and
    ``<mount>/data/<path>`` of a KV v2 engine. Tokens are checked on reads; errors have Vault's
    shape (``{"errors": [...]}``) and status codes, which hvac maps to its exceptions."""

    def __init__(self) -> None:
        super().__init__()
        self.kubernetes_roles: dict[str, str] = {}  # role -> the JWT it accepts
        self.approles: dict[str, str] = {}  # role_id -> secret_id
        self.secrets: dict[str, dict[str, str]] = {}  # "mount/path" -> data
        self.tokens: set[str] = set()

    def handle(
        self, method: str, path: str, headers: Any, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if not path.startswith("/v1/"):
            return _json(404, {"errors": []})
        route = path[len("/v1/") :]
        if method in ("POST", "PUT") and route.startswith("auth/") and route.endswith("/login"):
            return self._login(route.split("/")[1], json.loads(body or b"{}"))
        token = headers.get("X-Vault-Token")
        if token not in self.tokens:
            return _json(403, {"errors": ["permission denied"]})
        mount, _, rest = route.partition("/data/")
        if method == "GET" and rest:
            data = self.secrets.get(f"{mount}/{rest}")
            if data is None:
                return _json(404, {"errors": []})
            return _json(
                200,
                {
                    "request_id": secrets.token_hex(8),
                    "lease_id": "",
                    "renewable": False,
                    "lease_duration": 0,
                    "data": {
                        "data": data,
                        "metadata": {
                            "created_time": dt.datetime.now(dt.UTC).isoformat(),
                            "custom_metadata": None,
                            "deletion_time": "",
                            "destroyed": False,
                            "version": 1,
                        },
                    },
                    "wrap_info": None,
                    "warnings": None,
                    "auth": None,
                },
            )
        return _json(404, {"errors": []})

    def _login(self, mount: str, params: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if "jwt" in params:
            if self.kubernetes_roles.get(params.get("role", "")) != params["jwt"]:
                return _json(403, {"errors": ["permission denied"]})
        elif "role_id" in params:
            if self.approles.get(params["role_id"]) != params.get("secret_id"):
                return _json(400, {"errors": ["invalid role or secret ID"]})
        else:
            return _json(400, {"errors": ["missing login parameters"]})
        token = "hvs." + secrets.token_hex(12)
        self.tokens.add(token)
        return _json(
            200,
            {
                "auth": {
                    "client_token": token,
                    "accessor": secrets.token_hex(8),
                    "policies": ["default"],
                    "lease_duration": 3600,
                    "renewable": True,
                }
            },
        )


class FakeCredentialEndpoint(_Server):
    """Serves AWS-shaped temporary credentials, as the container endpoint (any path, optional
    Authorization header) and as IMDSv2 (token PUT, role listing, role credentials)."""

    def __init__(
        self, access_key: str, secret_key: str, token: str, *, auth: str | None = None
    ) -> None:
        super().__init__()
        self.access_key, self.secret_key, self.token = access_key, secret_key, token
        self.auth = auth

    def _creds(self) -> dict[str, str]:
        expiry = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        return {
            "Code": "Success",
            "AccessKeyId": self.access_key,
            "SecretAccessKey": self.secret_key,
            "Token": self.token,
            "Expiration": expiry.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    def handle(
        self, method: str, path: str, headers: Any, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if path == "/latest/api/token" and method == "PUT":
            return 200, {}, b"imds-session-token"
        if path == "/latest/meta-data/iam/security-credentials/":
            return 200, {}, b"trainer-role"
        if path == "/latest/meta-data/iam/security-credentials/trainer-role":
            return _json(200, self._creds())
        if path.startswith("/latest/"):
            return 404, {}, b""
        if self.auth is not None and headers.get("Authorization") != self.auth:
            return _json(401, {"message": "unauthorized"})
        return _json(200, self._creds())


class FakeSts(_Server):
    """STS's ``AssumeRoleWithWebIdentity`` (the query protocol, XML replies): gives temporary
    credentials for ``role`` to a caller presenting ``token``, and AccessDenied otherwise."""

    def __init__(self, role: str, token: str, access_key: str, secret_key: str, session: str):
        super().__init__()
        self.role, self.token = role, token
        self.access_key, self.secret_key, self.session = access_key, secret_key, session

    def handle(
        self, method: str, path: str, headers: Any, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        xml = {"Content-Type": "text/xml"}
        if form.get("Action") != "AssumeRoleWithWebIdentity":
            return (
                400,
                xml,
                b"<ErrorResponse><Error><Code>InvalidAction</Code></Error></ErrorResponse>",
            )
        if form.get("RoleArn") != self.role or form.get("WebIdentityToken") != self.token:
            return (
                403,
                xml,
                (
                    b"<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>"
                    b"<Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message>"
                    b"</Error><RequestId>r</RequestId></ErrorResponse>"
                ),
            )
        expiry = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        reply = (
            '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleWithWebIdentityResult><Credentials>"
            f"<AccessKeyId>{self.access_key}</AccessKeyId>"
            f"<SecretAccessKey>{self.secret_key}</SecretAccessKey>"
            f"<SessionToken>{self.session}</SessionToken><Expiration>{expiry}</Expiration>"
            "</Credentials><SubjectFromWebIdentityToken>system:serviceaccount:ml:trainer"
            "</SubjectFromWebIdentityToken><AssumedRoleUser>"
            f"<Arn>{self.role}/s</Arn><AssumedRoleId>AROAEXAMPLE:s</AssumedRoleId>"
            "</AssumedRoleUser></AssumeRoleWithWebIdentityResult>"
            "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>"
            "</AssumeRoleWithWebIdentityResponse>"
        )
        return 200, xml, reply.encode()


class RecordingProxy(_Server):
    """A plain-HTTP forward proxy: forwards absolute-URI requests and records their hosts."""

    def __init__(self) -> None:
        super().__init__()
        self.hosts: list[str] = []

    def handle(
        self, method: str, path: str, headers: Any, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        target = urlsplit(path)
        self.hosts.append(f"{target.hostname}:{target.port}")
        conn = http.client.HTTPConnection(target.hostname or "", target.port or 80, timeout=30)
        forward = {
            k: v for k, v in headers.items() if k.lower() not in ("proxy-connection", "connection")
        }
        conn.request(
            method,
            target.path + (f"?{target.query}" if target.query else ""),
            body or None,
            forward,
        )
        reply = conn.getresponse()
        payload = reply.read()
        out = {
            k: v
            for k, v in reply.getheaders()
            if k.lower() not in ("transfer-encoding", "connection", "content-length")
        }
        conn.close()
        return reply.status, out, payload


def serve(factory: Callable[[], _Server]) -> _Server:
    return factory().start()
