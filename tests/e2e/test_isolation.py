"""Isolation below the handlers: with real tenant credentials from the local
stack's STS, the IAM guard refuses every key outside the caller's prefix,
exactly as DynamoDB would, even when a handler is broken."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_stack.events import rest_event
from local_stack.lambda_runtime import LambdaContext, load_handler
from local_stack.roles import function_role, role_arn
from support_tickets.session import tenant_session
from support_tickets.settings import get_settings
from tests.e2e.conftest import RunningStack, new_tenant_id

BROKEN_HANDLER = Path(__file__).parent / "broken_handler"

# (caller, victim) tenant ids, built from a random base: "1" vs "10" and "a" vs "a-b" in both directions.
PAIRS = [
    pytest.param(lambda base: (base, base + "0"), id="1-vs-10"),
    pytest.param(lambda base: (base + "0", base), id="10-vs-1"),
    pytest.param(lambda base: (base, base + "-b"), id="a-vs-a-b"),
    pytest.param(lambda base: (base + "-b", base), id="a-b-vs-a"),
]


def table_items(stack: RunningStack) -> list[dict[str, Any]]:
    """Every item, read as the operator (the guard lets the operator scan),
    once the aggregator has caught up with the stream (its count items move)."""
    assert stack.drain()["drained"]
    client = stack.operator("dynamodb")
    items: list[dict[str, Any]] = []
    for page in client.get_paginator("scan").paginate(TableName=stack.state["table_name"]):
        items.extend(page["Items"])
    return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))


def role_credentials(stack: RunningStack, role: str, **tags: str) -> dict[str, str]:
    """Credentials of a template role, as Lambda (here: the operator) gets them."""
    kwargs: dict[str, Any] = {"RoleArn": role_arn(role), "RoleSessionName": f"test-{role}"}
    if tags:
        kwargs["Tags"] = [{"Key": key, "Value": value} for key, value in tags.items()]
    credentials = stack.operator("sts").assume_role(**kwargs)["Credentials"]
    return {
        "aws_access_key_id": credentials["AccessKeyId"],
        "aws_secret_access_key": credentials["SecretAccessKey"],
        "aws_session_token": credentials["SessionToken"],
    }


def client_with(stack: RunningStack, service: str, credentials: dict[str, str]) -> Any:
    import boto3

    session = boto3.Session(**credentials, region_name=stack.state["region"])  # type: ignore[arg-type]
    return session.client(service, endpoint_url=stack.state["emulator_url"])  # type: ignore[call-overload]


def tenant_client(stack: RunningStack, tenant_id: str) -> Any:
    """A DynamoDB client on TenantAccessRole credentials, obtained the way the
    layer gets them: ApiFunctionRole assumes the role with the TenantId tag."""
    api_role = client_with(stack, "sts", role_credentials(stack, "ApiFunctionRole"))
    credentials = api_role.assume_role(
        RoleArn=stack.state["tenant_role_arn"],
        RoleSessionName=f"tenant-{tenant_id}",
        Tags=[{"Key": "TenantId", "Value": tenant_id}],
    )["Credentials"]
    return client_with(
        stack,
        "dynamodb",
        {
            "aws_access_key_id": credentials["AccessKeyId"],
            "aws_secret_access_key": credentials["SecretAccessKey"],
            "aws_session_token": credentials["SessionToken"],
        },
    )


def assert_denied(call: Callable[[], Any]) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    assert error["Error"]["Code"] == "AccessDeniedException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "is not authorized to perform: dynamodb:" in error["Error"]["Message"]
    return caught.value


# ---------------------------------------------------------------- a broken handler
@pytest.fixture
def broken_handler(stack: RunningStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., dict[str, Any]]]:
    """The broken test function, run in-process like the stack runs functions:
    ApiFunctionRole's credentials, the template's environment, the emulator."""
    credentials = role_credentials(stack, function_role("CreateTicketFunction"))
    for name, value in {
        "AWS_ACCESS_KEY_ID": credentials["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": credentials["aws_secret_access_key"],
        "AWS_SESSION_TOKEN": credentials["aws_session_token"],
        "AWS_ENDPOINT_OVERRIDE": stack.state["emulator_url"],
        "TABLE_NAME": stack.state["table_name"],
        "TENANT_ROLE_ARN": stack.state["tenant_role_arn"],
        "ALLOWED_CLIENT_IDS": stack.state["user_pool_client_id"],
        "POWERTOOLS_METRICS_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    tenant_session.cache_clear()
    handler = load_handler(BROKEN_HANDLER, "app.lambda_handler")

    def invoke(caller_tenant: str, body: str) -> dict[str, Any]:
        claims = {
            "cognito:username": f"u-{caller_tenant}",
            "custom:tenant_id": caller_tenant,
            "token_use": "id",
            "aud": stack.state["user_pool_client_id"],
        }
        event = rest_event("POST", "/leak", body=body, claims=claims)
        response: dict[str, Any] = handler(event, LambdaContext(function_name="BrokenFunction"))
        return response

    yield invoke
    get_settings.cache_clear()
    tenant_session.cache_clear()


@pytest.mark.parametrize("pair", PAIRS)
def test_a_broken_handler_is_stopped_by_the_guard(
    stack: RunningStack, broken_handler: Callable[..., dict[str, Any]], pair: Callable[[str], tuple[str, str]]
) -> None:
    caller, victim = pair(new_tenant_id())
    victim_token = stack.token(victim, f"u-{victim}")
    secret = stack.request("POST", "/tickets", token=victim_token, body={"title": "victim's secret"}).body
    # Control: with the caller's own tenant in the body the broken handler works,
    # so the refusals below come from the guard, not from a handler that can't run.
    own = broken_handler(caller, f'{{"tenant_id": "{caller}"}}')
    assert own["statusCode"] == 200, own
    own_id = stack.request("GET", "/tickets", token=stack.token(caller, f"u-{caller}")).body["items"][0]["ticket_id"]
    assert broken_handler(caller, f'{{"tenant_id": "{caller}", "ticket_id": "{own_id}"}}')["statusCode"] == 200
    before = table_items(stack)

    # When: it reads and writes the victim's tickets with the caller's credentials
    read = broken_handler(caller, f'{{"tenant_id": "{victim}", "ticket_id": "{secret["ticket_id"]}"}}')
    write = broken_handler(caller, f'{{"tenant_id": "{victim}"}}')

    # Then: DynamoDB's AccessDenied surfaces as an error; nothing leaked, nothing written
    for response in (read, write):
        assert response["statusCode"] == 403, response
        assert "FORBIDDEN" in response["body"]
        assert "victim's secret" not in response["body"]
    assert table_items(stack) == before


# ---------------------------------------------------------------- tenant credentials, raw
@pytest.mark.parametrize("pair", PAIRS)
def test_tenant_credentials_reach_only_their_own_prefix(
    stack: RunningStack, pair: Callable[[str], tuple[str, str]]
) -> None:
    caller, victim = pair(new_tenant_id())
    table = stack.state["table_name"]
    client = tenant_client(stack, caller)
    mine = {"pk": {"S": f"TENANT#{caller}|TICKET#A"}, "sk": {"S": "SUMMARY"}}
    theirs = {"pk": {"S": f"TENANT#{victim}|TICKET#A"}, "sk": {"S": "SUMMARY"}}
    client.put_item(TableName=table, Item={**mine, "tenant_status": {"S": f"TENANT#{caller}|OPEN"}})
    stack.operator("dynamodb").put_item(
        TableName=table, Item={**theirs, "tenant_status": {"S": f"TENANT#{victim}|OPEN"}}
    )
    assert client.get_item(TableName=table, Key=mine)["Item"]["pk"] == mine["pk"]
    before = table_items(stack)

    assert_denied(lambda: client.get_item(TableName=table, Key=theirs))
    assert_denied(lambda: client.put_item(TableName=table, Item=theirs))
    assert_denied(lambda: client.delete_item(TableName=table, Key=theirs))
    assert_denied(
        lambda: client.update_item(
            TableName=table, Key=theirs, UpdateExpression="SET title = :t", ExpressionAttributeValues={":t": {"S": "x"}}
        )
    )
    assert_denied(
        lambda: client.query(
            TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": theirs["pk"]}
        )
    )
    assert_denied(
        lambda: client.query(
            TableName=table,
            IndexName="GSI1",
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "tenant_status"},
            ExpressionAttributeValues={":s": {"S": f"TENANT#{victim}|OPEN"}},
        )
    )
    assert_denied(
        lambda: client.query(
            TableName=table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": mine["pk"]},
            ExclusiveStartKey=theirs,
        )
    )
    assert_denied(lambda: client.batch_get_item(RequestItems={table: {"Keys": [mine, theirs]}}))
    assert_denied(
        lambda: client.batch_write_item(
            RequestItems={table: [{"PutRequest": {"Item": mine}}, {"DeleteRequest": {"Key": theirs}}]}
        )
    )
    assert_denied(
        lambda: client.transact_write_items(
            TransactItems=[{"Put": {"TableName": table, "Item": mine}}, {"Delete": {"TableName": table, "Key": theirs}}]
        )
    )
    assert_denied(lambda: client.transact_get_items(TransactItems=[{"Get": {"TableName": table, "Key": theirs}}]))
    assert_denied(lambda: client.scan(TableName=table))
    assert_denied(lambda: client.execute_statement(Statement=f'SELECT * FROM "{table}"'))  # noqa: S608
    assert_denied(lambda: client.describe_table(TableName=table))
    assert table_items(stack) == before


def test_the_denial_reads_like_dynamodbs(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    error = assert_denied(lambda: tenant_client(stack, tenant).scan(TableName=stack.state["table_name"]))
    assert error.response["Error"]["Message"] == (
        f"User: arn:aws:sts::123456789012:assumed-role/TenantAccessRole/tenant-{tenant} is not authorized to "
        f"perform: dynamodb:Scan on resource: arn:aws:dynamodb:us-east-1:123456789012:table/SupportTicket "
        "because no identity-based policy allows the dynamodb:Scan action"
    )


# ---------------------------------------------------------------- roles and trust
def test_the_function_role_itself_cannot_read_the_table(stack: RunningStack) -> None:
    client = client_with(stack, "dynamodb", role_credentials(stack, "ApiFunctionRole"))
    key = {"pk": {"S": "TENANT#x|TICKET#A"}, "sk": {"S": "SUMMARY"}}
    assert_denied(lambda: client.get_item(TableName=stack.state["table_name"], Key=key))


@pytest.mark.parametrize(
    "tags",
    [
        pytest.param([], id="no-tag"),
        pytest.param([{"Key": "TenantId", "Value": ""}], id="empty-tag"),
        pytest.param([{"Key": "TenantId", "Value": "a"}, {"Key": "Admin", "Value": "1"}], id="extra-tag"),
    ],
)
def test_the_trust_policy_wants_exactly_a_non_empty_tenant_tag(stack: RunningStack, tags: list[dict[str, str]]) -> None:
    sts = client_with(stack, "sts", role_credentials(stack, "ApiFunctionRole"))
    with pytest.raises(ClientError) as caught:
        sts.assume_role(RoleArn=stack.state["tenant_role_arn"], RoleSessionName="s-1", Tags=tags)
    assert caught.value.response["Error"]["Code"] == "AccessDenied"


@pytest.mark.parametrize("value", ["*", "glo*", "?", "a|b"])
def test_sts_refuses_tag_values_with_wildcards_and_delimiters(stack: RunningStack, value: str) -> None:
    # As STS does: its Tag value pattern is [\p{L}\p{Z}\p{N}_.:/=+\-@]*. So a
    # session tagged "*" (which would read every tenant if the tag were a
    # pattern) never exists, whoever asks, the operator included.
    for sts in (client_with(stack, "sts", role_credentials(stack, "ApiFunctionRole")), stack.operator("sts")):
        with pytest.raises(ClientError) as caught:
            sts.assume_role(
                RoleArn=stack.state["tenant_role_arn"],
                RoleSessionName="s-1",
                Tags=[{"Key": "TenantId", "Value": value}],
            )
        assert caught.value.response["Error"]["Code"] == "ValidationError"
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_a_tenant_session_cannot_become_another_tenant(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    api_sts = client_with(stack, "sts", role_credentials(stack, "ApiFunctionRole"))
    credentials = api_sts.assume_role(
        RoleArn=stack.state["tenant_role_arn"], RoleSessionName="s-1", Tags=[{"Key": "TenantId", "Value": tenant}]
    )["Credentials"]
    tenant_sts = client_with(
        stack,
        "sts",
        {
            "aws_access_key_id": credentials["AccessKeyId"],
            "aws_secret_access_key": credentials["SecretAccessKey"],
            "aws_session_token": credentials["SessionToken"],
        },
    )
    with pytest.raises(ClientError) as caught:
        tenant_sts.assume_role(
            RoleArn=stack.state["tenant_role_arn"], RoleSessionName="s-2", Tags=[{"Key": "TenantId", "Value": "other"}]
        )
    assert caught.value.response["Error"]["Code"] == "AccessDenied"
    with pytest.raises(ClientError):
        tenant_sts.get_session_token()


def test_the_aggregator_role_reaches_aggregate_items_only(stack: RunningStack) -> None:
    client = client_with(stack, "dynamodb", role_credentials(stack, function_role("AggregateCountsFunction")))
    table = stack.state["table_name"]
    tenant = new_tenant_id()
    aggregate = {"pk": {"S": f"TENANT#{tenant}|AGGREGATE"}, "sk": {"S": "OPEN"}}
    client.get_item(TableName=table, Key=aggregate)  # allowed (nothing there yet)
    ticket = {"pk": {"S": f"TENANT#{tenant}|TICKET#A"}, "sk": {"S": "SUMMARY"}}
    assert_denied(lambda: client.get_item(TableName=table, Key=ticket))
    client.put_item(TableName=table, Item=aggregate)  # its own items: counts and journals (put in transactions)
    assert_denied(lambda: client.put_item(TableName=table, Item=ticket))
    assert_denied(lambda: client.put_item(TableName=table, Item={**ticket, "pk": {"S": f"TENANT#{tenant}|CONFIG"}}))
    assert_denied(lambda: client.delete_item(TableName=table, Key=aggregate))


def test_the_aggregator_role_sends_to_its_on_failure_queue_only(stack: RunningStack) -> None:
    # Lambda sends a stream's on-failure records with the function's role; the
    # guard judges sqs:SendMessage on the queue itself, as SQS does.
    sqs = client_with(stack, "sqs", role_credentials(stack, function_role("AggregateCountsFunction")))
    queue = stack.state["failure_queue_url"]
    sqs.send_message(QueueUrl=queue, MessageBody='{"test": "on-failure"}')
    other = stack.operator("sqs").create_queue(QueueName=f"other-{new_tenant_id()}")["QueueUrl"]
    attempts: list[Callable[[], Any]] = [
        lambda: sqs.send_message(QueueUrl=other, MessageBody="x"),
        lambda: sqs.receive_message(QueueUrl=queue),
        lambda: sqs.purge_queue(QueueUrl=queue),
    ]
    for attempt in attempts:
        with pytest.raises(ClientError) as caught:
            attempt()
        assert "is not authorized to perform: sqs:" in caught.value.response["Error"]["Message"]
    received = stack.operator("sqs").receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert '{"test": "on-failure"}' in [message["Body"] for message in received]
