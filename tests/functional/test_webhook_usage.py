"""The delivery function's usage lines (docs/usage.md): one per tenant and
invocation, with its messages, attempts, deliveries, SQS and KMS calls, the
DynamoDB units of its own calls, and its share of the invocation's billed
duration by the time its messages took; in process over moto, through the
function's own handler, with receivers on 127.0.0.1."""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aws_lambda_powertools import Logger
from botocore import xform_name

from local_stack.lambda_.runtime import LambdaContext
from support_tickets.core import keys
from support_tickets.usage import meter
from support_tickets.webhooks import metered_delivery
from support_tickets.webhooks.metered_delivery import METER, TenantTotals, usage_lines
from tests.conftest import all_items
from tests.functional.api_harness import Api, User
from tests.functional.conftest import TENANT_PAIRS
from tests.functional.stream_harness import StreamHarness, stream_handler
from tests.functional.test_usage_line import dynamodb_answers
from tests.functional.webhook_harness import receive

pytestmark = pytest.mark.usefixtures("local_receivers")

HOLD_SECONDS = 0.4  # how long the slow receiver holds each delivery
ALL_TYPES = ["ticket.created", "ticket.updated", "ticket.deleted", "comment.added"]


@contextmanager
def receiver(hold: float = 0.0, status: int = 200) -> Iterator[str]:
    """A receiver on 127.0.0.1 that answers ``status`` after holding each request ``hold`` seconds."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            time.sleep(hold)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def register(api: Api, tenant: str, url: str) -> None:
    response = api.call("webhook_create", User(tenant, "root", admin=True), body={"url": url, "events": ALL_TYPES})
    assert response.status == 201, response.body


def tenant_of_call(params: dict[str, Any]) -> str:
    """The tenant of a DynamoDB call of the delivery function (every one names its key)."""
    pk = params.get("Key", {}).get("pk", {}).get("S") or params["ExpressionAttributeValues"][":pk"]["S"]
    return keys.tenant_of_key(pk)


def deliver_batch(log_lines: Callable[[], list[dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """The delivery function's handler over what the queue holds now: its answer, its usage
    lines by tenant and the DynamoDB calls it made."""
    records = receive()
    log_lines()
    with dynamodb_answers() as seen:
        answer = stream_handler("DeliverWebhookFunction")({"Records": records}, LambdaContext("DeliverWebhookFunction"))
    lines = {line["tenant_id"]: line["usage"] for line in log_lines() if line.get("message") == "usage"}
    return answer, lines, seen


@pytest.mark.parametrize(("slow", "prompt"), TENANT_PAIRS)
def test_each_tenant_is_billed_its_own_deliveries_share_of_the_invocation(
    api: Api, audit_stream: StreamHarness, log_lines: Callable[[], list[dict[str, Any]]], slow: str, prompt: str
) -> None:
    # Given two tenants' webhooks, one held by its receiver, one answered at once,
    # and one batch with two deliveries of the slow one and one of the other
    with receiver(hold=HOLD_SECONDS) as slow_url, receiver() as prompt_url:
        register(api, slow, slow_url)
        register(api, prompt, prompt_url)
        api.new_ticket(User(slow, "alice"), title="one")
        api.new_ticket(User(slow, "alice"), title="two")
        api.new_ticket(User(prompt, "bob"), title="three")
        audit_stream.deliver(audit_stream.new_records())
        answer, lines, seen = deliver_batch(log_lines)
    assert answer == {"batchItemFailures": []}
    # Then each tenant has one line with its own messages, attempts and deliveries
    assert set(lines) == {slow, prompt}
    counts = {tenant: (line["messages"], line["attempts"], line["deliveries"]) for tenant, line in lines.items()}
    assert counts == {slow: (2, 2, 2), prompt: (1, 1, 1)}
    assert all(line["function"] == "deliver_webhook" and line["sqs_requests"] == 0 for line in lines.values())
    # (each new webhook's secret is decrypted at least once: the container's cache had none of it)
    assert 1 <= lines[slow]["kms_requests"] <= 2
    assert lines[prompt]["kms_requests"] == 1
    # the invocation's billed duration (whole ms, at least the hold) shared by the messages'
    # time: the slow tenant's are most of it, and so is the invocation
    total = sum((Decimal(str(line["duration_ms"])) for line in lines.values()), Decimal(0))
    assert total == total.to_integral_value()
    assert total >= HOLD_SECONDS * 1000
    assert lines[slow]["duration_ms"] > lines[prompt]["duration_ms"]
    assert (lines[slow]["invocations"], lines[prompt]["invocations"]) == (1, 0)
    # and each tenant's units are exactly what DynamoDB answered to the calls on its keys
    expected: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0), Decimal(0)])
    for operation, params, response in seen:
        read, write = meter.response_units(xform_name(operation), response)
        mine = expected[tenant_of_call(params)]
        mine[0] += read
        mine[1] += write
        mine[2] += 1
    for tenant, line in lines.items():
        assert [Decimal(str(line["read_units"])), Decimal(str(line["write_units"])), line["dynamodb_calls"]] == (
            expected[tenant]
        )
    assert set(expected) == {slow, prompt}


def test_a_failed_attempt_is_an_attempt_with_its_queue_call_and_no_delivery(
    api: Api, audit_stream: StreamHarness, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    # Given a webhook whose receiver answers 503
    with receiver(status=503) as url:
        register(api, "acme", url)
        api.new_ticket(User("acme", "alice"))
        audit_stream.deliver(audit_stream.new_records())
        answer, lines, _ = deliver_batch(log_lines)
    assert len(answer["batchItemFailures"]) == 1
    # Then the attempt is billed, with the visibility change of its retry; no delivery ended
    usage = lines["acme"]
    assert (usage["messages"], usage["attempts"], usage["deliveries"], usage["sqs_requests"]) == (1, 1, 0, 1)
    assert usage["invocations"] == 1


def test_shares_are_exact_and_nobodys_share_is_no_line() -> None:
    totals = {
        "1": TenantTotals(messages=2, elapsed_ns=700_000_000),
        "10": TenantTotals(messages=1, elapsed_ns=300_000_000),
        metered_delivery.NOBODY: TenantTotals(messages=1, elapsed_ns=100_000_000),
    }
    lines = usage_lines(LambdaContext("DeliverWebhookFunction"), totals, {}, 1000.2)
    # The billed 1,001 ms shared 7:3:1, nobody's share on no line; one invocation, the largest's
    assert set(lines) == {"1", "10"}
    assert (lines["1"]["duration_ms"], lines["10"]["duration_ms"]) == (637.0, 273.0)  # and 91 ms nobody's
    assert (lines["1"]["invocations"], lines["10"]["invocations"]) == (1, 0)


def failing_batch() -> None:
    """An invocation whose batch fails after one of acme's messages made an attempt."""
    with metered_delivery.metered_batch(Logger(), LambdaContext("DeliverWebhookFunction")):
        with METER.message() as usage:
            usage.tenant_id = "acme"
            usage.attempts = 1
        raise RuntimeError("the batch failed")


def test_a_failed_invocation_still_logs_its_lines(log_lines: Callable[[], list[dict[str, Any]]]) -> None:
    log_lines()
    with pytest.raises(RuntimeError):
        failing_batch()
    (line,) = [line for line in log_lines() if line.get("message") == "usage"]
    assert (line["tenant_id"], line["usage"]["attempts"], line["usage"]["invocations"]) == ("acme", 1, 1)


@pytest.mark.parametrize(("tenant", "other"), TENANT_PAIRS)
def test_each_tenant_pays_the_storage_of_the_delivery_records_its_messages_create(
    api: Api,
    audit_stream: StreamHarness,
    log_lines: Callable[[], list[dict[str, Any]]],
    dynamodb: Any,
    table_name: str,
    tenant: str,
    other: str,
) -> None:
    """Before: a tenant's delivery records (its events, kept 30 days) were billed as writes and
    never as storage. A record created is its size (event plus overhead, in KB rounded up) for
    its 30 days, on its tenant's line alone; a retry rewrites it and adds nothing."""
    from support_tickets.webhooks.metered_delivery import RECORD_DAYS, RECORD_OVERHEAD_BYTES

    with receiver(status=503) as failing_url, receiver() as answering_url:
        register(api, tenant, failing_url)
        register(api, other, answering_url)
        api.new_ticket(User(tenant, "alice"), description="\u4e2d" * 10_000)
        api.new_ticket(User(other, "bob"), description="short")
        audit_stream.deliver(audit_stream.new_records())
        _, lines, _ = deliver_batch(log_lines)
    bodies = {
        keys.tenant_of_key(item["pk"]["S"]): item["event"]["S"]
        for item in all_items(dynamodb, table_name)
        if item["pk"]["S"].endswith("#DELIVERIES")
    }
    for owner in (tenant, other):
        size = len(bodies[owner].encode()) + RECORD_OVERHEAD_BYTES
        assert lines[owner]["stored_kb_days"] == math.ceil(size / 1024) * RECORD_DAYS
    assert lines[tenant]["stored_kb_days"] > 30 * 30  # its 30 KB event for 30 days, not the other's
