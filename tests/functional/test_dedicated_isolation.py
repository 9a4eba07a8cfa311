"""A dedicated tenant's table as the local stack's guard judges it, with the
template's policies and the table's tags as moto holds them (the dedicated
template's tables made in moto, then every request judged from its body alone):
only its own tenant's credentials reach it, and only under its prefix and
through the stack's endpoint; another dedicated tenant's and a pooled
tenant's credentials reach none of it, whatever the keys (their own prefix
included); a dedicated tenant reaches nothing of another tenant's in the
pool table. Tenants ``1`` and ``10`` both ways, and ``100`` (pooled, a prefix
of neither but sharing ``1`` and ``10``'s digits). A tag changed in moto is
the next request's."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from local_stack.emulator.server import moto_table_key, moto_table_tags, table_keys
from local_stack.iam.dynamodb_authorization import TableKeys, authorize_dynamodb
from local_stack.iam.kms_via_dynamodb import TableKey
from local_stack.iam.sessions import Session
from local_stack.local_values import LOCAL_VPC_ENDPOINT_ID, offline_values
from stack_model import dedicated
from stack_model.roles import RoleDefinition, roles_from_template
from stack_model.template import REGION, table_definition, table_protections
from support_tickets.core import keys
from tests.conftest import SHARED_AWS

POOL = str(table_definition()["TableName"])
DEDICATED = ("1", "10")
POOLED = "100"
POOL_VALUES = offline_values(user_pool_id="p", client_id="c", identity_pool_id="i")
ROLES: dict[str, RoleDefinition] = roles_from_template(POOL_VALUES)
# One mocked account for the module: its tests read the tables' tags and judge
# requests, and write no item (the one that changes a tag puts it back).
pytestmark = SHARED_AWS


def dedicated_table(tenant: str) -> str:
    return dedicated.table_name(POOL, tenant)


@pytest.fixture
def tables(aws: None) -> dict[str, TableKeys]:
    """The pool table (the ``aws`` fixture's) and tenant 1's and 10's dedicated
    tables, made in moto from the dedicated template (tagged, as it declares
    them) unless they are there: what the guard reads keys of."""
    client = boto3.client("dynamodb", region_name=REGION)
    (resource,) = dedicated.dedicated_resources("AWS::DynamoDB::Table").values()
    found = {POOL: table_keys(table_definition())}
    existing = set(client.list_tables()["TableNames"])
    for tenant in DEDICATED:
        values = dedicated.dedicated_values(tenant, POOL_VALUES)
        definition = dedicated.table_definition(values)
        if definition["TableName"] not in existing:
            props = values.resolve({"Tags": resource["Properties"]["Tags"]})
            client.create_table(**definition, **table_protections(props))
        found[definition["TableName"]] = table_keys(definition)
    return found


def refusal(
    tables: dict[str, TableKeys],
    tenant: str,
    operation: str,
    body: dict[str, Any],
    *,
    role: str = "TenantAccessRole",
    source_vpce: str | None = LOCAL_VPC_ENDPOINT_ID,
) -> str | None:
    """The guard's AccessDenied message for the call (``None``: allowed), the
    tables' tags read from moto as the emulator reads them."""
    session = Session("ASIATEST", ROLES[role], "test", {"TenantId": tenant} if role == "TenantAccessRole" else {})
    return authorize_dynamodb(
        session,
        operation,
        body,
        region=REGION,
        tables=tables,
        source_vpce=source_vpce,
        resource_tags=moto_table_tags,
    )


def ticket(pk_tenant: str, ticket_id: str = "T1") -> dict[str, Any]:
    return keys.ticket_key(pk_tenant, ticket_id)


def every_call(table: str, key_tenant: str) -> list[tuple[str, dict[str, Any]]]:
    """Every item call the API makes, on ``table``, with keys of ``key_tenant``."""
    key = ticket(key_tenant)
    item = {**key, "title": {"S": "x"}}
    status = keys.tenant_status(key_tenant, keys.TicketStatus.OPEN)
    query = {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": key["pk"]}}
    return [
        ("GetItem", {"TableName": table, "Key": key}),
        ("PutItem", {"TableName": table, "Item": item}),
        (
            "UpdateItem",
            {
                "TableName": table,
                "Key": key,
                "UpdateExpression": "SET title = :t",
                "ExpressionAttributeValues": {":t": {"S": "y"}},
            },
        ),
        ("DeleteItem", {"TableName": table, "Key": key}),
        ("Query", {"TableName": table, **query}),
        (
            "Query",
            {
                "TableName": table,
                "IndexName": keys.GSI1_NAME,
                "KeyConditionExpression": "tenant_status = :s",
                "ExpressionAttributeValues": {":s": {"S": status}},
            },
        ),
        ("BatchWriteItem", {"RequestItems": {table: [{"DeleteRequest": {"Key": key}}]}}),
        ("TransactWriteItems", {"TransactItems": [{"Put": {"TableName": table, "Item": item}}]}),
    ]


@pytest.mark.parametrize("tenant", DEDICATED)
def test_a_dedicated_tenant_reaches_its_own_table_under_its_own_prefix(
    tables: dict[str, TableKeys], tenant: str
) -> None:
    for operation, body in every_call(dedicated_table(tenant), tenant):
        assert refusal(tables, tenant, operation, body) is None, (operation, body)


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1"), ("1", POOLED), ("10", POOLED)])
def test_a_dedicated_tenant_reaches_no_other_prefix_in_its_own_table(
    tables: dict[str, TableKeys], tenant: str, other: str
) -> None:
    for operation, body in every_call(dedicated_table(tenant), other):
        assert refusal(tables, tenant, operation, body) is not None, (operation, body)
    # Nor a key without the "|" that ends its id (TENANT#1 is a prefix of TENANT#10).
    bare = {"pk": {"S": f"TENANT#{tenant}"}, "sk": {"S": "SUMMARY"}}
    assert refusal(tables, tenant, "GetItem", {"TableName": dedicated_table(tenant), "Key": bare}) is not None


@pytest.mark.parametrize(
    ("table_of", "caller"),
    [("1", "10"), ("10", "1"), ("1", POOLED), ("10", POOLED)],
    ids=["10-on-1s-table", "1-on-10s-table", "pooled-on-1s-table", "pooled-on-10s-table"],
)
def test_no_other_tenants_credentials_reach_a_dedicated_table_whatever_the_keys(
    tables: dict[str, TableKeys], table_of: str, caller: str
) -> None:
    """Another dedicated tenant's and a pooled tenant's credentials: keys of the
    table's tenant, of the caller's own prefix (its own items, in another's table),
    and of a third tenant, are all refused."""
    third = next(tenant for tenant in ("1", "10", POOLED) if tenant not in (table_of, caller))
    for key_tenant in (table_of, caller, third):
        for operation, body in every_call(dedicated_table(table_of), key_tenant):
            message = refusal(tables, caller, operation, body)
            assert message is not None, (caller, operation, body)
            assert "dedicated" in message


@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1"), ("1", POOLED), ("10", POOLED)])
def test_a_dedicated_tenant_reaches_nothing_of_another_tenant_in_the_pool_table(
    tables: dict[str, TableKeys], tenant: str, other: str
) -> None:
    for operation, body in every_call(POOL, other):
        assert refusal(tables, tenant, operation, body) is not None, (operation, body)
    # Its own items there stay its own (its tenant record is in the pool table).
    config = keys.tenant_config_key(tenant)
    assert refusal(tables, tenant, "GetItem", {"TableName": POOL, "Key": config}) is None


@pytest.mark.parametrize("tenant", DEDICATED)
def test_outside_the_stacks_endpoint_a_dedicated_tenant_reaches_nothing_of_its_table(
    tables: dict[str, TableKeys], tenant: str
) -> None:
    for source_vpce in (None, "vpce-0wrong0wrong0wrong"):
        for operation, body in every_call(dedicated_table(tenant), tenant):
            assert refusal(tables, tenant, operation, body, source_vpce=source_vpce) is not None


@pytest.mark.parametrize("tenant", DEDICATED)
def test_in_its_own_table_a_tenant_still_never_writes_its_counts_record_audit_or_the_erasing_mark(
    tables: dict[str, TableKeys], tenant: str
) -> None:
    table = dedicated_table(tenant)
    counts = {"pk": {"S": keys.aggregate_pk(tenant)}, "sk": {"S": keys.aggregate_sk(keys.TicketStatus.OPEN, 0)}}
    for key in (counts, keys.tenant_config_key(tenant)):
        message = refusal(tables, tenant, "PutItem", {"TableName": table, "Item": {**key, "count": {"N": "9"}}})
        assert message is not None
        assert "explicit deny" in message
    erasing = {"TableName": table, "Item": {**ticket(tenant), "erasing": {"BOOL": True}}}
    assert "explicit deny" in str(refusal(tables, tenant, "PutItem", erasing))


def test_a_tag_changed_in_moto_is_the_next_requests(tables: dict[str, TableKeys]) -> None:
    client = boto3.client("dynamodb", region_name=REGION)
    arn = client.describe_table(TableName=dedicated_table("1"))["Table"]["TableArn"]
    get = {"TableName": dedicated_table("1"), "Key": ticket("1")}
    assert refusal(tables, "1", "GetItem", get) is None
    client.untag_resource(ResourceArn=arn, TagKeys=["TenantId"])
    assert refusal(tables, "1", "GetItem", get) is not None
    # Retagged for another tenant: that tenant, under its own prefix; never the name's.
    client.tag_resource(ResourceArn=arn, Tags=[{"Key": "TenantId", "Value": "10"}])
    assert refusal(tables, "1", "GetItem", get) is not None
    assert refusal(tables, "10", "GetItem", {**get, "Key": ticket("10")}) is None
    client.tag_resource(ResourceArn=arn, Tags=[{"Key": "TenantId", "Value": "1"}])
    assert refusal(tables, "1", "GetItem", get) is None
    assert refusal(tables, "10", "GetItem", {**get, "Key": ticket("10")}) is not None
    # Overwritten, as DynamoDB does: one TenantId tag, tenant 1's.
    assert client.list_tags_of_resource(ResourceArn=arn)["Tags"] == [{"Key": "TenantId", "Value": "1"}]


def test_a_tenant_tag_whose_key_differs_in_case_counts_alone_and_never_beside_another(
    tables: dict[str, TableKeys],
) -> None:
    """IAM reads aws:ResourceTag/TenantId from a tag key of any case, but a
    table with two such keys (DynamoDB's tag keys are case-sensitive) is no
    one's, whichever was tagged first: AWS does not say which value it sees."""
    client = boto3.client("dynamodb", region_name=REGION)
    arn = client.describe_table(TableName=dedicated_table("1"))["Table"]["TableArn"]
    get = {"TableName": dedicated_table("1"), "Key": ticket("1")}
    get_10 = {**get, "Key": ticket("10")}

    def owners() -> set[str]:
        return {
            tenant for tenant, body in (("1", get), ("10", get_10)) if refusal(tables, tenant, "GetItem", body) is None
        }

    assert owners() == {"1"}
    client.tag_resource(ResourceArn=arn, Tags=[{"Key": "tenantid", "Value": "10"}])
    assert owners() == set()
    client.untag_resource(ResourceArn=arn, TagKeys=["TenantId"])
    assert owners() == {"10"}
    client.tag_resource(ResourceArn=arn, Tags=[{"Key": "TenantId", "Value": "1"}])
    assert owners() == set()
    client.untag_resource(ResourceArn=arn, TagKeys=["tenantid"])
    assert owners() == {"1"}


@pytest.mark.parametrize("tenant", DEDICATED)
def test_the_stream_functions_write_into_a_dedicated_table_what_they_write_into_the_pools(
    tables: dict[str, TableKeys], tenant: str
) -> None:
    table = dedicated_table(tenant)
    counts = {"pk": {"S": keys.aggregate_pk(tenant)}, "sk": {"S": keys.aggregate_sk(keys.TicketStatus.OPEN, 0)}}
    update = {
        "UpdateExpression": "ADD #c :one",
        "ExpressionAttributeNames": {"#c": "count"},
        "ExpressionAttributeValues": {":one": {"N": "1"}},
    }
    write_counts = {"TableName": table, "Key": counts, **update}
    assert refusal(tables, tenant, "UpdateItem", write_counts, role="AggregateCountsRole", source_vpce=None) is None
    # Counts only: never a ticket.
    write_ticket = {"TableName": table, "Key": ticket(tenant), **update}
    assert refusal(tables, tenant, "UpdateItem", write_ticket, role="AggregateCountsRole", source_vpce=None)
    history = {
        "pk": {"S": keys.history_pk(tenant, "T1")},
        "sk": {"S": keys.audit_sk("2026-01-01T00:00:00.000Z", "1", "e1")},
        "change": {"S": "x"},
    }
    put_history = {"TableName": table, "Item": history}
    assert refusal(tables, tenant, "PutItem", put_history, role="AuditTrailRole", source_vpce=None) is None
    # While a move copies the tenant out of either table, each event's mark first (TenantTable.marks_writes):
    # a put of a mark, never an update or delete of one, never a ticket.
    mark = {**keys.move_mark_key(tenant, history["sk"]["S"]), "expiration": {"N": "1"}}
    for where in (table, POOL):
        put_mark = {"TableName": where, "Item": mark}
        assert refusal(tables, tenant, "PutItem", put_mark, role="AuditTrailRole", source_vpce=None) is None
        drop_mark = {"TableName": where, "Key": {"pk": mark["pk"], "sk": mark["sk"]}}
        assert refusal(tables, tenant, "DeleteItem", drop_mark, role="AuditTrailRole", source_vpce=None)
        put_ticket = {"TableName": where, "Item": {**ticket(tenant), "title": {"S": "x"}}}
        assert refusal(tables, tenant, "PutItem", put_ticket, role="AuditTrailRole", source_vpce=None)
    # The tenant record stays in the pool table: the delivery function reads a tier there only.
    config = {"TableName": table, "Key": keys.tenant_config_key(tenant)}
    assert refusal(tables, tenant, "GetItem", config, role="DeliverWebhookRole", source_vpce=None) is not None
    assert (
        refusal(tables, tenant, "GetItem", {**config, "TableName": POOL}, role="DeliverWebhookRole", source_vpce=None)
        is None
    )


def test_the_guard_reads_a_tables_key_and_its_state_from_moto_at_each_request(tables: dict[str, TableKeys]) -> None:
    """What DynamoDB would use for a data request (local_stack.iam.kms_via_dynamodb):
    the customer managed key a table is encrypted with, in its state now."""
    kms = boto3.client("kms", region_name=REGION)
    client = boto3.client("dynamodb", region_name=REGION)
    key = kms.create_key(Description="an encrypted table's")["KeyMetadata"]
    definition = {**table_definition(), "TableName": f"{POOL}-encrypted"}
    sse: dict[str, Any] = {"SSESpecification": {"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": key["Arn"]}}
    arn = client.create_table(**definition, **sse)["TableDescription"]["TableArn"]
    assert moto_table_key(arn) == TableKey(key["Arn"], "Enabled")
    kms.disable_key(KeyId=key["KeyId"])
    assert moto_table_key(arn) == TableKey(key["Arn"], "Disabled")
    kms.enable_key(KeyId=key["KeyId"])
    kms.schedule_key_deletion(KeyId=key["KeyId"], PendingWindowInDays=7)
    assert moto_table_key(arn) == TableKey(key["Arn"], "PendingDeletion")
    # The pool table and tenant 1's here: DynamoDB's own key.
    pool = client.describe_table(TableName=POOL)["Table"]["TableArn"]
    assert moto_table_key(pool) is None
    assert moto_table_key(pool.replace(POOL, dedicated_table("1"))) is None
