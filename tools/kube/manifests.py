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
pod fails its TrainJob at once instead of being retried six times with back-off. With
`--real-node` it is the runtime of the real node (tools/kube/node-up): its pods tolerate the
node's taint and select its label, run the locally made torch image, report their log's tail as
the termination message when they fail, and mount the checkpoint and script folders of the node.

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


#: The real node's taint and label (tools/kube/node-up registers the kubelet with them).
REAL_NODE_KEY = "dispatch.test/real-node"


def real_node(doc: dict[str, Any], image: str, checkpoints: str, scripts: str) -> dict[str, Any]:
    """``doc``'s pods placed on the real node only, with its image and folders."""
    for rj in doc["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rj["template"]["spec"].setdefault("template", {}).setdefault("spec", {})
        pod["nodeSelector"] = {REAL_NODE_KEY: "true"}
        pod["tolerations"] = [{"key": REAL_NODE_KEY, "operator": "Exists", "effect": "NoSchedule"}]
        pod["volumes"] = [
            {"name": "checkpoints", "hostPath": {"path": checkpoints, "type": "DirectoryOrCreate"}},
            {"name": "scripts", "hostPath": {"path": scripts, "type": "Directory"}},
        ]
        for container in pod.get("containers") or []:
            container["image"] = image
            # A failed container's last log lines become its termination message: torchrun's
            # summary of which worker failed and how reaches the pod's status.
            container["terminationMessagePolicy"] = "FallbackToLogsOnError"
            container["volumeMounts"] = [
                {"name": "checkpoints", "mountPath": "/checkpoints"},
                {"name": "scripts", "mountPath": "/scripts", "readOnly": True},
            ]
            # torch 1.13's torchrun on Python 3.11 crashes parsing its default redirects ("0"):
            # naming them avoids it. Workers' lines then carry a "[default<rank>]:" prefix.
            env = [
                e
                for e in container.get("env") or []
                if e.get("name") not in {"PET_REDIRECTS", "PET_TEE"}
            ]
            container["env"] = [
                *env,
                {"name": "PET_REDIRECTS", "value": "1"},
                {"name": "PET_TEE", "value": "1"},
            ]
    return doc


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    loc = sub.add_parser("localize", help="stdin: rendered manifests; stdout: host-process version")
    loc.add_argument("--webhook-port", type=int, required=True)
    rt = sub.add_parser("runtime", help="stdin: a ClusterTrainingRuntime; stdout: the test runtime")
    rt.add_argument("--name", required=True)
    rt.add_argument("--backoff-limit", type=int, default=0)
    rt.add_argument("--real-node", action="store_true", help="the real node's runtime")
    rt.add_argument("--image", help="with --real-node: the image of its pods")
    rt.add_argument("--checkpoints", help="with --real-node: the checkpoint folder on the node")
    rt.add_argument("--scripts", help="with --real-node: the script folder on the node")
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
        if args.real_node:
            if not (args.image and args.checkpoints and args.scripts):
                raise SystemExit(
                    "manifests.py runtime --real-node needs --image, --checkpoints and --scripts"
                )
            out = [real_node(out[0], args.image, args.checkpoints, args.scripts)]
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
