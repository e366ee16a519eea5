"""The training request (request.json a handoff writes) and the objects it names.

Every object is read and checked against the request's bytes and sha256 before any training: a request
pins its data, so a changed object means the data is not what the handoff approved.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlparse


class BadInput(Exception):
    """Input the trainer refuses before training: exit code 2, one line starting with [CODE]."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code


def where(uri: str, row: int | None = None, fld: str | None = None) -> str:
    """'<uri> row 3 field loss_mask' — how every refusal names what it refuses."""
    parts = [uri]
    if row is not None:
        parts.append(f"row {row}")
    if fld is not None:
        parts.append(f"field {fld}")
    return " ".join(parts)


def _s3_client() -> Any:
    import boto3  # only when an s3:// URI is used: local runs need no AWS SDK
    from botocore.config import Config

    endpoint = os.environ.get("S3_ENDPOINT") or None
    # The pipeline's own rules (shared/config/env.ts): path-style addressing for an S3-compatible
    # endpoint unless S3_FORCE_PATH_STYLE=false, and checksums only where required (S3-compatible
    # servers reject or mangle the SDK's default checksums).
    path_style = os.environ.get("S3_FORCE_PATH_STYLE", "true" if endpoint else "false") == "true"
    config = Config(s3={"addressing_style": "path" if path_style else "auto"},
                    request_checksum_calculation="when_required", response_checksum_validation="when_required")
    return boto3.client(
        "s3", endpoint_url=endpoint, region_name=os.environ.get("S3_REGION") or None, config=config,
    )  # credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN from the environment


def _s3_location(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    return parsed.netloc, unquote(parsed.path.lstrip("/"))


def local_path(uri: str) -> Path | None:
    """The file a file:// URI or a plain path names; None for s3://."""
    if uri.startswith("s3://"):
        return None
    if uri.startswith("file://"):
        return Path(unquote(urlparse(uri).path))
    return Path(uri)


def read_uri(uri: str) -> bytes:
    path = local_path(uri)
    if path is not None:
        return path.read_bytes()
    bucket, key = _s3_location(uri)
    return _s3_client().get_object(Bucket=bucket, Key=key)["Body"].read()


def write_uri(uri: str, data: bytes) -> None:
    """Writes whole: a local file through a temp file and rename, an S3 object in one PUT."""
    path = local_path(uri)
    if path is None:
        bucket, key = _s3_location(uri)
        _s3_client().put_object(Bucket=bucket, Key=key, Body=data, ContentType="application/json")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, 0o644)   # mkstemp's 0600 would keep a worker running as another user from reading it
    os.replace(tmp, path)


@dataclass
class Request:
    uri: str
    sha256: str
    data: dict[str, Any]
    objects: list[dict[str, Any]] = field(default_factory=list)  # every dataset object, in request order

    @property
    def policy_version(self) -> int | None:
        return self.data.get("policyVersion")

    @property
    def tokenizer_fingerprint(self) -> str | None:
        return (self.data.get("tokenizer") or {}).get("fingerprint")


def load_request(uri: str) -> Request:
    if local_path(uri) is not None and not uri.startswith("file://"):
        uri = Path(uri).resolve().as_uri()   # a plain path is recorded as the file:// URI it names
    try:
        raw = read_uri(uri)
    except (OSError, ValueError) as error:
        raise BadInput("REQUEST_UNREADABLE", f"{uri}: cannot read the request ({error}); pass the request.json a handoff wrote") from error
    try:
        data = json.loads(raw)
        datasets = data["datasets"]
        objects = [dict(obj, datasetIndex=i) for i, ds in enumerate(datasets) for obj in ds["objects"]]
    except (ValueError, KeyError, TypeError) as error:
        raise BadInput("BAD_REQUEST", f"{uri}: not a training request ({error!r}); pass the request.json a handoff wrote") from error
    return Request(uri, hashlib.sha256(raw).hexdigest(), data, objects)


def verify_objects(request: Request, keep: Callable[[dict[str, Any]], bool] = lambda obj: obj.get("format") == "parquet") -> dict[str, bytes]:
    """Reads every object and checks its bytes and sha256; returns the contents of the objects `keep` selects."""
    kept: dict[str, bytes] = {}
    for obj in request.objects:
        uri = obj["uri"]
        try:
            content = read_uri(uri)
        except OSError as error:
            raise BadInput("OBJECT_MISSING", f"{uri}: cannot read an object of the request ({error}); restore it or rerun the stage that wrote it") from error
        sha = hashlib.sha256(content).hexdigest()
        if len(content) != obj.get("bytes") or sha != obj.get("sha256"):
            raise BadInput(
                "OBJECT_CHANGED",
                f"{where(uri, fld='sha256')}: the object has {len(content)} bytes, sha256 {sha}; the request pinned "
                f"{obj.get('bytes')} bytes, sha256 {obj.get('sha256')}; rerun the stage and the handoff to get a request for the data as it is",
            )
        if keep(obj):
            kept[uri] = content
    return kept
