"""The emulator tells only the written tables' stream pollers of a write: the
tables each write request names, read from the body botocore sends, and the
stack's notice to the pollers of those tables alone (``None``: every poller)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders

from local_stack.emulator.server import TABLE_WRITES, written_tables
from local_stack.iam.dynamodb_authorization import table_name
from local_stack.stack import LocalStack

POOL, OWN = "SupportTicket", "SupportTicket-dedicated-10"
OWN_ARN = f"arn:aws:dynamodb:us-east-1:123456789012:table/{OWN}"
ITEM = {"pk": {"S": "TENANT#10|T#1"}, "sk": {"S": "SUMMARY"}}
KEY = {"pk": {"S": "TENANT#10|T#1"}, "sk": {"S": "SUMMARY"}}


def sent(operation: str, **params: Any) -> tuple[str, bytes]:
    """The ``X-Amz-Target`` and body botocore sends for ``operation`` (nothing is sent)."""
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
    )
    captured: dict[str, Any] = {}

    def answer(request: Any, **_: Any) -> AWSResponse:
        captured["target"], captured["body"] = request.headers["X-Amz-Target"], request.body
        return AWSResponse(request.url, 200, HTTPHeaders(), SimpleNamespace(stream=lambda **_: iter([b"{}"])))

    # A before-send handler that answers is what botocore sends no request for.
    client.meta.events.register("before-send", cast(Callable[..., None], answer))
    getattr(client, operation)(**params)
    target = captured["target"].decode() if isinstance(captured["target"], bytes) else captured["target"]
    return target, captured["body"]


@pytest.mark.parametrize(
    ("operation", "params", "tables"),
    [
        pytest.param("put_item", {"TableName": POOL, "Item": ITEM}, {POOL}, id="put"),
        pytest.param(
            "update_item",
            {
                "TableName": OWN_ARN,
                "Key": KEY,
                "UpdateExpression": "SET a = :a",
                "ExpressionAttributeValues": {":a": {"S": "x"}},
            },
            {OWN},
            id="update-by-arn",
        ),
        pytest.param("delete_item", {"TableName": OWN, "Key": KEY}, {OWN}, id="delete"),
        pytest.param(
            "batch_write_item",
            {"RequestItems": {POOL: [{"PutRequest": {"Item": ITEM}}], OWN: [{"DeleteRequest": {"Key": KEY}}]}},
            {POOL, OWN},
            id="batch",
        ),
        pytest.param(
            "transact_write_items",
            {
                "TransactItems": [
                    {"ConditionCheck": {"TableName": POOL, "Key": KEY, "ConditionExpression": "attribute_exists(pk)"}},
                    {"Put": {"TableName": OWN_ARN, "Item": ITEM}},
                    {"Delete": {"TableName": OWN, "Key": KEY}},
                ]
            },
            {POOL, OWN},
            id="transaction",
        ),
    ],
)
def test_a_write_names_the_tables_its_body_names(operation: str, params: dict[str, Any], tables: set[str]) -> None:
    target, body = sent(operation, **params)
    assert target in TABLE_WRITES
    assert written_tables(target, body) == frozenset(tables)


def test_partiql_and_bodies_dynamodb_would_refuse_name_no_table_so_every_table_may_be_written() -> None:
    target, body = sent("execute_statement", Statement=f"INSERT INTO \"{OWN}\" VALUE {{'pk': 'a', 'sk': 'b'}}")
    assert target in TABLE_WRITES
    assert written_tables(target, body) is None
    put = "DynamoDB_20120810.PutItem"
    assert written_tables(put, b"not json") is None
    assert written_tables(put, b'{"Item": {}}') is None
    assert written_tables(put, b'{"TableName": 7}') is None
    assert written_tables("DynamoDB_20120810.TransactWriteItems", b'{"TransactItems": [{"Put": 1}]}') is None


def test_a_table_is_named_by_its_name_its_arn_or_its_streams_arn() -> None:
    assert table_name(OWN) == OWN
    assert table_name(OWN_ARN) == OWN
    assert table_name(f"{OWN_ARN}/stream/2026-12-07T03:02:05.619687") == OWN


class Poller:
    def __init__(self, table: str) -> None:
        self.stream_arn = f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/label"
        self.notified = 0

    def notify(self) -> None:
        self.notified += 1


def test_the_stack_tells_only_the_written_tables_pollers_and_all_when_it_cannot_say() -> None:
    pollers = {
        "AggregateCountsFunction": Poller(POOL),
        "AuditTrailFunction": Poller(POOL),
        f"AggregateCountsFunction@{OWN}": Poller(OWN),
        f"AuditTrailFunction@{OWN}": Poller(OWN),
        "AuditTrailFunction@SupportTicket-dedicated-1": Poller("SupportTicket-dedicated-1"),
    }
    stack = SimpleNamespace(pollers=pollers)
    LocalStack._table_written(stack, frozenset({OWN}))  # type: ignore[arg-type]
    assert {name: poller.notified for name, poller in pollers.items()} == {
        "AggregateCountsFunction": 0,
        "AuditTrailFunction": 0,
        f"AggregateCountsFunction@{OWN}": 1,
        f"AuditTrailFunction@{OWN}": 1,
        "AuditTrailFunction@SupportTicket-dedicated-1": 0,
    }
    LocalStack._table_written(stack, None)  # type: ignore[arg-type]
    assert all(poller.notified >= 1 for poller in pollers.values())
    assert pollers["AggregateCountsFunction"].notified == 1
