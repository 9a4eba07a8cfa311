"""API Gateway REST (v1 proxy) events, shaped exactly as API Gateway sends them
with a Cognito user-pool authorizer: claims are strings under
``requestContext.authorizer.claims``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

# The app client of the sample events (events/) and of the in-process tests'
# claims: what ALLOWED_CLIENT_IDS names wherever such events are invoked.
SAMPLE_CLIENT_ID = "1example23456789exampleclient"


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
    multi_value_query: Mapping[str, Sequence[str]] | None = None,
    default_headers: bool = True,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """``query`` holds one value per name (API Gateway keeps the last);
    ``multi_value_query`` all of them (derived from ``query`` when omitted).
    ``default_headers=False`` passes ``headers`` exactly as received."""
    path = resource
    for name, value in (path_parameters or {}).items():
        path = path.replace("{" + name + "}", value)
    all_headers = {"Accept": "application/json", "Host": "localhost"} if default_headers else {}
    all_headers.update(headers or {})
    if body is not None and default_headers:
        all_headers.setdefault("Content-Type", "application/json")
    if multi_value_query is None and query:
        multi_value_query = {k: [v] for k, v in query.items()}
    request_id = request_id or str(uuid.uuid4())
    now = time.time()
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": all_headers,
        "multiValueHeaders": {name: [value] for name, value in all_headers.items()},
        "queryStringParameters": dict(query) if query else None,
        "multiValueQueryStringParameters": {k: list(v) for k, v in multi_value_query.items()}
        if multi_value_query
        else None,
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
            "identity": {"sourceIp": source_ip, "userAgent": all_headers.get("User-Agent", "local")},
            "domainName": "localhost",
            "apiId": "local",
            "authorizer": {"claims": dict(claims)} if claims is not None else None,
        },
        "body": body,
        "isBase64Encoded": False,
    }
