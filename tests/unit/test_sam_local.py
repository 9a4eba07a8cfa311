"""How SAM CLI 1.170 (the pinned ``sam``) reads the template for ``sam local``,
without a container engine: what docs/local-stack.md's recipes rely on.

- ``sam local start-api`` serves every route of the API's definition, each
  behind the API's Lambda authorizer.
- With the template as written, no function is tenant-isolated: ``sam local
  invoke <ApiFunction> -e events/<file>.json`` runs it without ``--tenant-id``
  (and refuses one, as Lambda does), and ``sam local start-api`` needs no
  ``X-Amz-Tenant-Id`` (it passes the request's header to the same check,
  ``LocalLambdaRunner.get_function``).
- With the tenant isolation variant (``make build TENANT_ISOLATION=1``,
  stack_model/isolation.py), every API function is, and nothing else:
  ``--tenant-id`` (or start-api's header) is required for those, refused for
  the others.

tests/sam_local/ runs the same in Lambda containers (skipped without one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from samcli.commands.local.lib.exceptions import TenantIdValidationError
from samcli.commands.local.lib.local_lambda import LocalLambdaRunner
from samcli.lib.providers.api_provider import ApiProvider
from samcli.lib.providers.sam_function_provider import SamFunctionProvider
from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider

from ops.routes import api_routes
from stack_model.isolation import write_variant
from stack_model.template import PROJECT_ROOT, TEMPLATE_PATH


def stacks_of(path: Path) -> list[object]:
    """A template as SAM CLI's providers read it (SAM's transform needs a Region)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        found, _ = SamLocalStackProvider.get_stacks(str(path))
        return list(found)


@pytest.fixture(scope="module")
def stacks() -> list[object]:
    return stacks_of(TEMPLATE_PATH)


@pytest.fixture(scope="module")
def isolated_stacks(tmp_path_factory: pytest.TempPathFactory) -> list[object]:
    return stacks_of(write_variant(TEMPLATE_PATH, tmp_path_factory.mktemp("variant") / "template.yaml"))


def runner_of(stacks: list[object]) -> LocalLambdaRunner:
    return LocalLambdaRunner(
        local_runtime=None,
        function_provider=SamFunctionProvider(stacks),
        cwd=str(PROJECT_ROOT),
        real_path=str(PROJECT_ROOT),
    )


def other_functions(stacks: list[object]) -> set[str]:
    names = {function.name for function in SamFunctionProvider(stacks).get_all()}
    assert {"AuthorizerFunction", "AggregateCountsFunction", "AuditTrailFunction", "DeliverWebhookFunction"} <= names
    return names - {route.function for route in api_routes()}


def test_start_api_serves_every_route_behind_the_authorizer(stacks: list[object]) -> None:
    (api,) = ApiProvider(stacks).get_all()
    served = {
        (method, route.path, route.function_name, route.authorizer_name)
        for route in api.routes
        for method in route.methods
    }
    assert served == {(route.method, route.path, route.function, "TenantAuthorizer") for route in api_routes()}


def test_sam_local_runs_every_function_of_the_template_without_a_tenant_id(stacks: list[object]) -> None:
    provider, runner = SamFunctionProvider(stacks), runner_of(stacks)
    assert {function.name: function.tenancy_config for function in provider.get_all()} == dict.fromkeys(
        {function.name for function in provider.get_all()}
    )
    for function in {route.function for route in api_routes()} | other_functions(stacks):
        assert runner.get_function(function).name == function
        with pytest.raises(TenantIdValidationError):
            runner.get_function(function, tenant_id="acme")


def test_sam_local_demands_a_tenant_id_for_every_api_function_of_the_isolation_variant(
    isolated_stacks: list[object],
) -> None:
    provider, runner = SamFunctionProvider(isolated_stacks), runner_of(isolated_stacks)
    for route in api_routes():
        assert provider.get(route.function).tenancy_config == {"TenantIsolationMode": "PER_TENANT"}
        assert runner.get_function(route.function, tenant_id="acme").name == route.function
        with pytest.raises(TenantIdValidationError):
            runner.get_function(route.function)
    for function in other_functions(isolated_stacks):
        assert provider.get(function).tenancy_config is None
        assert runner.get_function(function).name == function
        with pytest.raises(TenantIdValidationError):
            runner.get_function(function, tenant_id="acme")
