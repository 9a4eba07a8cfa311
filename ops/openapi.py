"""The OpenAPI document of the whole API, generated from the handlers themselves.

Each REST function of `template.yaml` is loaded the way the local stack loads it
(its own ``app`` module, from its ``CodeUri``). Its Powertools resolver's
``get_openapi_schema()`` describes its one route: the path, the response
dataclasses (pydantic reads them here, at build time; the functions never import
it) and the route's declared responses
(``support_tickets.api.resolver.openapi_responses``). What the route accepts
(``app.accepts``: the body's JSON Schema, query and header parameters) is
added as it is declared, since those declarations are what the function checks
(support_tickets.api.validation). The documents are merged into one, with the
Cognito bearer security scheme and server placeholders.

    python -m ops.openapi > docs/openapi.json     (make openapi)
"""

from __future__ import annotations

import json
import sys
import tomllib
from typing import TYPE_CHECKING, Any

from stack_model.functions import FunctionSpec, function_specs, load_handler
from stack_model.template import PROJECT_ROOT
from support_tickets.core.models import STATUS_SCHEMA

if TYPE_CHECKING:
    from support_tickets.api.resolver import RestApp
    from support_tickets.api.validation import Parameter, RouteInput

TITLE = "Support tickets API"
DESCRIPTION = (
    "Multi-tenant support tickets. Every route needs `Authorization: Bearer <Cognito ID token>`; "
    "the tenant is the token's `custom:tenant_id`, admins are in the `admin` group. "
    'Bodies are JSON, at most 64 KiB. Errors: `{"error": {"code", "message", "details"?}}`. '
    "The full contract is docs/API.md."
)
SECURITY_SCHEME = "CognitoIdToken"
SERVERS: list[dict[str, Any]] = [
    {
        "url": "https://{restApiId}.execute-api.{region}.amazonaws.com/{stage}",
        "description": "Deployed stack (the `ApiUrl` output)",
        "variables": {
            "restApiId": {"default": "your-api-id"},
            "region": {"default": "us-east-1"},
            "stage": {"default": "v1"},
        },
    },
    {"url": "http://127.0.0.1:3000", "description": "Local stack (`make dev`)"},
]
# Powertools documents its own validation error shape; ours is ErrorResponse.
_POWERTOOLS_ONLY_SCHEMAS = ("HTTPValidationError", "ValidationError", "ResponseValidationError")
_POWERTOOLS_VALIDATION_STATUS = "422"
_STATUS_REF = {"$ref": "#/components/schemas/TicketStatus"}


class OpenApiMismatch(RuntimeError):
    """A handler's route disagrees with the template, or two handlers disagree."""


def _version() -> str:
    with (PROJECT_ROOT / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def function_app(spec: FunctionSpec) -> RestApp:
    """The Powertools resolver of one function, from its own handler module."""
    handler = load_handler(spec.code_uri, spec.handler)
    app: RestApp = sys.modules[handler.__module__].app
    return app


def _with_status_ref(schema: Any) -> Any:
    """A declared schema with the ticket status as the one ``TicketStatus`` component."""
    if isinstance(schema, dict):
        if {key: value for key, value in schema.items() if key != "default"} == STATUS_SCHEMA:
            return {**_STATUS_REF, **({"default": schema["default"]} if "default" in schema else {})}
        return {key: _with_status_ref(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_with_status_ref(item) for item in schema]
    return schema


def _parameter(parameter: Parameter, location: str) -> dict[str, Any]:
    return {
        "name": parameter.name,
        "in": location,
        "required": parameter.required,
        "schema": _with_status_ref(dict(parameter.schema)),
    }


def _add_input(operation: dict[str, Any], accepts: RouteInput, schemas: dict[str, Any]) -> dict[str, Any]:
    """The operation with what its route accepts, in OpenAPI's order (parameters, body, responses)."""
    parameters = [
        *operation.get("parameters", []),
        *(_parameter(parameter, "query") for parameter in accepts.query),
        *(_parameter(parameter, "header") for parameter in accepts.headers),
    ]
    added: dict[str, Any] = {"parameters": parameters} if parameters else {}
    if accepts.body is not None:
        name = accepts.body.__name__
        schemas[name] = {**_with_status_ref(dict(accepts.body_schema)), "title": name}
        added["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
        }
    ordered: dict[str, Any] = {}
    for key, value in operation.items():
        if key == "responses":
            ordered.update(added)
        if key != "parameters":
            ordered[key] = value
    return ordered


def _function_document(spec: FunctionSpec, version: str) -> dict[str, Any]:
    app = function_app(spec)
    document: dict[str, Any] = json.loads(app.get_openapi_json_schema(title=TITLE, version=version))
    declared = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    expected = {(route.method, route.path) for route in spec.routes}
    if declared != expected:
        raise OpenApiMismatch(f"{spec.logical_id}: handler serves {sorted(declared)}, template maps {sorted(expected)}")
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for item in document["paths"].values():
        for method, operation in item.items():
            operation["responses"].pop(_POWERTOOLS_VALIDATION_STATUS, None)
            for response in operation["responses"].values():
                if response.get("content") == {}:
                    del response["content"]  # 204: no body
            operation["x-function"] = spec.logical_id
            item[method] = _add_input(operation, app.accepts, schemas)
    return document


def build_document() -> dict[str, Any]:
    version = _version()
    paths: dict[str, dict[str, Any]] = {}
    schemas: dict[str, Any] = {}
    for spec in function_specs().values():
        if not spec.routes:
            continue  # the stream function
        document = _function_document(spec, version)
        for path, item in document["paths"].items():
            for method, operation in item.items():
                if method in paths.setdefault(path, {}):
                    raise OpenApiMismatch(f"{method.upper()} {path} is served by two functions")
                paths[path][method] = operation
        for name, schema in document.get("components", {}).get("schemas", {}).items():
            if name in _POWERTOOLS_ONLY_SCHEMAS:
                continue
            if schemas.setdefault(name, schema) != schema:
                raise OpenApiMismatch(f"two handlers define different schemas named {name}")
    return {
        "openapi": "3.1.0",
        "info": {"title": TITLE, "version": version, "description": DESCRIPTION},
        "servers": SERVERS,
        "security": [{SECURITY_SCHEME: []}],
        "paths": {path: dict(sorted(paths[path].items())) for path in sorted(paths)},
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "securitySchemes": {
                SECURITY_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "A Cognito user pool ID token (the API's Lambda TOKEN authorizer verifies it).",
                }
            },
        },
    }


def render() -> str:
    return json.dumps(build_document(), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
