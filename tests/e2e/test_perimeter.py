"""The data perimeter, as an attacker with a normal user account tries it.

A non-admin user of a tenant holds a valid ID token. The identity pool's
``GetId`` and ``GetCredentialsForIdentity`` are public and unsigned, and the
pool id is no secret, so the user exchanges its own token for exactly the
credentials of ``TenantAccessRole`` that the API's authorizer obtains. With
them, from anywhere but the stack's VPC (here: the emulator's main listener,
not the gateway endpoint's), every DynamoDB call is refused, and the table is
unchanged item for item; the same user's API calls still work. A second
tenant (the attacker's id + ``0``, the ``1``/``10`` pair) is the victim.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from support_tickets.core import keys
from tests.e2e.conftest import RunningStack, new_tenant_id
from tests.e2e.test_isolation import assert_denied, client_with, exchange, table_state


@pytest.fixture
def attack(stack: RunningStack) -> dict[str, Any]:
    """An attacker (non-admin) and a victim tenant, each with a ticket and a
    comment made through the API, and the attacker's own credentials from the
    identity pool's public API."""
    attacker = new_tenant_id()
    victim = attacker + "0"
    tokens = {tenant: stack.token(tenant, f"u-{tenant}") for tenant in (attacker, victim)}
    tickets = {}
    for tenant, token in tokens.items():
        created = stack.request("POST", "/tickets", token=token, body={"title": f"ticket of {tenant}"})
        assert created.status == 201, created.body
        tickets[tenant] = created.body["ticket_id"]
        comment = stack.request("POST", f"/tickets/{tickets[tenant]}/comments", token=token, body={"body": "hi"})
        assert comment.status == 201, comment.body
    stack.drain()  # the audit trail and the counts exist too
    credentials = exchange(stack, tokens[attacker])  # GetId + GetCredentialsForIdentity, unsigned
    return {
        "attacker": attacker,
        "victim": victim,
        "tokens": tokens,
        "tickets": tickets,
        "dynamodb": client_with(stack, "dynamodb", credentials),  # from outside the VPC
    }


def attempts(stack: RunningStack, attack: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """Every kind of call the review tried, on the attacker's own keys first
    (IAM's prefix rule would allow those from inside), then the victim's."""
    table = stack.state["table_name"]
    own, victim = attack["attacker"], attack["victim"]
    own_ticket, victim_ticket = attack["tickets"][own], attack["tickets"][victim]
    client = attack["dynamodb"]
    summary = {"pk": {"S": keys.ticket_pk(own, own_ticket)}, "sk": {"S": keys.SUMMARY_SK}}
    day = keys.audit_day_pk(own, _today(), 0)
    return {
        "GetItem own summary": lambda: client.get_item(TableName=table, Key=summary),
        "GetItem own tenant record": lambda: client.get_item(TableName=table, Key=keys.tenant_config_key(own)),
        "Query own ticket": lambda: client.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": keys.ticket_pk(own, own_ticket)}},
        ),
        "Query own GSI1 OPEN": lambda: client.query(
            TableName=table,
            IndexName="GSI1",
            KeyConditionExpression="tenant_status = :s",
            ExpressionAttributeValues={":s": {"S": keys.tenant_status(own, "OPEN")}},
        ),
        "Query an audit day": lambda: client.query(
            TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": day}}
        ),
        "UpdateItem updated_by forged": lambda: client.update_item(
            TableName=table,
            Key=summary,
            UpdateExpression="SET updated_by = :ada ADD version :one",
            ExpressionAttributeValues={":ada": {"S": "ada"}, ":one": {"N": "1"}},
        ),
        "UpdateItem erasing": lambda: client.update_item(
            TableName=table,
            Key=summary,
            UpdateExpression="SET #e = :t",
            ExpressionAttributeNames={"#e": keys.ERASING_ATTRIBUTE},
            ExpressionAttributeValues={":t": {"BOOL": True}},
        ),
        "UpdateItem an AGGREGATE count": lambda: client.update_item(
            TableName=table,
            Key={"pk": {"S": keys.aggregate_pk(own)}, "sk": {"S": keys.aggregate_sk("OPEN")}},
            UpdateExpression="ADD #c :n",
            ExpressionAttributeNames={"#c": "count"},
            ExpressionAttributeValues={":n": {"N": "1000000"}},
        ),
        "PutItem a row in the victim's GSI1 key": lambda: client.put_item(
            TableName=table,
            Item={
                "pk": {"S": keys.ticket_pk(own, "01PLANTED")},
                "sk": {"S": keys.SUMMARY_SK},
                "tenant_status": {"S": keys.tenant_status(victim, "OPEN")},
                "resolver": {"S": "nobody"},
            },
        ),
        "DeleteItem own summary (admin-only in the API)": lambda: client.delete_item(TableName=table, Key=summary),
        "DeleteItem the victim's summary": lambda: client.delete_item(
            TableName=table, Key={"pk": {"S": keys.ticket_pk(victim, victim_ticket)}, "sk": {"S": keys.SUMMARY_SK}}
        ),
        "BatchWriteItem": lambda: client.batch_write_item(RequestItems={table: [{"DeleteRequest": {"Key": summary}}]}),
        "TransactWriteItems": lambda: client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": summary,
                        "UpdateExpression": "SET title = :t",
                        "ExpressionAttributeValues": {":t": {"S": "defaced"}},
                    }
                }
            ]
        ),
    }


def _today() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")


def test_a_users_own_credentials_reach_nothing_from_outside_the_stack(
    stack: RunningStack, attack: dict[str, Any]
) -> None:
    # Given the table as the API left it
    before = table_state(stack)
    # When the attacker tries every call with its own identity-pool credentials
    refused = {}
    for name, call in attempts(stack, attack).items():
        refused[name] = assert_denied(call).response["Error"]["Message"]
    # Then each one was DynamoDB's AccessDeniedException, and nothing changed
    assert len(refused) == 13
    assert table_state(stack) == before
    # And the same user's API calls still work (the functions' way in is the gateway endpoint)
    token = attack["tokens"][attack["attacker"]]
    ticket = attack["tickets"][attack["attacker"]]
    read = stack.request("GET", f"/tickets/{ticket}", token=token)
    assert read.status == 200, read.body
    assert read.body["ticket"]["title"] == f"ticket of {attack['attacker']}"
    listed = stack.request("GET", "/tickets?status=OPEN", token=token)
    assert listed.status == 200
    assert [item["ticket_id"] for item in listed.body["items"]] == [ticket]


def test_the_same_credentials_work_through_the_gateway_endpoint_on_their_prefix_only(
    stack: RunningStack, attack: dict[str, Any]
) -> None:
    # The control: what IAM's prefix rule allows from inside the stack's VPC (the functions' way in),
    # so the refusals above are the perimeter's, not the prefix rule's.
    credentials = exchange(stack, attack["tokens"][attack["attacker"]])
    inside = client_with(stack, "dynamodb", credentials, in_vpc=True)
    table = stack.state["table_name"]
    own, victim = attack["attacker"], attack["victim"]
    own_key = {"pk": {"S": keys.ticket_pk(own, attack["tickets"][own])}, "sk": {"S": keys.SUMMARY_SK}}
    assert inside.get_item(TableName=table, Key=own_key)["Item"]["title"]["S"] == f"ticket of {own}"
    victim_key = {"pk": {"S": keys.ticket_pk(victim, attack["tickets"][victim])}, "sk": {"S": keys.SUMMARY_SK}}
    assert_denied(lambda: inside.get_item(TableName=table, Key=victim_key))


def test_the_gateway_endpoint_routes_dynamodb_only(stack: RunningStack) -> None:
    # In AWS the VPC has no other route: a function that called Cognito (or SQS) would hang. Here it is refused.
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    client = boto3.client(
        "cognito-identity",
        region_name=stack.state["region"],
        endpoint_url=stack.state["vpc_endpoint_url"],
        config=Config(retries={"total_max_attempts": 1}),
    )
    with pytest.raises(ClientError) as caught:
        client.get_id(IdentityPoolId=stack.state["identity_pool_id"], Logins={})
    assert caught.value.response["Error"]["Code"] == "UnreachableFromVpcException"
    assert json.dumps(caught.value.response["Error"]).count("DynamoDB") == 1


def test_tenant_credentials_encrypt_webhook_secrets_only_through_the_kms_endpoint_for_their_own_tenant(
    stack: RunningStack,
) -> None:
    # The KMS interface endpoint (docs/webhooks.md): Encrypt under the caller's own tenant's
    # context, through the endpoint only; never another tenant's context, never Decrypt.
    from botocore.exceptions import ClientError

    from tests.e2e.test_isolation import webhook_key_arn

    own = new_tenant_id()
    other = own + "0"  # "1" against "10"
    credentials = exchange(stack, stack.token(own, f"u-{own}"))
    inside = client_with(stack, "kms", credentials, in_vpc=True)
    outside = client_with(stack, "kms", credentials)
    key = webhook_key_arn(stack)
    context = {"tenant_id": own, "webhook_id": "wh_1"}
    blob = inside.encrypt(KeyId=key, Plaintext=b"whsec_x", EncryptionContext=context)["CiphertextBlob"]
    assert blob

    def refused(call: Callable[[], Any]) -> None:
        with pytest.raises(ClientError) as caught:
            call()
        assert caught.value.response["Error"]["Code"] == "AccessDeniedException"

    refused(lambda: outside.encrypt(KeyId=key, Plaintext=b"whsec_x", EncryptionContext=context))
    refused(lambda: inside.encrypt(KeyId=key, Plaintext=b"x", EncryptionContext={**context, "tenant_id": other}))
    refused(lambda: inside.encrypt(KeyId=key, Plaintext=b"x", EncryptionContext={"tenant_id": own}))
    refused(lambda: inside.decrypt(CiphertextBlob=blob, EncryptionContext=context))
    refused(lambda: outside.decrypt(CiphertextBlob=blob, EncryptionContext=context))
