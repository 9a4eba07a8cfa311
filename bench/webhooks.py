"""What a webhook delivery costs, and how long a ticket change takes to reach
its receiver (docs/webhooks.md).

- **Warm delivery**: the delivery function's handler, in this process, with
  its own role's credentials against the local stack's emulator, fed Lambda
  SQS events of one message each (an event for a webhook registered through
  the API, pointing at a receiver on 127.0.0.1): its duration, its AWS calls
  and the DynamoDB units they bill (the capacity model), in a warm container
  (one unmeasured delivery per tenant first: the clients made, each tenant's
  record and decrypted secret cached, as in a busy container). Messages go
  round-robin over several tenants so that none reaches its tier's
  deliveries per second.
- **Change to delivery**: ``changes`` tickets created one after the other
  through the local stack's HTTP API by the first of those tenants (one
  webhook, subscribed to ``ticket.created``, the same receiver); the time from the API's response to the receiver's
  receipt of that ticket's event (the table's stream, the audit-trail
  function, the FIFO queue, the delivery function: the local stack's pollers,
  whose polling intervals are not Lambda's).
- **Cost per million deliveries**, from the measured warm duration and units
  at the list prices of :mod:`support_tickets.core.prices`, for a first
  attempt that succeeds; the assumptions are written into the results.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.calls import CallRecorder
from bench.stackproc import StackProcess
from bench.stats import percentile, summary
from bench.warm import progress, quiet_stdout
from local_stack.lambda_runtime import LambdaContext, environment
from local_stack.state import local_admin
from stack_model.capacity import CapacityMeter, TableShape
from stack_model.functions import FunctionSpec, load_handler
from support_tickets.core import prices
from support_tickets.core.webhook_events import delivery_id, event_body
from support_tickets.streams.webhook_fanout import message, message_group

DELIVERY = "DeliverWebhookFunction"


class Receiver:
    """A webhook endpoint on 127.0.0.1 that answers 204 and notes when each event arrived."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}  # the event's ticket id -> time.monotonic()
        self.count = 0
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                at = time.monotonic()
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()
                ticket = json.loads(body).get("data", {}).get("ticket_id")
                with receiver.changed:
                    receiver.count += 1
                    if isinstance(ticket, str):
                        receiver.arrived.setdefault(ticket, at)
                    receiver.changed.notify_all()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, ticket_id: str, timeout: float) -> float:
        with self.changed:
            if not self.changed.wait_for(lambda: ticket_id in self.arrived, timeout):
                raise RuntimeError(f"the event of ticket {ticket_id} did not arrive within {timeout} s")
            return self.arrived[ticket_id]


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def api(stack: StackProcess, method: str, path: str, token: str, body: Any) -> tuple[int, Any]:
    request = urllib.request.Request(  # noqa: S310 - the local stack's API on loopback
        f"{stack.state['api_url']}{path}",
        data=json.dumps(body).encode(),
        method=method,
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return int(response.status), json.loads(response.read() or b"null")


def register(stack: StackProcess, admin: Any, tenant: str, url: str) -> str:
    """A webhook of ``tenant`` (onboarded first by ``admin``: its record and API key) for ``ticket.created``."""
    admin.ensure(tenant)
    token = stack.token(tenant, f"root-{tenant}", admin=True)
    status, created = api(stack, "POST", "/webhooks", token, {"url": url, "events": ["ticket.created"]})
    if status != 201:
        raise RuntimeError(f"webhook not registered: {status} {created}")
    return str(created["webhook_id"])


def sqs_record(tenant: str, webhook_id: str, number: int) -> dict[str, Any]:
    """A Lambda SQS record of one new event for ``webhook_id`` (as the fan-out sends it)."""
    at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    event_id = uuid.uuid4().hex
    ticket_id = f"T{number:06d}"
    event = {
        "id": event_id,
        "type": "ticket.created",
        "timestamp": at,
        "tenant_id": tenant,
        "data": {"ticket_id": ticket_id, "title": "Printer on fire", "status": "OPEN", "version": 1},
    }
    delivery = delivery_id(at, event_id, webhook_id)
    body = message(
        tenant_id=tenant, webhook_id=webhook_id, delivery=delivery, ticket_id=ticket_id, body=event_body(event)
    )
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": uuid.uuid4().hex,
        "body": body,
        "attributes": {
            "MessageGroupId": message_group(tenant, ticket_id, webhook_id),
            "MessageDeduplicationId": delivery,
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(int(time.time() * 1000)),
        },
        "eventSource": "aws:sqs",
    }


def run_warm_deliveries(
    stack: StackProcess, specs: dict[str, FunctionSpec], *, deliveries: int, receiver: Receiver, hooks: dict[str, str]
) -> dict[str, Any]:
    """``deliveries`` timed warm invocations of the delivery function, one message each
    (and as many more sized with the capacity model), to ``hooks`` (tenant -> its webhook)."""
    spec = specs[DELIVERY]
    names = list(hooks)
    recorder = CallRecorder()
    meter = CapacityMeter(stack.operator("dynamodb"), TableShape.from_template(str(stack.state["table_name"])))
    durations: list[float] = []
    tallies = []
    recorder.install()
    try:
        with environment(stack.function_environment(spec)), quiet_stdout():
            handler = load_handler(spec.code_uri, spec.handler, module_name="_bench_deliver_webhook")
            context = LambdaContext(function_name=DELIVERY, memory_limit_in_mb=spec.memory_mb, timeout_s=spec.timeout_s)
            # One per tenant warms the container up (its clients, each tenant's record and
            # secret cached as in a busy container): not measured. Then every other delivery is
            # timed (no capacity model: its look-ups around each call would add to the time) and
            # the others sized (their calls and units).
            warmup = len(names)
            for number in range(warmup + 2 * deliveries):
                tenant = names[number % len(names)]
                event = {"Records": [sqs_record(tenant, hooks[tenant], number)]}
                sized = number >= warmup and (number - warmup) % 2 == 1
                recorder.meter = meter if sized else None
                with recorder.request() as tally:
                    started = time.perf_counter_ns()
                    result = handler(event, context)
                    elapsed = time.perf_counter_ns() - started
                recorder.meter = None
                if result.get("batchItemFailures"):
                    raise RuntimeError(f"a delivery was not made: {result}")
                if sized:
                    tallies.append(tally)
                elif number >= warmup:
                    durations.append(elapsed / 1e6)
    finally:
        recorder.uninstall()
    if receiver.count != len(names) + 2 * deliveries:
        raise RuntimeError(f"{receiver.count} of {len(names) + 2 * deliveries} deliveries arrived")
    calls: dict[str, float] = {}
    for tally in tallies:
        for call, count in tally.calls.items():
            calls[call] = calls.get(call, 0) + count / len(tallies)
    return {
        "deliveries": deliveries,
        "memory_mb": spec.memory_mb,
        "duration_ms": summary(durations),
        "calls_per_delivery": {call: round(count, 3) for call, count in sorted(calls.items())},
        "rru_per_delivery": round(sum(t.rru for t in tallies) / len(tallies), 3),
        "wru_per_delivery": round(sum(t.wru for t in tallies) / len(tallies), 3),
    }


def run_delay(
    stack: StackProcess, *, changes: int, tenant: str, receiver: Receiver, timeout: float = 60.0
) -> dict[str, Any]:
    """``changes`` tickets created one at a time by ``tenant`` (whose webhook posts to
    ``receiver``); each one's API response to its event's receipt."""
    delays: list[float] = []
    token = stack.token(tenant, f"u-{tenant}")
    for number in range(changes):
        status, ticket = api(stack, "POST", "/tickets", token, {"title": f"change {number}"})
        answered = time.monotonic()
        if status != 201:
            raise RuntimeError(f"ticket not created: {status} {ticket}")
        delays.append((receiver.wait_for(str(ticket["ticket_id"]), timeout) - answered) * 1000)
    return {
        "changes": changes,
        "delay_ms": {
            **summary(delays),
            "p50": round(percentile(delays, 0.50), 1),
            "p99": round(percentile(delays, 0.99), 1),
        },
    }


def delivery_cost(warm: dict[str, Any]) -> dict[str, Any]:
    """USD per million deliveries (a first attempt that succeeds), by line item."""
    million = Decimal(1_000_000)
    seconds = Decimal(str(warm["duration_ms"]["median"])) / 1000
    gb_seconds = million * seconds * warm["memory_mb"] / 1024
    # send (the fan-out's SendMessageBatch: one request per event for up to 10 webhooks), receive, delete
    sqs_requests = 3
    fanout_query_rru = Decimal("0.5")  # an eventually consistent Query of a few small items
    rru = Decimal(str(warm["rru_per_delivery"])) + fanout_query_rru
    wru = Decimal(str(warm["wru_per_delivery"]))
    items = {
        "lambda": prices.lambda_usd(1_000_000, gb_seconds),
        "sqs_fifo": million * sqs_requests * prices.SQS_FIFO_PER_MILLION_REQUESTS_USD / million,
        "dynamodb": prices.dynamodb_usd(million * rru, million * wru),
        "kms_decrypt": prices.KMS_PER_MILLION_REQUESTS_USD,
    }
    made = {name: round(float(value), 4) for name, value in items.items()}
    made["total"] = round(sum(made.values()), 4)
    retry = {
        # What each failed attempt adds: an invocation, a receive, a visibility change, the record's write.
        "lambda": prices.lambda_usd(1_000_000, gb_seconds),
        "sqs_fifo": 2 * prices.SQS_FIFO_PER_MILLION_REQUESTS_USD,
        "dynamodb": prices.dynamodb_usd(million * Decimal(str(warm["rru_per_delivery"])), million * wru),
    }
    return {
        "assumptions": {
            "invocations": 1_000_000,
            "messages_per_invocation": 1,
            "gb_seconds": round(float(gb_seconds), 2),
            "sqs_requests_per_delivery": sqs_requests,
            "rru_per_delivery": float(rru),
            "wru_per_delivery": float(wru),
            "kms_decrypts_per_delivery": 1,
        },
        **made,
        "per_million_retries": round(float(sum(retry.values())), 4),
    }


DELIVERY_NOTE = (
    "Per million deliveries that succeed at the first attempt, us-east-1 list prices "
    "(`support_tickets.core.prices`). Assumed: one message per invocation (Lambda's FIFO event source hands a "
    "batch of up to 10 messages of as many groups: with busy tenants the invocations and their fixed cost fall "
    "by up to 10x); the delivery function's median warm duration measured here at its template memory; SQS FIFO: "
    "the fan-out's SendMessageBatch (one request per event, for up to 10 webhooks: counted once, as for one "
    "webhook), Lambda's ReceiveMessage and DeleteMessage (per batch: counted per message); the event source's "
    "empty receives while the queue is idle are a fixed cost, not counted; DynamoDB: the delivery function's "
    "reads and writes as the capacity model bills them (the webhook and the delivery's progress read "
    "consistently, the tier's per-second counter, the record's write with the event's body) plus the fan-out's "
    "Query of the tenant's webhooks (0.5 RRU, an upper bound: it is cached 30 s per container and tenant); "
    "KMS: one Decrypt per delivery, an upper bound (a container keeps a decrypted secret 5 minutes). Not "
    "counted: the audit-trail function's extra milliseconds to build and send the message (it runs anyway), "
    "CloudWatch logs and metrics, data transfer out to the receivers. A failed attempt adds an invocation, a "
    "receive, a visibility change and the record's write (`per_million_retries`). The delay is the local "
    "stack's: its stream and queue pollers' intervals, not Lambda's (DynamoDB Streams to Lambda is typically "
    "sub-second; SQS to Lambda long-polls), and moto's latencies; quote it as this machine's, not AWS's."
)


def run_webhooks(
    stack: StackProcess,
    specs: dict[str, FunctionSpec],
    *,
    deliveries: int,
    tenants: int,
    changes: int,
    tenant_prefix: str,
) -> dict[str, Any]:
    """``tenants``: how many the warm deliveries rotate over, so that none starts more than
    its tier's deliveries a second (5 for the basic tier)."""
    progress("webhooks: warm deliveries, change-to-delivery delay")
    admin = local_admin(stack.state)
    with receiving() as receiver:
        hooks = {
            tenant: register(stack, admin, tenant, receiver.url)
            for tenant in (f"{tenant_prefix}-{index}" for index in range(tenants))
        }
        warm = run_warm_deliveries(stack, specs, deliveries=deliveries, receiver=receiver, hooks=hooks)
        delay = run_delay(stack, changes=changes, tenant=next(iter(hooks)), receiver=receiver)
    return {"warm": warm, **delay, "cost_per_million_deliveries": delivery_cost(warm), "note": DELIVERY_NOTE}
