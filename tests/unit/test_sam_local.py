"""How SAM CLI 1.170 (the pinned ``sam``) reads the template for ``sam local``,
without a container engine: what docs/local-stack.md's recipes rely on.

- ``sam local start-api`` serves every route of the API's definition, each
  behind the API's Lambda authorizer.
- SAM CLI does not evaluate the ``Fn::If`` of the API functions'
  ``TenancyConfig`` (its resolver leaves a function's properties as written
  when one of them cannot be resolved locally, the user pool's ``GetAtt`` in
  the environment), so it takes every API function for a tenant-isolated one,
  whatever ``TenantIsolationMode`` says: ``sam local invoke`` needs
  ``--tenant-id`` for them (and refuses it for the other functions), and
  ``sam local start-api`` the client's ``X-Amz-Tenant-Id`` header, which it
  passes on as the invocation's tenant (our handlers refuse one that is not
  the token's tenant). A later SAM CLI that evaluates it makes this test fail:
  then the recipes change."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from samcli.commands.local.lib.exceptions import TenantIdValidationError
from samcli.commands.local.lib.local_lambda import LocalLambdaRunner
from samcli.lib.providers.api_provider import ApiProvider
from samcli.lib.providers.sam_function_provider import SamFunctionProvider
from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider

from ops.routes import api_routes
from stack_model.template import PROJECT_ROOT, TEMPLATE_PATH


@pytest.fixture(scope="module")
def stacks() -> Iterator[list[object]]:
    """The template as SAM CLI's providers read it (SAM's transform needs a Region)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        found, _ = SamLocalStackProvider.get_stacks(
            str(TEMPLATE_PATH), parameter_overrides={"TenantIsolationMode": "NONE"}
        )
        yield list(found)


def test_start_api_serves_every_route_behind_the_authorizer(stacks: list[object]) -> None:
    (api,) = ApiProvider(stacks).get_all()
    served = {
        (method, route.path, route.function_name, route.authorizer_name)
        for route in api.routes
        for method in route.methods
    }
    assert served == {(route.method, route.path, route.function, "TenantAuthorizer") for route in api_routes()}


def test_sam_local_takes_every_api_function_for_a_tenant_isolated_one_whatever_the_parameter(
    stacks: list[object],
) -> None:
    runner = LocalLambdaRunner(
        local_runtime=None,
        function_provider=SamFunctionProvider(stacks),
        cwd=str(PROJECT_ROOT),
        real_path=str(PROJECT_ROOT),
    )
    for route in api_routes():
        assert runner.get_function(route.function, tenant_id="acme").name == route.function
        with pytest.raises(TenantIdValidationError):
            runner.get_function(route.function)
    for function in ("AuthorizerFunction", "AggregateCountsFunction", "AuditTrailFunction"):
        assert runner.get_function(function).name == function
        with pytest.raises(TenantIdValidationError):
            runner.get_function(function, tenant_id="acme")
