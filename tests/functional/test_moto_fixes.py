"""local_stack.emulator.moto_fixes: each fix's bug shown in plain moto (the fix
removed for the duration, :meth:`Fix.removed`), then its absence with the fix.

- Atomic requests: a thread inside moto, and another thread's request runs
  meanwhile in plain moto; with the fix it has to wait for the lock.
- Transactions: plain moto deep-copies the table a transaction names, and a
  cancelled one leaves its records for a stream iterator opened before it
  while the next record reuses a sequence number; with the fix no table is
  copied, every write lands and a cancelled one restores exactly what it wrote.
- SQS: plain moto delivers a FIFO group's later message first once two
  failed messages' visibility ended, and refuses a new visibility timeout to a
  message sent more than 12 hours ago; with the fix the group comes back in
  order and the 12 hours count from the last receive.
- Queries: plain moto examines every item of the table for a query of one
  partition, of the table or of GSI1; with the fix only that partition's items
  are examined, and the answers (pages, order, after every kind of write) are
  plain moto's.
- KMS keys: plain moto generates an RSA key for every KMS key, symmetric ones
  included; with the fix none until an asymmetric operation needs it, and
  then those operations answer as in plain moto.
- SQS sizes: plain moto counts a message's characters, not its UTF-8 bytes and
  attributes, and takes any character; with the fix a message over the queue's
  maximum in bytes, a batch over 1 MiB and a refused character are refused as
  SQS refuses them.
- SQS backlogs: plain moto reads the clock for every message in the queue, many
  times over, on each send and each received message; with the fix a send and a
  receive read it as often with 100 messages in flight as with 10, and the
  counts, the visible messages and the retention check answer as plain moto's.
- AttributeValues: plain moto's JSON walk looks up every member of every
  AttributeValue of an answer (the look-ups grow ten to one with its values);
  with the fix an answer's look-ups do not grow with its items, and every
  answer (each kind of value, binary ones and nested ones included, each read
  operation and the stream) is the same bytes as plain moto's.
- Tags: plain moto's TagResource appends a tag whose key the table already
  has (``TenantId`` twice); with the fix the value is overwritten, one tag per
  key, and keys differing in case stay two tags, as in DynamoDB.
- API key tags: plain moto's API Gateway TagResource refuses an API key's ARN
  (it reads every ARN as a stage's); with the fix the key's tags are added or
  updated, listed (GetTags, GetApiKey, GetApiKeys) and removed, an unknown
  key is NotFoundException, and a stage's ARN is still moto's.
- Actions: plain moto lists the response class's members on every request;
  with the fix once per class, and every action is still found.
- moto's modules: plain moto's server lists moto's package directory for each
  request; with the fix once, and every answer is plain moto's.
- Requests: plain moto builds every in-process request with werkzeug's test
  EnvironBuilder; with the fix the builder runs once per endpoint and path, every
  request's WSGI environ is the builder's (keys, values, order), those it would
  build otherwise still take it, and every answer is plain moto's.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError
from cryptography.hazmat.primitives.asymmetric import rsa
from moto import backends as moto_backends
from moto.core import serialize as moto_serialize
from moto.core.request import Request as MotoRequest
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.sqs import models as sqs_models
from werkzeug.test import Client, EnvironBuilder

from local_stack.emulator import moto_fixes
from local_stack.emulator.moto_fixes import (
    ACTIONS_FOUND_WITHOUT_LISTING_THE_CLASS,
    API_KEYS_TAKE_TAGS,
    ATOMIC_REQUESTS,
    ATTRIBUTE_VALUES_SERIALIZE_AS_THEY_ARE,
    KMS_KEYS_MAKE_THEIR_PRIVATE_KEY_ON_FIRST_USE,
    MOTO_LOCK,
    MOTO_MODULES_LISTED_ONCE,
    QUERIES_READ_THEIR_PARTITION,
    REQUESTS_BUILT_WITHOUT_THE_TEST_BUILDER,
    SQS_COUNTS_BYTES_AND_REFUSES_WHAT_SQS_REFUSES,
    SQS_RECEIVES_AS_SQS_DOES,
    SQS_REQUESTS_COST_THE_SAME_WITH_A_BACKLOG,
    TAGS_ARE_ONE_PER_KEY,
    TRANSACTIONS_HONOUR_THEIR_CLIENT_REQUEST_TOKEN,
    TRANSACTIONS_UNDO_WHAT_THEY_WROTE,
)
from local_stack.event_sources.sqs_poller import advance_queue_clock
from support_tickets.core import keys
from tests.conftest import REGION, all_items

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

WAIT_S = 30  # a generous bound for a thread to reach a point; never a sleep


class HeldInsideMoto:
    """Makes the next ``GetItem`` that moto serves stop inside the backend until released."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()

    def get_item(self, original: Any, backend: DynamoDBBackend, *args: Any, **kwargs: Any) -> Any:
        self.inside.set()
        assert self.release.wait(WAIT_S), "the test never released the request"
        return original(backend, *args, **kwargs)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldInsideMoto]:
    holder = HeldInsideMoto()
    original = DynamoDBBackend.get_item

    def get_item(backend: DynamoDBBackend, *args: Any, **kwargs: Any) -> Any:
        return holder.get_item(original, backend, *args, **kwargs)

    monkeypatch.setattr(DynamoDBBackend, "get_item", get_item)
    yield holder
    holder.release.set()


def _read_in_a_thread(table_name: str, errors: list[BaseException]) -> threading.Thread:
    def read() -> None:
        try:
            boto3.client("dynamodb", region_name=REGION).get_item(
                TableName=table_name, Key={"pk": {"S": "TENANT#a|X"}, "sk": {"S": "SUMMARY"}}
            )
        except BaseException as exc:  # pragma: no cover - reported by the assertions
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    return reader


def test_in_plain_moto_a_request_runs_while_another_thread_is_inside_moto(
    dynamodb: DynamoDBClient, table_name: str, held: HeldInsideMoto
) -> None:
    errors: list[BaseException] = []
    with ATOMIC_REQUESTS.removed():
        # Given a thread whose GetItem is being served by the in-process moto
        reader = _read_in_a_thread(table_name, errors)
        assert held.inside.wait(WAIT_S)
        # When this thread writes meanwhile, then plain moto serves it inside the other request
        dynamodb.put_item(TableName=table_name, Item={"pk": {"S": "TENANT#a|Y"}, "sk": {"S": "SUMMARY"}})
        assert reader.is_alive()
        held.release.set()
        reader.join(WAIT_S)
    assert errors == []


def test_no_request_can_start_while_another_thread_is_inside_moto(
    dynamodb: DynamoDBClient, table_name: str, held: HeldInsideMoto
) -> None:
    # Given a thread whose GetItem is being served by the in-process moto
    errors: list[BaseException] = []
    reader = _read_in_a_thread(table_name, errors)
    assert held.inside.wait(WAIT_S)

    # When this thread wants moto meanwhile, then it has to wait for the lock
    assert MOTO_LOCK.acquire(blocking=False) is False

    # And once the request is done, moto is free again
    held.release.set()
    reader.join(WAIT_S)
    assert not reader.is_alive()
    assert errors == []
    assert MOTO_LOCK.acquire(blocking=False) is True
    MOTO_LOCK.release()


# ---------------------------------------------------------------- TransactWriteItems costs what it touches
def _item(pk: str, sk: str, **attributes: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}, **{name: {"S": value} for name, value in attributes.items()}}


def _stream_records(dynamodb: DynamoDBClient, table_name: str) -> list[dict[str, Any]]:
    streams: Any = boto3.client("dynamodbstreams", region_name=REGION)
    arn = dynamodb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
    records: list[dict[str, Any]] = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    return records


@pytest.fixture
def table_copies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables deep-copied meanwhile (by name), copied as before."""
    copied: list[str] = []

    def deepcopy(table: Table, memo: dict[int, Any]) -> Table:
        copied.append(table.name)
        clone = cast("Table", Table.__new__(Table))
        memo[id(table)] = clone
        clone.__dict__.update(copy.deepcopy(table.__dict__, memo))
        return clone

    monkeypatch.setattr(Table, "__deepcopy__", deepcopy, raising=False)
    return copied


def _streams() -> Any:
    return boto3.client("dynamodbstreams", region_name=REGION)


def _iterator(dynamodb: DynamoDBClient, table_name: str) -> str:
    arn = dynamodb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
    (shard,) = _streams().describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = _streams().get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
    return str(iterator["ShardIterator"])


def _cancelled_transaction(dynamodb: DynamoDBClient, table_name: str) -> None:
    """A put of a new item, then a put whose condition fails: cancelled."""
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table_name, "Item": _item("TENANT#a|NEW", "SUMMARY")}},
                {
                    "Put": {
                        "TableName": table_name,
                        "Item": _item("TENANT#a|X", "OLD"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )


def _increment(table_name: str, pk: str) -> Any:
    return [
        {
            "Update": {
                "TableName": table_name,
                "Key": {"pk": {"S": pk}, "sk": {"S": "COUNT"}},
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }
    ]


def test_a_transaction_retried_with_its_client_token_is_applied_once(dynamodb: DynamoDBClient, table_name: str) -> None:
    """An SDK retry after a read timeout sends the same token: DynamoDB applies
    the transaction once; plain moto twice. The same token with other items is
    refused; another token is another transaction."""
    pk = "TENANT#a|COUNTER"

    def count() -> str:
        return str(
            dynamodb.get_item(TableName=table_name, Key={"pk": {"S": pk}, "sk": {"S": "COUNT"}})["Item"]["n"]["N"]
        )

    with TRANSACTIONS_HONOUR_THEIR_CLIENT_REQUEST_TOKEN.removed():
        for _ in range(2):
            dynamodb.transact_write_items(TransactItems=_increment(table_name, pk), ClientRequestToken="plain")
        assert count() == "2"
    for _ in range(2):
        dynamodb.transact_write_items(TransactItems=_increment(table_name, pk), ClientRequestToken="once")
    assert count() == "3"
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(TransactItems=_increment(table_name, "TENANT#a|OTHER"), ClientRequestToken="once")
    assert refused.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
    dynamodb.transact_write_items(TransactItems=_increment(table_name, pk), ClientRequestToken="twice")
    assert count() == "4"


def test_in_plain_moto_a_transaction_copies_its_table_and_a_cancelled_one_stays_in_the_stream(
    dynamodb: DynamoDBClient, table_name: str, table_copies: list[str]
) -> None:
    # Given a table, and a stream iterator opened before a transaction
    for number in range(20):
        dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|BULK", f"ITEM#{number:03}"))
    dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|X", "OLD"))
    iterator = _iterator(dynamodb, table_name)
    with TRANSACTIONS_UNDO_WHAT_THEY_WROTE.removed():
        # When plain moto runs a transaction of one item, then it copies the whole table
        dynamodb.transact_write_items(
            TransactItems=[{"Put": {"TableName": table_name, "Item": _item("TENANT#a|X", "NEW")}}]
        )
        assert table_copies == [table_name]
        # And a cancelled transaction's put is still read by the iterator opened before it
        _cancelled_transaction(dynamodb, table_name)
        dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|X", "AFTER"))
    records = _streams().get_records(ShardIterator=iterator)["Records"]
    assert "TENANT#a|NEW" in [record["dynamodb"]["Keys"]["pk"]["S"] for record in records]
    # ...while a new reader finds the next write under the cancelled record's sequence number
    fresh = _stream_records(dynamodb, table_name)
    assert fresh[-1]["dynamodb"]["Keys"]["sk"]["S"] == "AFTER"
    assert fresh[-1]["dynamodb"]["SequenceNumber"] in [record["dynamodb"]["SequenceNumber"] for record in records]


def test_a_cancelled_transaction_is_not_in_the_stream_for_an_iterator_opened_before_it(
    dynamodb: DynamoDBClient, table_name: str
) -> None:
    dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|X", "OLD"))
    iterator = _iterator(dynamodb, table_name)
    _cancelled_transaction(dynamodb, table_name)
    dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|X", "AFTER"))
    records = _streams().get_records(ShardIterator=iterator)["Records"]
    assert [(r["dynamodb"]["Keys"]["pk"]["S"], r["dynamodb"]["Keys"]["sk"]["S"]) for r in records] == [
        ("TENANT#a|X", "OLD"),
        ("TENANT#a|X", "AFTER"),
    ]


def test_a_transaction_copies_no_table_and_applies_every_write(
    dynamodb: DynamoDBClient, table_name: str, table_copies: list[str]
) -> None:
    # Given a table with items the transaction does not touch
    for number in range(50):
        dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|BULK", f"ITEM#{number:03}"))
    dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|X", "OLD", v="1"))
    dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|X", "GONE"))
    before = len(_stream_records(dynamodb, table_name))

    # When a transaction puts, updates, deletes and checks
    dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table_name, "Item": _item("TENANT#a|X", "NEW", v="new")}},
            {
                "Update": {
                    "TableName": table_name,
                    "Key": {"pk": {"S": "TENANT#a|X"}, "sk": {"S": "OLD"}},
                    "UpdateExpression": "SET v = :v",
                    "ExpressionAttributeValues": {":v": {"S": "2"}},
                }
            },
            {"Delete": {"TableName": table_name, "Key": {"pk": {"S": "TENANT#a|X"}, "sk": {"S": "GONE"}}}},
            {
                "ConditionCheck": {
                    "TableName": table_name,
                    "Key": {"pk": {"S": "TENANT#a|BULK"}, "sk": {"S": "ITEM#000"}},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
        ]
    )

    # Then no table was copied, every write landed and streamed, in order
    assert table_copies == []
    items = dynamodb.query(
        TableName=table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "TENANT#a|X"}},
    )["Items"]
    assert {(item["sk"]["S"], item.get("v", {}).get("S")) for item in items} == {("NEW", "new"), ("OLD", "2")}
    new_records = _stream_records(dynamodb, table_name)[before:]
    assert [(r["eventName"], r["dynamodb"]["Keys"]["sk"]["S"]) for r in new_records] == [
        ("INSERT", "NEW"),
        ("MODIFY", "OLD"),
        ("REMOVE", "GONE"),
    ]


def test_a_cancelled_transaction_restores_exactly_the_items_it_wrote_and_streams_nothing(
    dynamodb: DynamoDBClient, table_name: str, table_copies: list[str]
) -> None:
    # Given items, some of which a transaction will write before it is cancelled
    dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|X", "OLD", v="1"))
    dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|X", "GONE", v="g"))
    dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|OTHER", "KEEP", v="k"))
    table_before = all_items(dynamodb, table_name)
    records_before = _stream_records(dynamodb, table_name)

    # When its last operation fails its condition, after the others were applied
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException) as cancelled:
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table_name, "Item": _item("TENANT#a|NEWHASH", "NEW", v="n")}},
                {"Put": {"TableName": table_name, "Item": _item("TENANT#a|X", "NEW", v="n")}},
                {
                    "Update": {
                        "TableName": table_name,
                        "Key": {"pk": {"S": "TENANT#a|X"}, "sk": {"S": "OLD"}},
                        "UpdateExpression": "SET v = :v, w = :v",
                        "ExpressionAttributeValues": {":v": {"S": "2"}},
                    }
                },
                {"Delete": {"TableName": table_name, "Key": {"pk": {"S": "TENANT#a|X"}, "sk": {"S": "GONE"}}}},
                {
                    "Put": {
                        "TableName": table_name,
                        "Item": _item("TENANT#a|OTHER", "KEEP", v="lost"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )

    # Then the reasons name the failed operation only, as DynamoDB does
    reasons = [reason["Code"] for reason in cancelled.value.response["CancellationReasons"]]
    assert reasons == ["None", "None", "None", "None", "ConditionalCheckFailed"]
    # And every item is as it was (the updated one unchanged, the deleted one back, the new ones absent)
    assert all_items(dynamodb, table_name) == table_before
    # And the stream holds nothing of the cancelled writes; the next write streams normally
    assert _stream_records(dynamodb, table_name) == records_before
    dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|X", "AFTER"))
    after = _stream_records(dynamodb, table_name)[len(records_before) :]
    assert [(r["eventName"], r["dynamodb"]["Keys"]["sk"]["S"]) for r in after] == [("INSERT", "AFTER")]
    assert int(after[0]["dynamodb"]["SequenceNumber"]) > int(records_before[-1]["dynamodb"]["SequenceNumber"])
    assert table_copies == []


def test_a_transaction_naming_one_item_twice_is_a_validation_error_and_changes_nothing(
    dynamodb: DynamoDBClient, table_name: str
) -> None:
    dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|X", "OLD", v="1"))
    table_before = all_items(dynamodb, table_name)
    with pytest.raises(dynamodb.exceptions.ClientError, match="ValidationException"):
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table_name, "Item": _item("TENANT#a|X", "NEW")}},
                {"Delete": {"TableName": table_name, "Key": {"pk": {"S": "TENANT#a|X"}, "sk": {"S": "NEW"}}}},
            ]
        )
    assert all_items(dynamodb, table_name) == table_before


# ---------------------------------------------------------------- a Query reads its partition only
@pytest.fixture
def examined(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many items each query was given to examine: plain moto's
    ``Table.all_items()``, or the partition the fix gives it instead."""
    counts: list[int] = []

    def counted(function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            items = function(*args, **kwargs)
            counts.append(len(items))
            return items

        return wrapper

    monkeypatch.setattr(Table, "all_items", counted(Table.all_items))
    monkeypatch.setattr(moto_fixes, "_partition_items", counted(moto_fixes._partition_items))
    monkeypatch.setattr(moto_fixes._IndexPartitions, "items", counted(moto_fixes._IndexPartitions.items))
    return counts


def _ticket(tenant: str, number: int, status: str, resolver: str = keys.UNASSIGNED_RESOLVER) -> dict[str, Any]:
    return {
        **_item(keys.ticket_pk(tenant, f"T{number:03}"), keys.SUMMARY_SK),
        "tenant_status": {"S": keys.tenant_status(tenant, status)},
        "resolver": {"S": resolver},
    }


def _index_query(
    dynamodb: DynamoDBClient, table_name: str, partition: str, **kwargs: Any
) -> tuple[list[str], dict[str, Any] | None]:
    found = dynamodb.query(
        TableName=table_name,
        IndexName=keys.GSI1_NAME,
        KeyConditionExpression="tenant_status = :s",
        ExpressionAttributeValues={":s": {"S": partition}},
        **kwargs,
    )
    return [item["pk"]["S"] for item in found["Items"]], found.get("LastEvaluatedKey")


@pytest.fixture
def tickets(dynamodb: DynamoDBClient, table_name: str) -> int:
    """Tickets of tenants 1 and 10 in two statuses, with comments (not in GSI1): the item count."""
    count = 0
    for tenant in ("1", "10"):
        for number in range(12):
            status = "OPEN" if number % 3 else "CLOSED"
            dynamodb.put_item(TableName=table_name, Item=_ticket(tenant, number, status, f"user{number % 4}"))
            dynamodb.put_item(TableName=table_name, Item=_item(keys.ticket_pk(tenant, f"T{number:03}"), "COMMENT#1"))
            count += 2
    return count


def test_in_plain_moto_a_query_examines_every_item_of_the_table(
    dynamodb: DynamoDBClient, table_name: str, tickets: int, examined: list[int]
) -> None:
    with QUERIES_READ_THEIR_PARTITION.removed():
        examined.clear()
        dynamodb.query(
            TableName=table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": keys.ticket_pk("1", "T001")}},
        )
        assert examined == [tickets]
        examined.clear()
        _index_query(dynamodb, table_name, keys.tenant_status("1", "OPEN"))
        assert examined == [tickets]


def test_a_table_query_examines_its_partition_only_in_order_with_pages_either_way(
    dynamodb: DynamoDBClient, table_name: str, examined: list[int]
) -> None:
    # Given a partition among others
    for number in range(7):
        dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|P", f"C#{number}"))
        dynamodb.put_item(TableName=table_name, Item=_item(f"TENANT#a|Q{number}", "SUMMARY"))

    def page(**kwargs: Any) -> tuple[list[str], dict[str, Any] | None]:
        found = dynamodb.query(
            TableName=table_name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :c)",
            ExpressionAttributeValues={":pk": {"S": "TENANT#a|P"}, ":c": {"S": "C#"}},
            Limit=3,
            **kwargs,
        )
        return [item["sk"]["S"] for item in found["Items"]], found.get("LastEvaluatedKey")

    # When it is read in pages, forwards and backwards, then every item comes once, in key order
    examined.clear()
    for forward, expected in ((True, [f"C#{n}" for n in range(7)]), (False, [f"C#{n}" for n in reversed(range(7))])):
        seen: list[str] = []
        start: dict[str, Any] | None = None
        while True:
            keys_, start = page(ScanIndexForward=forward, **({"ExclusiveStartKey": start} if start else {}))
            seen += keys_
            if start is None:
                break
        assert seen == expected
    # And each page examined the partition's 7 items, never the table's 14
    assert set(examined) == {7}
    # And a partition that does not exist is empty
    empty = dynamodb.query(
        TableName=table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "TENANT#a|NONE"}},
    )
    assert empty["Items"] == []


def test_an_index_query_examines_its_index_partition_only_with_pages_either_way(
    dynamodb: DynamoDBClient, table_name: str, tickets: int, examined: list[int]
) -> None:
    open_1 = keys.tenant_status("1", "OPEN")
    with QUERIES_READ_THEIR_PARTITION.removed():
        expected = {
            forward: _index_query(dynamodb, table_name, open_1, ScanIndexForward=forward)[0]
            for forward in (True, False)
        }
    # The index's first query builds its partitions from the table, once
    _index_query(dynamodb, table_name, keys.tenant_status("10", "CLOSED"))
    examined.clear()
    for forward in (True, False):
        seen: list[str] = []
        start: dict[str, Any] | None = None
        while True:
            extra = {"ExclusiveStartKey": start} if start else {}
            page, start = _index_query(dynamodb, table_name, open_1, Limit=3, ScanIndexForward=forward, **extra)
            seen += page
            if start is None:
                break
        # Every ticket of tenant 1's OPEN partition once, in plain moto's order, none of tenant 10's
        assert seen == expected[forward]
        assert len(seen) == 8
        assert all(pk.startswith(keys.tenant_prefix("1")) for pk in seen)
    # And each page examined that partition's 8 items, not the table's
    assert set(examined) == {8}
    assert _index_query(dynamodb, table_name, keys.tenant_status("1", "IN_PROGRESS"))[0] == []


def _moto_table(table_name: str) -> Table:
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    table: Table = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].get_table(table_name)
    return table


def _answers_agree(table: Table, partitions: list[str]) -> None:
    """The fixed query and plain moto's give the same items, counts and last
    keys for every partition, both ways, on moto's model (no index reset)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    plain_query = QUERIES_READ_THEIR_PARTITION.patches[0].original
    for partition in partitions:
        for forward in (True, False):
            for limit in (1000, 2):
                args: tuple[Any, ...] = (None, None, [], limit, None, forward, None, keys.GSI1_NAME)
                conditions: dict[str, Any] = {"hash_key_conditions": [("tenant_status", DynamoType({"S": partition}))]}
                fixed_items, fixed_count, fixed_last = table.query(*args, **conditions)
                plain_items, plain_count, plain_last = plain_query(table, *args, **conditions)
                assert [item.to_json() for item in fixed_items] == [item.to_json() for item in plain_items], partition
                assert (fixed_count, fixed_last) == (plain_count, plain_last)


def test_index_partitions_follow_every_kind_of_write(dynamodb: DynamoDBClient, table_name: str, tickets: int) -> None:
    table = _moto_table(table_name)
    partitions = [keys.tenant_status(tenant, status) for tenant in ("1", "10") for status in ("OPEN", "CLOSED")]
    _index_query(dynamodb, table_name, partitions[0])  # builds the index
    _answers_agree(table, partitions)
    key_1 = {"pk": {"S": keys.ticket_pk("1", "T001")}, "sk": {"S": keys.SUMMARY_SK}}
    closed = {":s": {"S": keys.tenant_status("1", "CLOSED")}}

    def update(key: dict[str, Any], expression: str, values: dict[str, Any] | None = None) -> None:
        extra: dict[str, Any] = {"ExpressionAttributeValues": values} if values else {}
        dynamodb.update_item(TableName=table_name, Key=key, UpdateExpression=expression, **extra)

    # An update moves a ticket between partitions in place; another takes one out of the index
    update(key_1, "SET tenant_status = :s", closed)
    update({**key_1, "pk": {"S": keys.ticket_pk("1", "T002")}}, "REMOVE tenant_status")
    _answers_agree(table, partitions)
    # An update of a missing item creates it in a partition; a put replaces an item under another status
    update(
        {"pk": {"S": keys.ticket_pk("10", "T900")}, "sk": {"S": "SUMMARY"}},
        "SET tenant_status = :s, resolver = :r",
        {":s": {"S": keys.tenant_status("10", "OPEN")}, ":r": {"S": "user9"}},
    )
    dynamodb.put_item(TableName=table_name, Item=_ticket("10", 4, "CLOSED"))
    dynamodb.delete_item(TableName=table_name, Key={"pk": {"S": keys.ticket_pk("10", "T005")}, "sk": {"S": "SUMMARY"}})
    _answers_agree(table, partitions)
    # A batch puts and deletes
    dynamodb.batch_write_item(
        RequestItems={
            table_name: [
                {"PutRequest": {"Item": _ticket("1", 50, "OPEN")}},
                {"DeleteRequest": {"Key": {"pk": {"S": keys.ticket_pk("1", "T004")}, "sk": {"S": "SUMMARY"}}}},
            ]
        }
    )
    _answers_agree(table, partitions)
    # A transaction moves a ticket; a cancelled one moves another and is undone
    key_7 = {"pk": {"S": keys.ticket_pk("1", "T007")}, "sk": {"S": keys.SUMMARY_SK}}
    dynamodb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table_name,
                    "Key": key_7,
                    "UpdateExpression": "SET tenant_status = :s",
                    "ExpressionAttributeValues": closed,
                }
            }
        ]
    )
    key_8 = {"pk": {"S": keys.ticket_pk("1", "T008")}, "sk": {"S": keys.SUMMARY_SK}}
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table_name,
                        "Key": key_8,
                        "UpdateExpression": "SET tenant_status = :s",
                        "ExpressionAttributeValues": closed,
                    }
                },
                {
                    "Put": {
                        "TableName": table_name,
                        "Item": _ticket("1", 50, "CLOSED"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {"Delete": {"TableName": table_name, "Key": key_1}},
            ]
        )
    _answers_agree(table, partitions)
    # PartiQL writes through the table too
    dynamodb.execute_statement(
        Statement=f'UPDATE "{table_name}" SET tenant_status = ? WHERE pk = ? AND sk = ?',  # noqa: S608 - the test's table
        Parameters=[closed[":s"], {"S": keys.ticket_pk("10", "T007")}, {"S": "SUMMARY"}],
    )
    _answers_agree(table, partitions)


# ---------------------------------------------------------------- KMS private keys on first use
@pytest.fixture
def rsa_keys_generated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many RSA private keys have been generated since the test began."""
    generated: list[int] = []
    original = rsa.generate_private_key

    def counting(*args: Any, **kwargs: Any) -> Any:
        generated.append(kwargs.get("key_size", args[1] if len(args) > 1 else 0))
        return original(*args, **kwargs)

    monkeypatch.setattr(rsa, "generate_private_key", counting)
    return generated


def test_in_plain_moto_every_kms_key_generates_an_rsa_key(aws: None, rsa_keys_generated: list[int]) -> None:
    kms = boto3.client("kms", region_name=REGION)
    with KMS_KEYS_MAKE_THEIR_PRIVATE_KEY_ON_FIRST_USE.removed():
        kms.create_key(Description="symmetric")
    assert rsa_keys_generated == [2048]


def test_a_symmetric_key_generates_none_and_still_encrypts(aws: None, rsa_keys_generated: list[int]) -> None:
    kms = boto3.client("kms", region_name=REGION)
    key_id = kms.create_key(Description="symmetric")["KeyMetadata"]["KeyId"]
    context = {"tenant_id": "1"}
    blob = kms.encrypt(KeyId=key_id, Plaintext=b"secret", EncryptionContext=context)["CiphertextBlob"]
    assert kms.decrypt(CiphertextBlob=blob, EncryptionContext=context)["Plaintext"] == b"secret"
    assert rsa_keys_generated == []


def test_an_asymmetric_key_generates_its_key_when_first_used_and_signs_as_before(
    aws: None, rsa_keys_generated: list[int]
) -> None:
    kms = boto3.client("kms", region_name=REGION)
    key_id = kms.create_key(KeySpec="RSA_3072", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
    assert rsa_keys_generated == []
    signed = kms.sign(KeyId=key_id, Message=b"m", SigningAlgorithm="RSASSA_PSS_SHA_256")["Signature"]
    assert rsa_keys_generated == [3072]
    verify = kms.verify(KeyId=key_id, Message=b"m", Signature=signed, SigningAlgorithm="RSASSA_PSS_SHA_256")
    assert verify["SignatureValid"] is True
    assert kms.get_public_key(KeyId=key_id)["PublicKey"]
    assert rsa_keys_generated == [3072]  # once


# ---------------------------------------------------------------- SQS receives as SQS does
def _fifo_queue(sqs: Any, name: str) -> str:
    url: str = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"})[
        "QueueUrl"
    ]
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{n}", MessageGroupId="g", MessageDeduplicationId=f"m{n}")
    return url


def _receive_bodies(sqs: Any, url: str) -> list[str]:
    answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    return [message["Body"] for message in answer.get("Messages", [])]


def _fail_m1_and_m2_then_let_their_visibility_end(sqs: Any, url: str) -> list[str]:
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [message["Body"] for message in messages] == ["m0", "m1", "m2"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[0]["ReceiptHandle"])
    advance_queue_clock(31)
    return _receive_bodies(sqs, url)


def test_in_plain_moto_a_fifo_group_comes_back_out_of_order(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = _fifo_queue(sqs, "plain-order")
    with SQS_RECEIVES_AS_SQS_DOES.removed():
        assert _fail_m1_and_m2_then_let_their_visibility_end(sqs, url) == ["m2"]


def test_a_fifo_group_whose_visibility_ended_comes_back_in_order(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = _fifo_queue(sqs, "fixed-order")
    assert _fail_m1_and_m2_then_let_their_visibility_end(sqs, url) == ["m1", "m2"]


def _retry_a_day_later(sqs: Any, url: str) -> None:
    advance_queue_clock(24 * 3600)
    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=3600)


def test_in_plain_moto_a_message_sent_a_day_ago_can_never_be_hidden_again(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="plain-day")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="retry me")
    with SQS_RECEIVES_AS_SQS_DOES.removed(), pytest.raises(ClientError, match="beyond the limit"):
        _retry_a_day_later(sqs, url)


def test_twelve_hours_of_visibility_count_from_the_last_receive(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="fixed-day")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="retry me")
    _retry_a_day_later(sqs, url)
    advance_queue_clock(3601)
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=43000)
    advance_queue_clock(600)  # 10 minutes later, 43,000 s more would end 12 h 10 min after the receive
    with pytest.raises(ClientError, match="beyond the limit"):
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=43000)


# ---------------------------------------------------------------- SQS counts bytes
EMOJI = "\U0001f600"  # 1 character, 4 bytes in UTF-8


def _small_fifo_queue(sqs: Any, name: str) -> str:
    attributes = {"FifoQueue": "true", "MaximumMessageSize": "1024"}
    url: str = sqs.create_queue(QueueName=f"{name}.fifo", Attributes=attributes)["QueueUrl"]
    return url


def _send(sqs: Any, url: str, body: str, **attributes: str) -> Any:
    message_attributes = {name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()}
    return sqs.send_message(
        QueueUrl=url,
        MessageBody=body,
        MessageGroupId="g",
        MessageDeduplicationId=str(len(body)),
        MessageAttributes=message_attributes,
    )


def _batch_of_emoji(count: int) -> list[dict[str, str]]:
    # 4 entries of ``count`` emoji: count characters each, 16 x count bytes in all
    return [
        {"Id": str(n), "MessageBody": EMOJI * count, "MessageGroupId": "g", "MessageDeduplicationId": str(n)}
        for n in range(4)
    ]


def test_in_plain_moto_sizes_are_characters_and_any_character_goes(aws: None) -> None:
    sqs: Any = boto3.client("sqs", region_name=REGION)
    url = _small_fifo_queue(sqs, "plain-bytes")
    with SQS_COUNTS_BYTES_AND_REFUSES_WHAT_SQS_REFUSES.removed():
        _send(sqs, url, EMOJI * 1000)  # 4,000 bytes into a queue of 1,024
        _send(sqs, url, "x" * 1000, padding="y" * 100)  # 1,100 bytes with the attribute
        _send(sqs, url, "not \ufffe allowed")
        big = sqs.create_queue(QueueName="plain-batch.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        assert len(sqs.send_message_batch(QueueUrl=big, Entries=_batch_of_emoji(75_000))["Successful"]) == 4


def test_sizes_are_utf8_bytes_with_the_attributes_and_refused_characters_are_refused(aws: None) -> None:
    sqs: Any = boto3.client("sqs", region_name=REGION)
    url = _small_fifo_queue(sqs, "fixed-bytes")
    with pytest.raises(ClientError, match="shorter than 1024 bytes"):
        _send(sqs, url, EMOJI * 257)  # 1,028 bytes
    _send(sqs, url, EMOJI * 256)  # 1,024 bytes: the maximum itself goes
    with pytest.raises(ClientError, match="shorter than 1024 bytes"):
        _send(sqs, url, "x" * 1000, padding="y" * 100)
    for refused in ("\ufffe", "\uffff", "\x00", "\x0b", "\x1f"):
        with pytest.raises(ClientError) as caught:
            _send(sqs, url, f"not {refused} allowed")
        assert caught.value.response["Error"]["Code"] == "InvalidMessageContents"
    _send(sqs, url, "\t\n\r \x7f\ud7ff\ue000\ufffd" + EMOJI)  # the edges of the allowed set
    big = sqs.create_queue(QueueName="fixed-batch.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    with pytest.raises(ClientError) as too_long:
        sqs.send_message_batch(QueueUrl=big, Entries=_batch_of_emoji(75_000))  # 1,200,000 bytes
    assert too_long.value.response["Error"]["Code"].endswith("BatchRequestTooLong")
    assert len(sqs.send_message_batch(QueueUrl=big, Entries=_batch_of_emoji(65_536))["Successful"]) == 4  # 1 MiB
    entries = [
        {"Id": "ok", "MessageBody": "fine", "MessageGroupId": "g", "MessageDeduplicationId": "ok"},
        {"Id": "bad", "MessageBody": "\ufffe", "MessageGroupId": "g", "MessageDeduplicationId": "bad"},
    ]
    answer = sqs.send_message_batch(QueueUrl=big, Entries=entries)
    assert [entry["Id"] for entry in answer["Successful"]] == ["ok"]
    assert [(entry["Id"], entry["Code"], entry["SenderFault"]) for entry in answer["Failed"]] == [
        ("bad", "InvalidMessageContents", True)
    ]


# ---------------------------------------------------------------- SQS requests cost the same with a backlog
@pytest.fixture
def clock_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often moto's SQS read its clock (``unix_time`` or ``unix_time_millis``, as
    ``moto.sqs.models`` calls them, the queue clock's offset included): one count."""
    reads = [0]
    namespace = vars(sqs_models)
    for name in ("unix_time", "unix_time_millis"):
        clock = namespace[name]

        def counted(dt: Any = None, clock: Any = clock) -> Any:
            reads[0] += 1
            return clock(dt)

        monkeypatch.setitem(namespace, name, counted)
    return reads


def _reads_of_a_send_and_a_receive(
    sqs: Any, in_flight: int, reads: list[int], measured: Callable[[], AbstractContextManager[None]] = nullcontext
) -> int:
    """A FIFO queue with ``in_flight`` messages received and not deleted (other groups):
    the clock reads of one SendMessage and of the ReceiveMessage that returns it (made
    within ``measured``)."""
    url: str = sqs.create_queue(
        QueueName=f"backlog-{in_flight}-{reads[0]}.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "180"}
    )["QueueUrl"]
    for start in range(0, in_flight, 10):
        entries = [
            {"Id": str(n), "MessageBody": "deferred", "MessageGroupId": f"a{n}", "MessageDeduplicationId": f"a{n}"}
            for n in range(start, min(start + 10, in_flight))
        ]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]) == len(entries)
    with measured():
        before = reads[0]
        sqs.send_message(QueueUrl=url, MessageBody="b's event", MessageGroupId="b", MessageDeduplicationId="b")
        assert _receive_bodies(sqs, url) == ["b's event"]
        return reads[0] - before


def test_in_plain_moto_a_send_and_a_receive_read_the_clock_for_every_message_in_flight(
    aws: None, clock_reads: list[int]
) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    plain = SQS_REQUESTS_COST_THE_SAME_WITH_A_BACKLOG.removed
    few = _reads_of_a_send_and_a_receive(sqs, 10, clock_reads, plain)
    many = _reads_of_a_send_and_a_receive(sqs, 100, clock_reads, plain)
    # The send and the received message each work out the queue's attributes three times
    # (three walks over every message each): 22 reads more per message in flight here.
    assert many - few >= 10 * (100 - 10)


def test_a_send_and_a_receive_read_the_clock_as_often_whatever_the_backlog(aws: None, clock_reads: list[int]) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    assert _reads_of_a_send_and_a_receive(sqs, 100, clock_reads) == _reads_of_a_send_and_a_receive(sqs, 10, clock_reads)


def _counts_then_bodies(sqs: Any, name: str) -> tuple[dict[str, str], list[str], list[str]]:
    """A queue (60 s retention) with a message in flight, one visible and one delayed: its
    approximate counts, what a receive then returns, and what one returns after the
    retention period (the queue clock moved on)."""
    url = sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
    for body in ("received", "waiting"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=30)
    assert [message["Body"] for message in sqs.receive_message(QueueUrl=url)["Messages"]] == ["received"]
    counts = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    visible = _receive_bodies(sqs, url)
    advance_queue_clock(61)
    return counts, visible, _receive_bodies(sqs, url)


def test_the_counts_the_visible_messages_and_the_retention_answer_as_plain_moto(aws: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    with SQS_REQUESTS_COST_THE_SAME_WITH_A_BACKLOG.removed():
        plain = _counts_then_bodies(sqs, "plain-counted")
    fixed = _counts_then_bodies(sqs, "fixed-counted")
    assert fixed == plain
    counts, visible, past_retention = fixed
    assert set(counts.values()) == {"1"}  # one visible, one in flight, one delayed
    assert (visible, past_retention) == (["waiting"], [])


# ---------------------------------------------------------------- AttributeValues
@pytest.fixture
def look_ups(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times moto's JSON walk looked a member's value up (its attribute picker)."""
    counted = [0]
    picker = moto_serialize.AttributePicker.__call__

    def counting(self: Any, context: Any) -> Any:
        counted[0] += 1
        return picker(self, context)

    monkeypatch.setattr(moto_serialize.AttributePicker, "__call__", counting)
    return counted


def _slot_items(dynamodb: DynamoDBClient, table_name: str, count: int) -> None:
    for number in range(count):
        dynamodb.put_item(
            TableName=table_name,
            Item={
                "pk": {"S": "TENANT#1|LOOKUPS"},
                "sk": {"S": f"SLOT#{number:03d}"},
                "holder": {"S": "01M8E2JCH6DAC8K918Q2S67E6V"},
                "held_until": {"N": "1800000000.125"},
                "expiration": {"N": "1800003600"},
            },
        )


def _look_ups_of_a_query(dynamodb: DynamoDBClient, table_name: str, look_ups: list[int]) -> int:
    before = look_ups[0]
    dynamodb.query(
        TableName=table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "TENANT#1|LOOKUPS"}},
        ConsistentRead=True,
    )
    return look_ups[0] - before


def test_in_plain_moto_an_answer_looks_up_every_member_of_every_attribute_value(
    dynamodb: DynamoDBClient, table_name: str, look_ups: list[int]
) -> None:
    with ATTRIBUTE_VALUES_SERIALIZE_AS_THEY_ARE.removed():
        _slot_items(dynamodb, table_name, 10)
        few = _look_ups_of_a_query(dynamodb, table_name, look_ups)
        _slot_items(dynamodb, table_name, 100)
        many = _look_ups_of_a_query(dynamodb, table_name, look_ups)
    # Five values an item, each an AttributeValue of ten members looked up.
    assert many - few >= 90 * 5 * 10


def test_an_answers_look_ups_do_not_grow_with_its_items(
    dynamodb: DynamoDBClient, table_name: str, look_ups: list[int]
) -> None:
    _slot_items(dynamodb, table_name, 10)
    few = _look_ups_of_a_query(dynamodb, table_name, look_ups)
    _slot_items(dynamodb, table_name, 100)
    assert _look_ups_of_a_query(dynamodb, table_name, look_ups) == few


EVERY_KIND: dict[str, Any] = {
    "pk": {"S": "TENANT#1|KINDS"},
    "sk": {"S": "ITEM"},
    "text": {"S": "caf\u00e9 \U0001f600 \u4e2d"},
    "empty": {"S": ""},
    "number": {"N": "-12345678901234567890.123456789"},
    "flag": {"BOOL": False},
    "nothing": {"NULL": True},
    "strings": {"SS": ["b", "a"]},
    "numbers": {"NS": ["1", "2.5"]},
    "blob": {"B": b"\x00\xff binary"},
    "blobs": {"BS": [b"\x01", b"\x02"]},
    "map": {"M": {"inner": {"L": [{"S": "x"}, {"N": "1"}, {"M": {}}, {"L": []}]}, "deep": {"M": {"b": {"B": b"z"}}}}},
    "list": {"L": [{"BOOL": True}, {"SS": ["only"]}, {"NULL": True}]},
}


def _answers(dynamodb: DynamoDBClient, table_name: str) -> list[bytes]:
    """The raw bodies of each read of an item holding every kind of value."""
    bodies: list[bytes] = []
    client = boto3.client("dynamodb", region_name=REGION)
    client.meta.events.register(
        "after-call.dynamodb.*", lambda http_response, **_: bodies.append(http_response.content)
    )
    key: dict[str, Any] = {"pk": EVERY_KIND["pk"], "sk": EVERY_KIND["sk"]}
    client.put_item(TableName=table_name, Item=EVERY_KIND)
    client.get_item(TableName=table_name, Key=key)
    client.query(
        TableName=table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": EVERY_KIND["pk"]},
        ProjectionExpression="sk, #map.inner, #blob, #list",
        ExpressionAttributeNames={"#map": "map", "#list": "list", "#blob": "blob"},
    )
    client.batch_get_item(RequestItems={table_name: {"Keys": [key]}})
    client.transact_get_items(TransactItems=[{"Get": {"TableName": table_name, "Key": key}}])
    client.update_item(
        TableName=table_name,
        Key=key,
        UpdateExpression="SET flag = :true",
        ExpressionAttributeValues={":true": {"BOOL": True}},
        ReturnValues="ALL_NEW",
    )
    client.delete_item(TableName=table_name, Key=key, ReturnValues="ALL_OLD")
    return bodies


def test_every_answer_is_the_same_bytes_as_plain_moto(dynamodb: DynamoDBClient, table_name: str) -> None:
    with ATTRIBUTE_VALUES_SERIALIZE_AS_THEY_ARE.removed():
        plain = _answers(dynamodb, table_name)
    fixed = _answers(dynamodb, table_name)
    assert len(fixed) == 7
    assert fixed == plain
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    arn = dynamodb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]

    def records() -> bytes:
        bodies: list[bytes] = []
        streams.meta.events.register_first(
            "after-call.dynamodbstreams.GetRecords", lambda http_response, **_: bodies.append(http_response.content)
        )
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        streams.get_records(ShardIterator=iterator["ShardIterator"])
        return bodies[-1]

    def without_iterator(body: bytes) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(body)
        answer.pop("NextShardIterator")  # a new one each call
        return answer

    with ATTRIBUTE_VALUES_SERIALIZE_AS_THEY_ARE.removed():
        plain_records = without_iterator(records())
    assert len(plain_records["Records"]) >= 3  # the put, the update, the delete
    assert without_iterator(records()) == plain_records


# ---------------------------------------------------------------- one tag per key
def _retag(dynamodb: DynamoDBClient, table_name: str) -> list[dict[str, str]]:
    """The table's tags after ``TenantId=10``, ``TenantId=1`` and ``tenantid=10``."""
    arn = dynamodb.describe_table(TableName=table_name)["Table"]["TableArn"]
    dynamodb.tag_resource(ResourceArn=arn, Tags=[{"Key": "TenantId", "Value": "10"}])
    dynamodb.tag_resource(ResourceArn=arn, Tags=[{"Key": "TenantId", "Value": "1"}])
    dynamodb.tag_resource(ResourceArn=arn, Tags=[{"Key": "tenantid", "Value": "10"}])
    return cast("list[dict[str, str]]", dynamodb.list_tags_of_resource(ResourceArn=arn)["Tags"])


def test_in_plain_moto_tag_resource_adds_a_second_tag_of_a_key_the_table_has(
    dynamodb: DynamoDBClient, table_name: str
) -> None:
    with TAGS_ARE_ONE_PER_KEY.removed():
        tags = _retag(dynamodb, table_name)
    assert [tag for tag in tags if tag["Key"] == "TenantId"] == [
        {"Key": "TenantId", "Value": "10"},
        {"Key": "TenantId", "Value": "1"},
    ]


def test_tag_resource_overwrites_the_value_of_a_key_and_keys_are_case_sensitive(
    dynamodb: DynamoDBClient, table_name: str
) -> None:
    assert _retag(dynamodb, table_name) == [{"Key": "TenantId", "Value": "1"}, {"Key": "tenantid", "Value": "10"}]


# ---------------------------------------------------------------- API key tags
def _api_key_arn(key_id: str) -> str:
    return f"arn:aws:apigateway:{REGION}::/apikeys/{key_id}"


def test_in_plain_moto_an_api_key_takes_no_tags(aws: None) -> None:
    apigateway = boto3.client("apigateway", region_name=REGION)
    key = apigateway.create_api_key(name="st.1", enabled=True, tags={"stack": "st", "tenant": "1"})
    with API_KEYS_TAKE_TAGS.removed(), pytest.raises(ClientError, match="Invalid Rest API Id"):
        apigateway.tag_resource(resourceArn=_api_key_arn(key["id"]), tags={"offboarded": "1795000000"})


def test_an_api_key_takes_tags_lists_them_and_loses_them(aws: None) -> None:
    apigateway = boto3.client("apigateway", region_name=REGION)
    key = apigateway.create_api_key(name="st.1", enabled=True, tags={"stack": "st", "tenant": "1"})
    other = apigateway.create_api_key(name="st.10", enabled=True, tags={"stack": "st", "tenant": "10"})
    arn = _api_key_arn(key["id"])
    # added, and a key's value updated ("adds or updates a tag")
    apigateway.tag_resource(resourceArn=arn, tags={"offboarded": "1795000000", "stack": "st2"})
    tags = {"stack": "st2", "tenant": "1", "offboarded": "1795000000"}
    assert apigateway.get_tags(resourceArn=arn)["tags"] == tags
    assert apigateway.get_api_key(apiKey=key["id"])["tags"] == tags
    listed = {item["id"]: item["tags"] for item in apigateway.get_api_keys(nameQuery="st.")["items"]}
    assert listed == {key["id"]: tags, other["id"]: {"stack": "st", "tenant": "10"}}
    # removed
    apigateway.untag_resource(resourceArn=arn, tagKeys=["stack", "absent"])
    assert apigateway.get_tags(resourceArn=arn)["tags"] == {"tenant": "1", "offboarded": "1795000000"}
    # an unknown key, and a stage's ARN, answer as before
    with pytest.raises(ClientError, match="NotFoundException"):
        apigateway.tag_resource(resourceArn=_api_key_arn("nope"), tags={"a": "b"})
    with pytest.raises(ClientError, match="Invalid Rest API Id"):
        apigateway.tag_resource(resourceArn=f"arn:aws:apigateway:{REGION}::/restapis/x/stages/prod", tags={"a": "b"})


# ---------------------------------------------------------------- actions found without listing the class
@pytest.fixture
def class_listings(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The classes whose members moto lists (``inspect.getmembers`` as moto calls it)."""
    listed: list[object] = []
    original = inspect.getmembers

    def getmembers(target: object, predicate: Any = None) -> Any:
        listed.append(target)
        return original(target, predicate)

    monkeypatch.setattr(inspect, "getmembers", getmembers)  # the module moto.core.utils calls
    return listed


def test_in_plain_moto_every_request_lists_its_response_class(aws: None, class_listings: list[object]) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    with ACTIONS_FOUND_WITHOUT_LISTING_THE_CLASS.removed():
        for _ in range(3):
            sqs.list_queues()
    assert len(class_listings) >= 3


def test_a_response_class_is_listed_once_and_every_action_still_found(aws: None, class_listings: list[object]) -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    dynamodb.list_tables()
    dynamodb.list_tables()
    dynamodb.describe_limits()
    assert len(class_listings) <= 1  # none if an earlier test listed DynamoDB's already
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        dynamodb.describe_table(TableName="absent")


# ---------------------------------------------------------------- moto's modules listed once
@pytest.fixture
def directory_listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The directories listed meanwhile (``os.listdir`` as moto.backends calls it)."""
    listed: list[str] = []
    original = os.listdir

    def listdir(path: Any) -> list[str]:
        listed.append(str(path))
        return original(path)

    monkeypatch.setattr(moto_backends.os, "listdir", listdir)
    return listed


def _through_moto_server(service: str) -> tuple[Any, list[tuple[int, bytes]]]:
    """A client of ``service`` whose requests moto's server app (the emulator's
    dispatcher) answers, as over HTTP to ``127.0.0.1``; and the answers' statuses
    and bodies."""
    server = Client(DomainDispatcherApplication(create_backend_app))
    answers: list[tuple[int, bytes]] = []

    def send(request: Any, **_: Any) -> AWSResponse:
        url = urlsplit(request.url)
        headers = {
            name: value.decode() if isinstance(value, bytes) else value for name, value in request.headers.items()
        }
        answer = server.open(
            url.path, query_string=url.query, method=request.method, headers=headers, data=request.body
        )
        answers.append((answer.status_code, answer.data))
        received = HTTPHeaders()
        for name, value in answer.headers.items():
            received[name] = value
        return AWSResponse(request.url, answer.status_code, received, _Raw(answer.data))

    client = boto3.client(service, region_name=REGION, endpoint_url="http://127.0.0.1:4566")  # type: ignore[call-overload]
    client.meta.events.register_first(f"before-send.{service}.*", send)
    return client, answers


class _Raw:
    """The body botocore reads from an answer (a urllib3 response's stream)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self.data


def _requests_to_the_server() -> list[tuple[int, bytes]]:
    dynamodb, answers = _through_moto_server("dynamodb")
    dynamodb.create_table(
        TableName="listed",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.put_item(TableName="listed", Item={"pk": {"S": "TENANT#1|A"}})
    dynamodb.get_item(TableName="listed", Key={"pk": {"S": "TENANT#1|A"}})
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        dynamodb.get_item(TableName="absent", Key={"pk": {"S": "TENANT#10|A"}})
    dynamodb.delete_table(TableName="listed")
    sqs, sqs_answers = _through_moto_server("sqs")
    sqs.list_queues()
    return [(status, re.sub(rb"\d{10}\.\d+", b"<time>", body)) for status, body in [*answers, *sqs_answers]]


def test_in_plain_moto_every_request_to_the_server_lists_motos_directory(
    aws: None, directory_listings: list[str]
) -> None:
    with MOTO_MODULES_LISTED_ONCE.removed():
        answers = _requests_to_the_server()
    assert len(directory_listings) >= len(answers)


def test_motos_directory_is_listed_once_and_every_request_answered_as_in_plain_moto(
    aws: None, directory_listings: list[str]
) -> None:
    with MOTO_MODULES_LISTED_ONCE.removed():
        plain_modules = list(moto_backends.list_of_moto_modules())
        plain = _requests_to_the_server()
    assert moto_backends.list_of_moto_modules() == tuple(plain_modules)
    assert "dynamodb" in plain_modules
    directory_listings.clear()
    assert _requests_to_the_server() == plain
    assert len(plain) == 6
    assert len(directory_listings) <= 1  # none if an earlier test listed it already


# ---------------------------------------------------------------- requests built without the test builder
@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths werkzeug's EnvironBuilder built environs for meanwhile."""
    built: list[str] = []
    original = EnvironBuilder.get_environ

    def get_environ(builder: EnvironBuilder) -> Any:
        built.append(builder.path)
        return original(builder)

    monkeypatch.setattr(EnvironBuilder, "get_environ", get_environ)
    return built


def _calls_of_every_shape() -> list[tuple[int, bytes]]:
    """Requests of each protocol moto serves here (JSON, query, REST with path and query
    parameters, an S3 body and metadata), their statuses and bodies (times masked)."""
    answers: list[tuple[int, bytes]] = []

    def answered(http_response: Any, **_: Any) -> None:
        body = re.sub(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z|\d{10}(\.\d+)?", b"<time>", http_response.content)
        answers.append((http_response.status_code, body))

    dynamodb: Any = boto3.client("dynamodb", region_name=REGION)
    sqs: Any = boto3.client("sqs", region_name=REGION)
    apigateway: Any = boto3.client("apigateway", region_name=REGION)
    s3: Any = boto3.client("s3", region_name=REGION)
    for client in (dynamodb, sqs, apigateway, s3):
        client.meta.events.register("after-call.*.*", answered)
    dynamodb.create_table(
        TableName="built",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
    )
    dynamodb.put_item(TableName="built", Item={"pk": {"S": "TENANT#1|caf\u00e9 \U0001f600"}})
    dynamodb.get_item(TableName="built", Key={"pk": {"S": "TENANT#1|caf\u00e9 \U0001f600"}})
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        dynamodb.get_item(TableName="absent", Key={"pk": {"S": "TENANT#10|A"}})
    dynamodb.delete_table(TableName="built")
    sqs.list_queues(QueueNamePrefix="built")
    apigateway.get_api_keys(nameQuery="built.", includeValues=True)
    with pytest.raises(ClientError, match="NotFoundException"):
        apigateway.get_tags(resourceArn=f"arn:aws:apigateway:{REGION}::/apikeys/absent")
    s3.create_bucket(Bucket="built")
    s3.put_object(Bucket="built", Key="a/caf\u00e9 b+c", Body=b"\x00body", Metadata={"my_key": "v"})
    s3.head_object(Bucket="built", Key="a/caf\u00e9 b+c")
    s3.list_objects_v2(Bucket="built", Prefix="a/")
    return answers


def test_in_plain_moto_every_in_process_request_is_built_by_the_test_builder(aws: None, builds: list[str]) -> None:
    with REQUESTS_BUILT_WITHOUT_THE_TEST_BUILDER.removed():
        answers = _calls_of_every_shape()
    assert len(builds) >= len(answers) == 12


def test_requests_are_built_without_the_builder_and_answered_as_in_plain_moto(aws: None, builds: list[str]) -> None:
    with REQUESTS_BUILT_WITHOUT_THE_TEST_BUILDER.removed():
        plain = _calls_of_every_shape()
    builds.clear()
    assert _calls_of_every_shape() == plain
    assert len(builds) < len(plain) / 2  # once per endpoint and path (none for those built already)
    _calls_of_every_shape()
    assert len(builds) < len(plain) / 2


def _every_kind_of_request() -> list[AWSPreparedRequest]:
    """As botocore hands them to moto: JSON, query, REST, bodies of bytes, text and none,
    repeated, preserved and odd headers, a form with no body (the builder encodes it)."""

    def request(method: str, url: str, headers: dict[str, Any], body: Any) -> AWSPreparedRequest:
        received = HTTPHeaders()
        for name, value in headers.items():
            received[name] = value
        return AWSPreparedRequest(method=method, url=url, headers=received, body=body, stream_output=False)

    json_headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.GetItem"}
    form = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    return [
        request("POST", "https://dynamodb.us-east-1.amazonaws.com/", json_headers, b'{"TableName": "t"}'),
        request("POST", "https://dynamodb.us-east-1.amazonaws.com/", {**json_headers, "Content-Length": "99"}, "{}"),
        request("POST", "https://sqs.us-east-1.amazonaws.com/", form, "Action=ListQueues&Version=2012-11-05"),
        request("POST", "https://sqs.us-east-1.amazonaws.com/", form, b""),
        request("POST", "https://sqs.us-east-1.amazonaws.com/", {"Content-Type": "multipart/form-data"}, None),
        request(
            "GET",
            "https://apigateway.us-east-1.amazonaws.com/tags/arn%3Aaws%3Aapigateway%3Aus-east-1%3A%3A%2Fapikeys%2Fk"
            "?tagKeys=a&tagKeys=b%20c",
            {"Accept": "application/json", "X-Amz-Date": b"20260101T000000Z", "Transfer-Encoding": "chunked"},
            None,
        ),
        request(
            "PUT",
            "https://built.s3.us-east-1.amazonaws.com/a/caf%C3%A9%20b%2Bc;x=1",
            {"x-amz-meta-my_key": "v", "X-Amz-Meta-Other": "w", "Host": "built.s3.amazonaws.com:8443"},
            b"\x00body",
        ),
        request("GET", "http://127.0.0.1:4566/caf\u00e9/x?y=\u00e9", {"Accept": "*/*"}, b""),
        request("POST", "https://sts.amazonaws.com/", {"Content-Type": "text/plain", "X-Bad": "a\nb"}, b"x"),
    ]


def _environ(request: MotoRequest) -> list[tuple[str, Any]]:
    """The request's environ, its body read, the request itself (``werkzeug.request``)
    named, and a multipart form's random boundary (and so its length) masked."""
    body = request.environ["wsgi.input"].getvalue()
    boundary = re.search(rb"WerkzeugFormPart_[\d.]+", body)

    def comparable(key: str, value: Any) -> Any:
        if value is request:
            return "<the request>"
        if boundary is None:
            return body if key == "wsgi.input" else value
        if key == "CONTENT_LENGTH":
            assert int(value) == len(body)
            return "<its length>"
        if key == "wsgi.input":
            return body.replace(boundary[0], b"<boundary>")
        if key == "CONTENT_TYPE":
            return value.replace(boundary[0].decode(), "<boundary>")
        return value

    return [(key, comparable(key, value)) for key, value in request.environ.items()]


def test_every_kind_of_request_gets_the_environ_the_builder_builds(aws: None) -> None:
    for sent in _every_kind_of_request():
        with REQUESTS_BUILT_WITHOUT_THE_TEST_BUILDER.removed():
            try:
                plain: Any = _environ(MotoRequest.from_primitives(sent.method, sent.url, sent.headers, sent.body))
            except ValueError as refused:
                plain = str(refused)
        try:
            fixed: Any = _environ(MotoRequest.from_primitives(sent.method, sent.url, sent.headers, sent.body))
        except ValueError as refused:
            fixed = str(refused)
        assert fixed == plain, sent.url
