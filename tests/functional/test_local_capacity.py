"""The local emulator answers ``ReturnConsumedCapacity`` with the capacity
model's units (local_stack.emulator.consumed_capacity), not moto's constants: checked against
units worked out by hand from DynamoDB's published rules for items of known
sizes (an item's size: its attribute names plus values; reads by 4 KB, half
for eventually consistent; writes by 1 KB, twice inside a transaction, plus
GSI1's own writes)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

from local_stack.emulator.consumed_capacity import CapacityUnits
from stack_model.template import table_definition

PK = "TENANT#acme|TICKET#1"  # 20 bytes: "pk" + it = 22


def _item(sk: str, description_bytes: int, **extra: str) -> dict[str, Any]:
    item = {"pk": {"S": PK}, "sk": {"S": sk}, "description": {"S": "x" * description_bytes}}
    return item | {name: {"S": value} for name, value in extra.items()}


@pytest.fixture
def dynamodb() -> Iterator[tuple[Any, str]]:
    """A client of moto behind the capacity middleware, and a fresh table shaped like the template's."""
    table = f"capacity-{uuid.uuid4().hex[:12]}"
    app = CapacityUnits(DomainDispatcherApplication(create_backend_app), table)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = boto3.client(
        "dynamodb",
        endpoint_url=f"http://127.0.0.1:{server.server_port}",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),
    )
    definition = table_definition()
    definition.pop("StreamSpecification", None)
    client.create_table(**(definition | {"TableName": table}))
    try:
        yield client, table
    finally:
        client.delete_table(TableName=table)
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_writes_are_billed_per_kilobyte_of_the_larger_image(dynamodb: tuple[Any, str]) -> None:
    client, table = dynamodb
    # 22 + ("sk" + "SUMMARY" = 9) + ("description" = 11) + 3000 = 3042 bytes: 3 KB.
    put = client.put_item(TableName=table, Item=_item("SUMMARY", 3000), ReturnConsumedCapacity="TOTAL")
    assert put["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 3.0, "WriteCapacityUnits": 3.0}
    # Shrunk to 1042 bytes: still billed on the larger (old) image.
    shrunk = client.put_item(TableName=table, Item=_item("SUMMARY", 1000), ReturnConsumedCapacity="TOTAL")
    assert shrunk["ConsumedCapacity"]["WriteCapacityUnits"] == 3.0
    deleted = client.delete_item(
        TableName=table, Key={"pk": {"S": PK}, "sk": {"S": "SUMMARY"}}, ReturnConsumedCapacity="TOTAL"
    )
    assert deleted["ConsumedCapacity"]["WriteCapacityUnits"] == 2.0  # 1042 bytes


def test_reads_are_billed_per_4_kb_halved_when_eventually_consistent(dynamodb: tuple[Any, str]) -> None:
    client, table = dynamodb
    for sk in ("C#1", "C#2", "C#3"):  # 22 + 5 + 11 + 3000 = 3038 bytes each, 9114 in all
        client.put_item(TableName=table, Item=_item(sk, 3000))
    key = {"pk": {"S": PK}, "sk": {"S": "C#1"}}
    eventual = client.get_item(TableName=table, Key=key, ReturnConsumedCapacity="TOTAL")
    strong = client.get_item(TableName=table, Key=key, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
    missing = client.get_item(
        TableName=table, Key={"pk": {"S": PK}, "sk": {"S": "none"}}, ReturnConsumedCapacity="TOTAL"
    )
    assert eventual["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 0.5, "ReadCapacityUnits": 0.5}
    assert strong["ConsumedCapacity"]["ReadCapacityUnits"] == 1.0
    assert missing["ConsumedCapacity"]["ReadCapacityUnits"] == 0.5  # nothing found still costs the minimum
    query = client.query(
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": PK}},
        ProjectionExpression="sk",  # a projection does not make the items read smaller
        ReturnConsumedCapacity="TOTAL",
    )
    assert len(query["Items"]) == 3
    assert query["ConsumedCapacity"]["ReadCapacityUnits"] == 1.5  # 9114 bytes: 3 x 4 KB, halved


def test_index_writes_and_transactions(dynamodb: tuple[Any, str]) -> None:
    client, table = dynamodb
    client.put_item(TableName=table, Item=_item("SUMMARY", 2900))  # 2942 bytes
    # Into GSI1: the base item (2942 + "tenant_status" 13 + 16 + "resolver" 8 + 5 = 2984
    # bytes: 3) plus a new index entry of its keys (73 bytes: 1).
    indexed = client.update_item(
        TableName=table,
        Key={"pk": {"S": PK}, "sk": {"S": "SUMMARY"}},
        UpdateExpression="SET tenant_status = :s, resolver = :r",
        ExpressionAttributeValues={":s": {"S": "TENANT#acme|OPEN"}, ":r": {"S": "alice"}},
        ReturnConsumedCapacity="TOTAL",
    )
    assert indexed["ConsumedCapacity"]["WriteCapacityUnits"] == 3.0 + 1.0
    # In a transaction, twice (2986 bytes: 2 x 3); the index key changes: its old
    # entry deleted, a new one put (1 + 1).
    moved = client.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": PK}, "sk": {"S": "SUMMARY"}},
                    "UpdateExpression": "SET tenant_status = :s",
                    "ExpressionAttributeValues": {":s": {"S": "TENANT#acme|CLOSED"}},
                }
            }
        ],
        ReturnConsumedCapacity="TOTAL",
    )
    assert moved["ConsumedCapacity"] == [
        {"TableName": table, "CapacityUnits": 2 * 3.0 + 2.0, "WriteCapacityUnits": 2 * 3.0 + 2.0}
    ]


def test_nothing_asked_nothing_answered_and_errors_pass_through(dynamodb: tuple[Any, str]) -> None:
    client, table = dynamodb
    assert "ConsumedCapacity" not in client.put_item(TableName=table, Item=_item("SUMMARY", 10))
    with pytest.raises(ClientError) as refused:
        client.put_item(
            TableName=table,
            Item=_item("SUMMARY", 10),
            ConditionExpression="attribute_not_exists(pk)",
            ReturnConsumedCapacity="TOTAL",
        )
    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_a_dedicated_table_is_metered_on_its_own_items_under_its_own_name(dynamodb: tuple[Any, str]) -> None:
    client, pool = dynamodb
    # Given tenant 1's own table beside the pool (the dedicated template's name and shape)...
    dedicated = f"{pool}-dedicated-1"
    definition = table_definition()
    definition.pop("StreamSpecification", None)
    client.create_table(**(definition | {"TableName": dedicated}))
    try:
        # ...and, under the same key, a small item in the pool and a large one in its table.
        key = {"pk": {"S": PK}, "sk": {"S": "SUMMARY"}}
        client.put_item(TableName=pool, Item=_item("SUMMARY", 10))
        # 22 + 9 + 11 + 2900 = 2942 bytes: 3 KB, metered on the table it went to.
        put = client.put_item(TableName=dedicated, Item=_item("SUMMARY", 2900), ReturnConsumedCapacity="TOTAL")
        assert put["ConsumedCapacity"] == {"TableName": dedicated, "CapacityUnits": 3.0, "WriteCapacityUnits": 3.0}
        # Reads find the item of the table read: 2942 bytes strongly consistent is 1 RRU there...
        read = client.get_item(TableName=dedicated, Key=key, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
        assert read["ConsumedCapacity"]["TableName"] == dedicated
        # ...and a delete the larger image of that table's item (the pool's 52 bytes would be 1).
        deleted = client.delete_item(TableName=dedicated, Key=key, ReturnConsumedCapacity="TOTAL")
        assert deleted["ConsumedCapacity"]["WriteCapacityUnits"] == 3.0
        # A batch into the tenant's table alone is metered too; the pool's answers are still the pool's.
        batch = client.batch_write_item(
            RequestItems={dedicated: [{"PutRequest": {"Item": _item("C#1", 1500)}}]}, ReturnConsumedCapacity="TOTAL"
        )
        assert batch["ConsumedCapacity"] == [{"TableName": dedicated, "CapacityUnits": 2.0, "WriteCapacityUnits": 2.0}]
        pooled = client.delete_item(TableName=pool, Key=key, ReturnConsumedCapacity="TOTAL")
        assert pooled["ConsumedCapacity"] == {"TableName": pool, "CapacityUnits": 1.0, "WriteCapacityUnits": 1.0}
    finally:
        client.delete_table(TableName=dedicated)


def test_a_table_that_is_not_the_stacks_keeps_motos_answer(dynamodb: tuple[Any, str]) -> None:
    client, pool = dynamodb
    other = f"{pool}-other"
    definition = table_definition()
    definition.pop("StreamSpecification", None)
    client.create_table(**(definition | {"TableName": other}))
    try:
        put = client.put_item(TableName=other, Item=_item("SUMMARY", 2900), ReturnConsumedCapacity="TOTAL")
        # moto's constant, whatever the item's size (the model meters the stack's tables only).
        assert put["ConsumedCapacity"]["CapacityUnits"] == 1.0
    finally:
        client.delete_table(TableName=other)
