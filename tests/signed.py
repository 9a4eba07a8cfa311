"""WSGI requests signed by botocore, as the emulator's guard receives them
(for the guard's tests: the same bytes a boto3 client would send)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from unittest import mock
from urllib.parse import unquote, urlsplit

from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotocoreCredentials

from local_stack.iam.sigv4 import Credentials

HOST = "127.0.0.1:4566"
OPERATOR = Credentials("LOCALOPERATOR", "local-operator-secret")


def signed_environ(
    credentials: Credentials | None,
    service: str = "dynamodb",
    *,
    target: str = "",
    body: bytes = b"",
    method: str = "POST",
    path: str = "/",
    query: str = "",
    headers: Mapping[str, str] | None = None,
    content_type: str | None = None,
    region: str = "us-east-1",
    presign_seconds: int | None = None,
    when: datetime | None = None,
    host: str = HOST,
) -> dict[str, Any]:
    """The environ of a request signed with ``credentials`` (``None``: unsigned)
    by botocore's SigV4 signer: in the ``Authorization`` header, or presigned
    for ``presign_seconds``; at ``when`` (default: now)."""
    all_headers = {"Host": host, **(headers or {})}
    if target:
        all_headers["X-Amz-Target"] = target
        all_headers.setdefault("Content-Type", content_type or "application/x-amz-json-1.0")
    elif content_type:
        all_headers["Content-Type"] = content_type
    url = f"http://{host}{path}" + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url, headers=all_headers, data=body)
    if credentials is not None:
        keys = BotocoreCredentials(credentials.access_key_id, credentials.secret_access_key, credentials.session_token)
        signer = (
            SigV4Auth(keys, service, region)
            if presign_seconds is None
            else SigV4QueryAuth(keys, service, region, expires=presign_seconds)
        )
        if when is None:
            signer.add_auth(request)
        else:
            with mock.patch("botocore.auth.get_current_datetime", return_value=when.replace(tzinfo=None)):
                signer.add_auth(request)
    return environ_of(method, str(request.url), dict(request.headers.items()), body)


def environ_of(method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """What werkzeug's server makes of such a request."""
    parts = urlsplit(url)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": unquote(parts.path),
        "RAW_URI": parts.path + (f"?{parts.query}" if parts.query else ""),
        "QUERY_STRING": parts.query,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    for name, value in headers.items():
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            environ[key] = value
        else:
            environ[f"HTTP_{key}"] = value
    environ.setdefault("CONTENT_TYPE", "")
    return environ
