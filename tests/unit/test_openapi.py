"""docs/openapi.json: generated from the handlers (ops.openapi), never stale, and
describing exactly the template's routes with API.md's errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ops.openapi import SECURITY_SCHEME, build_document, render
from ops.routes import COMMON_ERRORS, api_routes
from stack_model.functions import function_specs
from stack_model.template import PROJECT_ROOT

CHECKED_IN = PROJECT_ROOT / "docs" / "openapi.json"
ERROR_REF = "#/components/schemas/ErrorResponse"
# API.md's error table, per route (ops/routes.py): what every route can answer, plus the route's own.
ROUTE_ERRORS = {
    (route.method.lower(), route.path): {str(code) for code in COMMON_ERRORS | route.needs.errors}
    for route in api_routes()
}
SUCCESS = {
    (route.method.lower(), route.path): (str(route.needs.success), route.needs.response) for route in api_routes()
}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return build_document()


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(method, path): op for path, item in document["paths"].items() for method, op in item.items()}


def test_checked_in_document_is_current() -> None:
    # Given the handlers as they are, when the document is generated,
    # then it is byte for byte what docs/openapi.json holds.
    assert CHECKED_IN.read_text(encoding="utf-8") == render(), "docs/openapi.json is stale: run `make openapi`"


def test_document_describes_exactly_the_template_routes(document: dict[str, Any]) -> None:
    template_routes = {
        (route.method.lower(), route.path, spec.logical_id)
        for spec in function_specs().values()
        for route in spec.routes
    }
    documented = {(method, path, op["x-function"]) for (method, path), op in operations(document).items()}
    assert documented == template_routes  # and the route table has them all: test_route_table


@pytest.mark.parametrize(("method", "path"), sorted(ROUTE_ERRORS))
def test_each_route_documents_its_success_and_errors(document: dict[str, Any], method: str, path: str) -> None:
    responses = operations(document)[(method, path)]["responses"]
    status, model = SUCCESS[(method, path)]
    assert set(responses) == {status} | ROUTE_ERRORS[(method, path)]
    if model is None:
        assert "content" not in responses[status]
    else:
        assert responses[status]["content"]["application/json"]["schema"] == {"$ref": f"#/components/schemas/{model}"}
    for code in ROUTE_ERRORS[(method, path)]:
        assert responses[code]["content"]["application/json"]["schema"] == {"$ref": ERROR_REF}
    for code in ("429", "503"):
        assert "Retry-After" in responses[code]["headers"]


def test_security_and_servers(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.")
    assert document["security"] == [{SECURITY_SCHEME: []}]
    scheme = document["components"]["securitySchemes"][SECURITY_SCHEME]
    assert (scheme["type"], scheme["scheme"], scheme["bearerFormat"]) == ("http", "bearer", "JWT")
    assert any("execute-api" in server["url"] for server in document["servers"])
    # Powertools' own 422 shape is not part of our contract.
    assert "HTTPValidationError" not in json.dumps(document)
    assert "422" not in {code for op in operations(document).values() for code in op["responses"]}


def test_request_models_come_from_the_handlers(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    create = schemas["CreateTicketRequest"]
    assert create["required"] == ["title"]
    assert create["additionalProperties"] is False
    assert create["properties"]["title"]["maxLength"] == 200
    batch = schemas["BatchStatusRequest"]["properties"]["ticket_ids"]
    assert (batch["minItems"], batch["maxItems"]) == (1, 100)
    list_params = {p["name"]: p for p in operations(document)[("get", "/tickets")]["parameters"]}
    assert set(list_params) == {"status", "resolver", "limit", "cursor"}
    assert (list_params["limit"]["schema"]["minimum"], list_params["limit"]["schema"]["maximum"]) == (1, 100)
    assert list_params["limit"]["schema"]["default"] == 25


def test_every_route_documents_a_suspended_tenant(document: dict[str, Any]) -> None:
    for (method, path), operation in operations(document).items():
        assert "TENANT_SUSPENDED" in operation["responses"]["403"]["description"], (method, path)


def test_the_audit_trail_takes_a_window(document: dict[str, Any]) -> None:
    params = {p["name"]: p for p in operations(document)[("get", "/audit")]["parameters"]}
    assert set(params) == {"from", "to", "limit", "cursor"}
    event = document["components"]["schemas"]["AuditEvent"]
    assert event["properties"]["type"]["enum"] == ["created", "updated", "comment_added", "deleted"]
