"""A dedicated tenant's table's template (templates/dedicated-table.yaml): the
pool table's shape, its protections (PITR, deletion protection, a customer
managed key of its own with rotation, the TenantId tag), its key's policy
judged statement by statement with the guard's evaluator, and its stream's
mappings equal to the pool stream's for the same functions. cfn-lint and
checkov read it in tests/unit/test_template.py and test_checkov.py, in the
same run as template.yaml."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

from local_stack.iam import policy_evaluation as iam
from local_stack.local_values import offline_values
from stack_model.dedicated import (
    TENANT_TAG,
    dedicated_resources,
    dedicated_template,
    dedicated_values,
    imported_names,
    table_name,
)
from stack_model.template import REGION, Values, resources, template, translated

TENANT = "acme"
ACCOUNT_ROOT = "arn:aws:iam::123456789012:root"
TENANT_ROLE = "arn:aws:iam::123456789012:role/TenantAccessRole"
STREAM_ROLES = [f"arn:aws:iam::123456789012:role/{role}" for role in ("AggregateCountsRole", "AuditTrailRole")]
DELIVERY_ROLE = "arn:aws:iam::123456789012:role/DeliverWebhookRole"
VIA_DYNAMODB = f"dynamodb.{REGION}.amazonaws.com"
CRYPTO = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:ReEncryptFrom", "kms:CreateGrant")


def the(kind: str) -> dict[str, Any]:
    (resource,) = dedicated_resources(kind).values()
    return resource


def table() -> dict[str, Any]:
    return the("AWS::DynamoDB::Table")


def pool_table() -> dict[str, Any]:
    table: dict[str, Any] = template()["Resources"]["SupportTicketTable"]
    return table


def values(tenant: str = TENANT) -> Values:
    """The template read for ``tenant`` beside the offline pool stack."""
    read = dedicated_values(tenant, offline_values(user_pool_id="p", client_id="c", identity_pool_id="i"))
    read.add("TableKey", "k", Arn=f"arn:aws:kms:{REGION}:123456789012:key/k")
    read.add("Table", "t", Arn="t", StreamArn="s")
    return read


# ---------------------------------------------------------------- the table
@pytest.mark.parametrize(
    "name",
    [
        "AttributeDefinitions",
        "KeySchema",
        "GlobalSecondaryIndexes",
        "StreamSpecification",
        "TimeToLiveSpecification",
        "BillingMode",
    ],
)
def test_the_table_has_the_pool_tables_shape(name: str) -> None:
    """Same keys, GSI1 (and its projection), stream view type and TTL: the code is
    the same in both placements, and a tenant can move back."""
    assert table()["Properties"][name] == pool_table()["Properties"][name]


def test_the_table_keeps_its_data_under_a_key_of_its_own() -> None:
    props = table()["Properties"]
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert props["SSESpecification"] == {
        "SSEEnabled": True,
        "SSEType": "KMS",
        "KMSMasterKeyId": {"Fn::GetAtt": ["TableKey", "Arn"]},
    }
    # Deleting the stack keeps the table and the key (without it, the table and its backups are unreadable).
    assert (table()["DeletionPolicy"], table()["UpdateReplacePolicy"]) == ("Retain", "Retain")
    key = the("AWS::KMS::Key")
    assert (key["DeletionPolicy"], key["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert key["Properties"]["EnableKeyRotation"] is True


def test_the_table_is_tagged_with_its_tenant() -> None:
    assert table()["Properties"]["Tags"] == [{"Key": TENANT_TAG, "Value": {"Ref": "TenantId"}}]
    assert dedicated_template()["Parameters"]["TenantId"]["AllowedPattern"] == "^[a-z0-9-]{1,63}$"


@pytest.mark.parametrize("tenant", ["1", "10", "a-b"])
def test_the_tables_name_is_what_the_tenant_role_reaches_and_the_pool_table_is_not(tenant: str) -> None:
    name = str(values(tenant).resolve(table()["Properties"]["TableName"]))
    assert name == table_name("SupportTicket", tenant)
    statement = next(
        s
        for policy in resources("AWS::IAM::Role")["TenantAccessRole"]["Properties"]["Policies"]
        for s in policy["PolicyDocument"]["Statement"]
        if s.get("Sid") == "ItsOwnDedicatedTable"
    )
    pattern = statement["Resource"][0]["Fn::Sub"].replace("${SupportTicketTable.Arn}", "table/SupportTicket")
    assert fnmatch.fnmatchcase(f"table/{name}", pattern)
    assert not fnmatch.fnmatchcase("table/SupportTicket", pattern)


# ---------------------------------------------------------------- the key's policy
def key_policy(tenant: str = TENANT) -> dict[str, Any]:
    policy: dict[str, Any] = values(tenant).resolve(the("AWS::KMS::Key")["Properties"]["KeyPolicy"])
    return policy


def key_decision(
    action: str, principal: str, *, via: str | None = VIA_DYNAMODB, tenant_tag: str | None = None
) -> iam.Decision:
    """The key policy's answer for ``principal`` (a role, or the account root standing
    for the account's IAM principals), as KMS evaluates a key policy."""
    context: dict[str, list[str]] = {"aws:PrincipalArn": [principal]}
    if via is not None:
        context["kms:ViaService"] = [via]
    if tenant_tag is not None:
        context[f"aws:PrincipalTag/{TENANT_TAG}"] = [tenant_tag]
    request = iam.Request(action, "*", context, principals=(principal,))
    return iam.evaluate([key_policy()], request, trust=True)


@pytest.mark.parametrize("action", CRYPTO)
def test_nobody_uses_the_key_but_through_dynamodb(action: str) -> None:
    for principal in (ACCOUNT_ROOT, TENANT_ROLE, *STREAM_ROLES, DELIVERY_ROLE):
        assert key_decision(action, principal, via=None, tenant_tag=TENANT) is not iam.Decision.ALLOW
        assert key_decision(action, principal, via="s3.us-east-1.amazonaws.com", tenant_tag=TENANT) is not (
            iam.Decision.ALLOW
        )


def test_through_dynamodb_the_account_the_stream_roles_and_only_its_tenants_credentials_use_it() -> None:
    for principal in (ACCOUNT_ROOT, *STREAM_ROLES, DELIVERY_ROLE):
        assert key_decision("kms:Decrypt", principal) is iam.Decision.ALLOW
    assert key_decision("kms:Decrypt", TENANT_ROLE, tenant_tag=TENANT) is iam.Decision.ALLOW
    # Another tenant's credentials, or the tenant role's without a tag: explicitly refused.
    for other in ("1", "10", "acme-b", "acm"):
        assert key_decision("kms:Decrypt", TENANT_ROLE, tenant_tag=other) is iam.Decision.EXPLICIT_DENY
    assert key_decision("kms:Decrypt", TENANT_ROLE) is iam.Decision.EXPLICIT_DENY
    # Tenant credentials and the stream roles never create grants (the account's deployer does).
    for principal in (TENANT_ROLE, *STREAM_ROLES):
        assert key_decision("kms:CreateGrant", principal, tenant_tag=TENANT) is not iam.Decision.ALLOW


def test_the_account_administers_the_key_without_decrypting_with_it() -> None:
    (administers,) = [s for s in key_policy()["Statement"] if s["Sid"] == "AccountAdministersOnly"]
    actions = administers["Action"]
    assert "kms:*" not in actions
    assert not any(fnmatch.fnmatchcase(crypto, pattern) for crypto in CRYPTO for pattern in actions)
    assert {"kms:ScheduleKeyDeletion", "kms:PutKeyPolicy", "kms:EnableKeyRotation"} <= set(actions)
    assert key_decision("kms:ScheduleKeyDeletion", ACCOUNT_ROOT, via=None) is iam.Decision.ALLOW
    # And DynamoDB reads the key's metadata itself, as in AWS's key policy for it.
    (describes,) = [s for s in key_policy()["Statement"] if s["Sid"] == "DynamoDbDescribesTheKey"]
    assert describes["Principal"] == {"Service": "dynamodb.amazonaws.com"}


# ---------------------------------------------------------------- its stream's mappings
# A mapping's settings that name nothing of a stack: equal to the pool stream's, value for value.
SETTINGS = (
    "StartingPosition",
    "BatchSize",
    "MaximumBatchingWindowInSeconds",
    "ParallelizationFactor",
    "MaximumRetryAttempts",
    "BisectBatchOnFunctionError",
    "MaximumRecordAgeInSeconds",
    "FunctionResponseTypes",
    "FilterCriteria",
)


def pool_mappings() -> dict[str, dict[str, Any]]:
    """The pool stream's mappings as SAM deploys them, by function."""
    return {
        mapping["Properties"]["FunctionName"]["Ref"]: mapping["Properties"]
        for mapping in resources("AWS::Lambda::EventSourceMapping").values()
        if "StreamArn" in str(mapping["Properties"]["EventSourceArn"])
    }


def dedicated_mappings() -> dict[str, dict[str, Any]]:
    """This template's mappings, by the pool function they name."""
    found = {}
    for mapping in dedicated_resources("AWS::Lambda::EventSourceMapping").values():
        props = mapping["Properties"]
        export = props["FunctionName"]["Fn::ImportValue"]["Fn::Sub"].removeprefix("${PoolStackName}-")
        output = translated()["Outputs"][export]
        found[output["Value"]["Fn::GetAtt"][0]] = props
    return found


def test_the_tables_stream_feeds_every_stream_function_of_the_pool_and_nothing_else() -> None:
    assert set(dedicated_mappings()) == set(pool_mappings())
    for props in dedicated_mappings().values():
        assert props["EventSourceArn"] == {"Fn::GetAtt": ["Table", "StreamArn"]}


@pytest.mark.parametrize("setting", SETTINGS)
def test_each_mapping_has_the_pool_streams_setting_for_its_function(setting: str) -> None:
    """Same filters, batching, retries, bisection, record age and partial batch
    responses: a change to one template's mapping that the other does not follow fails here."""
    pool = pool_mappings()
    for function, props in dedicated_mappings().items():
        assert props.get(setting) == pool[function].get(setting), (function, setting)


def test_each_mapping_gives_up_to_its_functions_failure_queue() -> None:
    pool = pool_mappings()
    for function, props in dedicated_mappings().items():
        export = props["DestinationConfig"]["OnFailure"]["Destination"]["Fn::ImportValue"]["Fn::Sub"]
        output = translated()["Outputs"][export.removeprefix("${PoolStackName}-")]
        assert output["Value"] == pool[function]["DestinationConfig"]["OnFailure"]["Destination"], function


def test_what_it_imports_the_pool_stack_exports() -> None:
    exported = {f"${{PoolStackName}}-{name}" for name, output in translated()["Outputs"].items() if "Export" in output}
    assert imported_names() <= exported


# ---------------------------------------------------------------- its alarms
def test_its_alarms_reach_the_pool_stacks_topic() -> None:
    alarms = dedicated_resources("AWS::CloudWatch::Alarm")
    assert set(alarms) == {"TableThrottlesAlarm", "TableErrorsAlarm"}
    topic = {"Fn::ImportValue": {"Fn::Sub": "${PoolStackName}-AlarmTopicArn"}}
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [topic]
        assert alarm["Properties"]["OKActions"] == [topic]
        metrics = [m["MetricStat"]["Metric"] for m in alarm["Properties"]["Metrics"] if "MetricStat" in m]
        assert metrics
        for metric in metrics:
            assert {"Name": "TableName", "Value": {"Ref": "Table"}} in metric["Dimensions"]


def test_its_streams_lag_is_the_stream_functions_iterator_age_alarms() -> None:
    """IteratorAge by function is the maximum over every mapping of the function:
    the pool stack's alarm on it watches a dedicated table's mapping too."""
    alarmed = {
        alarm["Properties"]["Dimensions"][0]["Value"]["Ref"]
        for alarm in resources("AWS::CloudWatch::Alarm").values()
        if alarm["Properties"].get("MetricName") == "IteratorAge"
    }
    assert set(pool_mappings()) <= alarmed
    for alarm in resources("AWS::CloudWatch::Alarm").values():
        if alarm["Properties"].get("MetricName") == "IteratorAge":
            assert alarm["Properties"]["Statistic"] == "Maximum"
