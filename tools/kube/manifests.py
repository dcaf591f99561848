#!/usr/bin/env python3
"""Turn an upstream controller's rendered manifests into ones for a controller run on the host.

tools/kube/up renders each controller's manifests with `kubectl kustomize` straight from the Go
module cache, then pipes them through here. Upstream deploys the controller as a Deployment
behind a Service; here the controller is a host process on 127.0.0.1, so:

- Deployments (and APIServices, whose backends would be missing and would break discovery) are
  dropped;
- every Service that a webhook configuration or a CRD conversion webhook points at becomes
  `type: ExternalName, externalName: localhost`, and the reference's port becomes the port the
  host process serves its webhooks on. The apiserver then calls https://localhost:PORT with the
  TLS server name <service>.<namespace>.svc, which is the name the controller's own certificate
  rotator puts into the certificate it makes, so the rotator's caBundle injection keeps working.

`runtime` derives dispatch's test runtime from an upstream ClusterTrainingRuntime: the same
template under another name, with `backoffLimit` set on every replicated Job, so that a failed
pod fails its TrainJob at once instead of being retried six times with back-off.

Uses only PyYAML (Debian's python3-yaml), because it runs before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

DROPPED_KINDS = {"Deployment", "APIService"}
WEBHOOK_KINDS = {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}


def _service_refs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The clientConfig.service mappings of a webhook configuration or a CRD, to be rewritten."""
    kind = doc.get("kind")
    if kind in WEBHOOK_KINDS:
        return [
            w["clientConfig"]["service"]
            for w in doc.get("webhooks") or []
            if (w.get("clientConfig") or {}).get("service")
        ]
    if kind == "CustomResourceDefinition":
        conv = (doc.get("spec") or {}).get("conversion") or {}
        svc = ((conv.get("webhook") or {}).get("clientConfig") or {}).get("service")
        return [svc] if svc else []
    return []


def localize(docs: list[dict[str, Any]], port: int) -> list[dict[str, Any]]:
    """Rewrite the documents of one controller for a host process serving webhooks on `port`."""
    targets: set[tuple[str, str]] = set()
    for doc in docs:
        for svc in _service_refs(doc):
            svc["port"] = port
            targets.add((svc.get("namespace", ""), svc["name"]))
    out = []
    for doc in docs:
        if doc.get("kind") in DROPPED_KINDS:
            continue
        meta = doc.get("metadata") or {}
        if (
            doc.get("kind") == "Service"
            and (meta.get("namespace", ""), meta.get("name")) in targets
        ):
            doc["spec"] = {"type": "ExternalName", "externalName": "localhost"}
        out.append(doc)
    return out


def test_runtime(doc: dict[str, Any], name: str, backoff_limit: int) -> dict[str, Any]:
    """A copy of an upstream runtime, renamed, with backoffLimit on each replicated Job."""
    if doc.get("kind") != "ClusterTrainingRuntime":
        raise SystemExit(
            f"manifests.py runtime: expected a ClusterTrainingRuntime, got {doc.get('kind')!r}"
        )
    doc["metadata"] = {
        "name": name,
        "labels": dict((doc.get("metadata") or {}).get("labels") or {}),
    }
    for rj in doc["spec"]["template"]["spec"]["replicatedJobs"]:
        rj["template"].setdefault("spec", {})["backoffLimit"] = backoff_limit
    return doc


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    loc = sub.add_parser("localize", help="stdin: rendered manifests; stdout: host-process version")
    loc.add_argument("--webhook-port", type=int, required=True)
    rt = sub.add_parser("runtime", help="stdin: a ClusterTrainingRuntime; stdout: the test runtime")
    rt.add_argument("--name", required=True)
    rt.add_argument("--backoff-limit", type=int, default=0)
    args = p.parse_args(argv)
    docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
    if args.cmd == "localize":
        out = localize(docs, args.webhook_port)
    else:
        if len(docs) != 1:
            raise SystemExit(
                f"manifests.py runtime: expected one document on stdin, got {len(docs)}"
            )
        out = [test_runtime(docs[0], args.name, args.backoff_limit)]
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
