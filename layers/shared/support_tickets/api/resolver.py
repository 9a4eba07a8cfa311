"""API plumbing of every REST function: the resolver, the caller, the checked input, the one error table.

That table maps every domain error to API.md's body for it.

Order of answers for a request (see :func:`handle`): identity from the
authorizer claims (401/403), an execution environment of another tenant
(403), body size (413), a JSON ``Content-Type`` for a body (400),
then the query, headers and body against what the route declares
(:mod:`support_tickets.api.validation`, 400), then the route. Everything that
goes wrong after that is an :class:`~support_tickets.core.errors.ApiError`
raised by the domain and turned into a response here, never in a handler.
The identity is read before the 413 is answered, so that a request the
authorizer let through logs its ``"request handled"`` line under the tenant
of the authorizer's context (API Gateway's, never the client's), whatever the
answer; only a request with no valid caller logs none.

In Lambda's tenant isolation mode (``TenantIsolationMode=PER_TENANT``) the
context names the tenant whose execution environment runs the request
(``context.tenant_id``, from the ``X-Amz-Tenant-Id`` API Gateway maps from the
authorizer's context). A request whose caller is another tenant is refused,
403 ``FORBIDDEN``, before it touches anything: this environment may hold that
other tenant's state. Lambda and API Gateway make that impossible as
configured; the check holds if either is misconfigured (a header mapped from
the client's request, a direct invocation with another ``--tenant-id``).
Without the mode the context has no tenant and nothing is checked.

Powertools' own request validation stays off (``enable_validation=False``): it
is built on pydantic, whose import alone is more than a fifth of a cold
start's floor; our declarations are plain JSON Schema, documented as they are.
"""

from __future__ import annotations

import json
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from support_tickets.api.validation import CheckedInput, RouteInput, read_input
from support_tickets.core.errors import (
    ApiError,
    Forbidden,
    InvalidJson,
    PayloadTooLarge,
    QuotaExceeded,
    TenantSuspended,
    Throttled,
    TicketNotFound,
    Unauthorized,
    Unavailable,
    ValidationFailed,
)
from support_tickets.core.identity import Caller, caller_from_event
from support_tickets.core.models import ErrorResponse
from support_tickets.core.settings import get_settings
from support_tickets.core.tracing import make_tracer
from support_tickets.data import deadline
from support_tickets.usage import meter

logger = Logger()
tracer = make_tracer()
metrics = Metrics()
# Most requests add no metric of their own: Powertools' warning after each of them
# would be a log line per request saying nothing (its documented way to silence it).
warnings.filterwarnings("ignore", message="No application metrics to publish")

MAX_BODY_BYTES = 64 * 1024
CALLER_CONTEXT_KEY = "caller"
INPUT_CONTEXT_KEY = "input"
# The reason a request is refused when its caller's tenant is not the one its
# execution environment serves (tenant isolation mode); names neither tenant.
FOREIGN_ENVIRONMENT_MESSAGE = "This request reached an execution environment of another tenant."
# The one line per request that records its outcome (with the tenant_id every
# line of the request carries) and its usage: the stack's Contributor Insights
# rules count it, the metering function folds it into the tenant's usage.
REQUEST_OUTCOME_MESSAGE = "request handled"


def error_response(exc: ApiError) -> Response[Any]:
    if exc.status >= 500:
        logger.warning("request failed", extra={"code": exc.code})
    return Response(
        status_code=exc.status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(exc.body()),
        headers=exc.headers(),
    )


NotFoundOf = Callable[[Mapping[str, str]], ApiError]


def _route_not_matched(app: RestApp, not_found: type[ApiError] | NotFoundOf) -> Any:
    # API Gateway only invokes a function for its own route, so a path the
    # resolver can't match has an id ({ticket_id}, {webhook_id}) with
    # characters no such id has (e.g. "#"): not found, like any other invalid id.
    # A path with two ids says which one with a function of the path's parameters.
    def response(exc: NotFoundError) -> Response[Any]:
        if isinstance(not_found, type):
            return error_response(not_found())
        return error_response(not_found(app.current_event.path_parameters or {}))

    return response


def _unexpected_error_response(exc: Exception) -> Response[Any]:
    logger.exception("unhandled error")
    metrics.add_metric(name="UnhandledError", unit=MetricUnit.Count, value=1)
    return Response(
        status_code=500,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps({"error": {"code": "INTERNAL_ERROR", "message": "Internal error."}}),
    )


class RestApp(APIGatewayRestResolver):
    """Powertools' REST resolver with the one route's declared input
    (``accepts``), which :func:`handle` checks and ops/openapi.py documents."""

    def __init__(self, accepts: RouteInput) -> None:
        super().__init__()
        self.accepts = accepts

    @property
    def checked_input(self) -> CheckedInput:
        """This request's body and parameters, as :func:`handle` checked them against ``accepts``."""
        given = self.context.get(INPUT_CONTEXT_KEY)
        if not isinstance(given, CheckedInput):  # handle() always sets it; belt and braces
            raise ApiError()
        return given


def create_app(accepts: RouteInput | None = None, not_found: type[ApiError] | NotFoundOf = TicketNotFound) -> RestApp:
    """The resolver a REST function registers its one route on, with what that
    route accepts besides its path (nothing, by default: any query parameter is a 400),
    and the error of an id in its path that no such thing can have."""
    app = RestApp(accepts or RouteInput())
    app.exception_handler(ApiError)(error_response)
    app.exception_handler(NotFoundError)(_route_not_matched(app, not_found))
    app.exception_handler(Exception)(_unexpected_error_response)
    return app


# Errors any route can answer: a bad request, the caller's token (401, or 403 for
# a malformed tenant claim), a suspended tenant (403), the body size, and AWS
# pushing back.
COMMON_ERRORS: tuple[type[ApiError], ...] = (
    ValidationFailed,
    InvalidJson,
    Unauthorized,
    Forbidden,
    TenantSuspended,
    PayloadTooLarge,
    Throttled,
    QuotaExceeded,
    Unavailable,
)


def openapi_responses(status: int, description: str, *errors: type[ApiError]) -> dict[int, OpenAPIResponse]:
    """A route's documented responses: its success (schema from the return
    annotation; none for 204) and ``ErrorResponse`` for every error it can give,
    the common ones plus ``errors``. Used in each route's decorator, so the
    OpenAPI document comes from the handlers themselves."""
    responses: dict[int, OpenAPIResponse] = {status: {"description": description}}
    if status in {202, 204}:  # no body
        responses[status]["content"] = {}
    by_status: defaultdict[int, list[type[ApiError]]] = defaultdict(list)
    for error in (*COMMON_ERRORS, *errors):
        if error not in by_status[error.status]:
            by_status[error.status].append(error)
    for code, classes in sorted(by_status.items()):
        response: OpenAPIResponse = {
            "description": " ".join(f"`{error.code}`: {error.default_message}" for error in classes),
            "content": {content_types.APPLICATION_JSON: {"model": ErrorResponse}},
        }
        if code in {Throttled.status, QuotaExceeded.status, Unavailable.status}:
            response["headers"] = {
                "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}
            }
        responses[code] = response
    return responses


def current_caller(app: APIGatewayRestResolver) -> Caller:
    caller = app.context.get(CALLER_CONTEXT_KEY)
    if not isinstance(caller, Caller):  # handle() always sets it; belt and braces
        raise ApiError()
    return caller


def _proxy_response(response: Response[Any]) -> dict[str, Any]:
    return {
        "statusCode": response.status_code,
        "headers": {"Content-Type": content_types.APPLICATION_JSON, **{k: str(v) for k, v in response.headers.items()}},
        "body": response.body,
        "isBase64Encoded": False,
    }


def _require_json_body(event: Mapping[str, Any]) -> None:
    """A body is JSON, whatever case its media type is written in (no ``Content-Type``: JSON assumed)."""
    if not event.get("body"):
        return
    headers = {str(name).lower(): value for name, value in (event.get("headers") or {}).items()}
    media_type = str(headers.get("content-type") or "application/json").split(";", 1)[0].strip().lower()
    if media_type != content_types.APPLICATION_JSON:
        raise ValidationFailed(details=[{"field": "Content-Type", "message": "must be application/json"}])


def _body_size(event: Mapping[str, Any]) -> int:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return len(body) * 3 // 4
    return len(body.encode("utf-8"))


def usage_fields(event: Mapping[str, Any], context: LambdaContext, consumed: meter.Consumed) -> dict[str, Any]:
    """The request's usage, as its ``"request handled"`` line carries it (docs/usage.md)."""
    return {
        "route": f"{event.get('httpMethod')} {event.get('resource')}",
        **meter.consumed_fields(context, consumed),
    }


def _check_environment_tenant(caller: Caller, context: LambdaContext) -> None:
    """Refuse a caller of another tenant than the execution environment's
    (``context.tenant_id``, set only in tenant isolation mode:
    https://docs.aws.amazon.com/lambda/latest/dg/tenant-isolation-context.html)."""
    environment_tenant = getattr(context, "tenant_id", None)
    if environment_tenant is None or environment_tenant == caller.tenant_id:
        return
    logger.warning(
        "security: a request for another tenant's execution environment",
        extra={"environment_tenant_id": str(environment_tenant)[:256]},
    )
    metrics.add_metric(name="ForeignEnvironment", unit=MetricUnit.Count, value=1)
    raise Forbidden(FOREIGN_ENVIRONMENT_MESSAGE)


def handle(app: RestApp, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Resolve a REST (v1 proxy) event for ``app``'s route, as the caller, before
    Lambda's timeout: a dependency that hangs is a 503, not API Gateway's 502
    (:mod:`support_tickets.data.deadline`)."""
    with deadline.within(context):
        return _resolve(app, event, context)


def _resolve(app: RestApp, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    meter.start()
    # Too large is the answer whoever calls (413 before 401), but the caller is
    # still read first: a request the authorizer let through is its tenant's,
    # refused or not (API Gateway and Lambda bill it), so its line is logged below.
    too_large = _body_size(event) > MAX_BODY_BYTES
    try:
        caller = caller_from_event(event, get_settings().allowed_client_ids)
    except ApiError as exc:
        # No tenant (or not a valid one): nothing to log it under; API
        # Gateway's access log has the request.
        return _proxy_response(error_response(PayloadTooLarge() if too_large else exc))
    logger.append_keys(tenant_id=caller.tenant_id, user=caller.username)
    tracer.put_annotation(key="tenant_id", value=caller.tenant_id)
    status = 500  # unless the resolver answers: whatever escapes is Lambda's error
    try:
        try:
            _check_environment_tenant(caller, context)
            if too_large:
                raise PayloadTooLarge()
            _require_json_body(event)
            checked = read_input(app.accepts, event)
        except ApiError as exc:
            response = _proxy_response(error_response(exc))
        else:
            app.append_context(**{CALLER_CONTEXT_KEY: caller, INPUT_CONTEXT_KEY: checked})  # type: ignore[no-untyped-call]
            response = app.resolve(event, context)
        status = response["statusCode"]
        return response
    finally:
        # The request's one outcome line, with its usage: the metering function
        # counts it (exactly once per request, whatever happened above).
        logger.info(
            REQUEST_OUTCOME_MESSAGE,
            extra={
                "method": event.get("httpMethod"),
                "resource": event.get("resource"),
                "status": status,
                "usage": usage_fields(event, context, meter.finish()),
            },
        )
