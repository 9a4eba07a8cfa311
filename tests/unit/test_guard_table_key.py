"""The guard over a dedicated table encrypted with its own key: DynamoDB uses
the key for the caller on every data request, so the key's policy (from
templates/dedicated-table.yaml, its conditions on ``kms:ViaService`` and the
caller's ``TenantId`` tag) and its state decide too, as DynamoDB answers them
(local_stack.iam.kms_via_dynamodb). Tenants 1 and 10, each with its own table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from local_stack.iam.dynamodb_authorization import TableKeys
from local_stack.iam.guard import SOURCE_VPCE_ENVIRON, Guard
from local_stack.iam.kms_via_dynamodb import TableKey
from local_stack.iam.sessions import Session, Sessions
from local_stack.iam.sigv4 import Credentials
from local_stack.local_values import LOCAL_VPC_ENDPOINT_ID
from stack_model import dedicated
from support_tickets.core import keys
from tests.signed import OPERATOR, signed_environ
from tests.unit.test_guard_kms import ROLES, VALUES
from tests.unit.test_guard_wsgi import TABLES, Recorder

TENANTS = ("1", "10")
REGION_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/"
TABLE = {tenant: dedicated.table_name("SupportTicket", tenant) for tenant in TENANTS}
KEY_ARN = {
    tenant: f"arn:aws:kms:us-east-1:123456789012:key/0000000{i}-0000-0000-0000-000000000000"
    for i, tenant in enumerate(TENANTS)
}
CREDENTIALS = {
    tenant: Credentials(f"ASIATENANT{tenant:0>10}", f"secret-{tenant}", f"token-{tenant}") for tenant in TENANTS
}
AGGREGATOR = Credentials("ASIAAGGREGATOR000001", "aggregator-secret", "aggregator-token")


def key_policy(tenant: str) -> dict[str, Any]:
    (key,) = dedicated.dedicated_resources("AWS::KMS::Key").values()
    policy: dict[str, Any] = dedicated.dedicated_values(tenant, VALUES).resolve(key["Properties"]["KeyPolicy"])
    return policy


class Account:
    """The tables' tags and keys as moto would hold them, changed by the tests."""

    def __init__(self) -> None:
        self.tags = {REGION_ARN + TABLE[t]: {"TenantId": t} for t in TENANTS}
        self.states = {KEY_ARN[t]: "Enabled" for t in TENANTS}

    def table_key(self, table_arn: str) -> TableKey | None:
        for tenant in TENANTS:
            if table_arn == REGION_ARN + TABLE[tenant]:
                return TableKey(KEY_ARN[tenant], self.states[KEY_ARN[tenant]])
        return None  # the pool table: DynamoDB's own key


@pytest.fixture
def account() -> Account:
    return Account()


@pytest.fixture
def guard(account: Account) -> Guard:
    sessions = Sessions(operator=OPERATOR)
    for tenant in TENANTS:
        session = Session(
            CREDENTIALS[tenant].access_key_id, ROLES["TenantAccessRole"], f"t{tenant}", {"TenantId": tenant}
        )
        sessions.add(session, CREDENTIALS[tenant])
    sessions.add(Session(AGGREGATOR.access_key_id, ROLES["AggregateCountsRole"], "AggregateCountsFunction"), AGGREGATOR)
    tables = {**TABLES, **{TABLE[t]: TableKeys(TABLE[t], "pk", {"GSI1": "tenant_status"}) for t in TENANTS}}
    return Guard(
        Recorder(),
        roles=ROLES,
        tables=tables,
        sessions=sessions,
        key_policies={KEY_ARN[t]: key_policy(t) for t in TENANTS},
        resource_tags=account.tags.get,
        table_key=account.table_key,
    )


def call(guard: Guard, signer: Credentials, operation: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The guard's status and JSON answer (``{}``: forwarded to moto), through the stack's endpoint."""
    environ = signed_environ(signer, target=f"DynamoDB_20120810.{operation}", body=json.dumps(body).encode())
    environ[SOURCE_VPCE_ENVIRON] = LOCAL_VPC_ENDPOINT_ID
    status: list[str] = []
    answer = b"".join(guard(environ, lambda s, headers, exc_info=None: status.append(s)))
    return status[0], json.loads(answer)


def get(table_of: str, key_tenant: str) -> dict[str, Any]:
    return {"TableName": TABLE[table_of], "Key": keys.ticket_key(key_tenant, "T1")}


def counts(tenant: str) -> dict[str, Any]:
    key = {"pk": {"S": keys.aggregate_pk(tenant)}, "sk": {"S": keys.aggregate_sk(keys.TicketStatus.OPEN, 0)}}
    return {
        "TableName": TABLE[tenant],
        "Key": key,
        "UpdateExpression": "ADD #c :one",
        "ExpressionAttributeNames": {"#c": "count"},
        "ExpressionAttributeValues": {":one": {"N": "1"}},
    }


@pytest.mark.parametrize(("table_of", "caller"), [("1", "10"), ("10", "1")])
def test_a_table_retagged_for_another_tenant_is_still_refused_it_by_its_keys_policy(
    guard: Guard, account: Account, table_of: str, caller: str
) -> None:
    """IAM's ABAC follows the tag; the key's policy names its own tenant: the
    other tenant's credentials are refused the key, as DynamoDB refuses them.
    Its tenant and the stream functions use it (the policy's principals)."""
    assert call(guard, CREDENTIALS[table_of], "GetItem", get(table_of, table_of)) == ("200 OK", {})
    assert call(guard, AGGREGATOR, "UpdateItem", counts(table_of)) == ("200 OK", {})
    account.tags[REGION_ARN + TABLE[table_of]] = {"TenantId": caller}
    status, answer = call(guard, CREDENTIALS[caller], "GetItem", get(table_of, caller))
    assert status.startswith("400"), answer
    assert answer["__type"] == "com.amazonaws.dynamodb.v20120810#AccessDeniedException"
    assert answer["message"].startswith("KMS key access denied error: com.amazonaws.services.kms.model.AWSKMSException")
    assert f"kms:Decrypt on resource: {KEY_ARN[table_of]} with an explicit deny" in answer["message"]
    # Its own tenant's credentials: refused by IAM now (the tag is not theirs), not by the key.
    status, answer = call(guard, CREDENTIALS[table_of], "GetItem", get(table_of, table_of))
    assert status.startswith("400")
    assert answer["__type"] == "com.amazonaws.dynamodb.v20120810#AccessDeniedException"
    assert "dynamodb:GetItem" in answer["message"]


@pytest.mark.parametrize("tenant", TENANTS)
@pytest.mark.parametrize(
    ("state", "error"),
    [
        ("Disabled", "KMS key disabled error: com.amazonaws.services.kms.model.DisabledException: {} is disabled."),
        (
            "PendingDeletion",
            "KMS validation error: com.amazonaws.services.kms.model.KMSInvalidStateException: {} is pending deletion.",
        ),
    ],
)
def test_a_table_whose_key_is_disabled_or_pending_deletion_refuses_every_data_request_and_only_those(
    guard: Guard, account: Account, tenant: str, state: str, error: str
) -> None:
    other = next(t for t in TENANTS if t != tenant)
    account.states[KEY_ARN[tenant]] = state
    query = {
        "TableName": TABLE[tenant],
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": keys.ticket_key(tenant, "T1")["pk"]},
    }
    refused = [
        (CREDENTIALS[tenant], "GetItem", get(tenant, tenant)),
        (CREDENTIALS[tenant], "Query", query),
        (CREDENTIALS[tenant], "PutItem", {"TableName": TABLE[tenant], "Item": keys.ticket_key(tenant, "T1")}),
        (AGGREGATOR, "UpdateItem", counts(tenant)),
        (OPERATOR, "GetItem", get(tenant, tenant)),  # the operator too: it is the key's state
        (OPERATOR, "Scan", {"TableName": TABLE[tenant]}),
    ]
    for signer, operation, body in refused:
        status, answer = call(guard, signer, operation, body)
        assert status.startswith("400"), (operation, answer)
        assert answer["__type"] == "com.amazonaws.dynamodb.v20120810#ValidationException"
        assert answer["message"].startswith(error.format(KEY_ARN[tenant])), answer["message"]
    # IAM decides first: the other tenant's credentials get IAM's refusal, whatever the key.
    status, answer = call(guard, CREDENTIALS[other], "GetItem", get(tenant, other))
    assert status.startswith("400")
    assert answer["__type"] == "com.amazonaws.dynamodb.v20120810#AccessDeniedException"
    assert "dynamodb:GetItem" in answer["message"]
    # Its table's description and tags, the other tenant's table and the pool table: as before.
    assert call(guard, OPERATOR, "DescribeTable", {"TableName": TABLE[tenant]}) == ("200 OK", {})
    assert call(guard, CREDENTIALS[other], "GetItem", get(other, other)) == ("200 OK", {})
    pool = {"TableName": "SupportTicket", "Key": keys.ticket_key(tenant, "T1")}
    assert call(guard, CREDENTIALS[tenant], "GetItem", pool) == ("200 OK", {})
    account.states[KEY_ARN[tenant]] = "Enabled"
    assert call(guard, CREDENTIALS[tenant], "GetItem", get(tenant, tenant)) == ("200 OK", {})
