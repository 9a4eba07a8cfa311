"""API Gateway REST (v1 proxy) events, shaped exactly as API Gateway sends them
with a Cognito user-pool authorizer: claims are strings under
``requestContext.authorizer.claims``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any


def rest_event(
    method: str,
    resource: str,
    *,
    path_parameters: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    body: str | None = None,
    claims: Mapping[str, str] | None = None,
    stage: str = "v1",
    request_id: str | None = None,
) -> dict[str, Any]:
    path = resource
    for name, value in (path_parameters or {}).items():
        path = path.replace("{" + name + "}", value)
    all_headers = {"Accept": "application/json", "Host": "localhost", **(headers or {})}
    if body is not None:
        all_headers.setdefault("Content-Type", "application/json")
    request_id = request_id or str(uuid.uuid4())
    now = time.time()
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": all_headers,
        "multiValueHeaders": {name: [value] for name, value in all_headers.items()},
        "queryStringParameters": dict(query) if query else None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": dict(path_parameters) if path_parameters else None,
        "stageVariables": None,
        "requestContext": {
            "resourceId": "local",
            "resourcePath": resource,
            "httpMethod": method,
            "extendedRequestId": request_id,
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "path": f"/{stage}{path}",
            "accountId": "123456789012",
            "protocol": "HTTP/1.1",
            "stage": stage,
            "domainPrefix": "localhost",
            "requestTimeEpoch": int(now * 1000),
            "requestId": request_id,
            "identity": {"sourceIp": "127.0.0.1", "userAgent": all_headers.get("User-Agent", "local")},
            "domainName": "localhost",
            "apiId": "local",
            "authorizer": {"claims": dict(claims)} if claims is not None else None,
        },
        "body": body,
        "isBase64Encoded": False,
    }
