"""How the guard turns DynamoDB API calls into IAM questions (actions,
resources, dynamodb:LeadingKeys), and how it refuses what it can't model."""

from __future__ import annotations

from typing import Any

import pytest

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.dynamodb_authorization import Question, TableKeys, authorize_dynamodb, dynamodb_requests
from local_stack.iam.sessions import Session
from local_stack.iam.sts import InvalidRequest, parse_assume_role
from local_stack.local_values import LOCAL_VPC_ENDPOINT_ID
from tests.unit.test_guard_policy import INDEX_ARN, TABLE_ARN, TENANT_ROLE

TABLES = {"SupportTicket": TableKeys("SupportTicket", "pk", {"GSI1": "tenant_status"})}


def questions(operation: str, body: dict[str, Any]) -> list[Question]:
    return dynamodb_requests(operation, body, region="us-east-1", tables=TABLES)


def s(value: str) -> dict[str, str]:
    return {"S": value}


def key(pk: str) -> dict[str, Any]:
    return {"pk": s(pk), "sk": s("SUMMARY")}


@pytest.mark.parametrize(
    ("operation", "field"), [("GetItem", "Key"), ("PutItem", "Item"), ("UpdateItem", "Key"), ("DeleteItem", "Key")]
)
def test_item_operations(operation: str, field: str) -> None:
    assert questions(operation, {"TableName": "SupportTicket", field: key("TENANT#1|TICKET#a")}) == [
        Question(f"dynamodb:{operation}", TABLE_ARN, ("TENANT#1|TICKET#a",))
    ]


def test_table_arn_as_table_name() -> None:
    (question,) = questions("GetItem", {"TableName": TABLE_ARN, "Key": key("TENANT#1|A")})
    assert question.resource == TABLE_ARN


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("pk = :pk", None),
        (":pk = pk", None),
        ("#p = :pk", {"#p": "pk"}),
        ("pk = :pk AND begins_with(sk, :c)", None),
        ("(pk = :pk) AND sk BETWEEN :c AND :d", None),
        ("  pk=:pk  ", None),
    ],
)
def test_query_partition_key_from_the_key_condition(expression: str, names: dict[str, str] | None) -> None:
    body: dict[str, Any] = {
        "TableName": "SupportTicket",
        "KeyConditionExpression": expression,
        "ExpressionAttributeValues": {":pk": s("TENANT#1|TICKET#a"), ":c": s("A"), ":d": s("B")},
    }
    if names:
        body["ExpressionAttributeNames"] = names
    assert questions("Query", body) == [Question("dynamodb:Query", TABLE_ARN, ("TENANT#1|TICKET#a",))]


def test_query_on_the_index_uses_the_index_partition_key_and_resource() -> None:
    body = {
        "TableName": "SupportTicket",
        "IndexName": "GSI1",
        "KeyConditionExpression": "tenant_status = :ts AND resolver = :r",
        "ExpressionAttributeValues": {":ts": s("TENANT#1|OPEN"), ":r": s("pk")},
    }
    assert questions("Query", body) == [Question("dynamodb:Query", INDEX_ARN, ("TENANT#1|OPEN",))]


def test_query_start_key_partitions_are_touched_keys_too() -> None:
    body = {
        "TableName": "SupportTicket",
        "IndexName": "GSI1",
        "KeyConditionExpression": "tenant_status = :ts",
        "ExpressionAttributeValues": {":ts": s("TENANT#1|OPEN")},
        "ExclusiveStartKey": {"pk": s("TENANT#10|TICKET#x"), "sk": s("SUMMARY"), "tenant_status": s("TENANT#1|OPEN")},
    }
    (question,) = questions("Query", body)
    assert set(question.leading_keys or ()) == {"TENANT#1|OPEN", "TENANT#10|TICKET#x"}


def test_legacy_key_conditions() -> None:
    body = {
        "TableName": "SupportTicket",
        "KeyConditions": {"pk": {"AttributeValueList": [s("TENANT#1|A")], "ComparisonOperator": "EQ"}},
    }
    assert questions("Query", body)[0].leading_keys == ("TENANT#1|A",)


@pytest.mark.parametrize(
    "body",
    [
        {"KeyConditionExpression": "sk = :pk"},  # no partition key
        {"KeyConditionExpression": "pk = :pk OR pk = :c"},  # two partition values
        {"KeyConditionExpression": "begins_with(pk, :pk)"},
        {"KeyConditionExpression": "pk = :missing"},
        {"KeyConditionExpression": "#p = :pk"},  # undefined name
        {"KeyConditionExpression": "pk = :pk; DROP"},
        {"KeyConditions": {"pk": {"AttributeValueList": [s("TENANT#1|A")], "ComparisonOperator": "BEGINS_WITH"}}},
        {"KeyConditionExpression": "pk = :pk", "IndexName": "GSI9"},
        {"KeyConditionExpression": "pk = :num"},
    ],
)
def test_queries_it_cannot_read_are_not_understood(body: dict[str, Any]) -> None:
    request = {
        "TableName": "SupportTicket",
        "ExpressionAttributeValues": {":pk": s("TENANT#1|A"), ":c": s("TENANT#2|A"), ":num": {"B": "AAAA"}},
        **body,
    }
    with pytest.raises(iam.NotUnderstood):
        questions("Query", request)


def test_transactions_ask_one_question_per_item_with_the_item_action() -> None:
    body = {
        "TransactItems": [
            {"ConditionCheck": {"TableName": "SupportTicket", "Key": key("TENANT#1|A")}},
            {"Put": {"TableName": "SupportTicket", "Item": key("TENANT#1|B")}},
            {"Update": {"TableName": "SupportTicket", "Key": key("TENANT#1|C")}},
            {"Delete": {"TableName": "SupportTicket", "Key": key("TENANT#1|D")}},
        ]
    }
    assert [(q.action, q.leading_keys) for q in questions("TransactWriteItems", body)] == [
        ("dynamodb:ConditionCheckItem", ("TENANT#1|A",)),
        ("dynamodb:PutItem", ("TENANT#1|B",)),
        ("dynamodb:UpdateItem", ("TENANT#1|C",)),
        ("dynamodb:DeleteItem", ("TENANT#1|D",)),
    ]
    gets = {"TransactItems": [{"Get": {"TableName": "SupportTicket", "Key": key("TENANT#1|A")}}]}
    assert questions("TransactGetItems", gets)[0].action == "dynamodb:GetItem"


def test_batches_ask_per_table_with_every_key() -> None:
    write = {
        "RequestItems": {
            "SupportTicket": [
                {"PutRequest": {"Item": key("TENANT#1|A")}},
                {"DeleteRequest": {"Key": key("TENANT#2|B")}},
            ]
        }
    }
    assert questions("BatchWriteItem", write) == [
        Question("dynamodb:BatchWriteItem", TABLE_ARN, ("TENANT#1|A", "TENANT#2|B"))
    ]
    read = {"RequestItems": {"SupportTicket": {"Keys": [key("TENANT#1|A")]}}}
    assert questions("BatchGetItem", read)[0].leading_keys == ("TENANT#1|A",)


def test_keyless_operations_have_no_leading_keys() -> None:
    assert questions("Scan", {"TableName": "SupportTicket"}) == [Question("dynamodb:Scan", TABLE_ARN)]
    assert questions("ListTables", {}) == [Question("dynamodb:ListTables", "*")]
    stream = f"{TABLE_ARN}/stream/label"
    assert questions("GetRecords", {"ShardIterator": f"{stream}|1|abc"}) == [Question("dynamodb:GetRecords", stream)]


@pytest.mark.parametrize("operation", ["ListStreams", "ListBackups", "ListContributorInsights"])
def test_actions_without_a_resource_type_are_asked_on_any_resource_whatever_table_they_name(operation: str) -> None:
    # IAM has no resource type for them: a policy granting them on a table's ARN grants nothing.
    assert questions(operation, {"TableName": "SupportTicket"}) == [Question(f"dynamodb:{operation}", "*")]


@pytest.mark.parametrize(
    ("operation", "body"),
    [
        ("ExecuteStatement", {"Statement": "SELECT * FROM SupportTicket"}),
        ("GetItem", {"TableName": "Other", "Key": key("TENANT#1|A")}),
        ("GetItem", {"TableName": "SupportTicket", "Key": {"sk": s("SUMMARY")}}),
        ("GetItem", {"TableName": "SupportTicket", "Key": {"pk": {"L": []}}}),
        ("TransactWriteItems", {"TransactItems": []}),
        ("TransactWriteItems", {"TransactItems": [{"Put": {"TableName": "SupportTicket"}, "Delete": {}}]}),
        ("BatchWriteItem", {"RequestItems": {"SupportTicket": [{"UpdateRequest": {}}]}}),
        ("BatchGetItem", {"RequestItems": {}}),
    ],
)
def test_requests_it_cannot_read_are_not_understood(operation: str, body: dict[str, Any]) -> None:
    with pytest.raises(iam.NotUnderstood):
        questions(operation, body)


def test_authorize_denies_in_dynamodbs_words() -> None:
    session = Session("ASIAX", TENANT_ROLE, "tenant-1", {"TenantId": "1"})
    own_item = {"TableName": "SupportTicket", "Key": key("TENANT#1|A")}
    allowed = authorize_dynamodb(
        session, "GetItem", own_item, region="us-east-1", tables=TABLES, source_vpce=LOCAL_VPC_ENDPOINT_ID
    )
    assert allowed is None
    outside = authorize_dynamodb(session, "GetItem", own_item, region="us-east-1", tables=TABLES)
    assert outside == (
        "User: arn:aws:sts::123456789012:assumed-role/TenantAccessRole/tenant-1 is not authorized to perform: "
        f"dynamodb:GetItem on resource: {TABLE_ARN} because no identity-based policy allows the dynamodb:GetItem action"
    )
    message = authorize_dynamodb(session, "Scan", {"TableName": "SupportTicket"}, region="us-east-1", tables=TABLES)
    assert message == (
        "User: arn:aws:sts::123456789012:assumed-role/TenantAccessRole/tenant-1 is not authorized to perform: "
        f"dynamodb:Scan on resource: {TABLE_ARN} because no identity-based policy allows the dynamodb:Scan action"
    )
    partiql = authorize_dynamodb(session, "ExecuteStatement", {"Statement": "x"}, region="us-east-1", tables=TABLES)
    assert partiql is not None
    assert "dynamodb:ExecuteStatement" in partiql


# ---------------------------------------------------------------- STS's tag rules
def assume_role_params(*tags: tuple[str, str]) -> dict[str, str]:
    params = {"Action": "AssumeRole", "RoleArn": TENANT_ROLE.arn, "RoleSessionName": "s"}
    for index, (key, value) in enumerate(tags, start=1):
        params[f"Tags.member.{index}.Key"] = key
        params[f"Tags.member.{index}.Value"] = value
    return params


@pytest.mark.parametrize(
    "value",
    ["*", "glo*", "?", "g?obex", "a|b", "TENANT#x", "$x", "a,b", "a;b", "a\x00", "a\tb", "\ue000", "x" * 257],
)
def test_tag_values_sts_refuses_are_refused(value: str) -> None:
    with pytest.raises(InvalidRequest, match=r"tags\.1\.member\.value"):
        parse_assume_role(assume_role_params(("TenantId", value)))


@pytest.mark.parametrize("key", ["", "*", "Tenant*", "a|b", "x" * 129])
def test_tag_keys_sts_refuses_are_refused(key: str) -> None:
    with pytest.raises(InvalidRequest, match=r"tags\.1\.member\.key"):
        parse_assume_role(assume_role_params((key, "acme")))


@pytest.mark.parametrize(
    "value", ["", "acme", "acme corp", "é", "\uff21\uff23", "\u0663", "a:b/c=d+e-f@g_h.i", "x" * 256, "\u2028"]
)
def test_tag_values_sts_accepts_are_accepted(value: str) -> None:
    assert parse_assume_role(assume_role_params(("TenantId", value))).tags == {"TenantId": value}


def test_at_most_50_session_tags() -> None:
    fifty = [(f"k{index}", "v") for index in range(50)]
    assert len(parse_assume_role(assume_role_params(*fifty)).tags) == 50
    with pytest.raises(InvalidRequest, match="less than or equal to 50"):
        parse_assume_role(assume_role_params(*fifty, ("k50", "v")))


def test_sts_validation_errors_are_counted_as_sts_counts_them() -> None:
    with pytest.raises(InvalidRequest, match=r"^2 validation errors detected: Value '\*' at 'tags\.1\.member\.key'"):
        parse_assume_role(assume_role_params(("*", "?")))
