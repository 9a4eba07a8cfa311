"""The REST API's routes as ``template.yaml`` writes them: ``TicketsApi``'s
OpenAPI ``DefinitionBody``, one path and method per route, each a Lambda
proxy integration that names its function (``${<Function>.Arn}`` in its URI)
and the request parameters it maps.

Routes are written there, not as the functions' ``Api`` events, because an
``Api`` event cannot map an integration request header, and with
``TenantIsolationMode=PER_TENANT`` every integration passes the tenant the
authorizer verified as ``X-Amz-Tenant-Id``
(https://docs.aws.amazon.com/lambda/latest/dg/tenant-isolation-invoke.html).
The one place routes are written: :mod:`stack_model.functions` (each
function's routes), ``ops.routes`` (the route table) and the local gateway
read them from here.
"""

from __future__ import annotations

import re
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
def integrations() -> tuple[Integration, ...]:
    """Every route of the API's ``DefinitionBody``, in the order written. A
    method that is not a Lambda proxy integration of one of the template's
    functions is an error: the local gateway runs only those."""
    body = template()["Resources"][API_RESOURCE]["Properties"]["DefinitionBody"]
    found: list[Integration] = []
    for path, operations in body["paths"].items():
        for method, operation in operations.items():
            if method not in _METHODS:
                raise ValueError(f"{API_RESOURCE}: {path} has {method!r}, not an HTTP method")
            integration = operation.get("x-amazon-apigateway-integration") or {}
            uri = integration.get("uri", {})
            text = uri.get("Fn::Sub") if isinstance(uri, dict) else None
            named = _FUNCTION_IN_URI.search(text) if isinstance(text, str) else None
            if integration.get("type") != "aws_proxy" or integration.get("httpMethod") != "POST" or named is None:
                raise ValueError(f"{API_RESOURCE}: {method.upper()} {path} is not a Lambda proxy integration")
            found.append(Integration(method.upper(), path, named[1], integration.get("requestParameters")))
    return tuple(found)
