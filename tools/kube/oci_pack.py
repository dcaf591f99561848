"""Pack a root filesystem into a one-layer OCI image archive that ``ctr images import`` reads.

No registry is reachable from the machines dispatch's real node runs on, so its images (the
pause container and the torch image) are made locally: a root filesystem directory, tarred and
gzipped as the single layer, described by an image config and a manifest, and laid out as an
OCI image layout inside a tar archive. ``io.containerd.image.name`` names the image so that
containerd imports it under that reference.

    python3 oci_pack.py ROOTFS IMAGE-NAME OUT.tar [--entrypoint ARG]... [--env K=V]...
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _layer(rootfs: Path, into: Path) -> tuple[str, str, int]:
    """The gzipped layer written to ``into``: (compressed digest, uncompressed digest, size)."""
    # GNU tar keeps every file type, owner and mode as they are in the rootfs; --numeric-owner
    # because the image's users are not this machine's. gzip -1: the archive is read once.
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs), "-cf", "-", "."],
        stdout=subprocess.PIPE,
    )
    assert tar.stdout is not None
    raw = hashlib.sha256()
    with into.open("wb") as out:
        gz = subprocess.Popen(["gzip", "-1", "-n"], stdin=subprocess.PIPE, stdout=out)
        assert gz.stdin is not None
        while chunk := tar.stdout.read(1 << 20):
            raw.update(chunk)
            gz.stdin.write(chunk)
        gz.stdin.close()
        if tar.wait() != 0 or gz.wait() != 0:
            sys.exit(f"oci_pack: tar or gzip of {rootfs} failed")
    packed = hashlib.sha256()
    with into.open("rb") as f:
        while chunk := f.read(1 << 20):
            packed.update(chunk)
    return "sha256:" + packed.hexdigest(), "sha256:" + raw.hexdigest(), into.stat().st_size


def pack(rootfs: Path, name: str, out: Path, entrypoint: list[str], env: list[str]) -> None:
    """Write the OCI archive of ``rootfs`` as image ``name`` to ``out``."""
    if not rootfs.is_dir():
        sys.exit(f"oci_pack: {rootfs} is not a directory")
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        layer_path = Path(tmp) / "layer.tar.gz"
        layer_digest, diff_id, layer_size = _layer(rootfs, layer_path)
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": env, "Entrypoint": entrypoint or None, "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
        config_bytes = json.dumps(config, sort_keys=True).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _digest(config_bytes),
                "size": len(config_bytes),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": layer_digest,
                    "size": layer_size,
                }
            ],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": _digest(manifest_bytes),
                    "size": len(manifest_bytes),
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        }
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w") as archive:

            def add(member: str, data: bytes) -> None:
                info = tarfile.TarInfo(member)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))

            add("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
            add("index.json", json.dumps(index).encode())
            add("blobs/sha256/" + _digest(config_bytes)[7:], config_bytes)
            add("blobs/sha256/" + _digest(manifest_bytes)[7:], manifest_bytes)
            archive.add(layer_path, "blobs/sha256/" + layer_digest[7:])
        os.replace(partial, out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rootfs", type=Path)
    parser.add_argument("name")
    parser.add_argument("out", type=Path)
    parser.add_argument("--entrypoint", action="append", default=[])
    parser.add_argument("--env", action="append", default=[])
    args = parser.parse_args(argv)
    env = args.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    pack(args.rootfs, args.name, args.out, args.entrypoint, env)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
