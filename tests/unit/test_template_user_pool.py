"""Whose user pool a stack trusts: its own (a stack alone, both parameters
empty: tests/unit/test_template.py reads that stack), or the shared pool of
templates/control-plane.yaml that a cell names by ``UserPoolId`` and
``UserPoolClientId`` (docs/cells.md), and then nothing of its own."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from stack_model.template import PROJECT_ROOT, REGION, load_template, template_values, translated, with_conditions
from support_tickets.core.settings import _USER_POOL_PROVIDER

OWN_POOL = ("UserPool", "UserPoolClient", "AdminGroup")
SHARED = {"UserPoolId": "us-east-1_Shared9", "UserPoolClientId": "sharedclient0"}
PROVIDER_OF_THE_PARAMETER = {"Fn::Sub": "cognito-idp.${AWS::Region}.${AWS::URLSuffix}/${UserPoolId}"}
CLIENT_OF_THE_PARAMETER = {"Ref": "UserPoolClientId"}


def stack(*, own_pool: bool) -> dict[str, Any]:
    return with_conditions(translated(), {"OwnUserPool": own_pool})


def references_to(template: dict[str, Any], names: tuple[str, ...]) -> list[str]:
    """Every Ref, GetAtt or ${...} of the template's resources and outputs that names one of ``names``."""
    text = json.dumps([template["Resources"], template["Outputs"]])
    alternatives = "|".join(names)
    patterns = (
        rf'"Ref": "({alternatives})"',
        rf'"Fn::GetAtt": \["({alternatives})"',
        rf"\$\{{({alternatives})(\.[A-Za-z]+)?\}}",
    )
    return [match.group(0) for pattern in patterns for match in re.finditer(pattern, text)]


@pytest.mark.parametrize(
    ("parameters", "own"),
    [({}, True), (SHARED, False), ({"UserPoolId": SHARED["UserPoolId"]}, True), ({"UserPoolClientId": "c"}, True)],
    ids=["defaults", "both", "pool-only", "client-only"],
)
def test_a_stack_has_its_own_pool_unless_both_parameters_name_the_shared_one(
    parameters: dict[str, str], own: bool
) -> None:
    for name in SHARED:
        assert translated()["Parameters"][name]["Default"] == ""
    assert template_values(parameters).condition("OwnUserPool") is own
    for resource in OWN_POOL:
        assert translated()["Resources"][resource]["Condition"] == "OwnUserPool"


def test_the_parameters_take_what_the_control_plane_outputs() -> None:
    control_plane = load_template(PROJECT_ROOT / "templates" / "control-plane.yaml")
    assert set(SHARED) <= set(control_plane["Outputs"])
    for name, value in SHARED.items():
        assert re.fullmatch(translated()["Parameters"][name]["AllowedPattern"], value)
        assert re.fullmatch(translated()["Parameters"][name]["AllowedPattern"], "")
    # The provider a cell derives from the pool's id is the pool's ProviderName in its Region,
    # one the functions' settings accept.
    values = template_values(SHARED)
    provider = values.resolve(PROVIDER_OF_THE_PARAMETER)
    assert provider == f"cognito-idp.{REGION}.amazonaws.com/{SHARED['UserPoolId']}"
    assert _USER_POOL_PROVIDER.fullmatch(provider)


def test_alone_the_stack_trusts_its_own_pool_and_never_reads_the_parameters() -> None:
    alone = stack(own_pool=True)
    assert set(OWN_POOL) <= set(alone["Resources"])
    assert references_to(alone, tuple(SHARED)) == []
    assert alone["Outputs"]["UserPoolId"]["Value"] == {"Ref": "UserPool"}


def test_with_the_shared_pool_the_stack_has_none_and_every_reference_is_the_parameters() -> None:
    cell = stack(own_pool=False)
    cognito = {
        resource["Type"] for resource in cell["Resources"].values() if resource["Type"].startswith("AWS::Cognito")
    }
    assert cognito == {
        "AWS::Cognito::IdentityPool",
        "AWS::Cognito::IdentityPoolRoleAttachment",
        "AWS::Cognito::IdentityPoolPrincipalTag",
    }
    assert references_to(cell, OWN_POOL) == []
    resources = cell["Resources"]
    assert resources["IdentityPool"]["Properties"]["CognitoIdentityProviders"] == [
        {"ProviderName": PROVIDER_OF_THE_PARAMETER, "ClientId": CLIENT_OF_THE_PARAMETER, "ServerSideTokenCheck": True}
    ]
    assert resources["IdentityPoolTenantTag"]["Properties"]["IdentityProviderName"] == PROVIDER_OF_THE_PARAMETER
    functions = [resource for resource in resources.values() if resource["Type"] == "AWS::Lambda::Function"]
    assert functions
    for function in functions:
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["USER_POOL_PROVIDER_NAME"] == PROVIDER_OF_THE_PARAMETER
        assert variables["ALLOWED_CLIENT_IDS"] == CLIENT_OF_THE_PARAMETER
    assert cell["Outputs"]["UserPoolId"]["Value"] == {"Ref": "UserPoolId"}
    assert cell["Outputs"]["UserPoolClientId"]["Value"] == CLIENT_OF_THE_PARAMETER
