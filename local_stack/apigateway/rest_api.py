"""API Gateway (REST, Lambda TOKEN authorizer, usage plans, Lambda proxy) on one machine.

For each request, in API Gateway's order:

1. **Route** by method and resource path from the template's API definition;
   a literal segment wins over a ``{param}`` (``/tickets/status`` over
   ``/tickets/{ticket_id}``). No route (an unknown path, or an unknown method
   on a known path): the ``MISSING_AUTHENTICATION_TOKEN`` gateway response,
   before any authorizer runs, as API Gateway answers (403 "Missing
   Authentication Token" by default; the template makes it 404 ``NOT_FOUND``:
   https://docs.aws.amazon.com/apigateway/latest/developerguide/supported-gateway-response-types.html).
   Locally there is no stage prefix.
2. **Body limit**: bodies are read only up to :data:`READ_LIMIT` (1 MiB);
   anything larger is refused with the template's ``REQUEST_TOO_LARGE``
   response without being read. Bodies up to that size reach the function,
   which answers 413 above 64 KiB itself, as it does when deployed.
3. **Authorizer** (:class:`LambdaAuthorizer`): the API's default authorizer
   from the template (its function, run in its own execution environment like
   the others, with its own role's credentials), called with the ``Authorization`` header as a
   TOKEN event; its answer is cached per header value for the template's
   ``ReauthorizeEvery`` (the stack may shorten it for tests). No header, a
   header the template's ``ValidationExpression`` does not match (checked
   before the function runs), or the function raising ``Unauthorized``: the
   ``UNAUTHORIZED`` gateway response (401); a policy that does not allow this method: ``ACCESS_DENIED``
   (403); any other failure (an error, its timeout): ``AUTHORIZER_FAILURE``.
4. **Usage plan** (:mod:`local_stack.apigateway.usage_plans`): the answer's
   ``usageIdentifierKey`` (``ApiKeySourceType: AUTHORIZER``) must be an
   enabled API key in one of the API's usage plans (else ``INVALID_API_KEY``,
   the template's 503 ``TENANT_MOVING``: a cell's refusal of a tenant placed
   elsewhere, support_tickets.auth.authorizer), within its plan's rate and burst
   (else ``THROTTLED``, 429) and its daily quota (else ``QUOTA_EXCEEDED``, 429),
   each with ``Retry-After``.
5. **Lambda proxy**: a REST v1 event (:func:`stack_model.events.rest_event`)
   with the authorizer's context under ``requestContext.authorizer`` (strings,
   plus ``principalId`` and ``integrationLatency``, as API Gateway passes a
   Lambda authorizer's) is given to the function (in its execution
   environment, :mod:`local_stack.lambda_.environments`); its ``statusCode``,
   ``headers`` + ``multiValueHeaders`` and ``body`` become the response. A
   function that raises, times out, crashes or returns something malformed is
   a 502 (the template's ``DEFAULT_5XX`` body). The integration's request
   headers (its ``requestParameters``, mapped from the authorizer's context,
   ``context.authorizer.<key>``, or a literal) go with the invocation, as API
   Gateway adds them to Lambda's Invoke: ``X-Amz-Tenant-Id`` names the
   invocation's tenant for a function in tenant isolation mode
   (the template's tenant isolation variant, ``--tenant-isolation``; never a
   header the client sent).

Gateway responses use the template's ``GatewayResponses`` (status, JSON body
template with ``$context.error.messageString`` and ``$context.authorizer.<key>``
(the Deny's context), headers). One log line per
request: method, path, status, milliseconds.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.wrappers import Request

from local_stack.apigateway.usage_plans import Decision, UsageMeter
from stack_model.api import TENANT_ID_HEADER
from stack_model.events import rest_event
from stack_model.functions import FunctionSpec
from stack_model.template import Values, template

log = logging.getLogger("local_stack.gateway")

READ_LIMIT = 1024 * 1024
API_RESOURCE = "TicketsApi"
REGION = "us-east-1"
ACCOUNT_ID = "123456789012"

Invoke = Callable[[FunctionSpec, dict[str, Any]], Any]
StartResponse = Callable[..., Any]


class IntegrationInvoke(Protocol):
    """Lambda's Invoke as a route's integration calls it: with the tenant its
    ``X-Amz-Tenant-Id`` header names, if it maps one."""

    def __call__(self, spec: FunctionSpec, event: dict[str, Any], tenant_id: str | None = None) -> Any: ...


# API Gateway's defaults, for the response types the template does not set.
_DEFAULT_STATUS = {
    "UNAUTHORIZED": 401,
    "INVALID_API_KEY": 403,
    "QUOTA_EXCEEDED": 429,
    "AUTHORIZER_FAILURE": 500,
    "AUTHORIZER_CONFIGURATION_ERROR": 500,
    "MISSING_AUTHENTICATION_TOKEN": 403,
    "ACCESS_DENIED": 403,
    "REQUEST_TOO_LARGE": 413,
    "THROTTLED": 429,
    "DEFAULT_4XX": 400,
    "DEFAULT_5XX": 502,
}


# ---------------------------------------------------------------- authorizer
@dataclass(frozen=True)
class Authorized:
    """A Lambda authorizer's answer (what API Gateway caches)."""

    principal_id: str
    statements: tuple[dict[str, Any], ...]
    context: dict[str, str]
    usage_identifier_key: str | None

    def allows(self, method_arn: str) -> bool:
        """IAM's rule for the policy: an explicit Deny wins, else an Allow is needed."""
        allowed = False
        for statement in self.statements:
            actions = _as_list(statement.get("Action"))
            if not any(_arn_matches(action, "execute-api:Invoke") for action in actions):
                continue
            if any(_arn_matches(resource, method_arn) for resource in _as_list(statement.get("Resource"))):
                if statement.get("Effect") == "Deny":
                    return False
                allowed = allowed or statement.get("Effect") == "Allow"
        return allowed


class AuthorizerRefused(Exception):
    """The gateway response type API Gateway would answer with."""

    def __init__(self, response_type: str, message: str) -> None:
        super().__init__(message)
        self.response_type = response_type
        self.message = message


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _arn_matches(pattern: object, value: str) -> bool:
    if not isinstance(pattern, str):
        return False
    regex = "".join(".*" if char == "*" else "." if char == "?" else re.escape(char) for char in pattern)
    return re.fullmatch(regex, value, flags=re.DOTALL) is not None


def _context_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class AuthorizerSpec:
    """The API's default authorizer as the template declares it."""

    function_logical_id: str
    ttl_seconds: int
    header: str
    validation_expression: str | None = None


def authorizer_spec() -> AuthorizerSpec:
    """``TicketsApi``'s ``Auth.DefaultAuthorizer``: a TOKEN authorizer whose
    ``FunctionArn`` is ``!GetAtt <Function>.Arn`` of this template."""
    auth = template()["Resources"][API_RESOURCE]["Properties"].get("Auth", {})
    name = auth.get("DefaultAuthorizer")
    spec = auth.get("Authorizers", {}).get(name) if name else None
    if not isinstance(spec, dict) or spec.get("FunctionPayloadType", "TOKEN") != "TOKEN":
        raise ValueError(f"{API_RESOURCE}: the local gateway runs a TOKEN Lambda authorizer as DefaultAuthorizer")
    target = spec.get("FunctionArn", {}).get("Fn::GetAtt")
    logical_id = target[0] if isinstance(target, list) else str(target).split(".")[0]
    identity = spec.get("Identity", {})
    # SAM's default ReauthorizeEvery is 300 s.
    return AuthorizerSpec(
        logical_id,
        int(identity.get("ReauthorizeEvery", 300)),
        identity.get("Header", "Authorization"),
        identity.get("ValidationExpression"),
    )


class LambdaAuthorizer:
    """A TOKEN authorizer: its function, invoked as the stack invokes every function, and its result cache."""

    def __init__(
        self,
        function: FunctionSpec,
        invoke: Invoke,
        ttl_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
        validation_expression: str | None = None,
    ) -> None:
        self.function = function
        self._invoke = invoke
        self.ttl_seconds = ttl_seconds
        self._validation = re.compile(validation_expression) if validation_expression else None
        self._monotonic = monotonic
        self._cache: dict[str, tuple[float, Authorized]] = {}
        self._lock = threading.Lock()
        self.invocations = 0

    def authorize(self, authorization: str | None, method_arn: str) -> tuple[Authorized, int]:
        """The answer for this header (cached or fresh) and the milliseconds
        spent in the function (0 when cached); :class:`AuthorizerRefused` when
        API Gateway would answer itself."""
        if not authorization or not authorization.strip():
            raise AuthorizerRefused("UNAUTHORIZED", "Unauthorized")
        if self._validation is not None and not self._validation.fullmatch(authorization):
            raise AuthorizerRefused("UNAUTHORIZED", "Unauthorized")
        now = self._monotonic()
        with self._lock:
            cached = self._cache.get(authorization)
            if cached is not None and now - cached[0] < self.ttl_seconds:
                return cached[1], 0
        started = time.monotonic()
        self.invocations += 1
        event = {"type": "TOKEN", "authorizationToken": authorization, "methodArn": method_arn}
        try:
            result = self._invoke(self.function, event)
        except Exception as exc:
            if str(exc) == "Unauthorized":
                raise AuthorizerRefused("UNAUTHORIZED", "Unauthorized") from exc
            log.exception("%s failed", self.function.logical_id)
            raise AuthorizerRefused("AUTHORIZER_FAILURE", "Authorizer error") from exc
        latency_ms = int((time.monotonic() - started) * 1000)
        answer = self._parse(result)
        if self.ttl_seconds > 0:
            with self._lock:
                self._cache[authorization] = (now, answer)
                if len(self._cache) > 10_000:
                    self._cache.pop(next(iter(self._cache)))
        return answer, latency_ms

    @staticmethod
    def _parse(result: Any) -> Authorized:
        document = result.get("policyDocument") if isinstance(result, dict) else None
        principal = result.get("principalId") if isinstance(result, dict) else None
        if not isinstance(document, dict) or not isinstance(principal, str) or not principal:
            raise AuthorizerRefused("AUTHORIZER_CONFIGURATION_ERROR", "Authorizer configuration error")
        context = result.get("context") or {}
        if not isinstance(context, dict) or any(isinstance(value, dict | list) for value in context.values()):
            raise AuthorizerRefused("AUTHORIZER_CONFIGURATION_ERROR", "Authorizer configuration error")
        key = result.get("usageIdentifierKey")
        return Authorized(
            principal_id=principal,
            statements=tuple(item for item in _as_list(document.get("Statement")) if isinstance(item, dict)),
            context={str(name): _context_value(value) for name, value in context.items() if value is not None},
            usage_identifier_key=key if isinstance(key, str) and key else None,
        )


# ---------------------------------------------------------------- routes
# Where an integration request header may come from here: the authorizer's context, or a literal.
_FROM_AUTHORIZER = re.compile(r"context\.authorizer\.([A-Za-z0-9_]+)")
_LITERAL = re.compile(r"'([^']*)'")


@dataclass(frozen=True)
class Route:
    method: str
    resource: str
    function: FunctionSpec
    # (header, mapping expression) its integration adds to the invocation.
    integration_headers: tuple[tuple[str, str], ...] = ()

    def headers_for(self, authorizer: Mapping[str, str]) -> dict[str, str]:
        """The integration's request headers for a request with this authorizer
        context (a context key it lacks maps to nothing, as in API Gateway)."""
        headers: dict[str, str] = {}
        for name, source in self.integration_headers:
            literal = _LITERAL.fullmatch(source)
            context = _FROM_AUTHORIZER.fullmatch(source)
            value = literal[1] if literal else authorizer.get(context[1]) if context else None
            if value:
                headers[name] = value
        return headers

    def match(self, method: str, path: str) -> tuple[tuple[bool, ...], dict[str, str]] | None:
        """``(specificity, path parameters)`` if this route serves the request."""
        if method != self.method:
            return None
        pattern = self.resource.strip("/").split("/")
        parts = path.strip("/").split("/") if path != "/" else [""]
        if len(pattern) != len(parts) or not path.startswith("/"):
            return None
        params: dict[str, str] = {}
        specificity: list[bool] = []
        for expected, actual in zip(pattern, parts, strict=True):
            if expected.startswith("{") and expected.endswith("}"):
                if not actual:
                    return None
                params[expected[1:-1]] = actual
                specificity.append(False)
            elif expected == actual:
                specificity.append(True)
            else:
                return None
        return tuple(specificity), params


def routes_from_specs(specs: Iterable[FunctionSpec]) -> list[Route]:
    routes = [
        Route(route.method, route.path, spec, route.integration_headers) for spec in specs for route in spec.routes
    ]
    for route in routes:
        for segment in route.resource.strip("/").split("/"):
            if "{" in segment and not (segment.startswith("{") and segment.endswith("}") and "+" not in segment):
                raise ValueError(f"unsupported path segment {segment!r} in {route.resource}")
        for name, source in route.integration_headers:
            if not (_FROM_AUTHORIZER.fullmatch(source) or _LITERAL.fullmatch(source)):
                raise ValueError(f"{route.method} {route.resource}: header {name} from {source!r} is not modelled")
    return routes


def resolve_route(routes: Iterable[Route], method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    """The route API Gateway would pick: literal segments beat parameters,
    earlier segments first."""
    best: tuple[tuple[bool, ...], Route, dict[str, str]] | None = None
    for route in routes:
        matched = route.match(method, path)
        if matched is not None and (best is None or matched[0] > best[0]):
            best = (matched[0], route, matched[1])
    return None if best is None else (best[1], best[2])


# ---------------------------------------------------------------- gateway responses
_AUTHORIZER_VARIABLE = re.compile(r"\$context\.authorizer\.([A-Za-z0-9_]+)")


@dataclass(frozen=True)
class GatewayResponses:
    """The API's ``GatewayResponses`` from the template."""

    configured: Mapping[str, Mapping[str, Any]]

    @classmethod
    def from_template(cls, values: Values) -> GatewayResponses:
        # As written: the translation folds them into the API's OpenAPI body.
        props = template()["Resources"][API_RESOURCE]["Properties"]
        return cls(values.resolve(props.get("GatewayResponses", {})))

    def render(
        self,
        response_type: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        authorizer: Mapping[str, str] | None = None,
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        status = _DEFAULT_STATUS.get(response_type, 500)
        family = "DEFAULT_4XX" if status < 500 else "DEFAULT_5XX"
        spec = self.configured.get(response_type) or {}
        status = int(spec.get("StatusCode", status))
        fallback = self.configured.get(family) or {}
        template_text = (spec.get("ResponseTemplates") or fallback.get("ResponseTemplates") or {}).get(
            "application/json"
        )
        if template_text is None:
            body = json.dumps({"message": message})
        else:
            body = template_text.replace("$context.error.messageString", json.dumps(message)).replace(
                "$context.error.message", message
            )
            # As API Gateway substitutes them: the authorizer's context value, empty when it has none.
            body = _AUTHORIZER_VARIABLE.sub(lambda found: (authorizer or {}).get(found[1], ""), body)
        out = [("Content-Type", "application/json")]
        parameters = spec.get("ResponseParameters") or fallback.get("ResponseParameters") or {}
        overrides = {name.lower(): value for name, value in (headers or {}).items()}
        for name, value in (parameters.get("Headers") or {}).items():
            out.append((name, overrides.pop(name.lower(), str(value).strip("'"))))
        out.extend((name, value) for name, value in (headers or {}).items() if name.lower() in overrides)
        return status, out, body.encode()


# ---------------------------------------------------------------- the gateway
class Gateway:
    """The WSGI application that serves the template's REST API."""

    def __init__(
        self,
        *,
        routes: list[Route],
        authorizer: LambdaAuthorizer,
        meter: UsageMeter,
        invoke: IntegrationInvoke,
        responses: GatewayResponses,
        stage: str,
        api_id: str = "local",
    ) -> None:
        self._routes = routes
        self._authorizer = authorizer
        self._meter = meter
        self._invoke = invoke
        self._responses = responses
        self._stage = stage
        self._api_id = api_id

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        started = time.monotonic()
        request = Request(environ)
        request.max_content_length = READ_LIMIT
        status, headers, body = self._handle(request)
        start_response(f"{status} {_reason(status)}", [*headers, ("Content-Length", str(len(body)))])
        elapsed_ms = (time.monotonic() - started) * 1000
        log.info("%s %s %d %.0fms", request.method, request.full_path.rstrip("?"), status, elapsed_ms)
        return [body]

    def _handle(self, request: Request) -> tuple[int, list[tuple[str, str]], bytes]:
        found = resolve_route(self._routes, request.method, request.path)
        if found is None:
            return self._responses.render("MISSING_AUTHENTICATION_TOKEN", "Missing Authentication Token")
        route, path_parameters = found
        if (request.content_length or 0) > READ_LIMIT:
            return self._too_large(request)
        admitted = self._admit(request)
        if not isinstance(admitted[0], Authorized):
            return admitted
        authorized, latency_ms, decision = admitted
        try:
            raw = request.get_data(cache=False)
        except RequestEntityTooLarge:
            return self._too_large(request)
        request_id = str(uuid.uuid4())
        integration_headers = {name.lower(): value for name, value in route.headers_for(authorized.context).items()}
        event = rest_event(
            request.method,
            route.resource,
            path_parameters=path_parameters or None,
            query={key: values[-1] for key, values in request.args.lists()} or None,
            multi_value_query=dict(request.args.lists()) or None,
            headers=dict(request.headers.items()),
            body=raw.decode("utf-8", "replace") if raw else None,
            authorizer={
                **authorized.context,
                "principalId": authorized.principal_id,
                "integrationLatency": latency_ms,
            },
            api_key=(authorized.usage_identifier_key, decision.key_id),
            stage=self._stage,
            request_id=request_id,
            default_headers=False,
            source_ip=request.remote_addr or "127.0.0.1",
        )
        try:
            result = self._invoke(route.function, event, tenant_id=integration_headers.get(TENANT_ID_HEADER.lower()))
            status, headers, body = _proxy_response(result)
        except Exception:
            log.exception("%s failed", route.function.logical_id)
            return self._responses.render("DEFAULT_5XX", "Internal server error")
        return status, [*headers, ("x-amzn-RequestId", request_id)], body

    def _admit(self, request: Request) -> tuple[Authorized, int, Decision] | tuple[int, list[tuple[str, str]], bytes]:
        """The authorizer's answer and the usage plan's decision, or the
        gateway response that ends the request."""
        method_arn = (
            f"arn:aws:execute-api:{REGION}:{ACCOUNT_ID}:{self._api_id}/{self._stage}/{request.method}{request.path}"
        )
        try:
            authorized, latency_ms = self._authorizer.authorize(request.headers.get("Authorization"), method_arn)
        except AuthorizerRefused as refused:
            return self._responses.render(refused.response_type, refused.message)
        if not authorized.allows(method_arn):
            return self._responses.render(
                "ACCESS_DENIED", "User is not authorized to access this resource", authorizer=authorized.context
            )
        decision = self._meter.admit(authorized.usage_identifier_key)
        if decision.outcome == "INVALID_API_KEY":
            return self._responses.render("INVALID_API_KEY", "Forbidden")
        if decision.outcome in ("THROTTLED", "QUOTA_EXCEEDED"):
            message = "Too Many Requests" if decision.outcome == "THROTTLED" else "Limit Exceeded"
            return self._responses.render(decision.outcome, message, {"Retry-After": str(decision.retry_after)})
        return authorized, latency_ms, decision

    def _too_large(self, request: Request) -> tuple[int, list[tuple[str, str]], bytes]:
        # The body stays unread: the connection ends with this answer.
        status, headers, body = self._responses.render("REQUEST_TOO_LARGE", "Request Too Long")
        return status, [*headers, ("Connection", "close")], body


class MalformedProxyResponse(ValueError):
    pass


def _proxy_response(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """A Lambda proxy response as API Gateway turns it into HTTP."""
    if not isinstance(result, dict) or not isinstance(result.get("statusCode"), int):
        raise MalformedProxyResponse("the function did not return a proxy response")
    multi = result.get("multiValueHeaders") or {}
    single = result.get("headers") or {}
    if not isinstance(multi, dict) or not isinstance(single, dict):
        raise MalformedProxyResponse("headers")
    headers: list[tuple[str, str]] = [(str(name), str(value)) for name, values in multi.items() for value in values]
    seen = {name.lower() for name in multi}
    headers += [(str(name), str(value)) for name, value in single.items() if name.lower() not in seen]
    if not any(name.lower() == "content-type" for name, _ in headers):
        headers.append(("Content-Type", "application/json"))
    raw = result.get("body")
    if raw is None:
        body = b""
    elif result.get("isBase64Encoded"):
        body = base64.b64decode(str(raw))
    else:
        body = str(raw).encode("utf-8")
    return int(result["statusCode"]), headers, body


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
