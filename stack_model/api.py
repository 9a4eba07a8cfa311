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

from dataclasses import dataclass
from functools import cache
from typing import Any

from stack_model.api_body import API_RESOURCE, INTEGRATION_HEADER, TENANT_ID_HEADER, operations
from stack_model.template import template

__all__ = ["API_RESOURCE", "INTEGRATION_HEADER", "TENANT_ID_HEADER", "Integration", "integrations", "operations"]


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
