"""The publish image itself, without a cluster: its root filesystem, unpacked from the OCI
archive tools/kube/build-publish-image made, runs in a chroot what a training pod runs. The init
container's program copies the helper and resolves (nothing at first, then what the first
execution published with the copied helper), on a POSIX root and on the S3 server
(tools/s3/up, reached on the host's loopback, which a chroot shares).

Needs root (debootstrap, chroot) and, the first time on a machine, Debian's mirror and PyPI
(the base and the dependencies: a few minutes; then a few seconds). Skips without root;
under JOBDISPATCH_REQUIRE_SERVICES=1 it fails instead.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from jobdispatch_conformance.services import require_service

BUILD = Path(__file__).parents[1] / "tools" / "kube" / "build-publish-image"
HELPER = "/shared/helper/bin/jobdispatch-publish"
#: chroot(8) is in /usr/sbin, which the commands' own PATH leaves out.
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"


def archive() -> Path:
    """The image's OCI archive, built (or found cached) from this checkout's wheels."""
    done = subprocess.run([str(BUILD)], capture_output=True, text=True, check=False, timeout=1800)
    assert done.returncode == 0, f"{BUILD.name} failed:\n{done.stderr[-4000:]}"
    tag = done.stdout.strip().splitlines()[-1].rsplit(":", 1)[1]
    cache = Path(os.environ.get("JOBDISPATCH_KUBE_CACHE", "/var/cache/jobdispatch-kube"))
    return cache / f"publish-image-{tag}" / "image.oci.tar"


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The image's root filesystem, unpacked from its one layer."""
    if os.geteuid() != 0:
        require_service("the publish image needs root to build and to chroot into")
    top = tmp_path_factory.mktemp("publish-image")
    with tarfile.open(archive()) as oci:
        index = json.loads(member(oci, "index.json"))
        manifest = json.loads(member(oci, blob(index["manifests"][0]["digest"])))
        (layer,) = manifest["layers"]
        layer_file = top / "layer.tar.gz"
        layer_file.write_bytes(member(oci, blob(layer["digest"])))
    root = top / "rootfs"
    root.mkdir()
    subprocess.run(["tar", "-xzf", str(layer_file), "-C", str(root)], check=True)
    layer_file.unlink()
    for shared in ("shared", "jobdispatch"):  # the pods' emptyDir, mounted
        (root / shared).mkdir()
    yield root
    subprocess.run(["rm", "-rf", str(root)], check=True)


def blob(digest: str) -> str:
    """Where an OCI layout keeps the blob of ``digest``."""
    return f"blobs/sha256/{digest.removeprefix('sha256:')}"


def member(oci: tarfile.TarFile, name: str) -> bytes:
    """The bytes of one file of the archive."""
    found = oci.extractfile(name)
    assert found is not None, name
    return found.read()


def chroot(root: Path, env: dict[str, str], *command: str) -> str:
    """Run ``command`` in the image's root with only ``env``; its stdout."""
    done = subprocess.run(
        [CHROOT, str(root), *command],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr}"
    return done.stdout


def s3_env() -> dict[str, str]:
    """A fresh bucket on the S3 server, and the helper's environment for it."""
    import boto3

    endpoint = os.environ.get("JOBDISPATCH_S3_ENDPOINT")
    if not endpoint:
        require_service(
            'no S3 server: run `eval "$(tools/s3/up)"` (JOBDISPATCH_S3_ENDPOINT is not set)'
        )
    assert endpoint is not None
    keys = os.environ["JOBDISPATCH_S3_ACCESS_KEY"], os.environ["JOBDISPATCH_S3_SECRET_KEY"]
    region = os.environ.get("JOBDISPATCH_S3_REGION", "us-east-1")
    bucket = f"jd-image-{secrets.token_hex(4)}"
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=keys[0],
        aws_secret_access_key=keys[1],
        region_name=region,
    ).create_bucket(Bucket=bucket)
    return {
        "JOBDISPATCH_CHECKPOINT_ROOT": f"s3://{bucket}/ckpt",
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_REGION": region,
        "AWS_ACCESS_KEY_ID": keys[0],
        "AWS_SECRET_ACCESS_KEY": keys[1],
    }


@pytest.mark.parametrize("store", ["posix", "s3"])
def test_the_init_program_hands_over_the_helper_and_the_checkpoint_to_resume_from(
    rootfs: Path, store: str
) -> None:
    """Submission 1: nothing to resume, the helper copied; it publishes step 12 with the copy.
    Submission 2: the init program resolves step 12 into the shared folder and names it."""
    root_env = (
        {"JOBDISPATCH_CHECKPOINT_ROOT": f"/ckpt-{secrets.token_hex(4)}"}
        if store == "posix"
        else s3_env()
    )
    if store == "posix":
        (rootfs / root_env["JOBDISPATCH_CHECKPOINT_ROOT"].lstrip("/")).mkdir()
    job = f"j{secrets.token_hex(4)}"
    base = {**root_env, "JOBDISPATCH_JOB": job, "JOBDISPATCH_SHARED": "/shared"}
    init = "/opt/jobdispatch-publish/bin/jobdispatch-publish-init"

    first = {**base, "JOBDISPATCH_SUBMISSION": "1", "JOBDISPATCH_EXECUTION": "0"}
    chroot(rootfs, first, init)
    assert (rootfs / "shared/resume.env").read_text() == "JOBDISPATCH_RESUME_FROM=\n"
    save = rootfs / "save"
    save.mkdir(exist_ok=True)
    (save / "state.pt").write_bytes(b"the model at step 12")
    published = chroot(rootfs, first, HELPER, "publish", "/save", "--step", "12")
    assert published.startswith("published step 12"), published

    second = {**base, "JOBDISPATCH_SUBMISSION": "2", "JOBDISPATCH_EXECUTION": "0"}
    chroot(rootfs, second, init)
    line = (rootfs / "shared/resume.env").read_text()
    assert line == "JOBDISPATCH_RESUME_FROM=/shared/resume\n"
    assert (rootfs / "shared/resume/state.pt").read_bytes() == b"the model at step 12"


def test_the_init_program_refuses_a_shared_folder_that_is_not_there(rootfs: Path) -> None:
    done = subprocess.run(
        [CHROOT, str(rootfs), "/opt/jobdispatch-publish/bin/jobdispatch-publish-init"],
        env={"JOBDISPATCH_SHARED": "/not-mounted"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "/not-mounted is not a folder: the shared volume is not mounted" in done.stderr


def test_the_copied_helper_refuses_a_python_it_was_not_built_for(rootfs: Path) -> None:
    """The copy's compiled dependency fits one minor version: another Python is told so."""
    chroot(rootfs, {}, "/opt/jobdispatch-publish/bin/jobdispatch-publish-init")
    (rootfs / "jobdispatch/helper/PYTHON").write_text("3.99\n")
    done = subprocess.run(
        [CHROOT, str(rootfs), "/jobdispatch/helper/bin/jobdispatch-publish", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "built for Python 3.99" in done.stderr, done.stderr
