"""API Gateway (REST, Cognito user-pool authorizer, Lambda proxy) on one machine.

For each request, in API Gateway's order:

1. **Route** by method and resource path from the template's ``Api`` events;
   a literal segment wins over a ``{param}`` (``/tickets/status`` over
   ``/tickets/{ticket_id}``). No route: 403 "Missing Authentication Token".
   Locally there is no stage prefix.
2. **Body limit**: bodies are read only up to :data:`READ_LIMIT` (1 MiB);
   anything larger is refused with the template's ``REQUEST_TOO_LARGE``
   response without being read. Bodies up to that size reach the function,
   which answers 413 above 64 KiB itself, as it does when deployed.
3. **Authorizer**: the ``Authorization`` header (``Bearer <token>`` or the
   bare token) must hold an ID token of the user pool: RS256 signature by a
   key of the pool's JWKS, ``iss`` = the pool, ``aud`` = the app client,
   ``token_use`` = ``id``, not expired. Otherwise the template's
   ``UNAUTHORIZED`` gateway response (401).
4. **Lambda proxy**: a REST v1 event (:func:`local_stack.events.rest_event`)
   with the claims as API Gateway passes them (all strings: list claims
   comma-joined, ``exp``/``iat`` as dates) is given to the function's handler
   in-process; its ``statusCode``, ``headers`` + ``multiValueHeaders`` and
   ``body`` become the response. A handler that raises or returns something
   malformed is a 502 (the template's ``DEFAULT_5XX`` body).

Gateway responses use the template's ``GatewayResponses`` (status, JSON body
template with ``$context.error.messageString``, headers). One log line per
request: method, path, status, milliseconds.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.wrappers import Request

from local_stack.events import gateway_claims, rest_event
from local_stack.lambda_runtime import FunctionSpec
from local_stack.template import Resolver, template

log = logging.getLogger("local_stack.gateway")

READ_LIMIT = 1024 * 1024
API_RESOURCE = "TicketsApi"

Invoke = Callable[[FunctionSpec, dict[str, Any]], Any]
StartResponse = Callable[..., Any]

# API Gateway's defaults, for the response types the template does not set.
_DEFAULT_STATUS = {
    "UNAUTHORIZED": 401,
    "MISSING_AUTHENTICATION_TOKEN": 403,
    "ACCESS_DENIED": 403,
    "REQUEST_TOO_LARGE": 413,
    "THROTTLED": 429,
    "DEFAULT_4XX": 400,
    "DEFAULT_5XX": 502,
}


# ---------------------------------------------------------------- authorizer
class Authorizer:
    """A Cognito user-pool authorizer: verifies ID tokens of one pool and client."""

    def __init__(self, keys: KeySet, issuer: str, audience: str, clock: Callable[[], float] = time.time) -> None:
        self._keys = keys
        self._issuer = issuer
        self._audience = audience
        self._clock = clock

    @classmethod
    def from_jwks(cls, jwks: Mapping[str, Any], issuer: str, audience: str) -> Authorizer:
        return cls(KeySet.import_key_set(jwks), issuer, audience)  # type: ignore[arg-type]

    def claims(self, authorization: str | None) -> dict[str, Any] | None:
        """The verified claims of the header's token, or ``None``."""
        if not authorization:
            return None
        scheme, _, rest = authorization.strip().partition(" ")
        token = rest.strip() if scheme.lower() == "bearer" else authorization.strip()
        if not token or " " in token:
            return None
        try:
            decoded = jwt.decode(token, self._keys, algorithms=["RS256"])
            registry = jwt.JWTClaimsRegistry(
                now=lambda: int(self._clock()),
                iss={"essential": True, "value": self._issuer},
                aud={"essential": True, "value": self._audience},
                token_use={"essential": True, "value": "id"},
                exp={"essential": True},
            )
            registry.validate(decoded.claims)
        except (JoseError, ValueError, TypeError):
            return None
        claims: dict[str, Any] = dict(decoded.claims)
        return claims


# ---------------------------------------------------------------- routes
@dataclass(frozen=True)
class Route:
    method: str
    resource: str
    function: FunctionSpec

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
    routes = [Route(route.method, route.path, spec) for spec in specs for route in spec.routes]
    for route in routes:
        for segment in route.resource.strip("/").split("/"):
            if "{" in segment and not (segment.startswith("{") and segment.endswith("}") and "+" not in segment):
                raise ValueError(f"unsupported path segment {segment!r} in {route.resource}")
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
@dataclass(frozen=True)
class GatewayResponses:
    """The API's ``GatewayResponses`` from the template."""

    configured: Mapping[str, Mapping[str, Any]]

    @classmethod
    def from_template(cls, resolver: Resolver) -> GatewayResponses:
        props = template()["Resources"][API_RESOURCE]["Properties"]
        return cls(resolver.resolve(props.get("GatewayResponses", {})))

    def render(self, response_type: str, message: str) -> tuple[int, list[tuple[str, str]], bytes]:
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
        headers = [("Content-Type", "application/json")]
        parameters = spec.get("ResponseParameters") or fallback.get("ResponseParameters") or {}
        for name, value in (parameters.get("Headers") or {}).items():
            headers.append((name, str(value).strip("'")))
        return status, headers, body.encode()


# ---------------------------------------------------------------- the gateway
class Gateway:
    """The WSGI application that serves the template's REST API."""

    def __init__(
        self,
        routes: list[Route],
        authorizer: Authorizer,
        invoke: Invoke,
        responses: GatewayResponses,
        stage: str,
    ) -> None:
        self._routes = routes
        self._authorizer = authorizer
        self._invoke = invoke
        self._responses = responses
        self._stage = stage

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
        claims = self._authorizer.claims(request.headers.get("Authorization"))
        if claims is None:
            return self._responses.render("UNAUTHORIZED", "Unauthorized")
        try:
            raw = request.get_data(cache=False)
        except RequestEntityTooLarge:
            return self._too_large(request)
        request_id = str(uuid.uuid4())
        event = rest_event(
            request.method,
            route.resource,
            path_parameters=path_parameters or None,
            query={key: values[-1] for key, values in request.args.lists()} or None,
            multi_value_query=dict(request.args.lists()) or None,
            headers=dict(request.headers.items()),
            body=raw.decode("utf-8", "replace") if raw else None,
            claims=gateway_claims(claims),
            stage=self._stage,
            request_id=request_id,
            default_headers=False,
            source_ip=request.remote_addr or "127.0.0.1",
        )
        try:
            result = self._invoke(route.function, event)
            status, headers, body = _proxy_response(result)
        except Exception:
            log.exception("%s failed", route.function.logical_id)
            return self._responses.render("DEFAULT_5XX", "Internal server error")
        return status, [*headers, ("x-amzn-RequestId", request_id)], body

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
