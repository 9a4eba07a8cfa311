"""The OpenAPI ``DefinitionBody`` of the template's REST API, read without the
template: its operations and the names its integrations use
(:mod:`stack_model.api` reads the template's; :mod:`stack_model.isolation`
rewrites a template's, so neither may import the other's template reader).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

API_RESOURCE = "TicketsApi"
# The header Lambda's Invoke takes the tenant of a tenant-isolated function from.
TENANT_ID_HEADER = "X-Amz-Tenant-Id"
# How an integration maps a request header (API Gateway's parameter mapping).
INTEGRATION_HEADER = "integration.request.header."
_METHODS = frozenset({"get", "put", "post", "delete", "patch", "head", "options"})
_FUNCTION_IN_URI = re.compile(r"/functions/\$\{([A-Za-z0-9]+)\.Arn\}/invocations$")


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
