"""What a webhook delivery costs, and how long a ticket change takes to reach
its receiver (docs/webhooks.md).

- **Warm delivery**: the delivery function's handler, in this process, with
  its own role's credentials against the local stack's emulator, fed Lambda
  SQS events of one message each (an event for a webhook registered through
  the API, pointing at a receiver on 127.0.0.1), each delivery's record
  written first as the fan-out writes it before queueing the message (not
  timed; its units sized apart): its duration, its AWS calls and the
  DynamoDB units they bill (the capacity model), in a warm container
  (one unmeasured delivery per tenant first: the clients made, each tenant's
  record and decrypted secret cached, as in a busy container). Messages go
  round-robin over several tenants so that none reaches its tier's
  deliveries per second.
- **Change to delivery**: tickets created one after the other through the
  local stack's HTTP API by the first of those tenants (one webhook,
  subscribed to ``ticket.created``, the same receiver); the time from the
  API's response to the receiver's receipt of that ticket's event (the
  table's stream, the audit-trail function, the FIFO queue, the delivery
  function: the local stack's pollers, whose polling intervals are not
  Lambda's). Measured alone, in the rounds of the next-but-one item.
- **Cost per million deliveries**, from the measured warm duration and units
  (the fan-out's version read and record write included) at the list prices
  of :mod:`support_tickets.usage.prices`, for a first attempt that succeeds;
  the assumptions are written into the results.
- **A neighbour's hanging endpoint** (:func:`run_hang`): tenant B's delays in
  rounds: alone (its changes through the API as above, then its events queued
  as the fan-out queues them, send to receipt), then its queued events beside
  another tenant (A, basic tier) whose events are queued at its tier's delivery
  rate (``WEBHOOK_TIER_RATES``, :class:`EventLoad`) for :data:`A_BURST_S`, then
  one whenever its endpoint holds fewer attempts than A's bound, for a webhook
  whose endpoint never answers (:class:`HangingReceiver`: each attempt runs the
  delivery function's whole 10 s deadline). Measured from the queue because
  the local stack's one emulator process and one stream shard can't carry A's
  traffic through the API and the stream as well on this machine (tried with
  A's 5 creates a second: the audit trail took ~650 ms a record and B's records
  waited behind A's), nor A's deferred backlog at its tier's rate for a whole
  block (its receives grow to ~25 a second within a minute, while the one
  emulator process served 10 to 15: A's messages piled up ahead of B's), hence
  A's rate for :data:`A_BURST_S` only. In AWS those receives come up to 10 to
  an invocation, a fraction of one of the 50. The local stack runs the queue's event source at the
  template's ``MaximumConcurrency`` (``serve --queue-concurrency``, passed by
  ``python -m bench``), its batches mixing groups as Lambda's FIFO source
  does; an unmeasured hang first starts the delivery function's execution
  environments. Each hang block has an A of its own (A holding its tier's
  in-flight bound, its burst's messages waiting out the longest deferral and
  no message waiting in the queue before B's first event); after it, A's
  webhook is deleted, its endpoint let go, the queue clock moved past every
  retry delay, the queue drained and the stream caught up, so the next round
  starts from an idle pool. Figures: B's delay p50/p99 in each condition, how
  many attempts A had under way at most (its bound, ``WEBHOOK_TIER_IN_FLIGHT``)
  and at each of B's receipts, A's burst rate achieved and its events after
  it, the delivery function's invocations a second and its execution
  environments (the pool's high-water mark). Under ``--quick`` a tiny version
  exercises the harness in about a
  second more than one change (:meth:`HangScene.quick`: B's one change, A's
  three events right behind it, A's endpoint let go once B's event arrived;
  no timing).
- **What a new webhook's freshness costs** (:func:`run_freshness`): the
  audit-trail function's :meth:`WebhookFanout.subscriptions
  <support_tickets.webhooks.fanout.WebhookFanout.subscriptions>`, in this
  process with its role, as each batch of stream records first calls it for a
  tenant: one consistent GetItem of the tenant's webhook count item, plus a
  consistent Query when its version moved. Its calls and read units (the
  capacity model) and its warm duration per batch, for a tenant without
  webhooks, one with a webhook whose version did not move, and one whose
  version just moved; against the design before (the webhooks cached 30 s,
  nothing read per batch: the cached call's duration is measured too), and the
  USD per million events at list prices when each event is its tenant's only
  one in its batch (the worst case).
"""

from __future__ import annotations

import json
import os
import select
import socket
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from bench.calls import CallRecorder, Tally
from bench.parking import PARKING_NOTE, run_parking
from bench.stackproc import StackProcess
from bench.stats import percentile, summary
from bench.warm import progress, quiet_stdout
from bench.webhook_setup import (
    DELIVERY,
    HANGING_TIER,
    QueuedEvent,
    api,
    lambda_record,
    queue_entry,
    queued_event,
    register,
)
from local_stack.event_sources.sqs_poller import sqs_sources
from local_stack.lambda_.runtime import LambdaContext, environment
from local_stack.local_values import queue_name
from local_stack.running_stack import control_call, local_admin
from stack_model.capacity import CapacityMeter, TableShape
from stack_model.functions import FunctionSpec, load_handler
from stack_model.template import resources
from support_tickets.core import keys
from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.streams.records import own_client
from support_tickets.usage import prices
from support_tickets.webhooks.delivery import THROTTLED_MAX_DELAY_SECONDS, tier_rates
from support_tickets.webhooks.delivery_records import DeliveryRecords
from support_tickets.webhooks.fanout import WebhookFanout, start_batch

AUDIT_TRAIL = "AuditTrailFunction"
WEBHOOK_QUEUE = "WebhookEventsQueue"
# How long the bench waits for something the local stack does within seconds (a hang to
# set in, a drain): a guard against a stuck run, not a figure.
WAIT_S = 120.0
# Past every delay a deferred or failed message of a hang block can have been given
# (60 s at most for a deferral, 5 s x 2^(n-1) for a retry: n stays small in a block).
QUEUE_CLOCK_JUMP_S = 3600
# The warm-up's hang lasts until the delivery function's environments have not grown for this long.
WARM_UP_STEADY_S = 15.0
# B's queued events are this far apart at least (a hang block lasts about its events times this:
# long enough for A's deferred messages to come back again and again meanwhile).
EVENT_SPACING_S = 2.0
# A's events go out at its tier's rate for this many seconds (60 at basic's 5 a second: without
# the in-flight bound their attempts, 10 s each, would hold all 50 invocations), then one
# whenever its endpoint holds fewer attempts than A's bound (a new event at hand when a lease is
# given back, as at its tier's rate). Sending on at its tier's rate, the receives of A's deferred
# backlog would outgrow what the local stack's one emulator process serves here (HANG_NOTE).
A_BURST_S = 12
# B's events start once every message of A's burst waits out the longest deferral: a message
# over A's bounds comes back after 2, 4, 8, 16, 32, then 60 s at a time (webhooks.delivery's
# bound delays), so 62 s after the burst. Before that the burst's receives (up to ~10 a second)
# load the one emulator process B's deliveries share here (HANG_NOTE).
A_BACKLOG_STEADY_S = sum(min(2**receives, THROTTLED_MAX_DELAY_SECONDS) for receives in range(1, 6))


class Endpoint:
    """A webhook endpoint on 127.0.0.1, a thread per request: each POST's body goes to
    :meth:`post`, which answers it; :meth:`serving` runs it."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                endpoint.post(self, self.rfile.read(int(self.headers.get("content-length") or 0)))

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    def post(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def closing(self) -> None:
        """What ends before the server does (nothing here)."""

    @contextmanager
    def serving(self) -> Iterator[Self]:
        thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.closing()
            self.server.shutdown()
            self.server.server_close()


def answer_204(request: BaseHTTPRequestHandler) -> None:
    request.send_response(204)
    request.send_header("content-length", "0")
    request.end_headers()


class Receiver(Endpoint):
    """An endpoint that answers 204 and notes when each event arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: dict[str, float] = {}  # the event's ticket id -> time.monotonic()
        self.count = 0

    def post(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        at = time.monotonic()
        answer_204(request)
        ticket = json.loads(body).get("data", {}).get("ticket_id")
        with self.changed:
            self.count += 1
            if isinstance(ticket, str):
                self.arrived.setdefault(ticket, at)
            self.changed.notify_all()

    def wait_for(self, ticket_id: str, timeout: float) -> float:
        with self.changed:
            if not self.changed.wait_for(lambda: ticket_id in self.arrived, timeout):
                raise RuntimeError(f"the event of ticket {ticket_id} did not arrive within {timeout} s")
            return self.arrived[ticket_id]


def receiving() -> AbstractContextManager[Receiver]:
    return Receiver().serving()


def run_warm_deliveries(
    stack: StackProcess, specs: dict[str, FunctionSpec], *, deliveries: int, receiver: Receiver, hooks: dict[str, str]
) -> dict[str, Any]:
    """``deliveries`` timed warm invocations of the delivery function, one message each
    (and as many more sized with the capacity model), to ``hooks`` (tenant -> its webhook).

    Each message's delivery record is written first, as the fan-out writes it before it
    queues the message (:meth:`DeliveryRecords.record_queued
    <support_tickets.webhooks.delivery_records.DeliveryRecords.record_queued>`, with the
    audit-trail function's role): untimed, and outside the delivery's calls and units, so
    that the delivery function updates that record as it does in the product (DynamoDB
    bills an update by the larger of the item before and after). That write is sized here,
    once per sized delivery (``fanout_wru_per_delivery``), rather than in
    :func:`run_freshness`: it is made once per delivery, not per batch, and here it is
    the very record, of the very event, that the delivery then updates."""
    spec = specs[DELIVERY]
    names = list(hooks)
    table = str(stack.state["table_name"])
    recorder = CallRecorder()
    meter = CapacityMeter(stack.operator("dynamodb"), TableShape.from_template(table))
    durations: list[float] = []
    tallies = []
    fanout_tallies = []
    recorder.install()
    try:
        with environment(stack.function_environment(specs[AUDIT_TRAIL])):
            fanout_client = OwnClient(own_client("dynamodb"))  # made while recording: its writes can be sized
        with environment(stack.function_environment(spec)), quiet_stdout():
            handler = load_handler(spec.code_uri, spec.handler, module_name="_bench_deliver_webhook")
            context = LambdaContext(function_name=DELIVERY, memory_limit_in_mb=spec.memory_mb, timeout_s=spec.timeout_s)
            # One per tenant warms the container up (its clients, each tenant's record and
            # secret cached as in a busy container): not measured. Then every other delivery is
            # timed (no capacity model: its look-ups around each call would add to the time) and
            # the others sized (their calls and units, and the fan-out's write of their record).
            warmup = len(names)
            for number in range(warmup + 2 * deliveries):
                tenant = names[number % len(names)]
                queued = queued_event(tenant, hooks[tenant], f"T{number:06d}")
                sized = number >= warmup and (number - warmup) % 2 == 1
                records = DeliveryRecords(TenantTable(tenant, table, fanout_client))
                fanout_tally = record_as_queued(recorder, records, queued, meter if sized else None)
                event = {"Records": [lambda_record(queued.entry)]}
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
                    fanout_tallies.append(fanout_tally)
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
        "fanout_wru_per_delivery": round(sum(t.wru for t in fanout_tallies) / len(fanout_tallies), 3),
    }


def record_as_queued(
    recorder: CallRecorder, records: DeliveryRecords, queued: QueuedEvent, meter: CapacityMeter | None
) -> Tally:
    """``queued``'s delivery record written as the fan-out writes it before it queues the
    message: its calls, and its units when ``meter`` sizes them."""
    recorder.meter = meter
    try:
        with recorder.request() as tally:
            written = records.record_queued(queued.record)
    finally:
        recorder.meter = None
    if not written:
        raise RuntimeError(f"delivery {queued.record.delivery_id} had a record already")
    return tally


class HangingReceiver(Endpoint):
    """An endpoint that never answers: it reads each request and holds it open until the
    caller hangs up (the delivery function's deadline) or the bench lets it go
    (:meth:`release`: then it answers 204 at once, and so does every later request
    until :meth:`hold`). Counts the requests it holds at once."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()
        self.held = 0
        self.most_held = 0
        self.requests = 0

    def post(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        with self.changed:
            self.requests += 1
            self.held += 1
            self.most_held = max(self.most_held, self.held)
            self.changed.notify_all()
        try:
            while not self.released.is_set():
                readable, _, _ = select.select([request.connection], [], [], 0.05)
                if readable and not request.connection.recv(1, socket.MSG_PEEK):
                    return  # the caller hung up: its deadline passed
            answer_204(request)
        finally:
            with self.changed:
                self.held -= 1
                self.changed.notify_all()

    def hold(self) -> None:
        """Hang again; the counts start over."""
        with self.changed:
            self.released.clear()
            self.most_held = self.held
            self.requests = 0

    def release(self) -> None:
        self.released.set()

    def closing(self) -> None:
        """Every held request answered before the server stops."""
        self.release()

    def wait_for(self, condition: Callable[[HangingReceiver], bool], timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: condition(self), timeout)


def hanging() -> AbstractContextManager[HangingReceiver]:
    return HangingReceiver().serving()


def webhook_queue_url(stack: StackProcess) -> str:
    """The local stack's ``WebhookEventsQueue`` (named as the emulator names a template queue)."""
    props = resources("AWS::SQS::Queue")[WEBHOOK_QUEUE]["Properties"]
    return str(stack.operator("sqs").get_queue_url(QueueName=queue_name(WEBHOOK_QUEUE, props))["QueueUrl"])


class EventLoad:
    """One tenant's events for one webhook sent to the webhook queue as the fan-out sends
    them (one message per event, a group per ticket), on a thread of its own until
    :meth:`stop`: ``per_second`` of them in one ``SendMessageBatch`` a second (as a batch of
    stream records' events arrive together) for the first ``burst_s`` seconds (``None``:
    all along), then one a second at most, when ``top_up`` says one is wanted (a second is
    ``interval_s``: shorter in tests). Sends slower than that make the rate fall behind;
    :meth:`stop` says what was achieved."""

    def __init__(
        self,
        stack: StackProcess,
        tenant: str,
        webhook_id: str,
        per_second: int,
        *,
        burst_s: int | None = None,
        top_up: Callable[[], bool] = lambda: False,
        interval_s: float = 1.0,
    ) -> None:
        self.tenant, self.webhook_id = tenant, webhook_id
        self.per_second, self.burst_s, self.top_up, self.interval_s = per_second, burst_s, top_up, interval_s
        self.sqs = stack.operator("sqs")  # made here: the thread only uses it
        self.queue_url = webhook_queue_url(stack)
        self.sent = 0
        self.topped_up = 0
        self.burst: dict[str, Any] = {}  # what the burst sent, once it is over
        self.burst_over = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-event-load", daemon=True)
        self._started = 0.0

    def send(self, count: int) -> None:
        entries = [
            {"Id": str(n), **queue_entry(self.tenant, self.webhook_id, f"A{self.sent + n:06d}")} for n in range(count)
        ]
        answer = self.sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
        if answer.get("Failed"):
            raise RuntimeError(f"events not queued: {answer['Failed']}")
        self.sent += count

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def _run(self) -> None:
        second = 1
        while not self._stop.wait(max(0.0, self._started + second * self.interval_s - time.monotonic())):
            if self.burst_s is None or second <= self.burst_s:
                self.send(self.per_second)
                if second == self.burst_s:
                    self.burst = self._achieved()
                    self.burst_over.set()
            elif self.top_up():
                self.send(1)
                self.topped_up += 1
            second += 1

    def _achieved(self) -> dict[str, Any]:
        elapsed = time.monotonic() - self._started
        return {
            "seconds": round(elapsed, 1),
            "sent": self.sent,
            "rate_per_second": round(self.sent / elapsed, 2) if elapsed else 0.0,
            "topped_up": self.topped_up,
        }

    def stop(self) -> dict[str, Any]:
        """Stop sending; what was sent (and, after a burst, what the burst sent)."""
        self._stop.set()
        self._thread.join()
        return {**self._achieved(), **({"burst": self.burst} if self.burst else {})}


def delivery_bounds(spec: FunctionSpec, tier: str) -> dict[str, Any]:
    """The delivery function's per-tenant bounds (its template environment) and its event
    source's ``MaximumConcurrency``: the pool a hanging endpoint could fill."""
    in_flight = tier_rates(spec.environment.get("WEBHOOK_TIER_IN_FLIGHT", "")) or {}
    rates = tier_rates(spec.environment.get("WEBHOOK_TIER_RATES", "")) or {}
    return {
        "tier": tier,
        "in_flight": in_flight[tier],
        "rate_per_second": rates[tier],
        "in_flight_by_tier": in_flight,
        "rate_by_tier": rates,
        "pool": queue_concurrency(spec.logical_id),
    }


def queue_concurrency(function: str = DELIVERY) -> int:
    """The ``MaximumConcurrency`` of ``function``'s SQS event source in the template
    (what ``python -m bench`` starts the local stack's source with)."""
    (limit,) = {source.maximum_concurrency for source in sqs_sources() if source.function == function}
    if limit is None:
        raise RuntimeError(f"{function}'s SQS event source has no MaximumConcurrency")
    return limit


def environments_of(stack: StackProcess, function: str) -> int | None:
    """How many execution environments (processes) of ``function`` the local stack has
    started and kept (each serves one invocation at a time: the most it ran at once);
    ``None`` where /proc can't tell."""
    wanted = f"AWS_LAMBDA_FUNCTION_NAME={function}".encode()
    parent = str(stack.process.pid)
    found = 0
    try:
        processes = [entry for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    except OSError:
        return None
    for process in processes:
        try:
            # The parent's pid is the field after the command's name, which ends with ")".
            if process.joinpath("stat").read_text().rpartition(")")[2].split()[1] != parent:
                continue
            if wanted in process.joinpath("environ").read_bytes().split(b"\0"):
                found += 1
        except (OSError, IndexError):
            continue  # ended meanwhile
    return found


def queue_invocations(stack: StackProcess) -> int:
    """The SQS event sources' invocations so far (the control endpoint's counters, no wait)."""
    return int(control_call(stack.state, "queues/drain?timeout=0", timeout=30)["invocations"])


def delays_of(
    stack: StackProcess,
    tenant: str,
    receiver: Receiver,
    changes: int,
    *,
    label: str,
    after_create: Callable[[], None] | None = None,
    timeout: float = WAIT_S,
) -> list[float]:
    """``changes`` tickets created one at a time by ``tenant`` (whose webhook posts to
    ``receiver``): each one's API response to its event's receipt, in ms
    (``after_create``: called after each API response)."""
    delays: list[float] = []
    token = stack.token(tenant, f"u-{tenant}")
    for number in range(changes):
        status, ticket = api(stack, "POST", "/tickets", token, {"title": f"{label} {number}"})
        answered = time.monotonic()
        if status != 201:
            raise RuntimeError(f"ticket not created: {status} {ticket}")
        if after_create is not None:
            after_create()
        delays.append((receiver.wait_for(str(ticket["ticket_id"]), timeout) - answered) * 1000)
    return delays


def delay_figures(delays: list[float]) -> dict[str, Any]:
    return {
        "changes": len(delays),
        "delay_ms": {
            **summary(delays),
            "p50": round(percentile(delays, 0.50), 1),
            "p99": round(percentile(delays, 0.99), 1),
        },
    }


def run_hang(
    stack: StackProcess,
    specs: dict[str, FunctionSpec],
    admin: Any,
    *,
    tenant: str,
    webhook_id: str,
    receiver: Receiver,
    rounds: int,
    changes: int,
    tenant_prefix: str,
) -> dict[str, Any]:
    """``tenant``'s (B's, ``webhook_id`` posting to ``receiver``) delays, in ``rounds``
    rounds: ``changes`` changes through the API and ``changes`` events queued, alone, then
    ``changes`` events queued while a fresh basic tenant (A) has events at its tier's
    delivery rate for an endpoint that never answers (module docstring), after one
    unmeasured such block that starts the delivery function's execution environments.
    ``rounds`` 0: the quick version (:meth:`HangScene.quick`: B's one change, A's events
    behind it)."""
    bounds = delivery_bounds(specs[DELIVERY], HANGING_TIER)
    scene = HangScene(stack, admin, tenant, webhook_id, receiver, bounds)
    with hanging() as endpoint:
        scene.endpoint = endpoint
        if rounds == 0:
            return {**bounds, "quick": True, **scene.quick(f"{tenant_prefix}-a0")}
        progress("webhooks: a hang block, unmeasured, starts the delivery function's execution environments")
        warm_up = scene.warm_up(f"{tenant_prefix}-aw")
        changes_alone: list[float] = []
        alone: list[float] = []
        hung: list[float] = []
        held_at_arrivals: list[int] = []
        blocks: list[dict[str, Any]] = []
        load_average = {"start": [round(value, 2) for value in os.getloadavg()]}
        for round_number in range(rounds):
            progress(f"webhooks: round {round_number + 1}/{rounds}: B alone, then beside A's hanging endpoint")
            changes_alone += delays_of(stack, tenant, receiver, changes, label="alone")
            alone += scene.queued_delays(changes)[0]
            block = scene.block(f"{tenant_prefix}-a{round_number}", changes)
            hung += block.pop("delays")
            held_at_arrivals += block.pop("held_at_arrivals")
            blocks.append(block)
        load_average["end"] = [round(value, 2) for value in os.getloadavg()]
    sent = sum(block["a_load"]["sent"] for block in blocks)
    return {
        **bounds,
        "quick": False,
        "rounds": rounds,
        "changes_per_block": changes,
        "baseline": delay_figures(changes_alone),
        "alone": delay_figures(alone),
        "hanging": {
            **delay_figures(hung),
            "a_most_held": max(block["a_most_held"] for block in blocks),
            "held_at_b_arrivals": {
                "min": min(held_at_arrivals),
                "at_bound": sum(1 for held in held_at_arrivals if held >= bounds["in_flight"]),
                "n": len(held_at_arrivals),
            },
            "a_attempts": sum(block["a_attempts"] for block in blocks),
            "a_backlog": max(block["a_backlog"] for block in blocks),
            "a_sent": sent,
            "a_rate_per_second": round(sent / sum(block["a_load"]["seconds"] for block in blocks), 2),
            "a_burst": {
                "seconds": A_BURST_S,
                "rate_per_second": round(
                    sum(block["a_load"]["burst"]["sent"] for block in blocks)
                    / sum(block["a_load"]["burst"]["seconds"] for block in blocks),
                    2,
                ),
            },
            "a_topped_up": sum(block["a_load"]["topped_up"] for block in blocks),
            "settled_s": max(block["settled_s"] for block in blocks),
            "invocations_per_second": round(
                sum(block["invocations"] for block in blocks) / sum(block["seconds"] for block in blocks), 1
            ),
            "delivery_environments": blocks[-1]["delivery_environments"],
            "blocks": blocks,
        },
        "warm_up": warm_up,
        "load_average": load_average,
    }


@dataclass
class HangScene:
    """Tenant B (``tenant``, its webhook ``webhook_id`` posting to ``receiver``) and, per
    block, a tenant A whose webhook posts to ``endpoint``, which never answers."""

    stack: StackProcess
    admin: Any
    tenant: str
    webhook_id: str
    receiver: Receiver
    bounds: dict[str, Any]
    endpoint: HangingReceiver | None = None
    queued: int = 0  # B's events queued so far (their ticket ids)

    @property
    def hanging(self) -> HangingReceiver:
        if self.endpoint is None:
            raise RuntimeError("no hanging endpoint")
        return self.endpoint

    def neighbour(self, neighbour: str) -> EventLoad:
        """A basic tenant with a webhook at the hanging endpoint; its events at its tier's
        rate for :data:`A_BURST_S`, then one whenever the endpoint holds fewer attempts than
        A's bound."""
        self.admin.ensure(neighbour)
        self.admin.set_tier(neighbour, HANGING_TIER)
        webhook_id = register(self.stack, self.admin, neighbour, self.hanging.url)
        bound, endpoint = self.bounds["in_flight"], self.hanging
        return EventLoad(
            self.stack,
            neighbour,
            webhook_id,
            self.bounds["rate_per_second"],
            burst_s=A_BURST_S,
            top_up=lambda: endpoint.held < bound,
        )

    def settled(self, queue_url: str) -> float:
        """Wait until no message waits in the queue to be received (A's are all attempted or
        deferred): the seconds it took."""
        sqs, started = self.stack.operator("sqs"), time.monotonic()
        while time.monotonic() - started < WAIT_S:
            waiting = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
            if waiting["Attributes"]["ApproximateNumberOfMessages"] == "0":
                return round(time.monotonic() - started, 1)
            time.sleep(0.5)
        raise RuntimeError(f"messages still waited in the queue after {WAIT_S:g} s")

    def queued_delays(self, count: int) -> tuple[list[float], list[int]]:
        """``count`` events of B queued one at a time (one every :data:`EVENT_SPACING_S` at
        most), as the fan-out queues them: each one's send to its receipt, in ms, and how
        many attempts A's endpoint held at each receipt."""
        sqs, queue_url = self.stack.operator("sqs"), webhook_queue_url(self.stack)
        delays: list[float] = []
        held: list[int] = []
        for _ in range(count):
            ticket_id = f"B{self.queued:06d}"
            self.queued += 1
            sqs.send_message(QueueUrl=queue_url, **queue_entry(self.tenant, self.webhook_id, ticket_id))
            sent = time.monotonic()
            delays.append((self.receiver.wait_for(ticket_id, WAIT_S) - sent) * 1000)
            held.append(self.endpoint.held if self.endpoint is not None else 0)
            time.sleep(max(0.0, sent + EVENT_SPACING_S - time.monotonic()))
        return delays, held

    def warm_up(self, neighbour: str) -> dict[str, Any]:
        """An unmeasured block: A hangs (its burst at its tier's rate) until the delivery
        function's execution environments stop growing (each new one is a process's cold
        start, which AWS runs elsewhere and this machine runs on the cores it measures with),
        then A is cleared away."""
        load = self.neighbour(neighbour)
        self.hanging.hold()
        started = time.monotonic()
        load.start()
        try:
            count, steady_since = environments_of(self.stack, DELIVERY), time.monotonic()
            while time.monotonic() - steady_since < WARM_UP_STEADY_S and time.monotonic() - started < WAIT_S * 2:
                time.sleep(1.0)
                now = environments_of(self.stack, DELIVERY)
                if now != count:
                    count, steady_since = now, time.monotonic()
        finally:
            load.stop()
        self.clear(neighbour, load.webhook_id)
        return {"seconds": round(time.monotonic() - started, 1), "delivery_environments": count}

    def block(self, neighbour: str, count: int) -> dict[str, Any]:
        """One block: A hangs (:meth:`neighbour`'s load), B's ``count`` events measured once A
        holds its bound, its burst's messages wait out the longest deferral
        (:data:`A_BACKLOG_STEADY_S`) and the queue has no message waiting; then A is cleared
        away (:meth:`clear`)."""
        stack, endpoint, bounds = self.stack, self.hanging, self.bounds
        load = self.neighbour(neighbour)
        endpoint.hold()
        load.start()
        try:
            if not endpoint.wait_for(lambda found: found.held >= bounds["in_flight"], WAIT_S):
                raise RuntimeError(f"{neighbour}'s endpoint held fewer than {bounds['in_flight']} in {WAIT_S:g} s")
            if not load.burst_over.wait(WAIT_S):
                raise RuntimeError(f"{neighbour}'s burst did not end in {WAIT_S:g} s")
            time.sleep(A_BACKLOG_STEADY_S)
            settled_s = self.settled(load.queue_url)
            started, invocations = time.monotonic(), queue_invocations(stack)
            delays, held = self.queued_delays(count)
            seconds, invocations = time.monotonic() - started, queue_invocations(stack) - invocations
        finally:
            sent = load.stop()
        backlog = stack.operator("sqs").get_queue_attributes(
            QueueUrl=load.queue_url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]["ApproximateNumberOfMessagesNotVisible"]
        block = {
            "delays": delays,
            "held_at_arrivals": held,
            "a_load": sent,
            "settled_s": settled_s,  # after A_BACKLOG_STEADY_S, until no message of the queue waited
            "a_backlog": int(backlog),  # A's messages waiting out a delay when the block ended
            "a_most_held": endpoint.most_held,
            "a_attempts": endpoint.requests,
            "seconds": round(seconds, 1),
            "invocations": invocations,
            "delivery_environments": environments_of(stack, DELIVERY),
        }
        self.clear(neighbour, load.webhook_id)
        return block

    def clear(self, neighbour: str, webhook_id: str) -> None:
        """A's webhook deleted (its messages are then dropped unattempted), its attempts under
        way answered, the queue clock moved past every delay they were given, the queue
        drained and the stream caught up (A's delivery side writes rate counters, leases
        and records): nothing of A's left for the next block."""
        stack = self.stack
        admin_token = stack.token(neighbour, f"root-{neighbour}", admin=True)
        request = urllib.request.Request(  # noqa: S310 - the local stack's API on loopback
            f"{stack.state['api_url']}/webhooks/{webhook_id}",
            method="DELETE",
            headers={"authorization": f"Bearer {admin_token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            if response.status != 204:
                raise RuntimeError(f"{neighbour}'s webhook not deleted: {response.status}")
        self.hanging.release()
        self.hanging.wait_for(lambda found: found.held == 0, WAIT_S)
        control_call(stack.state, f"queues/drain?timeout={WAIT_S:g}", timeout=WAIT_S + 10)
        control_call(stack.state, f"queues/clock?advance={QUEUE_CLOCK_JUMP_S}", timeout=30)
        control_call(stack.state, f"queues/drain?timeout={WAIT_S:g}", timeout=WAIT_S + 10)
        stack.drain(WAIT_S * 2)

    def quick(self, neighbour: str) -> dict[str, Any]:
        """The harness in about a second more than one change: B's one change, A's events
        (one more than its bound, to its hanging endpoint) right after B's API response, A
        let go once B's event arrived. B's event is ahead of A's in the pipeline, so no
        delivery waits for a second execution environment's cold start; that B is delivered
        while A holds its bound is the full run's figure (and tests/e2e's)."""
        load = self.neighbour(neighbour)
        self.hanging.hold()
        delays = delays_of(
            self.stack,
            self.tenant,
            self.receiver,
            1,
            label="quick",
            after_create=lambda: load.send(self.bounds["in_flight"] + 1),
        )
        self.hanging.release()
        return {
            "baseline": delay_figures(delays),
            "a_sent": load.sent,
            "a_most_held": self.hanging.most_held,
            "b_deliveries": len(delays),
        }


def run_freshness(
    stack: StackProcess, specs: dict[str, FunctionSpec], *, batches: int, with_webhooks: str, without: str
) -> dict[str, Any]:
    """What :meth:`WebhookFanout.subscriptions` costs the audit-trail function at the start
    of each batch (module docstring), ``batches`` times per case, interleaved (every other
    round sized with the capacity model, the others timed). ``with_webhooks`` has one webhook;
    ``without`` never had one."""
    spec = specs[AUDIT_TRAIL]
    operator = stack.operator("dynamodb")  # made before the recorder: its calls aren't the function's
    table = str(stack.state["table_name"])
    meter = CapacityMeter(operator, TableShape.from_template(table))
    cases = {"without webhooks": without, "with webhooks": with_webhooks, "version moved": with_webhooks}
    durations: dict[str, list[float]] = {case: [] for case in [*cases, "cached"]}
    tallies: dict[str, list[Tally]] = {case: [] for case in cases}
    found: dict[str, set[int]] = {case: set() for case in cases}
    recorder = CallRecorder()
    recorder.install()
    try:
        with environment(stack.function_environment(spec)):
            # The function's own fanout (its role's client), as webhook_fanout() makes it; it
            # sends nothing here (only subscriptions() is called).
            fanout = WebhookFanout(
                table_name=os.environ["TABLE_NAME"], client=own_client("dynamodb"), sqs=None, queue_url=""
            )
            for tenant in set(cases.values()):  # warm: the client made, the webhooks cached
                start_batch()
                fanout.subscriptions(tenant)
            for number in range(2 * batches):
                sized = number % 2 == 1
                for case, tenant in cases.items():
                    if case == "version moved":  # as a create or delete of a webhook moves it
                        operator.update_item(
                            TableName=table,
                            Key=keys.webhook_count_key(tenant),
                            UpdateExpression="ADD #version :one",
                            ExpressionAttributeNames={"#version": "version"},
                            ExpressionAttributeValues={":one": {"N": "1"}},
                        )
                    start_batch()
                    recorder.meter = meter if sized else None
                    with recorder.request() as tally:
                        started = time.perf_counter_ns()
                        subscribed = fanout.subscriptions(tenant)
                        elapsed = time.perf_counter_ns() - started
                    recorder.meter = None
                    found[case].add(len(subscribed))
                    if sized:
                        tallies[case].append(tally)
                        continue
                    durations[case].append(elapsed / 1e6)
                    if case == "with webhooks":  # the same batch again: the design before, every batch
                        started = time.perf_counter_ns()
                        fanout.subscriptions(tenant)
                        durations["cached"].append((time.perf_counter_ns() - started) / 1e6)
    finally:
        recorder.uninstall()
    if found != {"without webhooks": {0}, "with webhooks": {1}, "version moved": {1}}:
        raise RuntimeError(f"unexpected subscriptions: {found}")
    rows = {}
    for case in cases:
        calls: Counter[str] = Counter()
        for tally in tallies[case]:
            calls.update(tally.calls)
        rru = sum(tally.rru for tally in tallies[case]) / len(tallies[case])
        median_ms = summary(durations[case])["median"]
        rows[case] = {
            "calls_per_batch": {call: round(count / len(tallies[case]), 3) for call, count in sorted(calls.items())},
            "rru_per_batch": round(rru, 3),
            "duration_ms": summary(durations[case]),
            "usd_per_million_events": freshness_usd(rru, median_ms, spec.memory_mb),
        }
    return {
        "batches": batches,
        "memory_mb": spec.memory_mb,
        "cases": rows,
        "cached_ms": summary(durations["cached"]),
    }


def freshness_usd(rru: float, milliseconds: float, memory_mb: int) -> dict[str, float]:
    """USD per million events that are each their tenant's only one in its batch (the worst
    case: n events of a tenant in one batch share one read): the read units, and the
    function's billed duration of the read at its memory (no invocation of its own)."""
    million = Decimal(1_000_000)
    gb_seconds = million * Decimal(str(milliseconds)) / 1000 * memory_mb / 1024
    made = {
        "dynamodb": round(float(prices.dynamodb_usd(million * Decimal(str(rru)), Decimal(0))), 4),
        "lambda": round(float(gb_seconds * prices.LAMBDA_X86_PER_GB_SECOND_USD), 4),
    }
    made["total"] = round(made["dynamodb"] + made["lambda"], 4)
    return made


def delivery_cost(warm: dict[str, Any], fanout_rru: float) -> dict[str, Any]:
    """USD per million deliveries (a first attempt that succeeds), by line item;
    ``fanout_rru``: what the fan-out reads per event (:func:`run_freshness`). The DynamoDB
    line counts the fan-out's write of each delivery's record before it queues the message
    (``warm``'s ``fanout_wru_per_delivery``) besides the delivery function's own units."""
    million = Decimal(1_000_000)
    seconds = Decimal(str(warm["duration_ms"]["median"])) / 1000
    gb_seconds = million * seconds * warm["memory_mb"] / 1024
    # send (the fan-out's SendMessageBatch: one request per event for up to 10 webhooks), receive, delete
    sqs_requests = 3
    rru = Decimal(str(warm["rru_per_delivery"])) + Decimal(str(fanout_rru))
    fanout_wru = Decimal(str(warm["fanout_wru_per_delivery"]))
    delivery_wru = Decimal(str(warm["wru_per_delivery"]))
    wru = delivery_wru + fanout_wru
    items = {
        "lambda": prices.lambda_usd(1_000_000, gb_seconds),
        "sqs_fifo": million * sqs_requests * prices.SQS_FIFO_PER_MILLION_REQUESTS_USD / million,
        "dynamodb": prices.dynamodb_usd(million * rru, million * wru),
        "kms_decrypt": prices.KMS_PER_MILLION_REQUESTS_USD,
    }
    made = {name: round(float(value), 4) for name, value in items.items()}
    made["total"] = round(sum(made.values()), 4)
    retry = {
        # What each failed attempt adds: an invocation, a receive, a visibility change, the record's
        # write (the delivery function's: the fan-out wrote the record once, before the first).
        "lambda": prices.lambda_usd(1_000_000, gb_seconds),
        "sqs_fifo": 2 * prices.SQS_FIFO_PER_MILLION_REQUESTS_USD,
        "dynamodb": prices.dynamodb_usd(million * Decimal(str(warm["rru_per_delivery"])), million * delivery_wru),
    }
    return {
        "assumptions": {
            "invocations": 1_000_000,
            "messages_per_invocation": 1,
            "gb_seconds": round(float(gb_seconds), 2),
            "sqs_requests_per_delivery": sqs_requests,
            "rru_per_delivery": float(rru),
            "fanout_rru_per_delivery": fanout_rru,
            "wru_per_delivery": float(wru),
            "fanout_wru_per_delivery": float(fanout_wru),
            "kms_decrypts_per_delivery": 1,
        },
        **made,
        "per_million_retries": round(float(sum(retry.values())), 4),
    }


DELIVERY_NOTE = (
    "How: per million first-attempt successes at list prices, one message per invocation (Lambda hands up to "
    "10), the measured warm duration, the capacity model's units plus the fan-out's version read and record "
    "write, SQS send, receive, delete, a KMS Decrypt (an upper bound); no logs or data transfer. The delay runs "
    "via the local stack's pollers, not Lambda's."
)

HANG_NOTE = (
    "How: B's endpoint answers at once; A's never does, so each attempt holds an invocation the whole 10 s. A's "
    "events are queued at its tier's rate for 12 s, then one whenever it holds fewer attempts than its bound; B's "
    "start once A holds its bound. Rounds alternate B alone and B beside A, the pool drained between blocks, B's "
    "events queued directly (one emulator process cannot also carry A's traffic through the stream: "
    "`bench/webhooks.py`). Compare the conditions, not the milliseconds."
)


def run_webhooks(
    stack: StackProcess,
    specs: dict[str, FunctionSpec],
    *,
    deliveries: int,
    tenants: int,
    changes: int,
    rounds: int,
    batches: int,
    tenant_prefix: str,
) -> dict[str, Any]:
    """``tenants``: how many the warm deliveries rotate over, so that none starts more than
    its tier's deliveries a second (5 for the basic tier). ``changes``: the delay's changes
    per block (per condition and round; ``rounds`` 0: the hang's quick version, whose one
    change is the delay's); ``batches``: the freshness read's batches per case."""
    progress("webhooks: warm deliveries, the fan-out's freshness read, change-to-delivery delay")
    admin = local_admin(stack.state)
    with receiving() as receiver:
        hooks = {
            tenant: register(stack, admin, tenant, receiver.url)
            for tenant in (f"{tenant_prefix}-{index}" for index in range(tenants))
        }
        warm = run_warm_deliveries(stack, specs, deliveries=deliveries, receiver=receiver, hooks=hooks)
        first = next(iter(hooks))
        freshness = run_freshness(stack, specs, batches=batches, with_webhooks=first, without=f"{tenant_prefix}-n")
        hang = run_hang(
            stack,
            specs,
            admin,
            tenant=first,
            webhook_id=hooks[first],
            receiver=receiver,
            rounds=rounds,
            changes=changes,
            tenant_prefix=tenant_prefix,
        )
        delay = hang["baseline"]  # B alone, through the API (quick: its one change, A's events behind it)
    # A failing endpoint for minutes: its webhook's slots and lot (quick: seconds, 2 slots).
    parking = run_parking(stack, specs, quick=rounds == 0, tenant=f"{tenant_prefix}-p")
    fanout_rru = freshness["cases"]["with webhooks"]["rru_per_batch"]
    return {
        "warm": warm,
        **delay,
        "cost_per_million_deliveries": delivery_cost(warm, fanout_rru),
        "note": DELIVERY_NOTE,
        "freshness": freshness,
        "hang": {**hang, "note": HANG_NOTE},
        "parking": {**parking, "note": PARKING_NOTE},
        "queue_concurrency": queue_concurrency(),
    }
