"""The publish image on the real node (``tools/kube/up --real-node``): the Kubeflow adapter's
``publish`` option puts its init container in every training pod, which copies the checkpoint
helper onto the pod's shared volume and resolves the checkpoint to resume from; the training
script (tests/real_node_ddp.py ``--helper``) publishes with that helper.

The checkpoint root is a folder of the node's checkpoint hostPath, which every execution of a
job reaches (the init container mounts it through ``publish.mounts``), or a prefix of a bucket
on the S3 server (tools/s3/up), which the pods reach through a forwarder listening on the
node's bridge address inside its network namespace (tools/kube/netns_forward.py, as the
kubelet reaches the API server): the server listens on the host's loopback, which the node's
namespace does not share. The credentials reach the pods as a shared credentials file in the
hostPath, never in the TrainJob. The image is built from
this checkout's wheels when the test starts (``tools/kube/build-publish-image --import``: a few
seconds when it is cached, a few minutes cold) and imported into the node's containerd.

Without the real node the test skips with the reason; under JOBDISPATCH_REQUIRE_SERVICES=1 it
fails instead.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from jobdispatch.testing import eventually
from jobdispatch_kubeflow.testing import real_node_problem
from test_real_node import (
    DEADLINE,
    WAIT_AT,
    assert_resumed_to_the_same_loss,
    ddp_pair,
    evict_first_run,
    real_backend,
    supervise,
)

pytestmark = pytest.mark.kube

KUBE_TOOLS = Path(__file__).parents[1] / "tools" / "kube"
BUILD = KUBE_TOOLS / "build-publish-image"
#: Where the runtime's pods mount the publish image's shared emptyDir (the option's default).
SHARED = "/jobdispatch"


def publish_image() -> str:
    """The publish image of this checkout, built (or found cached) and imported into the
    node's containerd."""
    done = subprocess.run(
        [str(BUILD), "--import"], capture_output=True, text=True, check=False, timeout=1800
    )
    assert done.returncode == 0, f"{BUILD.name} failed:\n{done.stderr[-4000:]}"
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture
def published() -> Iterator[Any]:
    """The adapter for the real node's runtime with the publish option."""
    from jobdispatch_kubeflow.config import Publish
    from jobdispatch_kubeflow.testing import require

    require(real_node_problem())
    publish = Publish(image=publish_image(), mounts=(("checkpoints", "/checkpoints"),))
    apply_derived_runtime(publish)
    with real_backend(publish=publish) as made:
        yield made


def apply_derived_runtime(publish: Any) -> None:
    """The operator's step (docs/how-to/publish-image.md): print the derived runtime with the
    admin identity and apply it. The adapter then runs with the plane's least-privilege
    identity, which may read it but not create it."""
    from jobdispatch_kubeflow.testing import kubectl

    ((volume, path),) = publish.mounts
    done = subprocess.run(
        [
            *(sys.executable, "-m", "jobdispatch_kubeflow.derived"),
            *("--kubeconfig", os.environ["KUBECONFIG"]),
            *("--namespace", os.environ.get("JOBDISPATCH_KUBE_NAMESPACE", "dispatch")),
            *("--runtime", os.environ["JOBDISPATCH_KUBE_REAL_RUNTIME"]),
            *("--image", publish.image, "--mount", f"{volume}={path}"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"jobdispatch_kubeflow.derived failed: {done.stderr}"
    kubectl("apply", "-f", "-", stdin=done.stdout)


class PosixRoot:
    """A folder of the node's checkpoint hostPath."""

    def __init__(self, host: Path) -> None:
        self.host = host / "published"
        self.host.mkdir(exist_ok=True)
        self.pod_env = {"JOBDISPATCH_CHECKPOINT_ROOT": "/checkpoints/published"}

    def store(self) -> Any:
        from jobdispatch_publish.posix import PosixStore

        return PosixStore(self.host)

    def close(self) -> None:
        pass


class S3Root:
    """A fresh prefix of a fresh bucket on the S3 server, reached by the pods through a
    forwarder in the node's network namespace."""

    #: tools/kube/common.sh's NODE_NETNS and NODE_IP (the CNI bridge's gateway).
    NETNS = "/run/netns/jobdispatch-node"
    NODE_IP = "10.88.0.1"

    def __init__(self, host: Path) -> None:
        import boto3
        from botocore.config import Config

        endpoint = os.environ.get("JOBDISPATCH_S3_ENDPOINT")
        if not endpoint:
            from jobdispatch_kubeflow.testing import require

            require(
                'no S3 server: run `eval "$(tools/s3/up)"` (JOBDISPATCH_S3_ENDPOINT is not set)'
            )
        assert endpoint is not None
        self.region = os.environ.get("JOBDISPATCH_S3_REGION", "us-east-1")
        self.keys = (
            os.environ["JOBDISPATCH_S3_ACCESS_KEY"],
            os.environ["JOBDISPATCH_S3_SECRET_KEY"],
        )
        self.endpoint = endpoint
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=self.keys[0],
            aws_secret_access_key=self.keys[1],
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}),
        )
        self.bucket = f"jd-real-{secrets.token_hex(4)}"
        self.client.create_bucket(Bucket=self.bucket)
        self.root = f"s3://{self.bucket}/ckpt"
        target = urlsplit(endpoint)
        port = 17000 + secrets.randbelow(1000)
        self.forwarder = subprocess.Popen(
            [
                sys.executable,
                str(KUBE_TOOLS / "netns_forward.py"),
                self.NETNS,
                f"{self.NODE_IP}:{port}",
                f"{target.hostname}:{target.port or 80}",
            ]
        )
        # The credentials reach the pods as a file of the hostPath, not in the TrainJob.
        self.folder = host / f"s3-{self.bucket}"
        self.folder.mkdir()
        credentials = self.folder / "credentials"
        credentials.write_text(
            f"[default]\naws_access_key_id = {self.keys[0]}\n"
            f"aws_secret_access_key = {self.keys[1]}\n"
        )
        credentials.chmod(0o600)
        self.pod_env = {
            "JOBDISPATCH_CHECKPOINT_ROOT": self.root,
            "AWS_ENDPOINT_URL_S3": f"http://{self.NODE_IP}:{port}",
            "AWS_REGION": self.region,
            "AWS_SHARED_CREDENTIALS_FILE": f"/checkpoints/{self.folder.name}/credentials",
        }

    def store(self) -> Any:
        from jobdispatch_publish.config import load_settings
        from jobdispatch_publish.root import root_of
        from jobdispatch_publish.stores import open_store

        env = {
            "JOBDISPATCH_CHECKPOINT_ROOT": self.root,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.keys[0],
            "AWS_SECRET_ACCESS_KEY": self.keys[1],
        }
        settings = load_settings(None, env)
        return open_store(root_of(settings, env), settings, env)

    def close(self) -> None:
        self.forwarder.terminate()
        self.forwarder.wait(timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})
        self.client.delete_bucket(Bucket=self.bucket)


@pytest.fixture(params=["posix", "s3"])
def root(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The checkpoint root both executions of a job reach: a hostPath folder, or S3."""
    host = Path(os.environ.get("JOBDISPATCH_KUBE_REAL_CHECKPOINTS") or "/nonexistent")
    made = PosixRoot(host) if request.param == "posix" else S3Root(host)
    yield made
    made.close()


def entries(root: Any, job: str) -> list[Any]:
    """The job's published checkpoints under the root, newest first."""
    from jobdispatch_publish.resolve import Damaged
    from jobdispatch_publish.resolve import entries as listed

    found = list(listed(root.store(), job))
    assert not [e for e in found if isinstance(e, Damaged)], found
    return found


@pytest.mark.timeout(DEADLINE * 3)
def test_ddp_evicted_after_a_published_checkpoint_resumes_from_it_through_the_init_container(
    published: Any, root: Any
) -> None:
    """Two 2-pod DDP jobs publish every third step with the helper the init container copied;
    one runs through, the other is evicted (a drain) once step 12 is published, resubmitted by
    its rule, and its new pods' init containers resolve step 12: it resumes there and ends at
    the uninterrupted loss."""
    backend, made = published
    plain, resumed = ddp_pair(
        "real-pub", "real-pub-evicted", "--helper", SHARED, env=dict(root.pod_env)
    )
    c1, p1, s1 = supervise(backend, plain)
    c2, p2, s2 = supervise(backend, resumed)
    made += [p1.job, p2.job]
    try:
        eventually(
            lambda: [e.step for e in entries(root, p2.job)][:1] == [WAIT_AT],
            "step 12 published by the helper",
            within=DEADLINE,
            every=1,
        )
        evict_first_run(backend, p2.job)
        assert_resumed_to_the_same_loss((c1, p1.job), (c2, p2.job))
        steps = sorted((e.submission, e.execution, e.step) for e in entries(root, p2.job))
        print(f"published through the helper (submission, execution, step): {steps}")
        # Submission 1 published up to step 12, submission 2 from 15 on; the execution is the
        # JobSet's restart attempt, which each pod read from its own label.
        assert [s for s in steps if s[0] == 1] == [(1, "0", n) for n in range(3, 13, 3)]
        assert [s for s in steps if s[0] == 2] == [(2, "0", n) for n in range(15, 31, 3)]
    finally:
        s1.stop()
        s2.stop()
