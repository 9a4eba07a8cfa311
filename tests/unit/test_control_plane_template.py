"""The control plane's template (templates/control-plane.yaml): the cells' shared user
pool is template.yaml's setting for setting, the directory is protected as the pool
table is, the router's function is router/edge_router.js character for character
(the template deploys as it is, no build step), and the distribution forwards every
method, header (Authorization included) and query string over HTTPS only, caching
nothing. cfn-lint reads it clean (checkov: tests/unit/test_checkov.py, one run over every template)."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest

from stack_model.template import PROJECT_ROOT, load_template, template
from tests.unit.test_edge_router import ROUTER
from tests.unit.test_template import venv_tool

CONTROL_PLANE_PATH = PROJECT_ROOT / "templates" / "control-plane.yaml"
# CloudFront's managed policies (their ids are the same in every account).
CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"
ALL_VIEWER_EXCEPT_HOST_HEADER = "b689b0a8-53d0-40ab-baf2-68738e2966ac"
EVERY_METHOD = {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"}


def control_plane() -> dict[str, Any]:
    return load_template(CONTROL_PLANE_PATH)


def resource(name: str) -> dict[str, Any]:
    found: dict[str, Any] = control_plane()["Resources"][name]
    return found


@pytest.mark.parametrize("name", ["UserPool", "UserPoolClient", "AdminGroup"])
def test_the_shared_user_pool_is_a_cells_own(name: str) -> None:
    """The immutable custom:tenant_id no client writes, no self sign-up, the admin group,
    the token lifetimes: a cell on the shared pool behaves as one with its own."""
    cell = template()["Resources"][name]
    shared = resource(name)
    for part in ("Type", "Properties", "DeletionPolicy", "UpdateReplacePolicy"):
        assert shared.get(part) == cell.get(part), f"{name} {part}"


def test_the_directory_is_kept_as_the_pool_table_is() -> None:
    table = resource("DirectoryTable")
    props = table["Properties"]
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    # No stream: the operator's commands write the router's store themselves.
    assert "StreamSpecification" not in props


def test_the_router_function_is_the_tested_file_and_reads_the_store() -> None:
    function = resource("RouterFunction")["Properties"]
    assert function["FunctionCode"] == ROUTER.read_text(encoding="utf-8")
    assert function["AutoPublish"] is True
    config = function["FunctionConfig"]
    assert config["Runtime"] == "cloudfront-js-2.0"
    assert config["KeyValueStoreAssociations"] == [{"KeyValueStoreARN": {"Fn::GetAtt": ["RoutesStore", "Arn"]}}]
    assert resource("RoutesStore")["Type"] == "AWS::CloudFront::KeyValueStore"


def test_the_distribution_forwards_everything_over_https_and_caches_nothing() -> None:
    router = resource("Router")
    assert router["Condition"] == "HasDefaultCell"
    config = router["Properties"]["DistributionConfig"]
    (origin,) = config["Origins"]
    assert origin["DomainName"] == {"Ref": "DefaultCellApiDomain"}
    assert origin["OriginPath"] == {"Fn::Sub": "/${DefaultCellStageName}"}
    custom = origin["CustomOriginConfig"]
    assert (custom["OriginProtocolPolicy"], custom["OriginSSLProtocols"]) == ("https-only", ["TLSv1.2"])
    behavior = config["DefaultCacheBehavior"]
    assert "CacheBehaviors" not in config
    assert behavior["TargetOriginId"] == origin["Id"]
    assert behavior["ViewerProtocolPolicy"] == "https-only"
    assert set(behavior["AllowedMethods"]) == EVERY_METHOD
    # Caching off is what lets the all-viewer policy forward Authorization; Host is the origin's.
    assert behavior["CachePolicyId"] == CACHING_DISABLED
    assert behavior["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST_HEADER
    assert "ForwardedValues" not in behavior
    assert behavior["FunctionAssociations"] == [
        {"EventType": "viewer-request", "FunctionARN": {"Fn::GetAtt": ["RouterFunction", "FunctionARN"]}}
    ]
    assert "LambdaFunctionAssociations" not in behavior


def test_the_stage_and_api_domain_parameters_are_what_the_router_accepts() -> None:
    """The default cell is named as the function names every cell: an API Gateway
    regional domain and a stage of template.yaml's form."""
    parameters = control_plane()["Parameters"]
    assert (
        parameters["DefaultCellStageName"]["AllowedPattern"] == template()["Parameters"]["StageName"]["AllowedPattern"]
    )
    code = ROUTER.read_text(encoding="utf-8")
    match = re.search(r"^const DOMAIN = /(.+)/;$", code, re.MULTILINE)
    assert match is not None
    router_domain = re.compile(match.group(1))
    parameter = re.compile(parameters["DefaultCellApiDomain"]["AllowedPattern"])
    samples = {
        "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com": True,
        "zz9.execute-api.us-gov-west-1.amazonaws.com": True,
        "tokens.example.com": False,
        "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com.example.com": False,
        "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com:443": False,
        "A1B2C3D4E5.execute-api.eu-west-1.amazonaws.com": False,
        "x.lambda-url.eu-west-1.on.aws": False,
    }
    for domain, accepted in samples.items():
        assert bool(router_domain.fullmatch(domain)) is accepted, domain
        assert bool(parameter.fullmatch(domain)) is accepted, domain
    assert parameter.fullmatch("")  # no default cell yet: no distribution


def test_the_outputs_name_what_cells_and_operators_need() -> None:
    outputs = control_plane()["Outputs"]
    assert {
        "UserPoolId",
        "UserPoolClientId",
        "UserPoolArn",
        "DirectoryTableName",
        "KeyValueStoreArn",
        "RouterUrl",
    } <= set(outputs)
    assert outputs["RouterUrl"]["Condition"] == "HasDefaultCell"


def test_cfn_lint_is_clean() -> None:
    result = subprocess.run(  # noqa: S603 - fixed arguments
        [venv_tool("cfn-lint"), "--regions", "us-east-1", "--", str(CONTROL_PLANE_PATH)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "")
