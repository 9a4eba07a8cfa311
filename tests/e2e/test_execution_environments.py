"""The stream functions of the running stack, each in its own execution
environment: a poison record reaches both (the aggregator and the audit
writer read the same ticket summaries), and each reports it to its own
on-failure queue with its own role. Were the shared layer's cached queue
client shared between them, one would send with the other's role and be
refused (the other's queue is not its own), fail its batch and give it up."""

from __future__ import annotations

import json
from typing import Any

from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from tests.e2e.conftest import RunningStack, new_tenant_id

QUEUES = {"AggregateCountsFunction": "AggregateCountsFailureQueue", "AuditTrailFunction": "AuditTrailFailureQueue"}
POISON_RECORDS = 3
# Receives of a queue before a test gives up looking (each returns what the queue holds, up to 10).
RECEIVES = 100


def poison_summary(tenant: str, victim: str, n: int) -> dict[str, Any]:
    """A ticket summary of ``tenant`` whose ``tenant_status`` names ``victim``: what
    the operator could write and no function may count or record."""
    return {
        "pk": {"S": keys.ticket_pk(tenant, f"POISON{n:04d}")},
        "sk": {"S": keys.SUMMARY_SK},
        "ticket_id": {"S": f"POISON{n:04d}"},
        "tenant_status": {"S": keys.tenant_status(victim, TicketStatus.OPEN)},
        "resolver": {"S": keys.resolver_key(None)},
        "title": {"S": "planted"},
        "created_by": {"S": "mallory"},
        "created_at": {"S": "2026-11-21T10:00:00.000Z"},
        "updated_at": {"S": "2026-11-21T10:00:00.000Z"},
        "version": {"N": "1"},
    }


def poison_reports(stack: RunningStack, queue_name: str, tenant: str) -> list[dict[str, Any]]:
    """The poison reports about ``tenant`` in the queue, taken off it; other
    messages are left there, visible."""
    sqs = stack.operator("sqs")
    url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
    found: dict[str, dict[str, Any]] = {}
    for _ in range(RECEIVES):
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", [])
        for message in messages:
            body = json.loads(message["Body"])
            if isinstance(body, dict) and body.get("tenantId") == tenant:
                found[message["MessageId"]] = body
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if len(found) >= POISON_RECORDS or not messages:
            break
    return list(found.values())


def test_each_stream_function_reports_poison_to_its_own_queue(stack: RunningStack) -> None:
    # Given: the stream drained, and what the pollers have given up so far
    before = stack.drain()
    assert before["drained"], before
    tenant = new_tenant_id()
    victim = tenant + "0"
    # When: summaries of one tenant naming another are written, as only the operator can
    dynamodb = stack.operator("dynamodb")
    for n in range(POISON_RECORDS):
        dynamodb.put_item(TableName=stack.state["table_name"], Item=poison_summary(tenant, victim, n))
    after = stack.drain()
    # Then: each function sent every poison record to its own queue (a send refused
    # would have failed its batch, and the poller would have given it up)
    assert after["drained"], after
    assert after["given_up"] == before["given_up"]
    for function, queue in QUEUES.items():
        reports = poison_reports(stack, queue, tenant)
        assert len(reports) == POISON_RECORDS, (queue, reports)
        assert {report["function"] for report in reports} == {function}
        assert all("tenant_status" in report["reason"] for report in reports)
