"""The derived TrainingRuntime: read from the job's runtime, found or created at start, and
printed for an operator to apply.

A TrainJob can patch the containers its runtime has but cannot add one, nor carry a JobSet
failure policy (Trainer v2.2), so the publish option's init container and a native restart's
failure policy live in a namespaced TrainingRuntime derived from the configured one
(:func:`jobdispatch_kubeflow.restart.runtime_body`, named by a hash of its content).

Creating a TrainingRuntime is the right to define the pod template of every TrainJob that
refers to it (its volumes, its security context, its images): more than a supervisor that
creates TrainJobs on runtimes an operator chose needs, so the identity the project ships does
not hold it (spec 0010 §6). With the publish option the derived runtime is one per base runtime
and publish settings, so it is an operator's step, done once: ``python -m
jobdispatch_kubeflow.derived`` prints it for ``kubectl apply -f -``, and ``start`` finds it. An
identity that may create trainingruntimes (what native restarts need: one runtime per offered
policy) creates it itself. Where neither holds, ``start`` refuses, naming the runtime and the
step.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from jobdispatch.errors import Rejected, Unauthorized, ValidationError

from jobdispatch_kubeflow import probe, restart
from jobdispatch_kubeflow.api import AlreadyExists, Api, KubeApi
from jobdispatch_kubeflow.config import Settings

__all__ = ["derive", "ensure", "main", "missing", "present"]

#: What a refused start tells the operator to run (docs/how-to/publish-image.md).
OPERATOR_STEP = (
    "python -m jobdispatch_kubeflow.derived --namespace NS --runtime NAME --image IMAGE "
    "[--mount VOLUME=PATH] | kubectl apply -f -"
)


def derive(
    api: Api,
    settings: Settings,
    runtime: str,
    *,
    restart_on: list[int] | None = None,
    max_restarts: int = 0,
) -> dict[str, Any]:
    """The TrainingRuntime derived from ``runtime`` (of the kind ``settings`` names), with the
    failure policy when ``restart_on`` is given and the publish init container when
    ``settings.publish`` is. Rejected when the base runtime does not exist."""
    base = probe.read_runtime(api, settings, runtime)
    if base is None:
        raise Rejected(f"the training runtime {runtime} does not exist")
    return restart.runtime_body(
        base,
        namespace=settings.namespace,
        restart_on=restart_on,
        max_restarts=max_restarts,
        publish=settings.publish,
    )


def present(api: Api, body: dict[str, Any]) -> bool:
    """Whether the derived runtime ``body`` is in its namespace already (one GET)."""
    meta = body["metadata"]
    return api.get("trainingruntimes", meta["namespace"], meta["name"]) is not None


def missing(body: dict[str, Any], why: str) -> str:
    """What to tell when the derived runtime ``body`` is absent and may not be created
    (``why``): its name, its namespace and the operator's step."""
    meta = body["metadata"]
    return (
        f"the derived runtime {meta['name']} is not in namespace {meta['namespace']}, and "
        f"this identity may not create it ({why}): an operator applies it once, with "
        f"{OPERATOR_STEP} (docs/how-to/publish-image.md)"
    )


def ensure(api: Api, body: dict[str, Any]) -> None:
    """The derived runtime ``body`` is in its namespace: found (an operator applied it), else
    created. Rejected, naming it and the operator's step, when it is absent and the identity
    may not create it."""
    if present(api, body):
        return
    try:
        with contextlib.suppress(AlreadyExists):
            api.create("trainingruntimes", body["metadata"]["namespace"], body)
    except Unauthorized as exc:
        raise Rejected(missing(body, str(exc))) from exc


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m jobdispatch_kubeflow.derived",
        description="Print the TrainingRuntime the Kubeflow adapter's publish option derives "
        "from a runtime (JSON, for kubectl apply -f -). It reads the base runtime with the "
        "identity given here: an operator's, which may create trainingruntimes.",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--namespace", required=True, help="the adapter's namespace")
    p.add_argument("--runtime", required=True, help="the base runtime's name")
    p.add_argument(
        "--kind",
        choices=("ClusterTrainingRuntime", "TrainingRuntime"),
        default="ClusterTrainingRuntime",
        help="the base runtime's kind (default ClusterTrainingRuntime)",
    )
    p.add_argument("--image", required=True, help="publish.image of the cluster entry")
    p.add_argument("--path", help="publish.path of the cluster entry (default /jobdispatch)")
    p.add_argument(
        "--mount",
        action="append",
        default=[],
        metavar="VOLUME=PATH",
        help="one of publish.mounts (repeat for each)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Print the derived runtime of the arguments' publish settings. Exit 2 on arguments the
    adapter's configuration refuses, 1 when the base runtime cannot be read."""
    args = _parser().parse_args(argv)
    publish: dict[str, Any] = {"image": args.image}
    if args.path:
        publish["path"] = args.path
    mounts = [m.partition("=") for m in args.mount]
    publish["mounts"] = [{"volume": v, "path": p} for v, _, p in mounts]
    config = {
        "namespace": args.namespace,
        "runtime": {"name": args.runtime, "kind": args.kind},
        "publish": publish,
    }
    try:
        settings = Settings.from_config(config)
    except ValidationError as exc:
        print(f"jobdispatch_kubeflow.derived: {exc}", file=sys.stderr)
        return 2
    api = KubeApi(kubeconfig=args.kubeconfig, context=args.context)
    try:
        body = derive(api, settings, args.runtime)
    except Exception as exc:  # said, never hidden: the operator reads it
        print(f"jobdispatch_kubeflow.derived: {exc}", file=sys.stderr)
        return 1
    finally:
        api.close()
    sys.stdout.write(json.dumps(body, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
