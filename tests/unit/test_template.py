"""The template: lint-clean, and the isolation model holds in the SAM-translated
CloudFormation (what actually deploys), not just in the source YAML."""

from __future__ import annotations

import copy
import fnmatch
import json
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.shared.constants import TRACER_CAPTURE_ERROR_ENV, TRACER_CAPTURE_RESPONSE_ENV
from samtranslator.translator.transform import transform

from stack_model import managed_policies
from stack_model.dedicated import DEDICATED_TEMPLATE_PATH
from stack_model.functions import function_specs
from stack_model.isolation import with_tenant_isolation as with_tenant_isolation_mode
from stack_model.isolation import write_variant
from stack_model.template import TEMPLATE_PATH, load_template, with_conditions
from support_tickets.auth.authorizer import CONTEXT_ERROR_CODE, CONTEXT_ERROR_MESSAGE, MOVING_MESSAGE, caller_context
from support_tickets.core.errors import TenantMoving
from support_tickets.core.identity import BEARER_HEADER, TENANT_CLAIM

API_FUNCTIONS = {
    "CreateTicketFunction",
    "ListTicketsFunction",
    "GetTicketFunction",
    "GetTicketSummaryFunction",
    "UpdateTicketFunction",
    "AddCommentFunction",
    "BatchUpdateStatusFunction",
    "DeleteTicketFunction",
    "GetAggregatesFunction",
    "GetTicketHistoryFunction",
    "GetAuditTrailFunction",
    "CreateWebhookFunction",
    "ListWebhooksFunction",
    "DeleteWebhookFunction",
    "RotateWebhookSecretFunction",
    "GetUsageFunction",
    "ListWebhookDeliveriesFunction",
    "RedeliverWebhookFunction",
}
WEBHOOK_FUNCTIONS = {
    "CreateWebhookFunction",
    "ListWebhooksFunction",
    "DeleteWebhookFunction",
    "RotateWebhookSecretFunction",
    "ListWebhookDeliveriesFunction",
    "RedeliverWebhookFunction",
}
# The pool table and every dedicated tenant's table (templates/dedicated-table.yaml:
# named after the pool's "-dedicated-<tenant>"), as the roles' statements name them.
POOL_TABLE = {"Fn::GetAtt": ["SupportTicketTable", "Arn"]}
DEDICATED_TABLES = {"Fn::Sub": "${SupportTicketTable.Arn}-dedicated-*"}
POOL_AND_DEDICATED_TABLES = [POOL_TABLE, DEDICATED_TABLES]
POOL_AND_DEDICATED_STREAMS = [
    {"Fn::GetAtt": ["SupportTicketTable", "StreamArn"]},
    {"Fn::Sub": "${SupportTicketTable.Arn}-dedicated-*/stream/*"},
]
ITEM_ACTIONS = {
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
}


# The condition that gives a stack its own user pool (both UserPoolId and UserPoolClientId empty).
OWN_USER_POOL = "OwnUserPool"


class NoManagedPolicies:
    def load(self) -> dict[str, str]:
        return {}


@cache
def as_submitted(tenant_isolation: bool = False) -> dict[str, Any]:
    """The template (or its tenant isolation variant) as `sam deploy` would submit it (code already uploaded)."""
    template = with_tenant_isolation_mode(load_template()) if tenant_isolation else copy.deepcopy(load_template())
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        for uri in ("CodeUri", "ContentUri"):
            if uri in props:
                props[uri] = "s3://bucket/key.zip"
    translated_template: dict[str, Any] = transform(template, {}, NoManagedPolicies())
    return translated_template


@cache
def translated(tenant_isolation: bool = False) -> dict[str, Any]:
    """What a stack deployed alone makes of it (its own user pool: tests/unit/test_template_user_pool.py)."""
    return with_conditions(as_submitted(tenant_isolation), {OWN_USER_POOL: True})


def resources(kind: str, tenant_isolation: bool = False) -> dict[str, dict[str, Any]]:
    return {name: res for name, res in translated(tenant_isolation)["Resources"].items() if res["Type"] == kind}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statements(policy_document: dict[str, Any]) -> list[dict[str, Any]]:
    return as_list(policy_document["Statement"])


def all_role_statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for policy in role["Properties"].get("Policies", []):
        found.extend(statements(policy["PolicyDocument"]))
    return found


def venv_tool(name: str) -> str:
    tool = shutil.which(name, path=str(Path(sys.executable).parent))
    assert tool is not None, f"{name} is a pinned dev dependency (requirements-dev.txt)"
    return tool


def with_tenant_isolation(directory: Path) -> Path:
    """The tenant isolation variant of the template, written to ``directory``
    as ``make build TENANT_ISOLATION=1`` writes it (stack_model/isolation.py):
    what a deployment with the option on lints as."""
    return write_variant(TEMPLATE_PATH, directory / "template-tenant-isolation.yaml")


def test_cfn_lint_is_clean(tmp_path: Path) -> None:
    # `sam validate --lint` is this same check (samcli's validate calls
    # cfnlint.api.lint on the template, region us-east-1, cfn-lint's default):
    # run once here, not twice. Plain `sam validate` needs AWS credentials.
    # With tenant isolation on and off, and a dedicated tenant's table's template:
    # every template in one run (cfn-lint's start-up is most of its time).
    result = subprocess.run(  # noqa: S603 - fixed arguments
        [
            venv_tool("cfn-lint"),
            "--regions",
            "us-east-1",
            "--",
            str(TEMPLATE_PATH),
            str(with_tenant_isolation(tmp_path)),
            str(DEDICATED_TEMPLATE_PATH),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "")


def rest_api_body(tenant_isolation: bool = False) -> dict[str, Any]:
    (rest_api,) = resources("AWS::ApiGateway::RestApi", tenant_isolation).values()
    body: dict[str, Any] = rest_api["Properties"]["Body"]
    return body


def test_every_api_method_uses_the_lambda_authorizer_and_an_api_key() -> None:
    methods = resources("AWS::ApiGateway::Method")
    # SAM inlines the API as an OpenAPI body: check every operation there.
    paths = rest_api_body()["paths"]
    operations = [(path, verb, op) for path, ops in paths.items() for verb, op in ops.items()]
    assert len(operations) == len(API_FUNCTIONS) == 18
    for path, verb, op in operations:
        assert op.get("security") == [{"TenantAuthorizer": []}, {"api_key": []}], f"{verb.upper()} {path}"
    schemes = rest_api_body()["securityDefinitions"]
    authorizer = schemes["TenantAuthorizer"]
    assert authorizer["x-amazon-apigateway-authtype"] == "custom"
    assert authorizer["name"] == "Authorization"
    settings = authorizer["x-amazon-apigateway-authorizer"]
    assert settings["type"] == "token"
    assert "AuthorizerFunction" in json.dumps(settings["authorizerUri"])
    # The revocation window docs/isolation.md states is this cache's TTL.
    assert settings["authorizerResultTtlInSeconds"] == 300
    # The cache is per header value: one spelling per token reaches the authorizer, the rest is a 401.
    assert settings["identityValidationExpression"] == f"^{BEARER_HEADER}$"
    assert not any(scheme.get("x-amazon-apigateway-authtype") == "cognito_user_pools" for scheme in schemes.values())
    assert methods == {}  # no method defined outside the authorized OpenAPI body


def test_usage_plans_meter_the_key_the_authorizer_names() -> None:
    (rest_api,) = resources("AWS::ApiGateway::RestApi").values()
    assert rest_api["Properties"]["ApiKeySourceType"] == "AUTHORIZER"


def test_one_usage_plan_per_tier_from_the_parameters() -> None:
    from support_tickets.data.tenant_registry import TIERS

    plans = resources("AWS::ApiGateway::UsagePlan")
    assert set(plans) == {f"UsagePlan{tier.capitalize()}" for tier in TIERS}
    parameters = translated()["Parameters"]
    for tier in TIERS:
        props = plans[f"UsagePlan{tier.capitalize()}"]["Properties"]
        prefix = tier.capitalize()
        assert props["Throttle"] == {
            "RateLimit": {"Ref": f"{prefix}RateLimit"},
            "BurstLimit": {"Ref": f"{prefix}BurstLimit"},
        }
        assert props["Quota"] == {"Limit": {"Ref": f"{prefix}DailyQuota"}, "Period": "DAY"}
        assert props["ApiStages"] == [{"ApiId": {"Ref": "TicketsApi"}, "Stage": {"Ref": "TicketsApiStage"}}]
        for name in ("RateLimit", "BurstLimit", "DailyQuota"):
            assert parameters[f"{prefix}{name}"]["Type"] == "Number"
        assert translated()["Outputs"][f"UsagePlanId{prefix}"]["Value"] == {"Ref": f"UsagePlan{prefix}"}
    # Higher tiers allow more, and every tier stays under the stage's own throttle.
    defaults = {name: float(spec["Default"]) for name, spec in parameters.items() if spec["Type"] == "Number"}
    for name in ("RateLimit", "BurstLimit", "DailyQuota"):
        assert defaults[f"Basic{name}"] < defaults[f"Standard{name}"] < defaults[f"Premium{name}"]
    assert defaults["PremiumRateLimit"] <= defaults["ApiThrottlingRateLimit"]
    assert defaults["PremiumBurstLimit"] <= defaults["ApiThrottlingBurstLimit"]


def gateway_responses() -> dict[str, Any]:
    responses: dict[str, Any] = rest_api_body()["x-amazon-apigateway-gateway-responses"]
    return responses


@pytest.mark.parametrize(
    ("response_type", "status", "code", "retry_after"),
    [
        ("UNAUTHORIZED", 401, "UNAUTHORIZED", None),
        # the authorizer's Deny says which (FORBIDDEN or TENANT_SUSPENDED): test_access_denied_…
        ("ACCESS_DENIED", 403, f"$context.authorizer.{CONTEXT_ERROR_CODE}", None),
        # a key the authorizer named is in no plan of the stage: a tenant placed in another cell, or a
        # key that went after the answer was cached (support_tickets.auth.authorizer): retry
        ("INVALID_API_KEY", 503, "TENANT_MOVING", "'2'"),
        ("THROTTLED", 429, "THROTTLED", "'1'"),
        ("QUOTA_EXCEEDED", 429, "QUOTA_EXCEEDED", "'3600'"),
        ("AUTHORIZER_FAILURE", 503, "UNAVAILABLE", "'1'"),
        ("AUTHORIZER_CONFIGURATION_ERROR", 503, "UNAVAILABLE", "'1'"),
        ("REQUEST_TOO_LARGE", 413, "PAYLOAD_TOO_LARGE", None),
        # an integration that failed or outlived API Gateway's 29 s: a write may have been applied
        ("INTEGRATION_FAILURE", 504, "UNAVAILABLE", "'1'"),
        ("INTEGRATION_TIMEOUT", 504, "UNAVAILABLE", "'1'"),
        # no method for the path and verb (and a signature error, which only such a request can have)
        ("MISSING_AUTHENTICATION_TOKEN", 404, "NOT_FOUND", None),
        ("INVALID_SIGNATURE", 404, "NOT_FOUND", None),
    ],
)
def test_gateway_responses_carry_our_error_shape(
    response_type: str, status: int, code: str, retry_after: str | None
) -> None:
    response = gateway_responses()[response_type]
    assert int(response["statusCode"]) == status
    body = json.loads(response["responseTemplates"]["application/json"])
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    # Gateway response headers are literals (or request parameters): a fixed Retry-After.
    assert response.get("responseParameters", {}).get("gatewayresponse.header.Retry-After") == retry_after


def test_access_denied_takes_code_and_message_from_the_authorizers_deny() -> None:
    body = json.loads(gateway_responses()["ACCESS_DENIED"]["responseTemplates"]["application/json"])
    assert body == {
        "error": {
            "code": f"$context.authorizer.{CONTEXT_ERROR_CODE}",
            "message": f"$context.authorizer.{CONTEXT_ERROR_MESSAGE}",
        }
    }


def test_every_method_requires_the_key_the_authorizer_names() -> None:
    """What keeps a function from running for a request whose key is in no plan (a cell's
    refusal, support_tickets.auth.authorizer): the operations' ``api_key`` requirement is
    API Gateway's API key, and the key is the authorizer's, not the client's."""
    assert rest_api_body()["securityDefinitions"]["api_key"] == {"type": "apiKey", "name": "x-api-key", "in": "header"}
    (rest_api,) = resources("AWS::ApiGateway::RestApi").values()
    assert rest_api["Properties"]["ApiKeySourceType"] == "AUTHORIZER"


def test_a_key_in_no_plan_is_tenant_moving_as_the_authorizer_and_the_functions_say_it() -> None:
    response = gateway_responses()["INVALID_API_KEY"]
    assert json.loads(response["responseTemplates"]["application/json"]) == {
        "error": {"code": TenantMoving.code, "message": MOVING_MESSAGE}
    }
    assert (int(response["statusCode"]), response["responseParameters"]["gatewayresponse.header.Retry-After"]) == (
        TenantMoving.status,
        f"'{TenantMoving.retry_after_seconds}'",
    )


@pytest.mark.parametrize(
    "cell_id", ["", "cell-a", "1", "a" * 63, "a" * 64, "Cell-A", "cell_a", "cell a", "cell/a", "cell-a\n", "é"]
)
def test_a_cell_id_is_what_the_routers_store_and_the_authorizer_accept(cell_id: str) -> None:
    from ops.cell_routes import cell_origin_key
    from support_tickets.core.settings import ConfigurationError, Settings

    parameter = translated()["Parameters"]["CellId"]
    assert (parameter["Type"], parameter["Default"]) == ("String", "")  # alone unless told
    # CloudFormation matches the whole value (Java's Pattern.matches)
    accepted = re.fullmatch(parameter["AllowedPattern"], cell_id) is not None
    environment = {
        "TABLE_NAME": "SupportTicket",
        "ALLOWED_CLIENT_IDS": "client",
        "USER_POOL_PROVIDER_NAME": "cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE",
        "CELL_ID": cell_id,
    }
    try:
        settings = Settings.from_environment(environment)
    except ConfigurationError:
        assert not accepted, cell_id
    else:
        assert accepted, cell_id
        assert settings.cell_id == (cell_id or None)
    if cell_id:
        try:
            cell_origin_key(cell_id)
        except ValueError:
            assert not accepted, cell_id
        else:
            assert accepted, cell_id


def test_the_authorizer_alone_learns_the_cell_and_a_cell_says_its_id() -> None:
    functions = resources("AWS::Lambda::Function")
    assert functions["AuthorizerFunction"]["Properties"]["Environment"]["Variables"]["CELL_ID"] == {"Ref": "CellId"}
    others = {name for name, function in functions.items() if "CELL_ID" in json.dumps(function)}
    assert others == {"AuthorizerFunction"}
    assert translated()["Conditions"]["IsCell"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "CellId"}, ""]}]}
    assert translated()["Outputs"]["CellId"] | {"Description": None} == {
        "Condition": "IsCell",
        "Description": None,
        "Value": {"Ref": "CellId"},
    }


def test_the_authorizer_role_reads_only_tenant_records() -> None:
    functions = resources("AWS::Lambda::Function")
    assert functions["AuthorizerFunction"]["Properties"]["Role"] == {"Fn::GetAtt": ["AuthorizerRole", "Arn"]}
    role = resources("AWS::IAM::Role")["AuthorizerRole"]
    dynamodb = [
        statement
        for statement in role_grants("AuthorizerRole")
        if any(str(action).startswith("dynamodb") for action in as_list(statement["Action"]))
    ]
    assert dynamodb == all_role_statements(role)  # its only statement, and its managed policies grant no DynamoDB
    (statement,) = dynamodb
    assert as_list(statement["Action"]) == ["dynamodb:GetItem"]
    assert as_list(statement["Resource"]) == [{"Fn::GetAtt": ["SupportTicketTable", "Arn"]}]  # no index, no stream
    assert statement["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TENANT#*|CONFIG"]},
        "Null": {"dynamodb:LeadingKeys": "false"},
    }
    granted = {action for statement in role_grants("AuthorizerRole") for action in as_list(statement["Action"])}
    assert {action.split(":", 1)[0] for action in granted} == {"logs", "xray", "dynamodb"}


def test_each_route_has_its_own_function() -> None:
    paths = next(iter(resources("AWS::ApiGateway::RestApi").values()))["Properties"]["Body"]["paths"]
    targets = {
        json.dumps(op["x-amazon-apigateway-integration"]["uri"], sort_keys=True)
        for ops in paths.values()
        for op in ops.values()
    }
    assert len(targets) == len(API_FUNCTIONS)
    for function in API_FUNCTIONS:
        assert any(function in target for target in targets), function


def integration_of(operation: dict[str, Any]) -> dict[str, Any]:
    integration: dict[str, Any] = operation["x-amazon-apigateway-integration"]
    return integration


def test_the_template_puts_no_function_in_tenant_isolation_mode() -> None:
    # What a default deploy and sam local read: no TenancyConfig anywhere, no tenant mapping, and no
    # parameter for either (SAM CLI takes a TenancyConfig under Fn::If for an isolated function's:
    # stack_model/isolation.py says why, tests/unit/test_sam_local.py holds what sam local does).
    assert "TenantIsolationMode" not in load_template()["Parameters"]
    assert not any("TenancyConfig" in fn["Properties"] for fn in resources("AWS::Lambda::Function").values())
    operations = [op for ops in rest_api_body()["paths"].values() for op in ops.values()]
    assert len(operations) == len(API_FUNCTIONS)
    assert not any("requestParameters" in integration_of(op) for op in operations)
    assert not any(spec.tenant_isolation for spec in function_specs().values())
    assert {route.integration_headers for spec in function_specs().values() for route in spec.routes} == {()}


def test_the_isolation_variant_is_the_template_plus_the_mode_and_the_tenant_mapping_alone() -> None:
    plain = load_template()
    variant = with_tenant_isolation_mode(plain)
    assert plain == load_template()  # its source unchanged
    assert with_tenant_isolation_mode(variant) == variant
    # Without what it adds, it is the template: every later change of template.yaml is in it.
    stripped = copy.deepcopy(variant)
    for resource in stripped["Resources"].values():
        resource.get("Properties", {}).pop("TenancyConfig", None)
    for ops in stripped["Resources"]["TicketsApi"]["Properties"]["DefinitionBody"]["paths"].values():
        for op in ops.values():
            del integration_of(op)["requestParameters"]
    assert stripped == plain


def test_with_tenant_isolation_every_api_function_and_nothing_else_gets_its_own_environments_per_tenant() -> None:
    # What deploys from the variant: each API function's TenancyConfig is PER_TENANT, no other function has one
    # (not the authorizer, the stream, queue or log consumers: Lambda supports the mode for functions API
    # Gateway invokes only, docs/isolation.md)...
    functions = resources("AWS::Lambda::Function", tenant_isolation=True)
    assert {name for name, fn in functions.items() if "TenancyConfig" in fn["Properties"]} == API_FUNCTIONS
    assert all(
        functions[name]["Properties"]["TenancyConfig"] == {"TenantIsolationMode": "PER_TENANT"}
        for name in API_FUNCTIONS
    )
    # ...as the local stack reads it (--tenant-isolation): the API functions (those with a route) alone.
    on = function_specs(tenant_isolation=True)
    assert {name for name, spec in on.items() if spec.tenant_isolation} == API_FUNCTIONS
    assert {name for name, spec in on.items() if spec.routes} == API_FUNCTIONS
    assert {"AuthorizerFunction", "AggregateCountsFunction", "AuditTrailFunction", "DeliverWebhookFunction"} <= set(on)


def test_with_tenant_isolation_each_route_passes_the_tenant_the_authorizer_verified() -> None:
    # What deploys from the variant: each integration maps X-Amz-Tenant-Id from the authorizer's context
    tenant_header = {"integration.request.header.X-Amz-Tenant-Id": "context.authorizer.tenant_id"}
    operations = [op for ops in rest_api_body(tenant_isolation=True)["paths"].values() for op in ops.values()]
    assert len(operations) == len(API_FUNCTIONS)
    for op in operations:
        assert integration_of(op)["requestParameters"] == tenant_header
        # never from the client's request (method.request.*), which a caller writes
        assert "parameters" not in op
    # As the local stack reads it: the header from the authorizer's tenant_id on every route.
    assert {
        route.integration_headers for spec in function_specs(tenant_isolation=True).values() for route in spec.routes
    } == {(("X-Amz-Tenant-Id", "context.authorizer.tenant_id"),)}
    # the key the authorizer puts the verified tenant under
    assert caller_context({TENANT_CLAIM: "1"})["tenant_id"] == "1"


def test_api_gateway_may_invoke_each_api_function_for_its_own_route_only() -> None:
    permissions = {
        name: res["Properties"]
        for name, res in resources("AWS::Lambda::Permission").items()
        if res["Properties"]["Principal"] == "apigateway.amazonaws.com"
    }
    expected: dict[str, list[str]] = {}
    for path, ops in rest_api_body()["paths"].items():
        for verb, op in ops.items():
            (function,) = re.findall(r"\$\{(\w+)\.Arn\}", op["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"])
            arn_path = re.sub(r"\{[^}]+\}", "*", path)
            expected.setdefault(function, []).append(
                f"arn:${{AWS::Partition}}:execute-api:${{AWS::Region}}:${{AWS::AccountId}}:${{TicketsApi}}/*/{verb.upper()}{arn_path}"
            )
    granted: dict[str, list[str]] = {}
    for name, props in permissions.items():
        named = props["FunctionName"]
        function = named["Ref"] if "Ref" in named else named["Fn::GetAtt"][0]
        if function == "AuthorizerFunction":  # SAM's, for the API's authorizer
            continue
        assert props["Action"] == "lambda:InvokeFunction", name
        granted.setdefault(function, []).append(props["SourceArn"]["Fn::Sub"])
    assert granted == expected
    assert set(granted) == API_FUNCTIONS


def test_api_function_roles_cannot_touch_dynamodb_items() -> None:
    functions = resources("AWS::Lambda::Function")
    roles = resources("AWS::IAM::Role")
    api_role_names = {functions[name]["Properties"]["Role"]["Fn::GetAtt"][0] for name in API_FUNCTIONS}
    assert api_role_names == {"ApiFunctionRole"}
    role = roles["ApiFunctionRole"]
    # Logs and traces only (managed policies); no permission of its own at all.
    assert all_role_statements(role) == []
    granted = {action for statement in role_grants("ApiFunctionRole") for action in as_list(statement["Action"])}
    assert {action.split(":", 1)[0] for action in granted} == {"logs", "xray", "ec2"}
    # ec2: only what Lambda needs for the functions' network interfaces in the VPC.
    assert {action for action in granted if action.startswith("ec2:")} <= {
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSubnets",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    }
    managed = json.dumps(role["Properties"].get("ManagedPolicyArns", []))
    assert "AWSLambdaBasicExecutionRole" in managed
    assert "Dynamo" not in managed


def role_grants(role_name: str) -> list[dict[str, Any]]:
    """Every Allow statement a role gets: inline, from ``AWS::IAM::Policy``
    attachments and from its managed policies (documents from moto's copy)."""
    role = resources("AWS::IAM::Role")[role_name]
    granted = list(all_role_statements(role))
    for policy in resources("AWS::IAM::Policy").values():
        if {"Ref": role_name} in policy["Properties"]["Roles"]:
            granted.extend(statements(policy["Properties"]["PolicyDocument"]))
    for entry in role["Properties"].get("ManagedPolicyArns", []):
        granted.extend(statements(managed_policies.document(managed_policy_arn(entry))))
    return [statement for statement in granted if statement["Effect"] == "Allow"]


SESSION_ACTIONS = ("sts:AssumeRole", "sts:AssumeRoleWithWebIdentity", "sts:TagSession")


def grants_a_session(statement: dict[str, Any]) -> bool:
    """Whether the statement could allow assuming a role or tagging a session
    (wildcards included, NotAction too)."""
    if "NotAction" in statement:
        return not any(
            fnmatch.fnmatchcase(wanted.lower(), action.lower())
            for wanted in SESSION_ACTIONS
            for action in as_list(statement["NotAction"])
        )
    return any(
        fnmatch.fnmatchcase(wanted.lower(), action.lower())
        for wanted in SESSION_ACTIONS
        for action in as_list(statement["Action"])
    )


def test_no_role_of_the_stack_can_assume_the_tenant_role_or_tag_a_session() -> None:
    # Tenant credentials come only from the identity pool, for the caller's own token.
    roles = resources("AWS::IAM::Role")
    assert "AssumeTenantRolePolicy" not in translated()["Resources"]
    for name in roles:
        assert [statement for statement in role_grants(name) if grants_a_session(statement)] == [], name


def test_the_session_check_would_catch_a_grant() -> None:
    # The control for the test above: what the template used to grant, and wildcards.
    assert grants_a_session({"Effect": "Allow", "Action": ["sts:AssumeRole", "sts:TagSession"], "Resource": "*"})
    assert grants_a_session({"Effect": "Allow", "Action": "sts:*", "Resource": "*"})
    assert grants_a_session({"Effect": "Allow", "Action": "*", "Resource": "*"})
    assert grants_a_session({"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"})
    assert not grants_a_session({"Effect": "Allow", "Action": "logs:PutLogEvents", "Resource": "*"})


def tenant_role() -> dict[str, Any]:
    return resources("AWS::IAM::Role")["TenantAccessRole"]


def tenant_allows() -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in all_role_statements(tenant_role()) if s["Effect"] == "Allow"}


def test_tenant_policy_allows_item_actions_only_under_the_delimited_prefix() -> None:
    statement = tenant_allows()["TenantItems"]
    assert set(statement["Action"]) == ITEM_ACTIONS
    condition = statement["Condition"]
    assert condition["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == ["TENANT#${aws:PrincipalTag/TenantId}|*"]
    assert condition["Null"] == {"dynamodb:LeadingKeys": "false"}
    resources_json = json.dumps(statement["Resource"])
    assert "SupportTicketTable" in resources_json
    assert "/index/GSI1" in resources_json
    assert "/index/*" not in resources_json


def test_a_dedicated_table_is_reached_only_by_its_own_tenant_under_its_prefix_through_the_endpoint() -> None:
    statement = tenant_allows()["ItsOwnDedicatedTable"]
    assert set(statement["Action"]) == ITEM_ACTIONS
    # Tables named after the pool's "-dedicated-<tenant>" and their GSI1: never the pool table itself.
    assert statement["Resource"] == [DEDICATED_TABLES, {"Fn::Sub": "${SupportTicketTable.Arn}-dedicated-*/index/GSI1"}]
    assert statement["Condition"] == {
        # DynamoDB's ABAC: the table's TenantId tag (GSI1 inherits it) is the caller's session tag.
        "StringEquals": {
            "aws:SourceVpce": {"Ref": "DynamoDbEndpoint"},
            "aws:ResourceTag/TenantId": "${aws:PrincipalTag/TenantId}",
        },
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TENANT#${aws:PrincipalTag/TenantId}|*"]},
        "Null": {"dynamodb:LeadingKeys": "false"},
    }


def test_every_deny_of_the_tenant_role_holds_on_the_dedicated_tables_too() -> None:
    denies = [s for s in all_role_statements(tenant_role()) if s["Effect"] == "Deny"]
    assert len(denies) == 5
    for deny in denies:
        assert POOL_TABLE in as_list(deny["Resource"]), deny["Sid"]
        assert DEDICATED_TABLES in as_list(deny["Resource"]), deny["Sid"]


@pytest.mark.parametrize("role", ["AggregateCountsRole", "AuditTrailRole", "DeliverWebhookRole"])
def test_the_stream_and_delivery_roles_reach_the_dedicated_tables_as_the_pool_but_tenant_records(role: str) -> None:
    """What they write (counts, history, audit, deliveries) moves with a dedicated
    tenant; the tenant record stays in the pool table, and only there."""
    for statement in role_grants(role):
        if not any(action.startswith("dynamodb:") for action in as_list(statement["Action"])):
            continue
        resources_named = as_list(statement["Resource"])
        leading = statement.get("Condition", {}).get("ForAllValues:StringLike", {}).get("dynamodb:LeadingKeys", [])
        if leading == ["TENANT#*|CONFIG"]:
            assert resources_named == [POOL_TABLE], statement["Sid"]
        elif statement["Sid"] in ("ReadThisTablesStream", "ListThisTablesStreams"):
            assert any("-dedicated-*/stream/*" in json.dumps(resource) for resource in resources_named)
        else:
            assert resources_named == POOL_AND_DEDICATED_TABLES, statement["Sid"]


def test_what_a_dedicated_tenants_stack_imports_the_stack_exports() -> None:
    from stack_model.dedicated import imported_names

    outputs = translated()["Outputs"]
    exported = {
        output["Export"]["Name"]["Fn::Sub"].replace("${AWS::StackName}", "${PoolStackName}")
        for output in outputs.values()
        if "Export" in output
    }
    assert imported_names() <= exported
    # Each export is named after its output: <stack>-<output>.
    for name, output in outputs.items():
        if "Export" in output:
            assert output["Export"]["Name"] == {"Fn::Sub": f"${{AWS::StackName}}-{name}"}


def tenant_denies() -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in all_role_statements(tenant_role()) if s["Effect"] == "Deny"}


def test_tenant_credentials_can_never_write_a_tenant_record_the_audit_trail_or_the_counts() -> None:
    deny = tenant_denies()["TenantRecordAuditAndCountsAreReadOnly"]
    assert set(deny["Action"]) >= {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
    assert set(deny["Action"]) >= {"dynamodb:BatchWriteItem"}
    assert deny["Condition"] == {
        "ForAnyValue:StringLike": {
            "dynamodb:LeadingKeys": [
                "TENANT#*|CONFIG",
                "TENANT#*|HISTORY#*",
                "TENANT#*|AUDIT#*",
                "TENANT#*|AGGREGATE*",
                "TENANT#*|USAGE",
                "TENANT#*|USAGE#JOURNAL",
            ]
        }
    }
    assert "SupportTicketTable" in json.dumps(deny["Resource"])
    # Reading it stays allowed: GetItem is not denied.
    assert "dynamodb:GetItem" not in deny["Action"]


def test_tenant_credentials_can_never_write_the_erasing_mark() -> None:
    from support_tickets.core import keys

    deny = tenant_denies()["ErasingMarkIsTheOperators"]
    # Every action that can write an attribute (a transaction's items are
    # authorized as PutItem/UpdateItem); reading it (GetItem, Query) is not denied.
    assert set(deny["Action"]) == {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchWriteItem"}
    assert deny["Condition"] == {"ForAnyValue:StringEquals": {"dynamodb:Attributes": [keys.ERASING_ATTRIBUTE]}}
    assert "SupportTicketTable" in json.dumps(deny["Resource"])


def test_no_policy_anywhere_allows_scan_or_wildcards() -> None:
    everything = json.dumps(translated()["Resources"])
    assert "dynamodb:Scan" not in everything
    assert '"dynamodb:*"' not in everything
    for role in resources("AWS::IAM::Role").values():
        for statement in all_role_statements(role):
            for action in as_list(statement["Action"]):
                assert "*" not in action, action


def test_tenant_role_trust_admits_only_this_identity_pools_authenticated_identities() -> None:
    trust = statements(tenant_role()["Properties"]["AssumeRolePolicyDocument"])
    assert {statement["Action"] for statement in trust} == {"sts:AssumeRoleWithWebIdentity", "sts:TagSession"}
    for statement in trust:
        assert statement["Effect"] == "Allow"
        assert statement["Principal"] == {"Federated": "cognito-identity.amazonaws.com"}
        assert statement["Condition"]["StringEquals"] == {"cognito-identity.amazonaws.com:aud": {"Ref": "IdentityPool"}}
        assert statement["Condition"]["ForAnyValue:StringLike"] == {
            "cognito-identity.amazonaws.com:amr": "authenticated"
        }
    (tag,) = [statement for statement in trust if statement["Action"] == "sts:TagSession"]
    assert tag["Condition"]["StringLike"] == {"aws:RequestTag/TenantId": "?*"}
    assert tag["Condition"]["ForAllValues:StringEquals"] == {"aws:TagKeys": ["TenantId"]}


def single(kind: str) -> dict[str, Any]:
    (found,) = resources(kind).values()
    properties: dict[str, Any] = found["Properties"]
    return properties


def test_the_identity_pool_admits_only_this_user_pools_app_client() -> None:
    pool = single("AWS::Cognito::IdentityPool")
    assert pool["AllowUnauthenticatedIdentities"] is False
    assert pool["AllowClassicFlow"] is False
    assert pool["CognitoIdentityProviders"] == [
        {
            "ProviderName": {"Fn::GetAtt": ["UserPool", "ProviderName"]},
            "ClientId": {"Ref": "UserPoolClient"},
            "ServerSideTokenCheck": True,
        }
    ]
    for absent in ("SupportedLoginProviders", "OpenIdConnectProviderARNs", "SamlProviderARNs", "DeveloperProviderName"):
        assert absent not in pool


def test_authenticated_identities_get_the_tenant_role_and_nobody_else_any() -> None:
    attachment = single("AWS::Cognito::IdentityPoolRoleAttachment")
    assert attachment["IdentityPoolId"] == {"Ref": "IdentityPool"}
    assert attachment["Roles"] == {"authenticated": {"Fn::GetAtt": ["TenantAccessRole", "Arn"]}}
    assert "RoleMappings" not in attachment


def test_the_principal_tag_is_the_tokens_tenant_and_nothing_else() -> None:
    tags = single("AWS::Cognito::IdentityPoolPrincipalTag")
    assert tags["IdentityPoolId"] == {"Ref": "IdentityPool"}
    assert tags["IdentityProviderName"] == {"Fn::GetAtt": ["UserPool", "ProviderName"]}
    assert tags["UseDefaults"] is False
    assert tags["PrincipalTags"] == {"TenantId": "custom:tenant_id"}


def test_only_the_authorizer_knows_the_identity_pool_and_nothing_has_a_role_to_assume() -> None:
    from support_tickets.core.settings import variables as setting_variables

    aliases = set(setting_variables().values())
    assert {"IDENTITY_POOL_ID", "USER_POOL_PROVIDER_NAME"} <= aliases
    functions = resources("AWS::Lambda::Function")
    authorizer = functions["AuthorizerFunction"]
    variables = authorizer["Properties"]["Environment"]["Variables"]
    assert variables["IDENTITY_POOL_ID"] == {"Ref": "IdentityPool"}
    assert variables["USER_POOL_PROVIDER_NAME"] == {"Fn::GetAtt": ["UserPool", "ProviderName"]}
    # Deployed after the pool can issue tagged credentials.
    assert {"IdentityPoolRoles", "IdentityPoolTenantTag"} <= set(authorizer.get("DependsOn", []))
    for name in API_FUNCTIONS:
        variables = functions[name]["Properties"]["Environment"]["Variables"]
        # The functions never call Cognito (they can't: their VPC reaches DynamoDB only).
        assert "IDENTITY_POOL_ID" not in variables, name
        assert "TENANT_ROLE_ARN" not in variables, name


# ---------------------------------------------------------------- the data perimeter
def test_every_allow_of_the_tenant_role_holds_only_through_one_of_the_stacks_endpoints() -> None:
    allows = [statement for statement in all_role_statements(tenant_role()) if statement["Effect"] == "Allow"]
    assert allows
    for statement in allows:
        kms = all(action.startswith("kms:") for action in as_list(statement["Action"]))
        endpoint = "KmsEndpoint" if kms else "DynamoDbEndpoint"
        assert statement["Condition"]["StringEquals"]["aws:SourceVpce"] == {"Ref": endpoint}, statement


def test_tenant_credentials_may_only_encrypt_webhook_secrets_under_their_own_tenants_context() -> None:
    statement = tenant_allows()["WebhookSecretsEncryptOnly"]
    assert statement["Action"] == "kms:Encrypt"
    assert statement["Resource"] == {"Fn::GetAtt": ["WebhookSecretsKey", "Arn"]}
    assert statement["Condition"] == {
        "StringEquals": {
            "aws:SourceVpce": {"Ref": "KmsEndpoint"},
            "kms:EncryptionContext:tenant_id": "${aws:PrincipalTag/TenantId}",
        },
        "ForAllValues:StringEquals": {"kms:EncryptionContextKeys": ["tenant_id", "webhook_id"]},
        "Null": {"kms:EncryptionContext:webhook_id": "false"},
    }
    # No other statement of the tenant role names KMS.
    others = [s for s in all_role_statements(tenant_role()) if s is not statement]
    assert "kms:" not in json.dumps(others)


def test_only_the_delivery_role_can_decrypt_webhook_secrets() -> None:
    checked, decrypting = 0, []
    for name in resources("AWS::IAM::Role"):
        for statement in role_grants(name):
            checked += 1
            assert "NotAction" not in statement, (name, statement)
            if any(fnmatch.fnmatch("kms:decrypt", action.lower()) for action in as_list(statement["Action"])):
                decrypting.append((name, statement))
    assert checked > 10
    ((role, grant),) = decrypting
    assert role == "DeliverWebhookRole"
    assert grant["Action"] == "kms:Decrypt"
    assert grant["Resource"] == {"Fn::GetAtt": ["WebhookSecretsKey", "Arn"]}
    assert grant["Condition"] == {
        "ForAllValues:StringEquals": {"kms:EncryptionContextKeys": ["tenant_id", "webhook_id"]},
        "Null": {"kms:EncryptionContext:tenant_id": "false", "kms:EncryptionContext:webhook_id": "false"},
    }
    key = resources("AWS::KMS::Key")["WebhookSecretsKey"]["Properties"]
    assert key["EnableKeyRotation"] is True
    administers, deny = statements(key["KeyPolicy"])
    assert administers["Principal"] == {"AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}}
    # Whatever IAM grants anyone (an administrator included), the key refuses to decrypt for them.
    assert deny["Effect"] == "Deny"
    assert (deny["Principal"], deny["Action"], deny["Resource"]) == ("*", "kms:Decrypt", "*")
    assert deny["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": {"Fn::GetAtt": ["DeliverWebhookRole", "Arn"]}}}
    # And the only function with that role is the delivery function, outside the VPC.
    functions = resources("AWS::Lambda::Function")
    with_role = [n for n, f in functions.items() if "DeliverWebhookRole" in json.dumps(f["Properties"]["Role"])]
    assert with_role == ["DeliverWebhookFunction"]
    assert "VpcConfig" not in functions["DeliverWebhookFunction"]["Properties"]


def test_the_delivery_role_reaches_only_webhooks_deliveries_and_its_queues() -> None:
    granted = [s for s in role_grants("DeliverWebhookRole") if s.get("Sid") not in {None}]
    by_sid = {statement["Sid"]: statement for statement in granted}
    dynamodb = [s for s in granted if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))]
    for statement in dynamodb:
        keys_allowed = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
        assert set(keys_allowed) <= {
            "TENANT#*|WEBHOOKS",
            "TENANT#*|WEBHOOK#*#DELIVERIES",
            "TENANT#*|CONFIG",
            "TENANT#*|WEBHOOKS#RATE",
            "TENANT#*|WEBHOOK#*#PARKED",
        }, statement
        assert statement["Condition"]["Null"] == {"dynamodb:LeadingKeys": "false"}
        if statement["Sid"] in ("ParkedDeliveries", "TenantTier"):
            continue
        assert set(as_list(statement["Action"])) <= {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"}
    # Puts and deletes only in a webhook's parking partition (its slots, lot and circuit).
    parked = by_sid["ParkedDeliveries"]
    assert parked["Condition"]["ForAllValues:StringLike"] == {"dynamodb:LeadingKeys": ["TENANT#*|WEBHOOK#*#PARKED"]}
    assert set(as_list(parked["Action"])) == {
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    }
    # A webhook's status is the only attribute it may write (a 410 disables it).
    # The tier, and the move fence's check of the record: never a write of it.
    assert set(as_list(by_sid["TenantTier"]["Action"])) == {"dynamodb:GetItem", "dynamodb:ConditionCheckItem"}
    disable = by_sid["DisableWebhooks"]
    assert disable["Condition"]["ForAllValues:StringEquals"] == {"dynamodb:Attributes": ["pk", "sk", "status"]}
    queues = [s for s in granted if any(a.startswith("sqs:") for a in as_list(s["Action"]))]
    assert {json.dumps(s["Resource"]) for s in queues} == {
        json.dumps({"Fn::GetAtt": ["WebhookEventsQueue", "Arn"]}),
        json.dumps({"Fn::GetAtt": ["WebhookEventsDeadLetterQueue", "Arn"]}),
    }
    assert by_sid["ItsDeadLetterQueue"]["Action"] == "sqs:SendMessage"
    # Which of a tenant's attempt leases are held: a Query of its delivery-bound partition, nothing else.
    leases = by_sid["TierLeases"]
    assert leases["Action"] == "dynamodb:Query"
    assert leases["Condition"]["ForAllValues:StringLike"] == {"dynamodb:LeadingKeys": ["TENANT#*|WEBHOOKS#RATE"]}


def test_a_tenants_attempts_in_flight_are_a_bounded_share_of_the_delivery_pool() -> None:
    """Every tier has an in-flight bound below the event source's MaximumConcurrency, and a
    lease lives as long as the function may run (no attempt outlives its lease)."""
    from support_tickets.data.tenant_registry import TIERS
    from support_tickets.webhooks.delivery import LEASE_SECONDS, tier_rates

    function = resources("AWS::Lambda::Function")["DeliverWebhookFunction"]["Properties"]
    bounds = tier_rates(function["Environment"]["Variables"]["WEBHOOK_TIER_IN_FLIGHT"])
    assert bounds is not None
    assert set(bounds) == set(TIERS)
    (source,) = [
        mapping["Properties"]
        for mapping in resources("AWS::Lambda::EventSourceMapping").values()
        if mapping["Properties"]["FunctionName"] == {"Ref": "DeliverWebhookFunction"}
    ]
    pool = source["ScalingConfig"]["MaximumConcurrency"]
    assert max(bounds.values()) <= pool // 5  # one tenant holds at most a fifth of the pool
    assert function["Timeout"] <= LEASE_SECONDS


def test_the_webhook_queue_is_fifo_encrypted_and_feeds_the_delivery_function() -> None:
    queues = resources("AWS::SQS::Queue")
    queue, dead = queues["WebhookEventsQueue"]["Properties"], queues["WebhookEventsDeadLetterQueue"]["Properties"]
    for props in (queue, dead):
        assert props["FifoQueue"] is True
        assert props["SqsManagedSseEnabled"] is True
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["WebhookEventsDeadLetterQueue", "Arn"]}
    # 26 h of retries fit in the retention; the visibility is 6 x the function's timeout.
    assert queue["MessageRetentionPeriod"] > 26 * 3600
    function = resources("AWS::Lambda::Function")["DeliverWebhookFunction"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * function["Timeout"]
    (mapping,) = [
        m["Properties"]
        for m in resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": "DeliverWebhookFunction"}
    ]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["WebhookEventsQueue", "Arn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] <= 10  # FIFO's maximum
    # The audit writer sends to it, and reads only which webhooks a tenant has.
    audit = resources("AWS::Lambda::Function")["AuditTrailFunction"]["Properties"]
    assert audit["Environment"]["Variables"]["WEBHOOK_EVENTS_QUEUE_URL"] == {"Ref": "WebhookEventsQueue"}
    grants = {s["Sid"]: s for s in role_grants("AuditTrailRole") if "Sid" in s}
    assert grants["WebhookEvents"]["Resource"] == {"Fn::GetAtt": ["WebhookEventsQueue", "Arn"]}
    assert grants["TenantsWebhooks"]["Action"] == ["dynamodb:GetItem", "dynamodb:Query"]
    assert grants["TenantsWebhooks"]["Condition"]["ForAllValues:StringLike"] == {
        "dynamodb:LeadingKeys": ["TENANT#*|WEBHOOKS"]
    }


def test_only_the_functions_that_encrypt_a_secret_know_the_webhook_key() -> None:
    from ops.routes import api_routes

    functions = resources("AWS::Lambda::Function")
    variables = {name: f["Properties"].get("Environment", {}).get("Variables", {}) for name, f in functions.items()}
    knows = {name for name, found in variables.items() if "WEBHOOK_KEY_ARN" in found}
    assert knows == {route.function for route in api_routes() if route.needs.encrypts} | {"DeliverWebhookFunction"}
    assert knows == {"CreateWebhookFunction", "RotateWebhookSecretFunction", "DeliverWebhookFunction"}
    for name in knows:
        assert variables[name]["WEBHOOK_KEY_ARN"] == {"Fn::GetAtt": ["WebhookSecretsKey", "Arn"]}
    # Deployed, a webhook URL is https to a public address: no parameter turns local http on.
    local_http = {"CreateWebhookFunction", "DeliverWebhookFunction"}
    assert {name for name, found in variables.items() if "WEBHOOK_ALLOW_LOCAL_HTTP" in found} == local_http
    for name in local_http:
        assert variables[name]["WEBHOOK_ALLOW_LOCAL_HTTP"] == "false"


def test_the_kms_endpoint_is_an_interface_endpoint_that_admits_only_encrypt_on_the_webhook_key() -> None:
    endpoint = resources("AWS::EC2::VPCEndpoint")["KmsEndpoint"]["Properties"]
    assert endpoint["VpcEndpointType"] == "Interface"
    assert endpoint["ServiceName"] == {"Fn::Sub": "com.amazonaws.${AWS::Region}.kms"}
    assert endpoint["VpcId"] == {"Ref": "Vpc"}
    assert endpoint["SubnetIds"] == [{"Ref": "PrivateSubnetA"}, {"Ref": "PrivateSubnetB"}]
    assert endpoint["PrivateDnsEnabled"] is True
    (policy,) = statements(endpoint["PolicyDocument"])
    assert (policy["Effect"], policy["Action"]) == ("Allow", "kms:Encrypt")
    assert policy["Resource"] == {"Fn::GetAtt": ["WebhookSecretsKey", "Arn"]}
    group = resources("AWS::EC2::SecurityGroup")["KmsEndpointSecurityGroup"]["Properties"]
    (ingress,) = group["SecurityGroupIngress"]
    assert {k: v for k, v in ingress.items() if k != "Description"} == {
        "IpProtocol": "tcp",
        "FromPort": 443,
        "ToPort": 443,
        "CidrIp": {"Fn::GetAtt": ["Vpc", "CidrBlock"]},
    }
    (egress,) = group["SecurityGroupEgress"]
    assert egress["CidrIp"] == "127.0.0.1/32"  # nothing leaves the endpoint's interfaces


def test_the_gateway_endpoint_is_dynamodbs_in_the_stacks_vpc_and_only_for_this_table() -> None:
    endpoint = resources("AWS::EC2::VPCEndpoint")["DynamoDbEndpoint"]["Properties"]
    assert endpoint["VpcEndpointType"] == "Gateway"
    assert endpoint["ServiceName"] == {"Fn::Sub": "com.amazonaws.${AWS::Region}.dynamodb"}
    assert endpoint["VpcId"] == {"Ref": "Vpc"}
    assert endpoint["RouteTableIds"] == [{"Ref": "PrivateRouteTable"}]
    (policy,) = statements(endpoint["PolicyDocument"])
    assert policy["Effect"] == "Allow"
    assert set(policy["Action"]) == ITEM_ACTIONS
    # The pool table and the dedicated tenants' tables, with their GSI1.
    assert policy["Resource"] == [
        POOL_TABLE,
        {"Fn::Sub": "${SupportTicketTable.Arn}/index/GSI1"},
        DEDICATED_TABLES,
        {"Fn::Sub": "${SupportTicketTable.Arn}-dedicated-*/index/GSI1"},
    ]


def test_the_api_functions_run_in_two_private_subnets_whose_only_way_out_is_the_endpoint() -> None:
    subnets = resources("AWS::EC2::Subnet")
    assert set(subnets) == {"PrivateSubnetA", "PrivateSubnetB"}
    zones = [subnet["Properties"]["AvailabilityZone"] for subnet in subnets.values()]
    assert zones == [{"Fn::Select": [0, {"Fn::GetAZs": ""}]}, {"Fn::Select": [1, {"Fn::GetAZs": ""}]}]
    assert all(subnet["Properties"]["MapPublicIpOnLaunch"] is False for subnet in subnets.values())
    associations = resources("AWS::EC2::SubnetRouteTableAssociation").values()
    assert {json.dumps(a["Properties"]["SubnetId"]) for a in associations} == {
        json.dumps({"Ref": name}) for name in subnets
    }
    assert all(a["Properties"]["RouteTableId"] == {"Ref": "PrivateRouteTable"} for a in associations)
    # No route anywhere else: no internet gateway, no NAT, no route, no other endpoint.
    kinds = {resource["Type"] for resource in translated()["Resources"].values()}
    assert not kinds & {
        "AWS::EC2::InternetGateway",
        "AWS::EC2::NatGateway",
        "AWS::EC2::Route",
        "AWS::EC2::VPCGatewayAttachment",
        "AWS::EC2::EgressOnlyInternetGateway",
    }
    # The DynamoDB gateway endpoint and the KMS interface endpoint (webhook secrets).
    assert set(resources("AWS::EC2::VPCEndpoint")) == {"DynamoDbEndpoint", "KmsEndpoint"}
    group = resources("AWS::EC2::SecurityGroup")["ApiFunctionSecurityGroup"]["Properties"]
    assert "SecurityGroupIngress" not in group
    functions = resources("AWS::Lambda::Function")
    in_vpc = {name for name, function in functions.items() if "VpcConfig" in function["Properties"]}
    assert in_vpc == API_FUNCTIONS  # the authorizer and the stream functions call Cognito, SQS: outside
    for name in API_FUNCTIONS:
        vpc = functions[name]["Properties"]["VpcConfig"]
        assert vpc["SubnetIds"] == [{"Ref": "PrivateSubnetA"}, {"Ref": "PrivateSubnetB"}], name
        assert vpc["SecurityGroupIds"] == [{"Ref": "ApiFunctionSecurityGroup"}], name


def test_the_api_functions_egress_is_https_to_dynamodbs_prefix_list_and_the_kms_endpoint_only() -> None:
    # The narrowest rule a security group can express for a gateway endpoint: its
    # route's prefix list (an AWS::EC2::VPCEndpoint has no attribute that names it,
    # hence the parameter; docs/isolation.md). The KMS interface endpoint: its group.
    group = resources("AWS::EC2::SecurityGroup")["ApiFunctionSecurityGroup"]["Properties"]
    rules = [
        {key: value for key, value in rule.items() if key != "Description"} for rule in group["SecurityGroupEgress"]
    ]
    https = {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443}
    assert rules == [
        {**https, "DestinationPrefixListId": {"Ref": "DynamoDbPrefixListId"}},
        {**https, "DestinationSecurityGroupId": {"Ref": "KmsEndpointSecurityGroup"}},
    ]
    assert not [r for r in resources("AWS::EC2::SecurityGroupEgress").values() if r]
    parameter = translated()["Parameters"]["DynamoDbPrefixListId"]
    assert "Default" not in parameter  # every deployment names it; no wide fallback
    pattern = re.compile(parameter["AllowedPattern"])
    assert pattern.fullmatch("pl-02cd2c6b")
    assert pattern.fullmatch("pl-0123456789abcdef0")
    for refused in ("", "0.0.0.0/0", "pl-", "pl-XYZ12345", "sg-0123456789abcdef0", "pl-02cd2c6b\n"):
        assert not pattern.fullmatch(refused), refused


def _vpc_prefixes_that_hold_the_subnets() -> set[int]:
    """Prefix lengths of a VPC CIDR that CreateVpc accepts (/16 to /28) and that
    hold every subnet the template carves from it with !Cidr [<VPC>, count, bits]."""
    carved = []
    for subnet in resources("AWS::EC2::Subnet").values():
        index, cidr = subnet["Properties"]["CidrBlock"]["Fn::Select"]
        block, count, bits = cidr["Fn::Cidr"]
        assert block == {"Fn::GetAtt": ["Vpc", "CidrBlock"]}
        carved.append((int(index), int(count), int(bits)))
    works = set()
    for prefix in range(33):
        fits = True
        for index, count, bits in carved:
            subnet_prefix = 32 - bits
            # How many /subnet_prefix blocks a /prefix holds (counted, not listed: a /0 holds 2**24 /24s).
            subnets = 2 ** (subnet_prefix - prefix) if subnet_prefix >= prefix else 0
            # !Cidr fails when the block cannot hold `count` subnets; a subnet is /16 to /28 too.
            fits = fits and subnets >= count and index < count and 16 <= subnet_prefix <= 28
        if 16 <= prefix <= 28 and fits:
            works.add(prefix)
    return works


def test_the_vpc_cidr_parameter_admits_exactly_the_prefix_lengths_that_hold_the_subnets() -> None:
    parameter = translated()["Parameters"]["VpcCidr"]
    pattern = re.compile(parameter["AllowedPattern"])
    works = _vpc_prefixes_that_hold_the_subnets()
    assert works == set(range(16, 24))
    for prefix in range(33):
        assert bool(pattern.fullmatch(f"10.0.0.0/{prefix}")) == (prefix in works), prefix
    assert pattern.fullmatch(parameter["Default"])
    assert "ConstraintDescription" in parameter
    for refused in ("10.0.0.256/16", "10.0.0/16", "10.0.0.0/16\n", "\u0661\u0660.0.0.0/16", "10.0.0.0/\uff11\uff16"):
        assert not pattern.fullmatch(refused), refused


def test_credentials_outlive_the_authorizers_cache_and_the_longest_request() -> None:
    # The authorizer exchanges the token on each invocation: what API Gateway
    # serves from its cache is at most ReauthorizeEvery old, and Cognito's last an hour.
    from support_tickets.data.session import COGNITO_CREDENTIALS_SECONDS

    cache_seconds = load_template()["Resources"]["TicketsApi"]["Properties"]["Auth"]["Authorizers"]["TenantAuthorizer"][
        "Identity"
    ]["ReauthorizeEvery"]
    functions = resources("AWS::Lambda::Function")
    longest = max(int(functions[name]["Properties"].get("Timeout", 3)) for name in API_FUNCTIONS)
    assert cache_seconds + longest < COGNITO_CREDENTIALS_SECONDS


def role_of(function: str) -> dict[str, Any]:
    functions = resources("AWS::Lambda::Function")
    role_name = functions[function]["Properties"]["Role"]["Fn::GetAtt"][0]
    return resources("AWS::IAM::Role")[role_name]


def aggregator_role() -> dict[str, Any]:
    return role_of("AggregateCountsFunction")


def mapping_of(function: str) -> dict[str, Any]:
    mapping: dict[str, Any]
    (mapping,) = [
        mapping["Properties"]
        for mapping in resources("AWS::Lambda::EventSourceMapping").values()
        if mapping["Properties"]["FunctionName"] == {"Ref": function}
    ]
    return mapping


def tenant_placement_reads(table_statements: list[dict[str, Any]]) -> dict[str, Any]:
    """A stream role's one read of tenant records (whose table a stream record is:
    support_tickets.streams.routing): GetItem of ``TENANT#*|CONFIG``, in the pool
    table only, where every tenant's record stays."""
    (placement,) = [s for s in table_statements if s.get("Sid") == "TenantPlacement"]
    assert placement["Action"] == "dynamodb:GetItem"
    assert placement["Resource"] == POOL_TABLE
    assert placement["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TENANT#*|CONFIG"]},
        "Null": {"dynamodb:LeadingKeys": "false"},
    }
    return placement


def test_aggregator_can_write_only_aggregate_items() -> None:
    granted = all_role_statements(aggregator_role())
    table_statements = [s for s in granted if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))]
    placement = tenant_placement_reads(table_statements)
    item_statements = [s for s in table_statements if "dynamodb:UpdateItem" in as_list(s["Action"])]
    (items,) = item_statements
    assert set(items["Action"]) == {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
    assert items["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == [
        "TENANT#*|AGGREGATE",
        "TENANT#*|AGGREGATE#JOURNAL#*",
    ]
    assert items["Condition"]["Null"] == {"dynamodb:LeadingKeys": "false"}
    # The pool's counts and a dedicated tenant's, in its own table.
    assert items["Resource"] == POOL_AND_DEDICATED_TABLES
    others = [s for s in table_statements if s is not items and s is not placement]
    assert others
    for statement in others:
        assert all(
            action
            in {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}
            for action in as_list(statement["Action"])
        )


def test_aggregator_reads_this_tables_stream_only() -> None:
    streams = {
        action: statement["Resource"]
        for statement in all_role_statements(aggregator_role())
        for action in as_list(statement["Action"])
        if action in {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
    }
    # The pool table's stream and the dedicated tenants' tables' streams (their mappings feed it too).
    assert streams == dict.fromkeys(
        ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"), POOL_AND_DEDICATED_STREAMS
    )
    (listing,) = [s for s in all_role_statements(aggregator_role()) if "dynamodb:ListStreams" in as_list(s["Action"])]
    assert listing["Resource"] == [
        {"Fn::Sub": "${SupportTicketTable.Arn}/stream/*"},
        {"Fn::Sub": "${SupportTicketTable.Arn}-dedicated-*/stream/*"},
    ]
    (queue,) = [s for s in all_role_statements(aggregator_role()) if "sqs:SendMessage" in as_list(s["Action"])]
    assert queue["Resource"] == {"Fn::GetAtt": ["AggregateCountsFailureQueue", "Arn"]}


def managed_policy_arn(value: Any) -> str:
    """A ``ManagedPolicyArns`` entry as SAM and the template write it."""
    text = value.get("Fn::Sub") if isinstance(value, dict) and set(value) == {"Fn::Sub"} else value
    assert isinstance(text, str), f"cannot read managed policy {value!r}"
    return text.replace("${AWS::Partition}", "aws")


def grants_dynamodb(action: str) -> bool:
    service = action.split(":", 1)[0] if ":" in action else action
    return fnmatch.fnmatchcase("dynamodb", service.lower())


def test_no_role_gets_dynamodb_actions_from_a_managed_policy() -> None:
    # SAM adds AWSLambdaDynamoDBExecutionRole (stream actions on "*") to the role
    # it generates for a function with a DynamoDB event: every role is written out.
    checked = 0
    for name, role in resources("AWS::IAM::Role").items():
        for entry in role["Properties"].get("ManagedPolicyArns", []):
            document = managed_policies.document(managed_policy_arn(entry))
            for statement in statements(document):
                if statement["Effect"] != "Allow":
                    continue
                assert "NotAction" not in statement, (name, entry)
                granted = [a for a in as_list(statement["Action"]) if grants_dynamodb(a)]
                assert granted == [], (name, entry, granted)
            checked += 1
    assert checked >= 4  # the API role's two, the aggregator's two (and API Gateway's logging role)


def test_the_dynamodb_check_would_catch_sams_stream_policy() -> None:
    # The control for the test above: the policy SAM would have attached.
    document = managed_policies.document("arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole")
    assert any(grants_dynamodb(action) for statement in statements(document) for action in statement["Action"])
    assert grants_dynamodb("*")
    assert grants_dynamodb("DynamoDB:Get*")
    assert not grants_dynamodb("logs:PutLogEvents")


def test_table_keeps_its_data() -> None:
    table = translated()["Resources"]["SupportTicketTable"]
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"
    props = table["Properties"]
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"


def test_every_index_partition_key_is_tenant_prefixed_by_design() -> None:
    # GSI1's hash key is tenant_status, written only as keys.tenant_status() = TENANT#<t>|<STATUS>.
    props = translated()["Resources"]["SupportTicketTable"]["Properties"]
    (gsi,) = props["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == "GSI1"
    assert gsi["KeySchema"][0] == {"AttributeName": "tenant_status", "KeyType": "HASH"}
    assert gsi["Projection"]["ProjectionType"] == "INCLUDE"
    assert "description" not in gsi["Projection"]["NonKeyAttributes"]


def test_user_pool_tenant_attribute_is_immutable_and_unwritable() -> None:
    res = translated()["Resources"]
    pool = res["UserPool"]["Properties"]
    (tenant_attr,) = [attr for attr in pool["Schema"] if attr["Name"] == "tenant_id"]
    assert tenant_attr["Mutable"] is False
    assert pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    for client in resources("AWS::Cognito::UserPoolClient").values():
        assert "custom:tenant_id" not in client["Properties"]["WriteAttributes"]
    assert res["AdminGroup"]["Properties"]["GroupName"] == "admin"


def test_outputs() -> None:
    assert {
        "ApiUrl",
        "UserPoolId",
        "UserPoolClientId",
        "IdentityPoolId",
        "TableName",
        "UsagePlanIdBasic",
        "UsagePlanIdStandard",
        "UsagePlanIdPremium",
    } <= set(translated()["Outputs"])


def test_layer_and_runtime_are_python_3_13() -> None:
    for name, function in resources("AWS::Lambda::Function").items():
        assert function["Properties"]["Runtime"] == "python3.13", name
    template = load_template()
    layer = template["Resources"]["SharedLayer"]
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    # Built by layers/shared/Makefile (pinned requirements, byte-compiled for 3.13).
    assert layer["Metadata"]["BuildMethod"] == "makefile"


def test_every_function_is_built_by_the_functions_makefile() -> None:
    template = load_template()
    functions = {
        name: resource
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }
    assert functions
    for name, function in functions.items():
        # Metadata also holds the scanner's suppressions (checkov); the build reads these two.
        build = {key: value for key, value in function["Metadata"].items() if key != "checkov"}
        assert build == {"BuildMethod": "makefile", "ContextPath": "functions"}, name


def test_stream_source_is_bounded_and_reports_partial_failures() -> None:
    mappings = resources("AWS::Lambda::EventSourceMapping")
    assert {mapping["Properties"]["FunctionName"]["Ref"] for mapping in mappings.values()} == {
        "AggregateCountsFunction",
        "AuditTrailFunction",
        "DeliverWebhookFunction",  # its SQS queue (test_the_webhook_queue_is_fifo_...)
    }
    props = mapping_of("AggregateCountsFunction")
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BisectBatchOnFunctionError"] is True
    assert 0 < props["MaximumRetryAttempts"] <= 10
    assert props["ParallelizationFactor"] == 1
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert "AggregateCountsFailureQueue" in json.dumps(props["DestinationConfig"]["OnFailure"]["Destination"])
    (pattern,) = [json.loads(f["Pattern"]) for f in props["FilterCriteria"]["Filters"]]
    assert pattern["eventName"] == ["INSERT", "MODIFY", "REMOVE"]
    assert pattern["dynamodb"]["Keys"]["sk"] == {"S": ["SUMMARY"]}
    # an offboarding's erasures never reach the counts
    assert (
        pattern["dynamodb"]["OldImage"] == pattern["dynamodb"]["NewImage"] == {"erasing": {"BOOL": [{"exists": False}]}}
    )


def test_replay_horizon_outlives_the_oldest_redelivery() -> None:
    """The aggregator keeps its delivery journals for REPLAY_HORIZON_SECONDS;
    the event source never redelivers a record older than MaximumRecordAgeInSeconds."""
    function = translated()["Resources"]["AggregateCountsFunction"]["Properties"]
    horizon = int(function["Environment"]["Variables"]["REPLAY_HORIZON_SECONDS"])
    max_age = int(mapping_of("AggregateCountsFunction")["MaximumRecordAgeInSeconds"])
    assert max_age > 0
    assert horizon >= max_age + 600  # margin for clock skew between records and the function


def test_a_whole_batch_fits_one_journal() -> None:
    """A batch of the template's BatchSize is one chunk (one transaction) unless it
    touches more than 99 (tenant, status) pairs; longer deliveries take several."""
    from support_tickets.streams.aggregation import MAX_CHUNK_RECORDS

    assert int(mapping_of("AggregateCountsFunction")["BatchSize"]) <= MAX_CHUNK_RECORDS


def test_the_aggregator_sends_poison_to_its_failure_queue() -> None:
    function = translated()["Resources"]["AggregateCountsFunction"]["Properties"]
    assert function["Environment"]["Variables"]["FAILURE_QUEUE_URL"] == {"Ref": "AggregateCountsFailureQueue"}


def test_traces_hold_no_response_bodies_and_no_exception_objects() -> None:
    # The names are Powertools' own, so a typo here can't pass unnoticed.
    for name, function in resources("AWS::Lambda::Function").items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables.get(TRACER_CAPTURE_RESPONSE_ENV) == "false", name
        assert variables.get(TRACER_CAPTURE_ERROR_ENV) == "false", name


def test_functions_accept_id_tokens_of_the_stacks_app_client_only() -> None:
    # The authorizer checks aud against this list (support_tickets.auth.authorizer),
    # and the functions check the header's token again (support_tickets.core.identity).
    functions = resources("AWS::Lambda::Function")
    for name in [*API_FUNCTIONS, "AuthorizerFunction"]:
        variables = functions[name]["Properties"]["Environment"]["Variables"]
        assert variables["ALLOWED_CLIENT_IDS"] == {"Ref": "UserPoolClient"}, name
    assert list(resources("AWS::Cognito::UserPoolClient")) == ["UserPoolClient"]


# ---------------------------------------------------------------- the audit writer
def audit_role() -> dict[str, Any]:
    return role_of("AuditTrailFunction")


def test_the_audit_writer_only_puts_audit_items() -> None:
    granted = all_role_statements(audit_role())
    table_statements = [s for s in granted if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))]
    (items, webhooks, deleted, passes, refused) = [
        s for s in table_statements if s["Resource"] == POOL_AND_DEDICATED_TABLES
    ]
    placement = tenant_placement_reads(table_statements)
    # Which webhooks a tenant has (the count item's version, then the webhooks): that partition only, read only.
    assert webhooks["Action"] == ["dynamodb:GetItem", "dynamodb:Query"]
    assert webhooks["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TENANT#*|WEBHOOKS"]},
        "Null": {"dynamodb:LeadingKeys": "false"},
    }
    assert as_list(items["Action"]) == ["dynamodb:PutItem"]  # no read, no update, no delete of anything
    # The trail, and during a move's copy each event's mark (TenantTable.marks_writes).
    assert items["Condition"] == {
        "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": ["TENANT#*|HISTORY#*", "TENANT#*|AUDIT#*", "TENANT#*|MOVE#*"]
        },
        "Null": {"dynamodb:LeadingKeys": "false"},
    }
    # A delivery the queue refused for good: an UpdateItem of a delivery record naming the
    # delivery's attributes (no other item, no other attribute: DeliveryRecords.record_refusal).
    assert refused["Action"] == "dynamodb:UpdateItem"
    assert refused["Condition"]["ForAllValues:StringLike"] == {
        "dynamodb:LeadingKeys": ["TENANT#*|WEBHOOK#*#DELIVERIES"]
    }
    assert refused["Condition"]["Null"] == {"dynamodb:LeadingKeys": "false"}
    assert set(refused["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"]) == {
        "pk",
        "sk",
        "delivery_id",
        "webhook_id",
        "event_id",
        "type",
        "ticket_id",
        "event",
        "status",
        "failure_reason",
        "next_attempt_at",
        "last_status_code",
        "attempts",
        "created_at",
        "expiration",
        "redeliver_requested_at",
    }
    # What a ticket's delete left (streams/ticket_deletions.py): its items, deletes, the pass counter;
    # under ticket partitions only, never a put, never BatchWriteItem (which could put).
    assert deleted["Action"] == ["dynamodb:Query", "dynamodb:DeleteItem"]
    assert deleted["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TENANT#*|TICKET#*"]},
        "Null": {"dynamodb:LeadingKeys": "false"},
    }
    assert passes["Action"] == "dynamodb:UpdateItem"
    assert passes["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TENANT#*|TICKET#*"]},
        "ForAllValues:StringEquals": {"dynamodb:Attributes": ["pk", "sk", "passes"]},
        "Null": {"dynamodb:LeadingKeys": "false", "dynamodb:Attributes": "false"},
    }
    stream_actions = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
    for statement in table_statements:
        if all(statement is not known for known in (items, webhooks, refused, placement, deleted, passes)):
            assert set(as_list(statement["Action"])) <= {*stream_actions, "dynamodb:ListStreams"}
            assert statement["Resource"] in (
                POOL_AND_DEDICATED_STREAMS,
                [
                    {"Fn::Sub": "${SupportTicketTable.Arn}/stream/*"},
                    {"Fn::Sub": "${SupportTicketTable.Arn}-dedicated-*/stream/*"},
                ],
            )
    queues = [s["Resource"] for s in granted if "sqs:SendMessage" in as_list(s["Action"])]
    assert queues == [
        {"Fn::GetAtt": ["AuditTrailFailureQueue", "Arn"]},
        {"Fn::GetAtt": ["WebhookEventsQueue", "Arn"]},
    ]
    assert {a for s in granted for a in as_list(s["Action"])} <= {
        *stream_actions,
        "dynamodb:ListStreams",
        "dynamodb:PutItem",
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",  # a deleted ticket's items only (the statement above)
        "sqs:SendMessage",
    }


def test_the_audit_writers_source_is_bounded_filtered_and_reports_partial_failures() -> None:
    props = mapping_of("AuditTrailFunction")
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BisectBatchOnFunctionError"] is True
    assert 0 < props["MaximumRetryAttempts"] <= 10
    assert 0 < props["MaximumRecordAgeInSeconds"] <= 3600
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert "AuditTrailFailureQueue" in json.dumps(props["DestinationConfig"]["OnFailure"]["Destination"])
    filters = props["FilterCriteria"]["Filters"]
    summaries, comments, redeliveries, tombstones = [json.loads(f["Pattern"]) for f in filters]
    # A deleted ticket's tombstone, put and touched: the function finishes the delete.
    assert tombstones == {
        "eventName": ["INSERT", "MODIFY"],
        "dynamodb": {"Keys": {"pk": {"S": [{"prefix": "TENANT#"}]}, "sk": {"S": ["DELETING"]}}},
    }
    # A delivery marked for redelivery (POST .../redeliver): the delivery function's writes remove the mark.
    assert redeliveries == {
        "eventName": ["MODIFY"],
        "dynamodb": {
            "Keys": {"pk": {"S": [{"prefix": "TENANT#"}]}, "sk": {"S": [{"prefix": "DELIVERY#"}]}},
            "NewImage": {"redeliver_requested_at": {"S": [{"exists": True}]}},
        },
    }
    assert summaries["eventName"] == ["INSERT", "MODIFY", "REMOVE"]
    assert summaries["dynamodb"]["Keys"]["sk"] == {"S": ["SUMMARY"]}
    assert (
        summaries["dynamodb"]["NewImage"]
        == summaries["dynamodb"]["OldImage"]
        == {"erasing": {"BOOL": [{"exists": False}]}}
    )
    assert comments["eventName"] == ["INSERT"]
    assert comments["dynamodb"]["Keys"]["sk"] == {"S": [{"prefix": "COMMENT#"}]}
    function = translated()["Resources"]["AuditTrailFunction"]["Properties"]
    assert function["Environment"]["Variables"]["FAILURE_QUEUE_URL"] == {"Ref": "AuditTrailFailureQueue"}


def test_audit_retention_is_a_parameter_of_400_days_by_default() -> None:
    parameter = load_template()["Parameters"]["AuditRetentionDays"]
    assert (parameter["Type"], parameter["Default"]) == ("Number", 400)
    function = translated()["Resources"]["AuditTrailFunction"]["Properties"]
    assert function["Environment"]["Variables"]["AUDIT_RETENTION_DAYS"] == {"Ref": "AuditRetentionDays"}
    assert "AuditTrailFailureQueueUrl" in translated()["Outputs"]
