"""Invoke the real REST handlers in-process, with events shaped as API Gateway
sends them (stack_model.events.rest_event), over whatever AWS the test set up
(moto). One method per route, so tests read like the contract."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from unittest import mock

import boto3
import botocore.client
from botocore.exceptions import ClientError, EndpointConnectionError

from local_stack.apigateway.rest_api import GatewayResponses
from local_stack.lambda_.runtime import LambdaContext
from local_stack.local_values import local_values
from ops.routes import PATH_PARAMETER, SUBJECT_SEPARATOR, ApiRoute, by_name
from ops.sample_events import delivery_item, sample_delivery_id
from stack_model.events import authorizer_context, rest_event
from stack_model.functions import Handler, function_specs, load_handler
from stack_model.template import table_definition
from support_tickets.core.errors import ApiError, Unauthorized
from support_tickets.core.identity import TENANT_CLAIM, TenantCredentials, token_payload
from support_tickets.core.keys import InvalidTenantId, validate_tenant_id
from tests.conftest import REGION, credentials_for_token, tenant_claims, token_for_claims


@dataclass(frozen=True)
class User:
    """A Cognito user as the authorizer's claims describe it (all strings), of
    the in-process user pool (tokens signed with the tests' key)."""

    tenant_id: str
    username: str = "alice"
    admin: bool = False

    def claims(self) -> dict[str, str]:
        return tenant_claims(self.tenant_id, self.username, admin=self.admin)

    def in_groups(self, *groups: str) -> tuple[dict[str, str], dict[str, str]]:
        """Claims and headers of this user in ``groups``, as API Gateway passes
        them: the claim joined with ",", the ID token in Authorization."""
        claims = {**self.claims(), "cognito:groups": ",".join(groups)}
        return claims, {"Authorization": f"Bearer {token_for_claims(claims, groups=list(groups))}"}

    def as_admin(self) -> User:
        return User(self.tenant_id, f"{self.username}-admin", admin=True)


@dataclass
class ApiResponse:
    status: int
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON, or None for an empty body
    request_id: str
    # The Lambda proxy response as the runtime sends it (JSON, UTF-8): what Lambda's 6 MB limit counts.
    envelope_bytes: int = 0
    # What the invocation had left of its timeout when the function returned.
    remaining_ms: int | None = None

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error_code(self) -> str:
        return str(self.body["error"]["code"])


def parse_response(raw: Mapping[str, Any], request_id: str) -> ApiResponse:
    """A Lambda proxy response, whether it uses ``headers`` or ``multiValueHeaders``."""
    headers = {name.lower(): str(value) for name, value in (raw.get("headers") or {}).items()}
    for name, values in (raw.get("multiValueHeaders") or {}).items():
        headers[name.lower()] = ",".join(str(value) for value in values)
    body = raw.get("body")
    # Python 3.12+ runtimes serialize the answer with ensure_ascii off; never smaller with it on.
    size = max(len(json.dumps(raw, ensure_ascii=ascii).encode()) for ascii in (False, True))
    return ApiResponse(
        status=int(raw["statusCode"]),
        headers=headers,
        body=json.loads(body) if body else None,
        request_id=request_id,
        envelope_bytes=size,
    )


@cache
def _handler(logical_id: str) -> Handler:
    spec = function_specs()[logical_id]
    return load_handler(spec.code_uri, spec.handler)


def _exchanged(token: str) -> TenantCredentials | None:
    """The credentials the authorizer would pass for ``token`` (through the
    authorizer's token exchange, kept per token as API Gateway keeps its answer); none for a token that is no JWT of the
    pool at all (the authorizer would have refused it before any exchange)."""
    try:
        return credentials_for_token(token)
    except (KeyError, ValueError):
        return None


def _valid_tenant(token: str) -> bool:
    try:
        validate_tenant_id((token_payload(token) or {}).get(TENANT_CLAIM))
    except InvalidTenantId:
        return False
    return True


def _authorizer_failed(exc: ApiError, request_id: str) -> ApiResponse:
    """API Gateway's answer when the authorizer's exchange failed: a refused
    token is its ``UNAUTHORIZED`` response (401), anything else made the
    authorizer fail (``AUTHORIZER_FAILURE``, the template's 503)."""
    kind = "UNAUTHORIZED" if isinstance(exc, Unauthorized) else "AUTHORIZER_FAILURE"
    status, headers, body = _gateway_responses().render(kind, "Unauthorized" if kind == "UNAUTHORIZED" else "")
    return parse_response({"statusCode": status, "headers": dict(headers), "body": body.decode()}, request_id)


@cache
def _gateway_responses() -> GatewayResponses:
    return GatewayResponses.from_template(local_values())


# Every route of the template, by its short name (ops/routes.py).
ROUTES: dict[str, ApiRoute] = by_name()
# An in-process invocation's timeout unless a test gives one: the longest an API function
# may run (API Gateway's 29 s), not the template's 10 s. Nothing cuts an invocation here and no
# test asserts a speed, but the functions refuse a DynamoDB attempt that could not end before
# the invocation's deadline (support_tickets.data.deadline): on a loaded machine, 10 s would
# turn slowness before a request's first call into a 503.
IN_PROCESS_TIMEOUT_S = 29.0


@dataclass
class Api:
    """Every route, each through its own function's ``lambda_handler``."""

    invocations: list[ApiResponse] = field(default_factory=list)

    def call(
        self,
        route: str,
        user: User | None,
        *,
        ticket_id: str | None = None,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        raw_body: str | None = None,
        claims: Mapping[str, str] | None = None,
        context: Mapping[str, Any] | None = None,
        environment_tenant: str | None = None,
        timeout_s: float | None = None,
    ) -> ApiResponse:
        """``claims``: the caller's token's (its user's by default); the
        authorizer's context is what the API's authorizer makes of that token
        (the caller and the identity pool's credentials for it; if the exchange
        fails, API Gateway's answer for a refused token or a failed authorizer,
        and no function runs), unless ``context`` is given (what a broken or
        bypassed authorizer would pass). ``environment_tenant``: the Lambda
        context's ``tenant_id`` (tenant isolation mode: the tenant whose
        execution environment runs the request); none by default. ``timeout_s``:
        the function's timeout (the Lambda context's; :data:`IN_PROCESS_TIMEOUT_S` by default)."""
        spec = ROUTES[route]
        request_id = str(uuid.uuid4())
        claims = claims if claims is not None else (user.claims() if user else None)
        authorizer: Mapping[str, Any] | None = context
        if claims is not None:
            # The token the authorizer verified: the request's, or the one these claims came from.
            given = next((v for k, v in (headers or {}).items() if k.lower() == "authorization"), None)
            token = given.removeprefix("Bearer ") if given else token_for_claims(claims)
            if authorizer is None:
                try:
                    credentials = _exchanged(token)
                except ApiError as exc:
                    if not _valid_tenant(token):
                        # The authorizer would refuse this token before any exchange; what
                        # the function does with such a context (a bypassed authorizer) is the test.
                        credentials = None
                    else:
                        response = _authorizer_failed(exc, request_id)
                        self.invocations.append(response)
                        return response
                authorizer = authorizer_context(token_payload(token) or {}, credentials=credentials)
            if given is None:
                # API Gateway passes the verified token on: the token the context came from.
                headers = {**(headers or {}), "Authorization": f"Bearer {token}"}
        event = rest_event(
            spec.method,
            spec.path,
            path_parameters=(spec.path_parameters(ticket_id) or {PATH_PARAMETER: ticket_id})
            if ticket_id is not None
            else None,
            query=query,
            headers=headers,
            body=raw_body if raw_body is not None else (json.dumps(body) if body is not None else None),
            authorizer=authorizer,
            request_id=request_id,
        )
        handler = _handler(spec.function)  # imported before its invocation's time starts, as Lambda does
        lambda_context = LambdaContext(
            function_name=spec.function,
            tenant_id=environment_tenant,
            timeout_s=IN_PROCESS_TIMEOUT_S if timeout_s is None else timeout_s,
        )
        raw = handler(event, lambda_context)
        response = parse_response(raw, request_id)
        response.remaining_ms = lambda_context.get_remaining_time_in_millis()
        self.invocations.append(response)
        return response

    # ------------------------------------------------------------ one per route
    def create(self, user: User, body: Any, headers: Mapping[str, str] | None = None) -> ApiResponse:
        return self.call("create", user, body=body, headers=headers)

    def list_tickets(self, user: User, **query: str) -> ApiResponse:
        return self.call("list", user, query=query or None)

    def get(self, user: User, ticket_id: str, **query: str) -> ApiResponse:
        return self.call("get", user, ticket_id=ticket_id, query=query or None)

    def summary(self, user: User, ticket_id: str) -> ApiResponse:
        return self.call("summary", user, ticket_id=ticket_id)

    def update(self, user: User, ticket_id: str, body: Any, if_match: str | None = None) -> ApiResponse:
        headers = {"If-Match": if_match} if if_match is not None else None
        return self.call("update", user, ticket_id=ticket_id, body=body, headers=headers)

    def comment(self, user: User, ticket_id: str, body: Any) -> ApiResponse:
        return self.call("comment", user, ticket_id=ticket_id, body=body)

    def batch(self, user: User, ticket_ids: list[str], status: str) -> ApiResponse:
        return self.call("batch", user, body={"ticket_ids": ticket_ids, "status": status})

    def delete(self, user: User, ticket_id: str) -> ApiResponse:
        return self.call("delete", user, ticket_id=ticket_id)

    def aggregates(self, user: User) -> ApiResponse:
        return self.call("aggregates", user)

    def history(self, user: User, ticket_id: str, **query: str) -> ApiResponse:
        return self.call("history", user, ticket_id=ticket_id, query=query or None)

    def audit(self, user: User, **query: str) -> ApiResponse:
        return self.call("audit", user, query=query or None)

    # ------------------------------------------------------------ arrange helpers
    def new_ticket(self, user: User, title: str = "Printer on fire", **fields: Any) -> dict[str, Any]:
        response = self.create(user, {"title": title, **fields})
        assert response.status == 201, response.body
        ticket: dict[str, Any] = response.body
        return ticket


def sample_request(api: Api, route: str, user: User, ticket_id: str, **kwargs: Any) -> ApiResponse:
    """A valid request to ``route`` about ``ticket_id`` (for tables of cases):
    the route table's sample body, as an admin of ``user``'s tenant where the
    route needs one. ``kwargs`` go to :meth:`Api.call`. For a route whose path
    names a webhook, ``ticket_id`` is that webhook's id (:func:`new_subject`)."""
    spec = ROUTES[route]
    caller = user.as_admin() if spec.needs.admin and not user.admin else user
    return api.call(
        route,
        caller,
        ticket_id=ticket_id if spec.path_parameter is not None else None,
        body=spec.body(ticket_id),
        **kwargs,
    )


def new_subject(api: Api, route: str, user: User) -> str:
    """What a valid request to ``route`` is about, created in ``user``'s
    tenant: a new webhook's id for a route whose path names a webhook, else a
    new ticket's id."""
    if ROUTES[route].takes_webhook:
        body = ROUTES["webhook_create"].body("")
        response = api.call("webhook_create", user.as_admin(), body=body)
        assert response.status == 201, response.body
        webhook_id = str(response.body["webhook_id"])
        if ROUTES[route].takes_delivery:
            # A delivery of that webhook (only the delivery function makes one): seeded
            boto3.client("dynamodb", region_name=REGION).put_item(
                TableName=table_definition()["TableName"], Item=delivery_item(user.tenant_id, webhook_id)
            )
            return f"{webhook_id}{SUBJECT_SEPARATOR}{sample_delivery_id(webhook_id)}"
        return webhook_id
    return str(api.new_ticket(user)["ticket_id"])


def not_found_code(route: str) -> str:
    """The 404 code of a route whose path or body names something missing (or another tenant's)."""
    return "WEBHOOK_NOT_FOUND" if ROUTES[route].takes_webhook else "TICKET_NOT_FOUND"


@contextmanager
def aws_fails(service: str, error: Exception | Callable[[str], Exception]) -> Iterator[list[str]]:
    """Every ``service`` call raises ``error`` (as if botocore's retries ran out)
    while the block runs; yields the operations that were attempted."""
    original = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009 - private on purpose
    attempted: list[str] = []

    def failing(client: Any, operation: str, params: Any) -> Any:
        if client.meta.service_model.service_name != service:
            return original(client, operation, params)
        attempted.append(operation)
        raise error(operation) if callable(error) and not isinstance(error, Exception) else error

    with mock.patch.object(botocore.client.BaseClient, "_make_api_call", failing):
        yield attempted


def client_error(code: str, **extra: Any) -> Callable[[str], Exception]:
    def make(operation: str) -> Exception:
        response: Any = {"Error": {"Code": code, "Message": code}, **extra}
        return ClientError(response, operation)

    return make


def connection_error() -> Callable[[str], Exception]:
    return lambda operation: EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")


def assert_error(response: ApiResponse, status: int, code: str) -> dict[str, Any]:
    """``response`` is API.md's error body with this status and code; returns the error."""
    assert response.status == status, response.body
    assert response.header("Content-Type") == "application/json"
    assert set(response.body) == {"error"}
    error: dict[str, Any] = response.body["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    assert set(error) <= {"code", "message", "details"}
    assert "Traceback" not in json.dumps(response.body)
    return error


@contextmanager
def aws_calls() -> Iterator[list[tuple[str, str, dict[str, Any]]]]:
    """Record every AWS API call made in the block: (service, operation, parameters)."""
    original = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009 - private on purpose
    calls: list[tuple[str, str, dict[str, Any]]] = []

    def spy(client: Any, operation: str, params: dict[str, Any]) -> Any:
        calls.append((client.meta.service_model.service_name, operation, params))
        return original(client, operation, params)

    with mock.patch.object(botocore.client.BaseClient, "_make_api_call", spy):
        yield calls
