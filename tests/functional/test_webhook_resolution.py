"""A webhook's name lookup at delivery fits inside the attempt's deadline
(``getaddrinfo`` has no timeout of its own), in process over moto: a resolver
that hangs makes a failed attempt, retried later, and nothing is POSTed. The
registration's own bound is in test_api_webhooks.py."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pytest

from support_tickets.core import keys
from support_tickets.webhooks.urls import CheckedUrl
from tests.conftest import all_items
from tests.functional.api_harness import Api, User
from tests.functional.stream_harness import StreamHarness
from tests.functional.webhook_harness import deliverer, receive

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = pytest.mark.usefixtures("local_receivers")


def test_a_lookup_that_hangs_at_delivery_is_a_failed_attempt_within_the_deadline(
    api: Api, audit_stream: StreamHarness, dynamodb: DynamoDBClient, table_name: str
) -> None:
    registered = api.call(
        "webhook_create",
        User("acme", "root", admin=True),
        body={"url": "https://hooks.example.com/in", "events": ["ticket.created"]},
    )
    assert registered.status == 201, registered.body
    api.new_ticket(User("acme", "alice"))
    audit_stream.deliver(audit_stream.new_records())
    release = threading.Event()
    posted: list[CheckedUrl] = []

    def hanging(host: str, port: int) -> list[str]:
        release.wait(10)  # a nameserver that never answers
        return ["93.184.215.14"]

    def post(checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        posted.append(checked)
        return 204

    records = receive()
    try:
        # A small deadline stands for the attempt's 10 s: the batch returns, the message to retry.
        failed = deliverer(table_name, resolve=hanging, post=post, timeout=0.1).process_batch(records)
    finally:
        release.set()
    assert failed == [records[0]["messageId"]]
    assert posted == []
    pk = keys.webhook_deliveries_pk("acme", registered.body["webhook_id"])
    (record,) = [item for item in all_items(dynamodb, table_name) if item["pk"]["S"] == pk]
    assert record["status"]["S"] == "PENDING"
    assert record["attempts"]["N"] == "1"
    assert "NULL" in record["last_status_code"]  # nothing answered
