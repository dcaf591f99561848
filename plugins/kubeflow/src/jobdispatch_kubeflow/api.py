"""The Kubernetes API as the adapter uses it: a handful of REST verbs over plain dicts.

The official ``kubernetes`` client is used for what it does well (kubeconfig and in-cluster
loading, TLS, the connection pool), and every request goes through one generic call so the
objects come back exactly as the API server sent them (the classifier's fixtures have the same
shape), and so every request can be counted. Errors are mapped once, here: nothing answered is
``Unreachable``, 401 and 403 are ``Unauthorized``, 404 is ``NotFound``, 409 is ``Conflict``
(with :class:`AlreadyExists` for a create), 410 is :class:`Gone`, and a write whose reply was
lost is ``OutcomeUnknown``.

The bearer token, when the site names a token file or the host hands a token callable, is read
on every request and never kept: a rotated file is used from the next request on.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from jobdispatch.errors import Conflict, NotFound, OutcomeUnknown, Unauthorized, Unreachable

__all__ = [
    "KINDS",
    "AlreadyExists",
    "Api",
    "Gone",
    "Kind",
    "KubeApi",
    "file_token",
]

Obj = dict[str, Any]


#: Connections the client keeps open at once (see :meth:`KubeApi._connect`).
POOL_SIZE = 32


class AlreadyExists(Conflict):
    """A create found an object of that name (409 AlreadyExists)."""


class Gone(Exception):
    """A watch's resourceVersion is too old (410 Gone): list again and watch from there."""


class Kind:
    """Where one resource kind lives in the REST paths."""

    def __init__(
        self,
        group: str,
        version: str,
        plural: str,
        *,
        namespaced: bool = True,
        subresource: str | None = None,
    ):
        self.group = group
        self.version = version
        self.plural = plural
        self.namespaced = namespaced
        self.subresource = subresource

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if not name:
            return base
        return f"{base}/{name}/{self.subresource}" if self.subresource else f"{base}/{name}"


KINDS: Mapping[str, Kind] = {
    "trainjobs": Kind("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    "trainingruntimes": Kind("trainer.kubeflow.org", "v1alpha1", "trainingruntimes"),
    "clustertrainingruntimes": Kind(
        "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", namespaced=False
    ),
    "jobsets": Kind("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    "jobs": Kind("batch", "v1", "jobs"),
    "pods": Kind("", "v1", "pods"),
    "nodes": Kind("", "v1", "nodes", namespaced=False),
    "events": Kind("", "v1", "events"),
    "leases": Kind("coordination.k8s.io", "v1", "leases"),
    "workloads": Kind("kueue.x-k8s.io", "v1beta2", "workloads"),
    "workloads/status": Kind("kueue.x-k8s.io", "v1beta2", "workloads", subresource="status"),
    "admissionchecks": Kind("kueue.x-k8s.io", "v1beta2", "admissionchecks", namespaced=False),
    "localqueues": Kind("kueue.x-k8s.io", "v1beta2", "localqueues"),
    "priorityclasses": Kind("scheduling.k8s.io", "v1", "priorityclasses", namespaced=False),
    "clusterqueues": Kind("kueue.x-k8s.io", "v1beta2", "clusterqueues", namespaced=False),
    "admissionchecks/status": Kind(
        "kueue.x-k8s.io", "v1beta2", "admissionchecks", namespaced=False, subresource="status"
    ),
}


class Api(Protocol):
    """The verbs the backend uses. :class:`KubeApi` is the real one; tests and the benchmark
    substitute their own."""

    requests: Counter[str]
    #: Whether ``watch`` streams every change (the real API server does): a backend follows
    #: the kinds it observes and reads their caches only over an API that does.
    streams: bool

    def list(
        self,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Obj], str]: ...

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None: ...

    def create(self, kind: str, namespace: str | None, body: Obj) -> Obj: ...

    def patch(self, kind: str, namespace: str | None, name: str, body: Obj) -> Obj: ...

    def delete(self, kind: str, namespace: str | None, name: str, *, propagation: str) -> None: ...

    def watch(
        self,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str | None,
        resource_version: str,
        timeout: int,
    ) -> Iterator[Obj]: ...

    def log(
        self, namespace: str, pod: str, *, container: str | None, follow: bool
    ) -> IO[bytes]: ...

    def raw(self, method: str, path: str, body: Obj | None = None) -> Obj: ...

    def close(self) -> None: ...


def file_token(path: str) -> Callable[[], str]:
    """A token source that reads ``path`` on every call (a rotated file takes effect at once)."""

    def read() -> str:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise Unauthorized(f"cannot read the token file {path}: {exc}") from exc

    return read


def _status_error(status: int, body: bytes, what: str, *, write: bool) -> Exception:
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        payload = {}
    message = payload.get("message") or body.decode(errors="replace")[:300]
    reason = payload.get("reason", "")
    text = f"{what}: HTTP {status} {reason}: {message}".strip()
    if status in (401, 403):
        return Unauthorized(text)
    if status == 404:
        return NotFound(text)
    if status == 409:
        return AlreadyExists(text) if reason == "AlreadyExists" else Conflict(text)
    if status == 410:
        return Gone(text)
    if status >= 500 and "failed calling webhook" in message:
        # Admission runs before anything is stored: a webhook that did not answer means the
        # write did not happen (seen on the real control plane with the Trainer down).
        return Unreachable(text)
    if status >= 500 and write:
        return OutcomeUnknown(text)
    if status >= 500 or status == 429:
        return Unreachable(text)
    from jobdispatch.errors import Rejected

    return Rejected(text)


def _lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The non-blank lines of a stream that arrives in chunks (one watch event per line)."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line


class KubeApi:
    """The Kubernetes API through the official client.

    Args:
        kubeconfig / context: where to find the cluster and the client credentials.
        in_cluster: use the pod's service account instead.
        token: a bearer token source, called on every request (never cached).
        timeout: seconds for every request that is not a stream.
    """

    def __init__(
        self,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        in_cluster: bool = False,
        token: Callable[[], str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._where = "in-cluster" if in_cluster else (kubeconfig or "~/.kube/config")
        self._kubeconfig = kubeconfig
        self._context = context
        self._in_cluster = in_cluster
        self._client: Any = None
        self._token = token
        self._timeout = timeout
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.streams = True

    def _connect(self) -> Any:
        """The client, made on first use: building a backend touches neither the
        configuration files nor the network."""
        with self._lock:
            if self._client is not None:
                return self._client
            from kubernetes import client, config

            configuration = client.Configuration()
            try:
                if self._in_cluster:
                    config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                else:
                    config.load_kube_config(  # type: ignore[no-untyped-call]
                        config_file=self._kubeconfig,
                        context=self._context,
                        client_configuration=configuration,
                    )
            except Exception as exc:
                msg = f"cannot load the Kubernetes configuration from {self._where}: {exc}"
                raise Unreachable(msg) from exc
            from urllib3.util.retry import Retry

            # Retry a connection that was never made, once; never a request that was sent: a
            # lost reply to a create must surface as OutcomeUnknown (find by name then), not
            # be sent again behind the adapter's back.
            configuration.retries = Retry(total=1, connect=1, read=0, status=0, other=0)
            # One connection per thread that may hold one at once: a stream for each followed
            # kind, the admission controller's, and the poll's and callers' requests. The
            # client's default of 10 was too few for the followers of old ("Connection pool
            # is full, discarding connection" filled a supervisor's log).
            configuration.connection_pool_maxsize = POOL_SIZE
            self._client = client.ApiClient(configuration)
            return self._client

    def __repr__(self) -> str:
        return f"KubeApi({self._where}, context={self._context})"

    # ---------------------------------------------------------------- the one call

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Obj | None = None,
        content_type: str = "application/json",
        stream: bool = False,
        timeout: float | None = None,
        tag: str = "",
    ) -> Any:
        """One request. ``timeout``: seconds for the reply (the client's own by default); a
        stream waits for ever unless ``timeout`` is given, which then bounds each read."""
        from urllib3.exceptions import HTTPError

        write = method not in ("GET", "LIST", "WATCH")
        verb = "GET" if not write else method
        headers = {"Accept": "application/json", "Content-Type": content_type}
        auth: list[str] = ["BearerToken"]
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token()}"
            auth = []
        with self._lock:
            self.requests[f"{method} {tag or path}"] += 1
        api_client = self._connect()
        request = api_client.param_serialize(
            verb,
            path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=auth,
        )
        what = f"{method} {path}"
        try:
            bound: float | tuple[float, float] | None = timeout or self._timeout
            if stream:
                bound = None if timeout is None else (self._timeout, timeout)
            response = api_client.call_api(*request, _request_timeout=bound)
        except (HTTPError, OSError) as exc:
            if (
                write
                and "Connection refused" not in str(exc)
                and "NewConnectionError" not in repr(exc)
            ):
                raise OutcomeUnknown(f"{what}: no complete reply ({exc})") from exc
            raise Unreachable(f"{what}: {exc}") from exc
        if stream and 200 <= response.status < 300:
            return response.response
        data = response.read()
        if not 200 <= response.status < 300:
            raise _status_error(response.status, data, what, write=write)
        return json.loads(data) if data else {}

    # ---------------------------------------------------------------- verbs

    def list(
        self,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Obj], str]:
        query = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        result = self._call("LIST", KINDS[kind].path(namespace), query=query, tag=kind)
        return list(result.get("items") or []), str(
            (result.get("metadata") or {}).get("resourceVersion", "")
        )

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        try:
            result: Obj = self._call("GET", KINDS[kind].path(namespace, name), tag=kind)
        except NotFound:
            return None
        return result

    def create(self, kind: str, namespace: str | None, body: Obj) -> Obj:
        result: Obj = self._call("POST", KINDS[kind].path(namespace), body=body, tag=kind)
        return result

    def patch(self, kind: str, namespace: str | None, name: str, body: Obj) -> Obj:
        result: Obj = self._call(
            "PATCH",
            KINDS[kind].path(namespace, name),
            body=body,
            content_type="application/merge-patch+json",
            tag=kind,
        )
        return result

    def delete(self, kind: str, namespace: str | None, name: str, *, propagation: str) -> None:
        try:
            self._call(
                "DELETE",
                KINDS[kind].path(namespace, name),
                body={
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "propagationPolicy": propagation,
                },
                tag=kind,
            )
        except NotFound:
            return

    def watch(
        self,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str | None,
        resource_version: str,
        timeout: int,
    ) -> Iterator[Obj]:
        """Watch events (``{"type": ..., "object": ...}``) from ``resource_version`` for at most
        ``timeout`` seconds; :class:`Gone` when the version is too old (410, sent either as the
        status of the request or as an ERROR event inside the stream).

        A connection that goes silent is noticed: each read waits at most ``timeout`` seconds
        plus the request timeout (the server ends the stream after ``timeout``, and sends a
        bookmark just before), then the watch ends with ``Unreachable``, as it does when the
        connection breaks."""
        from urllib3.exceptions import HTTPError

        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        raw = self._call(
            "WATCH",
            KINDS[kind].path(namespace),
            query=query,
            stream=True,
            timeout=timeout + self._timeout,
            tag=kind,
        )
        try:
            for line in _lines(raw.stream(4096, decode_content=True)):
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    if status.get("code") == 410:
                        raise Gone(str(status.get("message", "resourceVersion too old")))
                    raise Unreachable(f"watch {kind}: {status.get('message', status)}")
                yield event
        except (HTTPError, OSError) as exc:
            raise Unreachable(f"watch {kind}: the stream broke or went silent ({exc})") from exc
        finally:
            raw.release_conn()

    def log(self, namespace: str, pod: str, *, container: str | None, follow: bool) -> IO[bytes]:
        query = [("follow", "true" if follow else "false")]
        if container:
            query.append(("container", container))
        stream: IO[bytes] = self._call(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
            query=query,
            stream=True,
            tag="pods/log",
        )
        return stream

    def raw(self, method: str, path: str, body: Obj | None = None) -> Obj:
        """Any other call (discovery, access reviews)."""
        result: Obj = self._call(method, path, body=body)
        return result

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
