"""The checkpoint store on S3 (AWS, or any implementation that honours conditional writes).

Publication entries are written with ``If-None-Match: *``: the store itself refuses to replace a
key that exists, so no zombie execution can overwrite a published entry, and of two executions
publishing the same step exactly one wins. Listings page through ``ListObjectsV2`` with a prefix,
a delimiter where folders are wanted, and continuation tokens. Save data goes through boto3's
transfer manager (multipart above the threshold, parts in parallel), and each file's ETag and
SHA-256 (of the local file, read beside the upload) are recorded in the entry, so resolve can
tell when published data was replaced, and checks what it downloaded byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from jobdispatch.errors import (
    DispatchError,
    NotFound,
    Unauthorized,
    Unavailable,
    Unreachable,
)

from jobdispatch_publish.config import S3Settings
from jobdispatch_publish.entry import FileRecord
from jobdispatch_publish.errors import Corrupt, RootUnavailable, SaveChanged
from jobdispatch_publish.root import S3Root
from jobdispatch_publish.store import Exists, LocalFile, ObjectInfo, Progress
from jobdispatch_publish.verify import check_folder, hash_file

__all__ = ["S3Store", "translate"]

_AUTH_CODES = {
    "SignatureDoesNotMatch": "the secret key does not match the access key",
    "InvalidAccessKeyId": "the access key is not known to the store",
    "AccessDenied": "access denied",
    "InvalidToken": "the session token is not valid",
    "ExpiredToken": "the session token has expired",
    "TokenRefreshRequired": "the session token has expired",
}


def translate(exc: BaseException, what: str) -> DispatchError | None:
    """A botocore failure as this package's error, naming ``what`` was being done; else None."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    if isinstance(exc, DispatchError):
        return exc
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in _AUTH_CODES or status == 403:
            reason = _AUTH_CODES.get(code, code or "forbidden")
            return Unauthorized(f"the store refused {what}: {reason} ({code or status})")
        if code == "NoSuchBucket":
            return RootUnavailable(f"{what}: the bucket does not exist (NoSuchBucket)")
        if code in ("NoSuchKey", "404", "NotFound"):
            return NotFound(f"{what}: not found")
        if status >= 500 or code in ("SlowDown", "ServiceUnavailable", "InternalError"):
            return Unavailable(f"the store could not serve {what}: {code or status}")
        return None
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError | ConnectionClosedError):
        return Unreachable(f"the store cannot be reached ({what}): {type(exc).__name__}")
    if isinstance(exc, ReadTimeoutError):
        return Unavailable(f"the store did not answer in time ({what})")
    if isinstance(exc, NoCredentialsError):
        return Unauthorized(f"no credentials to sign {what}")
    return None


class S3Store:
    """A :class:`~jobdispatch_publish.store.Store` over one bucket and prefix."""

    def __init__(self, root: S3Root, client: Any, settings: S3Settings | None = None) -> None:
        self.root = root
        self.client = client
        self.settings = settings or S3Settings()

    def describe(self, key: str = "") -> str:
        return f"s3://{self.root.bucket}/{self.root.key(key)}" if key else str(self.root)

    def local_path(self, key: str) -> Path | None:
        return None

    def check_root(self) -> None:
        """:class:`RootUnavailable` if the bucket does not exist; refused credentials and an
        unreachable store are reported as such. (A prefix with no keys is an empty root: S3 has
        no folders.) A one-key listing rather than ``HeadBucket``, whose errors have no body and
        so no reason, and which needs no permission beyond what resolve needs anyway."""
        self._call(
            f"listing {self.root}",
            self.client.list_objects_v2,
            Prefix=self.root.key(""),
            MaxKeys=1,
        )

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        try:
            return fn(Bucket=self.root.bucket, **kwargs)
        except Exception as exc:
            mapped = translate(exc, what)
            if mapped is None:
                raise
            raise mapped from None

    def _call_on_object(self, what: str, fn: Any, key: str) -> Any | None:
        """:meth:`_call` of ``fn`` on the object at ``key``; None when there is no such object."""
        try:
            return self._call(what, fn, Key=self.root.key(key))
        except NotFound:
            return None

    # -- small objects -------------------------------------------------------------------------

    def create(self, key: str, data: bytes) -> None:
        from botocore.exceptions import ClientError

        full = self.root.key(key)
        for _ in range(5):
            try:
                self.client.put_object(
                    Bucket=self.root.bucket, Key=full, Body=data, IfNoneMatch="*"
                )
                return
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if status == 412 or code == "PreconditionFailed":
                    raise Exists(key) from None
                if status == 409 or code == "ConditionalRequestConflict":
                    continue  # a concurrent conditional write is in flight: ask again
                raise translate(exc, f"writing {self.describe(key)}") or exc from None
            except Exception as exc:
                raise translate(exc, f"writing {self.describe(key)}") or exc from None
        msg = f"writing {self.describe(key)}: conditional write kept conflicting"
        raise Unavailable(msg)

    def write(self, key: str, data: bytes) -> None:
        self._call(
            f"writing {self.describe(key)}",
            self.client.put_object,
            Key=self.root.key(key),
            Body=data,
        )

    def replace_marks(self, key: str, old: Sequence[str]) -> None:
        """One ``PutObject`` of the empty mark, then one ``DeleteObjects`` of those it replaces
        (S3 has no rename; AWS does not charge for deletions)."""
        self.write(key, b"")
        self.delete([k for k in old if k != key])

    def read(self, key: str) -> bytes | None:
        reply = self._call_on_object(f"reading {self.describe(key)}", self.client.get_object, key)
        if reply is None:
            return None
        body: bytes = reply["Body"].read()
        return body

    def stat(self, key: str) -> ObjectInfo | None:
        what = f"looking up {self.describe(key)}"
        reply = self._call_on_object(what, self.client.head_object, key)
        if reply is None:
            return None
        return ObjectInfo(
            int(reply["ContentLength"]), reply.get("ETag"), reply["LastModified"].timestamp()
        )

    # -- listing -------------------------------------------------------------------------------

    def _pages(
        self, prefix: str, *, delimiter: str | None, page: int = 1000
    ) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"Prefix": self.root.key(prefix), "MaxKeys": page}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        while True:
            reply = self._call(
                f"listing {self.describe(prefix)}", self.client.list_objects_v2, **kwargs
            )
            yield reply
            if not reply.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = reply["NextContinuationToken"]

    def _relative(self, full: str) -> str:
        return full[len(self.root.prefix) + 1 :] if self.root.prefix else full

    def keys(self, prefix: str, *, limit: int | None = None, page: int = 1000) -> Iterator[str]:
        count = 0
        page = page if limit is None else max(1, min(page, limit))
        for reply in self._pages(prefix, delimiter=None, page=page):
            for obj in reply.get("Contents", []):
                if limit is not None and count >= limit:
                    return
                count += 1
                yield self._relative(obj["Key"])

    def children(self, prefix: str, *, page: int = 1000) -> Iterator[str]:
        for reply in self._pages(prefix, delimiter="/", page=page):
            for p in reply.get("CommonPrefixes", []):
                yield self._relative(p["Prefix"])

    def delete(self, keys: Iterable[str]) -> None:
        batch: list[str] = []
        for key in keys:
            batch.append(self.root.key(key))
            if len(batch) == 1000:
                self._delete_batch(batch)
                batch = []
        if batch:
            self._delete_batch(batch)

    def _delete_batch(self, keys: list[str]) -> None:
        reply = self._call(
            f"deleting {len(keys)} objects under {self.root}",
            self.client.delete_objects,
            Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True},
        )
        errors = [e for e in reply.get("Errors", []) if e.get("Code") != "NoSuchKey"]
        if errors:
            first = errors[0]
            msg = f"deleting {first.get('Key')}: {first.get('Code')} ({len(errors)} failed)"
            raise Unavailable(msg)

    # -- saves ---------------------------------------------------------------------------------

    def _transfer_config(self) -> Any:
        from boto3.s3.transfer import TransferConfig

        s = self.settings
        return TransferConfig(
            multipart_threshold=s.multipart_threshold,
            multipart_chunksize=s.multipart_chunksize,
            max_concurrency=s.max_concurrency,
            max_bandwidth=s.max_bandwidth,
        )

    def _transfer(self, what: str, submit: Any, meanwhile: Any = None) -> Any:
        """Run transfers through one manager and wait for all; the first failure is raised.
        ``meanwhile()`` runs in this thread while the manager's threads transfer; its answer is
        returned."""
        from boto3.s3.transfer import create_transfer_manager

        manager = create_transfer_manager(self.client, self._transfer_config())
        result = None
        try:
            futures = submit(manager)
            if meanwhile is not None:
                result = meanwhile()
            for future in futures:
                future.result()
        except BaseException as exc:
            manager.shutdown(cancel=True)
            mapped = translate(exc, what) if isinstance(exc, Exception) else None
            if mapped is None:
                raise
            raise mapped from None
        manager.shutdown()
        return result

    def put_files(
        self, files: Sequence[LocalFile], prefix: str, progress: Progress | None = None
    ) -> list[FileRecord]:
        from boto3.s3.transfer import ProgressCallbackInvoker

        subscribers = [ProgressCallbackInvoker(progress)] if progress else None

        def submit(manager: Any) -> list[Any]:
            return [
                manager.upload(
                    str(f.path),
                    self.root.bucket,
                    self.root.key(prefix + f.relative),
                    None,
                    subscribers,
                )
                for f in files
            ]

        # The digests are read from the local files while the upload runs (hashlib releases the
        # GIL, so this overlaps the transfer); a file that changed meanwhile fails the size check
        # here or publish's fingerprint check.
        digests = self._transfer(
            f"uploading to {self.describe(prefix)}",
            submit,
            meanwhile=lambda: [hash_file(f.path) for f in files],
        )
        # One listing gives every ETag and size, and proves every part of the save is there.
        uploaded = {}
        for reply in self._pages(prefix, delimiter=None):
            for obj in reply.get("Contents", []):
                uploaded[self._relative(obj["Key"])[len(prefix) :]] = obj
        records = []
        for f, (size, sha256) in zip(files, digests, strict=True):
            obj = uploaded.get(f.relative)
            if obj is None or int(obj["Size"]) != f.size or size != f.size:
                got = "missing" if obj is None else f"{obj['Size']} bytes"
                where = self.describe(prefix + f.relative)
                msg = f"{f.path}: expected {f.size} bytes at {where}, {got} (local: {size})"
                raise SaveChanged(msg)
            records.append(FileRecord(f.relative, f.size, obj["ETag"], sha256))
        return records

    def _check(self, record: FileRecord, key: str) -> None:
        info = self.stat(key)
        if info is None:
            msg = f"{self.describe(key)} is listed in the publication entry but missing"
            raise Corrupt(msg)
        if info.size != record.size or (record.etag and info.etag != record.etag):
            msg = (
                f"{self.describe(key)} changed after it was published "
                f"(entry: {record.size} bytes, {record.etag}; now: {info.size} bytes, {info.etag})"
            )
            raise Corrupt(msg)

    def get_files(
        self,
        records: Sequence[FileRecord],
        prefix: str,
        dest: Path,
        progress: Progress | None = None,
    ) -> None:
        from boto3.s3.transfer import ProgressCallbackInvoker

        for r in records:
            self._check(r, prefix + r.path)
        subscribers = [ProgressCallbackInvoker(progress)] if progress else None

        def submit(manager: Any) -> list[Any]:
            futures = []
            for r in records:
                target = dest / r.path
                target.parent.mkdir(parents=True, exist_ok=True)
                futures.append(
                    manager.download(
                        self.root.bucket,
                        self.root.key(prefix + r.path),
                        str(target),
                        None,
                        subscribers,
                    )
                )
            return futures

        self._transfer(f"downloading {self.describe(prefix)}", submit)
        # Checked again after: a replacement during the download would show a different ETag.
        for r in records:
            self._check(r, prefix + r.path)
        # And what arrived, byte for byte, against the digests recorded at publication.
        check_folder(records, dest)

    def sweep_incomplete(self, prefix: str, older_than: float) -> int:
        aborted = 0
        kwargs: dict[str, Any] = {"Prefix": self.root.key(prefix)}
        while True:
            reply = self._call(
                f"listing unfinished uploads under {self.describe(prefix)}",
                self.client.list_multipart_uploads,
                **kwargs,
            )
            for upload in reply.get("Uploads", []):
                if upload["Initiated"].timestamp() < older_than:
                    self._call(
                        f"aborting an unfinished upload of {upload['Key']}",
                        self.client.abort_multipart_upload,
                        Key=upload["Key"],
                        UploadId=upload["UploadId"],
                    )
                    aborted += 1
            if not reply.get("IsTruncated"):
                return aborted
            kwargs["KeyMarker"] = reply.get("NextKeyMarker")
            kwargs["UploadIdMarker"] = reply.get("NextUploadIdMarker")
