"""What the guard reads of an AWS API request, as the services' protocols
carry it: the whole body (:func:`read_body`), the parameters of a
query-protocol call (STS, SQS's query form: the query string and a form body,
:func:`query_params`) or of a JSON-protocol one (an ``X-Amz-Target``,
:func:`request_params`), the action the call names, and the service its
credential scope claims (:func:`claimed_service`, how to word a refusal of its
signature).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from local_stack.iam import sigv4
from local_stack.iam.sessions import signer_of

Environ = dict[str, Any]

_IDENTITY_POOL_TARGET = "AWSCognitoIdentityService."
_DYNAMODB_TARGETS = ("DynamoDB_", "DynamoDBStreams_")  # DynamoDB_20120810., DynamoDBStreams_20120810.


def read_body(environ: Environ) -> bytes:
    """The whole body: ``Content-Length`` bytes, or a chunked body to its end
    (werkzeug decodes the chunks and marks the input terminated)."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > 0:
        return bytes(environ["wsgi.input"].read(length))
    if environ.get("wsgi.input_terminated"):
        return bytes(environ["wsgi.input"].read())
    return b""


def json_object(body: bytes) -> dict[str, Any] | None:
    """A JSON-protocol body (empty: ``{}``); ``None`` when it is not a JSON object."""
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def query_params(environ: Environ, body: bytes) -> dict[str, str]:
    """A query-protocol call's parameters: the query string's, then a form
    body's (a repeated name: its last value)."""
    params = {key: values[-1] for key, values in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if "x-www-form-urlencoded" in environ.get("CONTENT_TYPE", ""):
        params.update({key: values[-1] for key, values in parse_qs(body.decode("utf-8", "replace")).items()})
    return params


def request_params(environ: Environ, body: bytes, target: str) -> dict[str, Any]:
    """A JSON-protocol body (calls with an X-Amz-Target; ``{}`` when it is not
    an object), else the query parameters."""
    if target:
        return json_object(body) or {}
    return dict(query_params(environ, body))


def action_of(target: str, params: Mapping[str, Any]) -> str:
    """The action an X-Amz-Target names (``AmazonSQS.SendMessage``), else the
    query's ``Action``."""
    return target.split(".", 1)[1] if "." in target else str(params.get("Action", ""))


def dynamodb_operation(target: str) -> str:
    """The operation a DynamoDB (or DynamoDB Streams) X-Amz-Target names."""
    return target.split(".", 1)[1] if target.startswith(_DYNAMODB_TARGETS) else target


def identity_pool_action(target: str) -> str:
    """The Cognito identity pool's action an X-Amz-Target names ("" for any other service's)."""
    return target.removeprefix(_IDENTITY_POOL_TARGET) if target.startswith(_IDENTITY_POOL_TARGET) else ""


def claimed_service(environ: Environ) -> str:
    """The service a request's credential scope names (how to word a refusal
    of its signature), as moto would read it; "" when there is none."""
    authorization = environ.get("HTTP_AUTHORIZATION", "")
    if authorization:
        signer = signer_of(authorization)
        return signer.service if signer is not None else ""
    credential = dict(sigv4.query_pairs(environ)).get("X-Amz-Credential", "")
    parts = credential.split("/")
    return parts[3].lower() if len(parts) == 5 else ""
