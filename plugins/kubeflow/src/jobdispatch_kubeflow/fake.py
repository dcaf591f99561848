"""An in-memory stand-in for the API server's REST verbs, for unit tests and the benchmark.

It stores objects as given and answers list, get, create, merge patch and delete the way the API
server does for what the adapter relies on: label selectors (``k=v`` and ``k in (a,b)``),
``resourceVersion`` checks on patch (409 on a stale one), 409 AlreadyExists on create, and
finalizers that keep a deleted object readable with its ``deletionTimestamp``. No controller
runs: a test sets the objects' status itself. Every request is counted like :class:`KubeApi`.
"""

from __future__ import annotations

import copy
import io
import re
from collections import Counter
from collections.abc import Iterator
from typing import IO, Any

from jobdispatch.errors import Conflict, NotFound

from jobdispatch_kubeflow.api import AlreadyExists

__all__ = ["FakeApi", "matches"]

Obj = dict[str, Any]
_IN = re.compile(r"^\s*([^\s!=]+)\s+in\s+\(([^)]*)\)\s*$")


def matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy a selector of ``k=v`` and ``k in (a,b)`` terms."""
    if not selector:
        return True
    terms, depth, cur = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    for term in terms:
        m = _IN.match(term)
        if m:
            if labels.get(m[1]) not in {v.strip() for v in m[2].split(",")}:
                return False
            continue
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip():
            return False
    return True


def _merge(target: Obj, patch: Obj) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeApi:
    """Objects by (kind, namespace, name); see the module docstring."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], Obj] = {}
        self.requests: Counter[str] = Counter()
        self.logs: dict[str, bytes] = {}
        self.groups: dict[str, tuple[str, ...]] = {
            "trainer.kubeflow.org": ("v1alpha1",),
            "jobset.x-k8s.io": ("v1alpha2",),
        }
        self.allowed = True
        self._version = 100

    def __repr__(self) -> str:
        return f"FakeApi({id(self)})"

    def _bump(self, obj: Obj) -> None:
        self._version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._version)

    def put(self, kind: str, namespace: str | None, obj: Obj) -> Obj:
        """Store ``obj`` as a controller would have made it (no request counted)."""
        obj = copy.deepcopy(obj)
        self._bump(obj)
        self.objects[(kind, namespace, obj["metadata"]["name"])] = obj
        return obj

    def count(self) -> int:
        return sum(self.requests.values())

    def list(
        self,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Obj], str]:
        self.requests[f"LIST {kind}"] += 1
        items = []
        for (k, ns, _), obj in sorted(self.objects.items(), key=lambda kv: str(kv[0])):
            if k != kind or (namespace is not None and ns != namespace):
                continue
            if not matches(label_selector, (obj.get("metadata") or {}).get("labels") or {}):
                continue
            if field_selector:
                key, _, value = field_selector.partition("=")
                if (
                    key == "involvedObject.name"
                    and (obj.get("involvedObject") or {}).get("name") != value
                ):
                    continue
            items.append(copy.deepcopy(obj))
        return items, str(self._version)

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        self.requests[f"GET {kind}"] += 1
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def create(self, kind: str, namespace: str | None, body: Obj) -> Obj:
        self.requests[f"POST {kind}"] += 1
        key = (kind, namespace, body["metadata"]["name"])
        if key in self.objects:
            raise AlreadyExists(f"{kind} {key[2]} already exists")
        obj = copy.deepcopy(body)
        self._bump(obj)
        self.objects[key] = obj
        return copy.deepcopy(obj)

    def patch(self, kind: str, namespace: str | None, name: str, body: Obj) -> Obj:
        self.requests[f"PATCH {kind}"] += 1
        obj = self.objects.get((kind, namespace, name))
        if obj is None:
            raise NotFound(f"{kind} {name} not found")
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
            raise Conflict(f"{kind} {name}: the object has been modified")
        patch = copy.deepcopy(body)
        patch.get("metadata", {}).pop("resourceVersion", None)
        _merge(obj, patch)
        self._bump(obj)
        if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
            del self.objects[(kind, namespace, name)]
        return copy.deepcopy(obj)

    def delete(self, kind: str, namespace: str | None, name: str, *, propagation: str) -> None:
        self.requests[f"DELETE {kind}"] += 1
        obj = self.objects.get((kind, namespace, name))
        if obj is None:
            return
        if obj["metadata"].get("finalizers"):
            obj["metadata"].setdefault("deletionTimestamp", "2026-12-01T00:00:00Z")
            self._bump(obj)
        else:
            del self.objects[(kind, namespace, name)]

    def watch(
        self,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str | None,
        resource_version: str,
        timeout: int,
    ) -> Iterator[Obj]:
        self.requests[f"WATCH {kind}"] += 1
        return iter(())

    def log(self, namespace: str, pod: str, *, container: str | None, follow: bool) -> IO[bytes]:
        self.requests["GET pods/log"] += 1
        if pod not in self.logs:
            raise NotFound(f"pod {pod} has no log")
        return io.BytesIO(self.logs[pod])

    def raw(self, method: str, path: str, body: Obj | None = None) -> Obj:
        self.requests[f"{method} {path}"] += 1
        if path == "/apis":
            return {
                "groups": [
                    {"name": g, "versions": [{"version": v} for v in vs]}
                    for g, vs in self.groups.items()
                ]
            }
        if path.startswith("/openapi/v3/apis/jobset"):
            return {
                "components": {
                    "schemas": {"x": {"properties": {"onJobFailureMessagePatterns": {}}}}
                }
            }
        if path.endswith("selfsubjectaccessreviews"):
            return {"status": {"allowed": self.allowed}}
        raise NotFound(path)

    def close(self) -> None:
        pass
