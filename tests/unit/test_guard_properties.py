"""Property-based: over random tenants and keys, the guard allows a tenant's
request exactly when every key it touches is under ``TENANT#<tenant>|``,
with the template's real TenantAccessRole policy and trust policy."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from local_stack.iam.dynamodb_authorization import authorize_dynamodb
from local_stack.iam.policy_evaluation import Decision
from local_stack.iam.sessions import Session
from local_stack.iam.sts import AssumeRoleRequest, authorize_assume_role
from local_stack.local_values import LOCAL_VPC_ENDPOINT_ID
from tests.depth import sized
from tests.unit.test_guard_policy import API_ROLE, ROLES, TENANT_ROLE, web_identity
from tests.unit.test_guard_requests import TABLES

PROPERTY_SETTINGS = settings(max_examples=sized(deep=300, ci=40), deadline=None)

tenant_ids = st.from_regex(r"[a-z0-9-]{1,63}", fullmatch=True)
# Keys of any shape: other tenants (prefixes and extensions of the caller's id),
# no tenant at all, wildcards and delimiters.
key_text = st.text(alphabet=st.sampled_from("ab1-0|#*?TENANT"), max_size=12)


def keys_for(tenant: str) -> st.SearchStrategy[str]:
    return st.one_of(
        key_text.map(lambda rest: f"TENANT#{tenant}|{rest}"),  # the caller's own
        st.tuples(tenant_ids, key_text).map(lambda pair: f"TENANT#{pair[0]}|{pair[1]}"),  # any tenant's
        key_text.map(lambda rest: f"TENANT#{tenant}{rest}"),  # the caller's id as a prefix: 1 vs 10
        key_text,  # not a tenant key at all
    )


def session(tenant: str) -> Session:
    return Session("ASIATEST", TENANT_ROLE, f"tenant-{tenant}", {"TenantId": tenant})


def owned(tenant: str, key: str) -> bool:
    return key.startswith(f"TENANT#{tenant}|")


def decide(tenant: str, operation: str, body: dict[str, Any], source_vpce: str | None = LOCAL_VPC_ENDPOINT_ID) -> bool:
    """Whether the guard lets tenant credentials make this request; by default
    through the stack's gateway endpoint (the functions' way)."""
    allowed = authorize_dynamodb(
        session(tenant), operation, body, region="us-east-1", tables=TABLES, source_vpce=source_vpce
    )
    # The data perimeter: from anywhere else, whatever the request, nothing.
    assert (
        source_vpce is None
        or authorize_dynamodb(session(tenant), operation, body, region="us-east-1", tables=TABLES) is not None
    )
    return allowed is None


def item(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": "SUMMARY"}}


@st.composite
def tenant_and_keys(draw: st.DrawFn, max_keys: int = 5) -> tuple[str, list[str]]:
    tenant = draw(tenant_ids)
    keys = draw(st.lists(keys_for(tenant), min_size=1, max_size=max_keys))
    return tenant, keys


@PROPERTY_SETTINGS
@given(tenant_and_keys(max_keys=1), st.sampled_from(["GetItem", "PutItem", "UpdateItem", "DeleteItem"]))
@example(("1", ["TENANT#10|TICKET#a"]), "GetItem")
@example(("10", ["TENANT#1|TICKET#a"]), "PutItem")
@example(("a", ["TENANT#a-b|TICKET#x"]), "UpdateItem")
@example(("a-b", ["TENANT#a|TICKET#x"]), "DeleteItem")
def test_single_item_operations(case: tuple[str, list[str]], operation: str) -> None:
    tenant, (key,) = case
    field = "Item" if operation == "PutItem" else "Key"
    assert decide(tenant, operation, {"TableName": "SupportTicket", field: item(key)}) == owned(tenant, key)


@PROPERTY_SETTINGS
@given(tenant_and_keys(), st.sampled_from(["BatchGetItem", "BatchWriteItem", "TransactWriteItems", "TransactGetItems"]))
@example(("1", ["TENANT#1|A", "TENANT#10|A"]), "BatchGetItem")
@example(("a", ["TENANT#a|A", "TENANT#a-b|A"]), "TransactWriteItems")
def test_multi_item_operations_need_every_key(case: tuple[str, list[str]], operation: str) -> None:
    tenant, keys = case
    body: dict[str, Any]
    if operation == "BatchGetItem":
        body = {"RequestItems": {"SupportTicket": {"Keys": [item(k) for k in keys]}}}
    elif operation == "BatchWriteItem":
        body = {"RequestItems": {"SupportTicket": [{"DeleteRequest": {"Key": item(k)}} for k in keys]}}
    elif operation == "TransactWriteItems":
        kinds = ["Put", "Update", "Delete", "ConditionCheck"]
        body = {
            "TransactItems": [
                {kinds[i % 4]: {"TableName": "SupportTicket", ("Item" if i % 4 == 0 else "Key"): item(k)}}
                for i, k in enumerate(keys)
            ]
        }
    else:
        body = {"TransactItems": [{"Get": {"TableName": "SupportTicket", "Key": item(k)}} for k in keys]}
    assert decide(tenant, operation, body) == all(owned(tenant, k) for k in keys)


@PROPERTY_SETTINGS
@given(tenant_and_keys(max_keys=2), st.booleans())
@example(("1", ["TENANT#10|OPEN", "TENANT#1|TICKET#a"]), True)
def test_queries_on_table_and_index(case: tuple[str, list[str]], on_index: bool) -> None:
    tenant, keys = case
    body: dict[str, Any] = {
        "TableName": "SupportTicket",
        "KeyConditionExpression": "#k = :v",
        "ExpressionAttributeNames": {"#k": "tenant_status" if on_index else "pk"},
        "ExpressionAttributeValues": {":v": {"S": keys[0]}},
    }
    if on_index:
        body["IndexName"] = "GSI1"
    if len(keys) > 1:  # a start key pointing at the second key's partition
        body["ExclusiveStartKey"] = {"pk": {"S": keys[1]}, "sk": {"S": "SUMMARY"}}
    assert decide(tenant, "Query", body) == all(owned(tenant, k) for k in keys)


@PROPERTY_SETTINGS
@given(tenant_ids, st.sampled_from([None, "GSI1"]))
def test_scan_is_always_denied(tenant: str, index: str | None) -> None:
    body: dict[str, Any] = {"TableName": "SupportTicket"}
    if index:
        body["IndexName"] = index
    assert not decide(tenant, "Scan", body)


@PROPERTY_SETTINGS
@given(tenant_and_keys(max_keys=1))
def test_a_session_without_the_tag_reaches_nothing(case: tuple[str, list[str]]) -> None:
    _, (key,) = case
    untagged = Session("ASIATEST", TENANT_ROLE, "untagged", {})
    body = {"TableName": "SupportTicket", "Key": item(key)}
    assert authorize_dynamodb(untagged, "GetItem", body, region="us-east-1", tables=TABLES) is not None


@PROPERTY_SETTINGS
@given(tenant_and_keys(max_keys=1))
def test_an_empty_tag_reaches_no_tenant(case: tuple[str, list[str]]) -> None:
    # Such a session can't exist (the trust policy wants a non-empty tag, see
    # below); if it did, it would reach only keys "TENANT#|...", which no valid
    # tenant id produces.
    _, (key,) = case
    assume(not key.startswith("TENANT#|"))
    empty = Session("ASIATEST", TENANT_ROLE, "empty", {"TenantId": ""})
    body = {"TableName": "SupportTicket", "Key": item(key)}
    assert authorize_dynamodb(empty, "GetItem", body, region="us-east-1", tables=TABLES) is not None


api_caller = Session("ASIAAPI", API_ROLE, "fn")
tag_keys = st.sampled_from(["TenantId", "tenantid", "Tenant", "Other", "TenantId2"])


@PROPERTY_SETTINGS
@given(st.dictionaries(tag_keys, st.text(max_size=5), max_size=3))
def test_no_tags_let_anyone_assume_the_tenant_role(tags: dict[str, str]) -> None:
    # Tenant credentials come only from the identity pool, for a caller's own token.
    request = AssumeRoleRequest(TENANT_ROLE.arn, "s-1", tags, None)
    assert authorize_assume_role(api_caller, request, ROLES) is not None
    assert authorize_assume_role(None, request, ROLES) is not None


@PROPERTY_SETTINGS
@given(st.dictionaries(tag_keys, st.text(max_size=5), max_size=3))
def test_the_identity_pool_tags_exactly_one_non_empty_tenant(tags: dict[str, str]) -> None:
    expected = set(tags) == {"TenantId"} and tags["TenantId"] != ""
    assert (web_identity("sts:TagSession", tags=tags) is Decision.ALLOW) == expected
