"""A webhook endpoint that fails for minutes under a steady flow of events: what
the pool's queue holds for it, what parking costs, and how fast the lot drains
once the endpoint answers again (docs/webhooks.md, "Parking").

A basic tenant's webhook; its events queued as the fan-out queues them, at its
tier's delivery rate (5 a second), every event a new ticket's but every fifth a
ticket's second event (their order is checked). Three phases on a simulated
clock: the endpoint answers 204 (``healthy``), then 500 (``failing``), then
204 again (``recovering``: no new events, so that the figure is how fast the lot
drains, at most the tier's rate: a tenant sending at its tier's full rate never
catches up on a backlog, parked or not; until the lot and the queue are empty
and every event is delivered).

The delivery function's code runs in this process with its role's credentials
against the local stack's emulator (every DynamoDB and KMS call through the IAM
guard, as the function makes them), on a FIFO queue of its own that the local
stack's event source does not poll: the bench receives it as Lambda's source
does (batches of 10, the messages not reported deleted, a failed group's
unattempted followers visible again) once every simulated second, and the
function's clock is the simulated one. A visibility change holds its message
until the simulated clock passes its delay; the messages so held are SQS's
messages *in flight* (the queue's 120,000), counted every simulated second. The
POST is the function's own up to the socket: its URL checked, its secret
decrypted with KMS and its headers signed, then answered by the phase's status
without a network round trip (an answer, not a hang: a hanging endpoint holds
the same slots, docs/webhooks.md). Figures are counts (messages, calls, units,
simulated seconds), which do not move with this machine's load.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from bench.stackproc import StackProcess
from bench.warm import progress
from bench.webhook_setup import DELIVERY, HANGING_TIER, queue_entry, register
from local_stack.lambda_.runtime import environment
from local_stack.running_stack import local_admin
from stack_model.functions import FunctionSpec
from support_tickets.core import keys
from support_tickets.streams.records import own_client
from support_tickets.usage import meter
from support_tickets.webhooks.delivery import Deliverer, SecretOpener, Sender, tier_rates
from support_tickets.webhooks.urls import CheckedUrl

# A whole run's phases (simulated seconds): 100 events healthy, then 600 failing, 6 times a
# webhook's slots (each message costs the emulator ~20 calls of ~20 ms here: ~10 minutes);
# the quick run's: a few events, 2 slots.
HEALTHY_S = 20
FAILING_S = 120
QUICK_HEALTHY_S = 1
QUICK_FAILING_S = 2
QUICK_SLOTS = 2
# The quick run's events a second: past its 2 slots within its failing seconds, at half the cost.
QUICK_EVENTS_PER_SECOND = 2
# The recovery's cap: a run that drains nothing in this long is stuck, not slow.
RECOVERY_CAP_S = 4 * 3600
BATCH = 10
SECOND_EVENT_EVERY = 5


class SimulatedQueue:
    """The function's SQS client on the simulated clock (module docstring)."""

    def __init__(self, sqs: Any, queue_url: str) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.now = time.time()  # SentTimestamp is SQS's (real) clock: the simulated one starts there
        self.waiting: dict[str, float] = {}

    def clock(self) -> float:
        return self.now

    def change_message_visibility(self, **kwargs: Any) -> Any:
        self.waiting[kwargs["ReceiptHandle"]] = self.now + kwargs["VisibilityTimeout"]
        return self.sqs.change_message_visibility(**{**kwargs, "VisibilityTimeout": 43_000})

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for receipt, due in list(self.waiting.items()):
            if due <= self.now:
                self.sqs.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=receipt, VisibilityTimeout=0)
                del self.waiting[receipt]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sqs, name)


class Endpoint:
    """The POST answered by the phase's status; what it received (event ids, in order)."""

    def __init__(self) -> None:
        self.status = 204
        self.delivered: list[str] = []
        self.attempts = 0

    def __call__(self, checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        self.attempts += 1
        if 200 <= self.status < 300:
            self.delivered.append(str(headers["webhook-id"]))
        return self.status


def lambda_record(message: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
    }


class Scene:
    def __init__(self, stack: StackProcess, spec: FunctionSpec, tenant: str, webhook_id: str, **options: Any) -> None:
        self.tenant, self.webhook_id = tenant, webhook_id
        operator = stack.operator("sqs")
        self.queue_url = operator.create_queue(
            QueueName=f"{tenant}-parking.fifo", Attributes={"FifoQueue": "true", "MaximumMessageSize": "1048576"}
        )["QueueUrl"]
        dead_letters = operator.create_queue(QueueName=f"{tenant}-parking-dlq.fifo", Attributes={"FifoQueue": "true"})
        self.queue = SimulatedQueue(operator, self.queue_url)
        self.endpoint = Endpoint()
        self.deliverer = Deliverer(
            table_name=os.environ["TABLE_NAME"],
            dynamodb=own_client("dynamodb"),
            sender=Sender(
                SecretOpener(own_client("kms"), os.environ["WEBHOOK_KEY_ARN"]),
                allow_local_http=True,
                post=self.endpoint,
            ),
            sqs=self.queue,
            queue_url=self.queue_url,
            dead_letter_queue_url=dead_letters["QueueUrl"],
            clock=self.queue.clock,
            tier_rates=tier_rates(spec.environment.get("WEBHOOK_TIER_RATES", "")),
            tier_in_flight=tier_rates(spec.environment.get("WEBHOOK_TIER_IN_FLIGHT", "")),
            **options,
        )
        self.sent: list[str] = []  # event ids, in order
        self.tickets: dict[str, list[str]] = {}  # ticket -> its event ids, in order
        self.in_flight: list[int] = []
        self.parked: list[int] = []

    def queue_events(self, count: int) -> None:
        for _ in range(count):
            number = len(self.sent)
            if number % SECOND_EVENT_EVERY == SECOND_EVENT_EVERY - 1 and self.tickets:
                ticket = list(self.tickets)[-2 if len(self.tickets) > 1 else -1]  # a ticket's second event
            else:
                ticket = f"P{number:07d}"
            entry = queue_entry(self.tenant, self.webhook_id, ticket)
            self.queue.sqs.send_message(QueueUrl=self.queue_url, **entry)
            event_id = entry["MessageBody"].split('"id":"', 1)[1].split('"', 1)[0]
            self.sent.append(event_id)
            self.tickets.setdefault(ticket, []).append(event_id)

    def second(self, *, skip_idle: bool = False) -> None:
        """One simulated second: what is visible received and handled, then the clock moved
        on; ``skip_idle`` (no events coming): when nothing was received, on to the next
        message due back instead (its in-flight count is the same meanwhile)."""
        records: list[dict[str, Any]] = []
        while True:
            found = self.queue.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=BATCH, VisibilityTimeout=43_000,
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])  # fmt: skip
            if not found:
                break
            records.extend(lambda_record(message) for message in found)
        for start in range(0, len(records), BATCH):
            batch = records[start : start + BATCH]
            failed = set(self.deliverer.process_batch(batch))
            for record in batch:
                if record["messageId"] not in failed:
                    self.queue.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=record["receiptHandle"])
                elif record["receiptHandle"] not in self.queue.waiting:
                    self.queue.sqs.change_message_visibility(
                        QueueUrl=self.queue_url, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=0
                    )
        self.in_flight.append(len(self.queue.waiting))  # the drain's token included
        due = min(self.queue.waiting.values(), default=self.queue.now + 1)
        self.queue.advance(max(1.0, due - self.queue.now) if skip_idle and not records else 1.0)

    def lot_size(self, operator: Any, table: str) -> int:
        item = operator.get_item(
            TableName=table, Key=keys.webhook_circuit_key(self.tenant, self.webhook_id), ConsistentRead=True
        ).get("Item")
        return int(item["parked"]["N"]) if item and "parked" in item else 0


def _units(consumed: meter.Consumed, events: int) -> dict[str, float]:
    events = max(events, 1)
    return {
        "dynamodb_calls_per_event": round(consumed.calls / events, 2),
        "rru_per_event": round(float(consumed.read_units) / events, 2),
        "wru_per_event": round(float(consumed.write_units) / events, 2),
    }


def run_parking(stack: StackProcess, specs: dict[str, FunctionSpec], *, quick: bool, tenant: str) -> dict[str, Any]:
    """The three phases (module docstring) for a basic tenant ``tenant``: the whole run's,
    with the function's 100 retry slots, or ``quick``'s few seconds with 2."""
    healthy_s, failing_s = (QUICK_HEALTHY_S, QUICK_FAILING_S) if quick else (HEALTHY_S, FAILING_S)
    spec = specs[DELIVERY]
    admin = local_admin(stack.state)
    admin.ensure(tenant)
    admin.set_tier(tenant, HANGING_TIER)
    webhook_id = register(stack, admin, tenant, "http://127.0.0.1:9/parking-bench")
    table = str(stack.state["table_name"])
    operator = stack.operator("dynamodb")
    tier_rate = int((tier_rates(spec.environment.get("WEBHOOK_TIER_RATES", "")) or {})[HANGING_TIER])
    rate = min(tier_rate, QUICK_EVENTS_PER_SECOND) if quick else tier_rate
    options = {"retry_slots": QUICK_SLOTS} if quick else {}
    phases: dict[str, Any] = {}
    with environment(stack.function_environment(spec)):
        scene = Scene(stack, spec, tenant, webhook_id, **options)
        for phase, seconds, status in (("healthy", healthy_s, 204), ("failing", failing_s, 500)):
            progress(f"webhooks: parking, {phase} endpoint ({seconds} simulated s)")
            scene.endpoint.status = status
            sent_before, in_flight_before = len(scene.sent), len(scene.in_flight)
            meter.start()
            for _ in range(seconds):
                scene.queue_events(rate)
                scene.second()
            consumed = meter.finish()
            events = len(scene.sent) - sent_before
            phases[phase] = {
                "seconds": seconds,
                "events": events,
                "in_flight_peak": max(scene.in_flight[in_flight_before:]),
                "parked_at_end": scene.lot_size(operator, table),
                **_units(consumed, events),
            }
        progress("webhooks: parking, the endpoint answers again: until the lot is drained")
        scene.endpoint.status = 204
        sent_before, in_flight_before = len(scene.sent), len(scene.in_flight)
        meter.start()
        drained_after: int | None = None
        parked_at_recovery = scene.lot_size(operator, table)
        recovered_at = scene.queue.now
        while scene.queue.now - recovered_at < RECOVERY_CAP_S:
            scene.second(skip_idle=True)
            if drained_after is None and scene.lot_size(operator, table) == 0:
                drained_after = round(scene.queue.now - recovered_at)
            if (
                drained_after is not None
                and not scene.queue.waiting
                and set(scene.endpoint.delivered) >= set(scene.sent)
            ):
                break
        consumed = meter.finish()
        phases["recovering"] = {
            "events": len(scene.sent) - sent_before,
            "parked_at_start": parked_at_recovery,
            "lot_drained_after_s": drained_after,
            "in_flight_peak": max(scene.in_flight[in_flight_before:]),
            **_units(consumed, parked_at_recovery),
        }
    missing = set(scene.sent) - set(scene.endpoint.delivered)
    if missing:
        raise RuntimeError(f"{len(missing)} events never delivered")
    first_arrival = {event_id: index for index, event_id in reversed(list(enumerate(scene.endpoint.delivered)))}
    out_of_order = sum(
        1
        for events_of_ticket in scene.tickets.values()
        for earlier, later in itertools.pairwise(events_of_ticket)
        if first_arrival[earlier] > first_arrival[later]
    )
    duplicates = sum(count - 1 for count in Counter(scene.endpoint.delivered).values())
    return {
        "tier": HANGING_TIER,
        "rate_per_second": rate,
        "retry_slots": scene.deliverer.retry_slots,
        "events": len(scene.sent),
        "tickets_with_two_events": sum(1 for events in scene.tickets.values() if len(events) > 1),
        "attempts": scene.endpoint.attempts,
        "duplicates": duplicates,
        "out_of_order": out_of_order,
        "phases": phases,
    }


PARKING_NOTE = (
    "How: on a simulated clock, the endpoint answers 204, then 500, then 204 with no new events until all are "
    "delivered (every fifth event a ticket's second, its order checked); the delivery function's code runs here "
    "against the emulator, on a queue received as Lambda's FIFO source does. In flight: the messages the queue "
    "held at once (SQS FIFO's 120,000 are every tenant's). Counts, not timings."
)
