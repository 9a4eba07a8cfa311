"""The REST API's routes as ``template.yaml`` writes them: ``TicketsApi``'s
OpenAPI ``DefinitionBody``, one path and method per route, each a Lambda
proxy integration that names its function (``${<Function>.Arn}`` in its URI)
and the request parameters it maps.

Routes are written there, not as the functions' ``Api`` events, because an
``Api`` event cannot map an integration request header, and in the template's
tenant isolation variant (:mod:`stack_model.isolation`) every integration
passes the tenant the authorizer verified as ``X-Amz-Tenant-Id``
(https://docs.aws.amazon.com/lambda/latest/dg/tenant-isolation-invoke.html).
The one place routes are written: :mod:`stack_model.functions` (each
function's routes), ``ops.routes`` (the route table) and the local gateway
read them from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from stack_model.template import template

API_RESOURCE = "TicketsApi"
# The header Lambda's Invoke takes the tenant of a tenant-isolated function from.
TENANT_ID_HEADER = "X-Amz-Tenant-Id"
# How an integration maps a request header (API Gateway's parameter mapping).
INTEGRATION_HEADER = "integration.request.header."
_METHODS = frozenset({"get", "put", "post", "delete", "patch", "head", "options"})
_FUNCTION_IN_URI = re.compile(r"/functions/\$\{([A-Za-z0-9]+)\.Arn\}/invocations$")


@dataclass(frozen=True)
class Integration:
    """One route: its method and path, its function, what its integration maps."""

    method: str  # upper case, as routes are named ("POST")
    path: str  # the API Gateway resource path, e.g. /tickets/{ticket_id}
    function: str  # the logical id of the function its URI names
    request_parameters: Any  # as written: a mapping, an Fn::If of mappings, or None


@cache
def integrations(tenant_isolation: bool = False) -> tuple[Integration, ...]:
    """Every route of the API's ``DefinitionBody``, in the order written (of the
    tenant isolation variant with ``tenant_isolation``). A method that is not a
    Lambda proxy integration of one of the template's functions is an error: the
    local gateway runs only those."""
    body = template(tenant_isolation)["Resources"][API_RESOURCE]["Properties"]["DefinitionBody"]
    return tuple(
        Integration(method.upper(), path, function, integration.get("requestParameters"))
        for path, method, integration, function in operations(body)
    )


def operations(body: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any], str]]:
    """Each operation of an OpenAPI ``DefinitionBody``: its path, its method (as
    written, lower case), its ``x-amazon-apigateway-integration`` (the mapping
    itself) and the logical id of the function it invokes."""
    for path, methods in body["paths"].items():
        for method, operation in methods.items():
            if method not in _METHODS:
                raise ValueError(f"{API_RESOURCE}: {path} has {method!r}, not an HTTP method")
            integration = operation.get("x-amazon-apigateway-integration") or {}
            uri = integration.get("uri", {})
            text = uri.get("Fn::Sub") if isinstance(uri, dict) else None
            named = _FUNCTION_IN_URI.search(text) if isinstance(text, str) else None
            if integration.get("type") != "aws_proxy" or integration.get("httpMethod") != "POST" or named is None:
                raise ValueError(f"{API_RESOURCE}: {method.upper()} {path} is not a Lambda proxy integration")
            yield path, method, integration, named[1]
