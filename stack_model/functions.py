"""The template's functions: each ``AWS::Serverless::Function`` with what
running it needs (code directory, handler, environment, memory, timeout, API
routes, VPC or not), and how its handler module is loaded.

Read by the local stack (which runs each in execution environments of its
own, one per tenant too where ``TenancyConfig`` says ``PER_TENANT``: the
tenant isolation variant, :mod:`stack_model.isolation`), by
``ops.openapi`` (which asks each handler for its routes) and by the tests and
benchmarks.
"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from stack_model.api import INTEGRATION_HEADER, integrations
from stack_model.template import (
    NO_VALUE,
    UnresolvedIntrinsic,
    Values,
    code_path,
    resources,
    template,
    template_values,
    translated,
)

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass(frozen=True)
class ApiRoute:
    method: str
    path: str  # API Gateway resource path, e.g. /tickets/{ticket_id}
    # The request headers its integration adds to the invocation: (name, mapping
    # expression, e.g. "context.authorizer.tenant_id"), as the reading's values resolve them.
    integration_headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class FunctionSpec:
    """One function of the template, as SAM deploys it."""

    logical_id: str
    code_uri: Path
    handler: str
    environment: dict[str, str]
    memory_mb: int
    timeout_s: int
    routes: tuple[ApiRoute, ...] = ()
    events: dict[str, Any] = field(default_factory=dict)
    # In the stack's VPC (VpcConfig): reaches DynamoDB through its gateway endpoint only.
    in_vpc: bool = False
    # The content of its layers: what Lambda puts on its import path.
    layers: tuple[Path, ...] = ()
    # LoggingConfig's LogFormat (Globals merged): how its runtime writes an invocation's error.
    log_format: str = "Text"
    # LoggingConfig's LogGroup (Globals merged), by name; Lambda's default without one.
    # Several functions may share one: Lambda then names each log stream after its function.
    log_group: str = ""
    # TenancyConfig's TenantIsolationMode is PER_TENANT: an execution environment
    # serves one tenant only, and every invocation names it.
    tenant_isolation: bool = False


def function_specs(values: Values | None = None, *, tenant_isolation: bool = False) -> dict[str, FunctionSpec]:
    """Every function of `template.yaml` (of its tenant isolation variant with
    ``tenant_isolation``) as SAM deploys it (``Globals`` merged by
    samtranslator), its environment resolved with ``values`` (the template's
    own by default: what is unknown there is left empty)."""
    values = values or template_values()
    specs: dict[str, FunctionSpec] = {}
    for logical_id, resource in resources("AWS::Lambda::Function", tenant_isolation).items():
        props = resource["Properties"]
        environment = {
            name: _env_string(values, value)
            for name, value in props.get("Environment", {}).get("Variables", {}).items()
        }
        # Its event sources (streams, queues), as written; its API routes are the API's own definition.
        events = template()["Resources"][logical_id].get("Properties", {}).get("Events", {})
        routes = tuple(
            ApiRoute(route.method, route.path, _integration_headers(values, route.request_parameters))
            for route in integrations(tenant_isolation)
            if route.function == logical_id
        )
        tenancy = values.resolve(props.get("TenancyConfig"))
        layers = [translated()["Resources"][layer["Ref"]]["Properties"]["Content"] for layer in props.get("Layers", [])]
        specs[logical_id] = FunctionSpec(
            logical_id=logical_id,
            code_uri=code_path(props["Code"]),
            handler=props["Handler"],
            environment=environment,
            memory_mb=int(props.get("MemorySize", 128)),
            timeout_s=int(props.get("Timeout", 3)),
            routes=routes,
            events=events,
            in_vpc="VpcConfig" in props,
            layers=tuple(code_path(content) for content in layers),
            log_format=str(props.get("LoggingConfig", {}).get("LogFormat", "Text")),
            log_group=str(values.resolve(props.get("LoggingConfig", {}).get("LogGroup", f"/aws/lambda/{logical_id}"))),
            tenant_isolation=isinstance(tenancy, dict) and tenancy.get("TenantIsolationMode") == "PER_TENANT",
        )
    return specs


def _integration_headers(values: Values, request_parameters: Any) -> tuple[tuple[str, str], ...]:
    """The request headers an integration maps, with these values (an ``Fn::If`` decided).
    Any other request parameter is an error: the local gateway maps headers only."""
    resolved = values.resolve(request_parameters)
    if resolved is None or resolved is NO_VALUE:
        return ()
    others = sorted(name for name in resolved if not name.startswith(INTEGRATION_HEADER))
    if others:
        raise ValueError(f"integration request parameters other than headers: {', '.join(others)}")
    return tuple((name.removeprefix(INTEGRATION_HEADER), str(source)) for name, source in resolved.items())


def _env_string(values: Values, value: Any) -> str:
    try:
        resolved = values.resolve(value)
    except UnresolvedIntrinsic:
        # A value the local run provides itself (e.g. the user pool's) resolves
        # once the emulator has created it; until then it is left empty.
        return ""
    return "" if resolved is None else str(resolved)


def load_handler(code_dir: Path, handler: str, *, module_name: str | None = None) -> Handler:
    """Import ``<code_dir>/<module>.py`` under a unique module name and return
    its handler function; a second call gives a second, independent module."""
    module_file, _, function_name = handler.rpartition(".")
    path = code_dir / f"{module_file.replace('.', '/')}.py"
    name = module_name or f"_lambda_{code_dir.name}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    handler_function: Handler = getattr(module, function_name)
    return handler_function
