"""local_stack.moto_fixes: every in-process moto request is atomic, and a
TransactWriteItems costs what it touches.

moto's backends have no locks of their own. The stream poller (a thread) and
the code under test (the main thread) both call the in-process moto, and a
``TransactWriteItems`` deep-copying the tables while the other thread wrote one
raised "dictionary changed size during iteration". These tests hold
a request inside moto and show that no other request can start meanwhile.

moto deep-copied every table a transaction named, to roll back a cancelled one
(a comment took hundreds of milliseconds once the table held a few thousand items).
The tests below fail on any deep copy of a table and check that a transaction
still applies all its writes, and that a cancelled one restores exactly the
items it wrote and leaves no stream record.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table

from local_stack.moto_fixes import MOTO_LOCK
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


def test_no_request_can_start_while_another_thread_is_inside_moto(
    dynamodb: DynamoDBClient, table_name: str, held: HeldInsideMoto
) -> None:
    # Given a thread whose GetItem is being served by the in-process moto
    errors: list[BaseException] = []

    def read() -> None:
        try:
            boto3.client("dynamodb", region_name=REGION).get_item(
                TableName=table_name, Key={"pk": {"S": "TENANT#a|X"}, "sk": {"S": "SUMMARY"}}
            )
        except BaseException as exc:  # pragma: no cover - reported by the assertion below
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
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
def no_table_copies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fails any deep copy of a table (what moto did in every TransactWriteItems)."""
    copied: list[str] = []

    def deepcopy(table: Table, memo: dict[int, Any]) -> Table:
        copied.append(table.name)
        raise AssertionError(f"table {table.name} was deep-copied")

    monkeypatch.setattr(Table, "__deepcopy__", deepcopy, raising=False)
    return copied


def test_a_transaction_copies_no_table_and_applies_every_write(
    dynamodb: DynamoDBClient, table_name: str, no_table_copies: list[str]
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
    assert no_table_copies == []
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
    dynamodb: DynamoDBClient, table_name: str, no_table_copies: list[str]
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
    assert no_table_copies == []


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
def test_a_query_reads_only_its_partition_in_order_with_pages_either_way(
    dynamodb: DynamoDBClient, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a partition among others
    for number in range(7):
        dynamodb.put_item(TableName=table_name, Item=_item("TENANT#a|P", f"C#{number}"))
        dynamodb.put_item(TableName=table_name, Item=_item(f"TENANT#a|Q{number}", "SUMMARY"))

    def every_item(table: Table) -> list[Any]:
        raise AssertionError("a base-table Query read every item of the table")

    monkeypatch.setattr(Table, "all_items", every_item)

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
    for forward, expected in ((True, [f"C#{n}" for n in range(7)]), (False, [f"C#{n}" for n in reversed(range(7))])):
        seen: list[str] = []
        start: dict[str, Any] | None = None
        while True:
            keys, start = page(ScanIndexForward=forward, **({"ExclusiveStartKey": start} if start else {}))
            seen += keys
            if start is None:
                break
        assert seen == expected
    # And a partition that does not exist is empty
    empty = dynamodb.query(
        TableName=table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "TENANT#a|NONE"}},
    )
    assert empty["Items"] == []
