"""API Gateway REST (v1 proxy) events, shaped exactly as API Gateway sends them
behind the API's Lambda authorizer: its context (flat strings: tenant,
username, groups as a JSON array, sub, jti, tier, and the tenant credentials it
obtained for the token) plus ``principalId`` and ``integrationLatency`` under
``requestContext.authorizer``, and the ``Authorization`` header (the
authorizer's identity source) passed through with the token the context came
from."""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from support_tickets.auth.authorizer import caller_context
from support_tickets.core.identity import SUBJECT_CLAIM, TenantCredentials, token_payload

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
    authorizer: Mapping[str, Any] | None = None,
    stage: str = "v1",
    request_id: str | None = None,
    multi_value_query: Mapping[str, Sequence[str]] | None = None,
    default_headers: bool = True,
    source_ip: str = "127.0.0.1",
    api_key: tuple[str | None, str | None] | None = None,
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
            "identity": {
                "sourceIp": source_ip,
                "userAgent": all_headers.get("User-Agent", "local"),
                "apiKey": api_key[0] if api_key else None,
                "apiKeyId": api_key[1] if api_key else None,
            },
            "domainName": "localhost",
            "apiId": "local",
            "authorizer": dict(authorizer) if authorizer is not None else None,
        },
        "body": body,
        "isBase64Encoded": False,
    }


def authorizer_context(
    claims: Mapping[str, Any], tier: str | None = "basic", credentials: TenantCredentials | None = None
) -> dict[str, Any]:
    """``requestContext.authorizer`` as API Gateway passes the API's Lambda
    authorizer's answer for a token with these claims (its payload) and the
    tenant credentials it obtained for that token (none: what a broken
    authorizer would pass, a 401 in every function)."""
    return {
        **caller_context(claims, tier),
        **(credentials.as_context() if credentials is not None else {}),
        "principalId": str(claims.get(SUBJECT_CLAIM, "")),
        "integrationLatency": 0,
    }


def with_token(event: Mapping[str, Any], token: str, credentials: TenantCredentials | None) -> dict[str, Any]:
    """``event`` as API Gateway would send it for a request bearing ``token``:
    the ``Authorization`` header (single- and multi-value) and the authorizer's
    context for that token, with the ``credentials`` it obtained for it. Its
    payload is decoded, not verified: the caller vouches for it (a token of the
    local user pool, or the tests' signing key)."""
    payload = token_payload(token)
    if payload is None:
        raise ValueError("not a JWT")
    authorized = copy.deepcopy(dict(event))
    for name in [name for name in authorized.get("headers") or {} if name.lower() == "authorization"]:
        del authorized["headers"][name]
    for name in [name for name in authorized.get("multiValueHeaders") or {} if name.lower() == "authorization"]:
        del authorized["multiValueHeaders"][name]
    authorized.setdefault("headers", {})["Authorization"] = f"Bearer {token}"
    authorized.setdefault("multiValueHeaders", {})["Authorization"] = [f"Bearer {token}"]
    authorized["requestContext"]["authorizer"] = authorizer_context(payload, credentials=credentials)
    return authorized
