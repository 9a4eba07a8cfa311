"""dynamodb:Attributes as the guard computes it (what DynamoDB's docs say the
key holds, per action), and what the template's TenantAccessRole does with it
and with the counts' keys: no write of the offboarding mark, no write of an
AGGREGATE item, while every write the API makes stays allowed."""

from __future__ import annotations

from typing import Any

import pytest

from local_stack.iam import policy_evaluation as iam
from local_stack.iam.dynamodb_authorization import (
    Question,
    TableKeys,
    authorize_dynamodb,
    dynamodb_requests,
    request_attributes,
)
from local_stack.iam.sessions import Session
from local_stack.local_values import LOCAL_VPC_ENDPOINT_ID
from support_tickets.core import keys
from tests.unit.test_guard_policy import TENANT_ROLE

TABLES = {"SupportTicket": TableKeys("SupportTicket", "pk", {"GSI1": "tenant_status"})}
REGION = "us-east-1"
ERASING = keys.ERASING_ATTRIBUTE


def s(value: str) -> dict[str, str]:
    return {"S": value}


def key(pk: str, sk: str = "SUMMARY") -> dict[str, Any]:
    return {"pk": s(pk), "sk": s(sk)}


def questions(operation: str, body: dict[str, Any]) -> list[Question]:
    return dynamodb_requests(operation, body, region=REGION, tables=TABLES)


def attributes(operation: str, body: dict[str, Any]) -> list[set[str]]:
    return [set(question.attributes or ()) for question in questions(operation, body)]


def session(tenant: str) -> Session:
    return Session("ASIATENANT", TENANT_ROLE, f"tenant-{tenant}", {"TenantId": tenant})


def refusal(tenant: str, operation: str, body: dict[str, Any]) -> str | None:
    """None when allowed, else the AccessDeniedException message."""
    # Through the stack's gateway endpoint, as the functions call: the perimeter lets it in, the Denies decide.
    return authorize_dynamodb(
        session(tenant), operation, body, region=REGION, tables=TABLES, source_vpce=LOCAL_VPC_ENDPOINT_ID
    )


def explicitly_denied(tenant: str, operation: str, body: dict[str, Any]) -> bool:
    message = refusal(tenant, operation, body)
    return message is not None and message.endswith("with an explicit deny in an identity-based policy")


# ---------------------------------------------------------------- what the key holds
def test_put_item_names_every_attribute_of_its_item_and_its_condition() -> None:
    body = {
        "TableName": "SupportTicket",
        "Item": {**key("TENANT#1|TICKET#a"), "title": s("t"), ERASING: {"BOOL": True}},
        "ConditionExpression": "attribute_not_exists(#p)",
        "ExpressionAttributeNames": {"#p": "pk"},
    }
    assert attributes("PutItem", body) == [{"pk", "sk", "title", ERASING}]


@pytest.mark.parametrize(
    ("update", "names", "found"),
    [
        ("SET #e = :v", {"#e": ERASING}, {ERASING}),
        ("SET erasing = :v", None, {ERASING}),
        ("set title = :v, erasing = :v", None, {"title", ERASING}),
        ("SET #v = #v + :one, updated_at = :now", {"#v": "version"}, {"version", "updated_at"}),
        ("REMOVE deleted_by, deleted_at", None, {"deleted_by", "deleted_at"}),
        ("ADD #c :n", {"#c": "count"}, {"count"}),
        ("SET a.#e = :v", {"#e": ERASING}, {"a"}),  # nested: the top-level attribute is "a"
        ("SET a[0].b = if_not_exists(c, :v)", None, {"a", "c"}),
        ("SET l = list_append(l, :v) REMOVE #e", {"#e": ERASING}, {"l", ERASING}),
    ],
)
def test_update_item_names_the_key_and_every_top_level_path_of_its_expressions(
    update: str, names: dict[str, str] | None, found: set[str]
) -> None:
    body: dict[str, Any] = {
        "TableName": "SupportTicket",
        "Key": key("TENANT#1|TICKET#a"),
        "UpdateExpression": update,
        "ConditionExpression": "attribute_exists(pk) AND size(title) > :zero",
        "ExpressionAttributeValues": {":v": s("x"), ":one": {"N": "1"}, ":now": s("n"), ":n": {"N": "1"}},
    }
    if names:
        body["ExpressionAttributeNames"] = names
    assert attributes("UpdateItem", body) == [{"pk", "sk", "title"} | found]


def test_legacy_parameters_count_too() -> None:
    body = {
        "TableName": "SupportTicket",
        "Key": key("TENANT#1|TICKET#a"),
        "AttributeUpdates": {ERASING: {"Action": "PUT", "Value": {"BOOL": True}}},
        "Expected": {"version": {"Value": {"N": "1"}}},
    }
    assert attributes("UpdateItem", body) == [{"pk", "sk", ERASING, "version"}]


def test_return_values_add_nothing() -> None:
    # What a write returns is not what it names (docs: restrict dynamodb:ReturnValues for that).
    body = {"TableName": "SupportTicket", "Key": key("TENANT#1|TICKET#a"), "ReturnValues": "ALL_OLD"}
    assert attributes("DeleteItem", body) == [{"pk", "sk"}]


def test_a_transaction_names_each_items_own_attributes() -> None:
    body = {
        "TransactItems": [
            {"Put": {"TableName": "SupportTicket", "Item": {**key("TENANT#1|TICKET#a"), "body": s("b")}}},
            {
                "Update": {
                    "TableName": "SupportTicket",
                    "Key": key("TENANT#1|TICKET#b"),
                    "UpdateExpression": "SET #e = :t",
                    "ExpressionAttributeNames": {"#e": ERASING},
                    "ExpressionAttributeValues": {":t": {"BOOL": True}},
                }
            },
            {
                "ConditionCheck": {
                    "TableName": "SupportTicket",
                    "Key": key("TENANT#1|TICKET#c"),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
        ]
    }
    assert attributes("TransactWriteItems", body) == [{"pk", "sk", "body"}, {"pk", "sk", ERASING}, {"pk", "sk"}]


def test_a_batch_names_every_put_items_attributes() -> None:
    body = {
        "RequestItems": {
            "SupportTicket": [
                {"DeleteRequest": {"Key": key("TENANT#1|TICKET#a")}},
                {"PutRequest": {"Item": {**key("TENANT#1|TICKET#b"), ERASING: {"BOOL": True}}}},
            ]
        }
    }
    assert attributes("BatchWriteItem", body) == [{"pk", "sk", ERASING}]


def test_reads_name_their_projection_and_conditions() -> None:
    query = {
        "TableName": "SupportTicket",
        "IndexName": "GSI1",
        "KeyConditionExpression": "tenant_status = :ts AND resolver = :r",
        "ProjectionExpression": "pk, #t",
        "ExpressionAttributeNames": {"#t": "title"},
        "ExpressionAttributeValues": {":ts": s("TENANT#1|OPEN"), ":r": s("ada")},
    }
    assert attributes("Query", query) == [{"tenant_status", "resolver", "pk", "title"}]
    get = {"TableName": "SupportTicket", "Key": key("TENANT#1|A"), "AttributesToGet": ["title"]}
    assert attributes("GetItem", get) == [{"pk", "sk", "title"}]


@pytest.mark.parametrize(
    "spec",
    [
        {"UpdateExpression": "SET #missing = :v"},  # an undefined name
        {"UpdateExpression": "SET a = :v; DROP"},  # a character no expression has
        {"ConditionExpression": 42},
        {"AttributeUpdates": ["erasing"]},
        {"ExpressionAttributeNames": ["#e"]},
    ],
)
def test_what_it_cannot_read_is_not_understood(spec: dict[str, Any]) -> None:
    with pytest.raises(iam.NotUnderstood):
        request_attributes(spec)


# ---------------------------------------------------------------- the template's tenant role
@pytest.mark.parametrize("tenant", ["1", "10"])
@pytest.mark.parametrize(
    ("operation", "body"),
    [
        ("PutItem", {"Item": {**key("TENANT#{t}|TICKET#a"), ERASING: {"BOOL": True}}}),
        (
            "UpdateItem",
            {
                "Key": key("TENANT#{t}|TICKET#a"),
                "UpdateExpression": "SET #e = :t",
                "ExpressionAttributeNames": {"#e": ERASING},
                "ExpressionAttributeValues": {":t": {"BOOL": True}},
                "ReturnValues": "ALL_NEW",
            },
        ),
        (
            "UpdateItem",
            {"Key": key("TENANT#{t}|TICKET#a"), "AttributeUpdates": {ERASING: {"Value": {"BOOL": True}}}},
        ),
    ],
)
def test_tenant_credentials_never_set_the_erasing_mark(tenant: str, operation: str, body: dict[str, Any]) -> None:
    request = _for_tenant(body, tenant)
    assert explicitly_denied(tenant, operation, request)


@pytest.mark.parametrize("tenant", ["1", "10"])
def test_nor_in_a_transaction_or_a_batch(tenant: str) -> None:
    pk = f"TENANT#{tenant}|TICKET#a"
    mark = {
        "TableName": "SupportTicket",
        "Key": key(pk),
        "UpdateExpression": "SET erasing = :t",
        "ExpressionAttributeValues": {":t": {"BOOL": True}},
    }
    assert explicitly_denied(tenant, "TransactWriteItems", {"TransactItems": [{"Update": mark}]})
    put = {"PutRequest": {"Item": {**key(pk), ERASING: {"BOOL": True}}}}
    assert explicitly_denied(tenant, "BatchWriteItem", {"RequestItems": {"SupportTicket": [put]}})


@pytest.mark.parametrize("tenant", ["1", "10"])
@pytest.mark.parametrize("pk", ["TENANT#{t}|AGGREGATE", "TENANT#{t}|AGGREGATE#JOURNAL#3"], ids=["counts", "journal"])
def test_tenant_credentials_never_write_the_counts(tenant: str, pk: str) -> None:
    item_key = key(pk.format(t=tenant), "OPEN")
    add = {
        "TableName": "SupportTicket",
        "Key": item_key,
        "UpdateExpression": "ADD #c :n",
        "ExpressionAttributeNames": {"#c": "count"},
        "ExpressionAttributeValues": {":n": {"N": "1000000"}},
    }
    assert explicitly_denied(tenant, "UpdateItem", add)
    assert explicitly_denied(tenant, "PutItem", {"TableName": "SupportTicket", "Item": item_key})
    assert explicitly_denied(tenant, "DeleteItem", {"TableName": "SupportTicket", "Key": item_key})
    assert explicitly_denied(tenant, "TransactWriteItems", {"TransactItems": [{"Update": add}]})
    batch = {"RequestItems": {"SupportTicket": [{"DeleteRequest": {"Key": item_key}}]}}
    assert explicitly_denied(tenant, "BatchWriteItem", batch)
    # Reading them is what GET /aggregates does.
    query = {
        "TableName": "SupportTicket",
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": s(pk.format(t=tenant))},
    }
    assert refusal(tenant, "Query", query) is None


def _for_tenant(body: dict[str, Any], tenant: str) -> dict[str, Any]:
    request = {"TableName": "SupportTicket", **body}
    for field in ("Key", "Item"):
        if field in request:
            request[field] = {**request[field], "pk": s(request[field]["pk"]["S"].format(t=tenant))}
    return request


# The writes the API makes with tenant credentials, in their real shapes: none is refused.
@pytest.mark.parametrize("tenant", ["1", "10"])
def test_every_write_the_api_makes_stays_allowed(tenant: str) -> None:
    pk = f"TENANT#{tenant}|TICKET#a"
    item = {**key(pk), "tenant_status": s(f"TENANT#{tenant}|OPEN"), "resolver": s("#UNASSIGNED"), "title": s("t")}
    create = {
        "TableName": "SupportTicket",
        "Item": item,
        "ConditionExpression": "attribute_not_exists(pk)",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    update = {
        "TableName": "SupportTicket",
        "Key": key(pk),
        "UpdateExpression": "SET #version = #version + :one, #updated_at = :now, #title = :title",
        "ConditionExpression": "attribute_exists(pk) AND #version = :expected",
        "ExpressionAttributeNames": {"#version": "version", "#updated_at": "updated_at", "#title": "title"},
        "ExpressionAttributeValues": {":one": {"N": "1"}, ":now": s("n"), ":title": s("x"), ":expected": {"N": "1"}},
        "ReturnValues": "ALL_NEW",
    }
    mark = {
        "TableName": "SupportTicket",
        "Key": key(pk),
        "UpdateExpression": "SET deleted_by = :actor, deleted_at = :at",
        "ConditionExpression": "attribute_exists(pk)",
        "ExpressionAttributeValues": {":actor": s("ada"), ":at": s("n")},
    }
    comment = {
        "TransactItems": [
            {
                "ConditionCheck": {
                    "TableName": "SupportTicket",
                    "Key": key(pk),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
            {"Put": {"TableName": "SupportTicket", "Item": {**key(pk, "COMMENT#1#c"), "body": s("b")}}},
        ]
    }
    idempotency = {
        "TableName": "SupportTicket",
        "Item": {**key(f"TENANT#{tenant}|IDEMPOTENCY#7", "h"), "status": s("INPROGRESS"), "expiration": {"N": "1"}},
        "ConditionExpression": "attribute_not_exists(#id) OR #expiry < :now",
        "ExpressionAttributeNames": {"#id": "pk", "#expiry": "expiration"},
        "ExpressionAttributeValues": {":now": {"N": "0"}},
    }
    deletes = {"RequestItems": {"SupportTicket": [{"DeleteRequest": {"Key": key(pk, "COMMENT#1#c")}}]}}
    assert refusal(tenant, "PutItem", create) is None
    assert refusal(tenant, "UpdateItem", update) is None
    assert refusal(tenant, "UpdateItem", mark) is None
    assert refusal(tenant, "TransactWriteItems", comment) is None
    assert refusal(tenant, "PutItem", idempotency) is None
    assert refusal(tenant, "DeleteItem", {"TableName": "SupportTicket", "Key": key(pk)}) is None
    assert refusal(tenant, "BatchWriteItem", deletes) is None
