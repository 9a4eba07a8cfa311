"""The stream functions' usage lines (support_tickets.usage.lines): per
invocation, one line per tenant of the batch, with the DynamoDB units its
records caused and its share of the invocation's duration; nothing of one
tenant on another's line (``1`` and ``10``), and the shares of an amount add
up to it exactly."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from local_stack.event_sources.stream_poller import StreamPoller
from local_stack.event_sources.stream_sources import stream_source
from local_stack.lambda_.runtime import LambdaContext
from stack_model import dedicated
from support_tickets.core import keys
from support_tickets.core.models import CreateTicketRequest
from support_tickets.data.placement import MovePhase
from support_tickets.data.table import to_item
from support_tickets.data.tenant_registry import TenantConfig, tenant_configs
from support_tickets.streams import aggregation
from support_tickets.streams.aggregation import CountLedger, ledger_record
from support_tickets.streams.audit_writer import AuditWriter, audit_client
from support_tickets.usage import meter
from support_tickets.usage.lines import (
    AGGREGATE_COUNTS,
    AUDIT_TRAIL,
    DURATION_QUANTUM,
    UNIT_QUANTUM,
    StreamInvocation,
    apportion,
    charged_records,
    payer_of,
    usage_lines,
)
from tests.conftest import REGION, RepoFactory, random_tenant_id
from tests.functional.memory_table import MemoryTable
from tests.functional.stream_harness import StreamHarness, stream_handler
from tests.functional.test_usage_line import dynamodb_answers

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

LogLines = Callable[[], list[dict[str, Any]]]


# ---------------------------------------------------------------- apportioning
@settings(max_examples=60, deadline=None)
@given(
    quanta=st.integers(min_value=0, max_value=10**9),
    weights=st.dictionaries(st.sampled_from(["1", "10", "acme", "b"]), st.integers(0, 500), min_size=1),
)
def test_shares_are_multiples_of_the_quantum_and_add_up_exactly(quanta: int, weights: dict[str, int]) -> None:
    total = quanta * UNIT_QUANTUM
    shares = apportion(total, weights)
    if not any(weights.values()):
        assert shares == {}
        return
    assert sum(shares.values(), Decimal(0)) == total
    whole = sum(weights.values())
    for tenant, share in shares.items():
        assert share % UNIT_QUANTUM == 0
        # each share is within one quantum of its exact proportion
        assert abs(share - total * weights[tenant] / whole) < UNIT_QUANTUM
    assert set(shares) == {tenant for tenant, weight in weights.items() if weight > 0}


def test_usage_lines_share_the_duration_by_records_and_keep_units_apart() -> None:
    consumed = {
        "1": meter.Consumed(Decimal("1.5"), Decimal(4), 3),
        "10": meter.Consumed(Decimal("0.5"), Decimal(2), 1),
    }
    context = LambdaContext("AuditTrailFunction", memory_limit_in_mb=256)
    lines = usage_lines(AUDIT_TRAIL, context, {"1": 2, "10": 1}, consumed, 10.0)
    assert set(lines) == {"1", "10"}
    assert lines["1"]["records"] == 2
    assert lines["10"]["records"] == 1
    assert (lines["1"]["read_units"], lines["1"]["write_units"], lines["1"]["dynamodb_calls"]) == (1.5, 4.0, 3)
    assert (lines["10"]["read_units"], lines["10"]["write_units"], lines["10"]["dynamodb_calls"]) == (0.5, 2.0, 1)
    # 10 ms by 2:1, to the microsecond, summing to the invocation's duration exactly
    assert (lines["1"]["duration_ms"], lines["10"]["duration_ms"]) == (6.667, 3.333)
    assert sum(Decimal(str(line["duration_ms"])) for line in lines.values()) == Decimal("10.000")
    assert {line["memory_mb"] for line in lines.values()} == {256}
    assert {line["request_id"] for line in lines.values()} == {context.aws_request_id}


# ---------------------------------------------------------------- the aggregator's transactions
def _insert(event_id: str, tenant: str, ticket: str) -> Any:
    pk = keys.ticket_pk(tenant, ticket)
    image = {"pk": pk, "sk": keys.SUMMARY_SK, "tenant_status": keys.tenant_status(tenant, keys.TicketStatus.OPEN)}
    return ledger_record(
        event_name="INSERT",
        sequence_number=event_id,
        event_id=event_id,
        keys_image={"pk": pk, "sk": keys.SUMMARY_SK},
        old_image=None,
        new_image=image,
    )


def test_a_chunks_units_go_to_its_tenants_by_items_the_journal_by_records() -> None:
    # Given a delivery of 3 records of tenant 1 and 1 of tenant 10: one transaction of the
    # journal and one count item each (every item under 1 KB: 2 WRU each in a transaction)
    table = MemoryTable()
    ledger = CountLedger("t", table, on_poison=lambda record: None)  # type: ignore[arg-type]
    records = [_insert("e1", "1", "a"), _insert("e2", "10", "b"), _insert("e3", "1", "c"), _insert("e4", "1", "d")]
    meter.start()
    ledger.apply(records)
    units = meter.METER.by_tenant()
    # Then tenant 1 has its count item and 3/4 of the journal: 6 WRU x (4 + 3) / 12
    assert units["1"] == meter.Consumed(Decimal(0), Decimal("3.5"), 1)
    # and tenant 10 its count item and 1/4 of the journal: 6 x (4 + 1) / 12
    assert units["10"] == meter.Consumed(Decimal(0), Decimal("2.5"), 1)
    assert meter.finish().write_units == Decimal(6)
    # When the same delivery comes again: the cancelled transaction reports no units,
    # the journal's read (1 RRU, strongly consistent) is shared by records
    meter.start()
    ledger.apply(records)
    again = meter.METER.by_tenant()
    assert again["1"] == meter.Consumed(Decimal("0.75"), Decimal(0), 1)
    assert again["10"] == meter.Consumed(Decimal("0.25"), Decimal(0), 1)


# ---------------------------------------------------------------- the handlers
@dataclass(frozen=True)
class StreamEnv:
    """What the handler tests start from: a repository per tenant, the table and its
    stream, and the log lines written since the last look."""

    repo_for: RepoFactory
    dynamodb: DynamoDBClient
    streams: Any
    table_name: str
    log_lines: LogLines


@pytest.fixture
def env(aws: None, repo_for: RepoFactory, dynamodb: DynamoDBClient, table_name: str, log_lines: LogLines) -> StreamEnv:
    return StreamEnv(repo_for, dynamodb, boto3.client("dynamodbstreams", region_name=REGION), table_name, log_lines)


def _create(repo_for: RepoFactory, tenant: str, tickets: int) -> None:
    repo = repo_for(tenant)
    for _ in range(tickets):
        repo.create_ticket(CreateTicketRequest(title="t"), created_by="alice")


def _usage(lines: list[dict[str, Any]], function: str) -> dict[str, dict[str, Any]]:
    found = [line for line in lines if line.get("message") == "usage" and line["usage"]["function"] == function]
    by_tenant = {line["tenant_id"]: line["usage"] for line in found}
    assert len(by_tenant) == len(found), "one line per tenant"
    return by_tenant


def _tenant_of_call(params: dict[str, Any]) -> str | None:
    """The tenant whose key a call names: the item it puts (the trail's events), the
    partition it queries or the item it reads (the webhook fan-out reading the tenant's
    subscriptions and their version)."""
    if "Item" in params:
        return keys.tenant_of_key(params["Item"]["pk"]["S"])
    if "Key" in params:
        return keys.tenant_of_key(params["Key"]["pk"]["S"])
    return keys.tenant_of_key(params["ExpressionAttributeValues"][":pk"]["S"])


def test_the_audit_writers_line_per_tenant_has_exactly_its_own_calls_units(env: StreamEnv) -> None:
    # Given one batch of records of tenants 1 (two tickets) and 10 (one)
    audit = StreamHarness.of("AuditTrailFunction", env.dynamodb, env.streams, env.table_name)
    _create(env.repo_for, "1", 2)
    _create(env.repo_for, "10", 1)
    records = audit.new_records()
    env.log_lines()
    with dynamodb_answers() as seen:
        assert audit.invoke(records) == []
    lines = _usage(env.log_lines(), AUDIT_TRAIL)
    # Then each tenant's line has its records and the units of the calls under its own keys
    assert set(lines) == {"1", "10"}
    for tenant in ("1", "10"):
        own = [
            (operation, answer["ConsumedCapacity"])
            for operation, params, answer in seen
            if _tenant_of_call(params) == tenant
        ]
        assert own, "the audit writer wrote the tenant's events"
        reads = sum(Decimal(str(c["CapacityUnits"])) for operation, c in own if operation in ("Query", "GetItem"))
        writes = sum(Decimal(str(c["CapacityUnits"])) for operation, c in own if operation not in ("Query", "GetItem"))
        assert lines[tenant]["records"] == sum(
            1 for record in records if keys.tenant_of_key(record["dynamodb"]["Keys"]["pk"]["S"]) == tenant
        )
        assert lines[tenant]["dynamodb_calls"] == len(own)
        assert Decimal(str(lines[tenant]["write_units"])) == writes > 0
        assert Decimal(str(lines[tenant]["read_units"])) == reads
    assert all(params.get("ReturnConsumedCapacity") == "TOTAL" for _, params, _ in seen)
    # and the duration is shared by records (2:1, to a microsecond each way)
    one, ten = Decimal(str(lines["1"]["duration_ms"])), Decimal(str(lines["10"]["duration_ms"]))
    assert abs(one - 2 * ten) <= 3 * DURATION_QUANTUM
    assert one > 0


@pytest.mark.parametrize(("moving", "beside"), [("1", "10"), ("10", "1")])
def test_a_moving_tenants_event_marks_are_on_its_own_line_and_nothing_of_them_on_its_neighbours(
    env: StreamEnv, moving: str, beside: str
) -> None:
    """While a move copies tenant ``moving`` out of the pool, the audit writer marks
    each event it puts into the tenant's trail (TenantTable.marks_writes): those
    puts are the moving tenant's units; its neighbour in the same batch has no
    mark and only its own calls' units."""
    copying = TenantConfig(
        tenant_id=moving,
        move_to="dedicated",
        move_table=dedicated.table_name(env.table_name, moving),
        move_phase=MovePhase.COPYING,
        move_started_at=1,
    )
    stored = {name: value for name, value in copying.item().items() if value is not None}
    env.dynamodb.put_item(TableName=env.table_name, Item=to_item(stored))
    tenant_configs().clear()
    audit = StreamHarness.of("AuditTrailFunction", env.dynamodb, env.streams, env.table_name)
    for title in ("Überweisung fehlgeschlagen", "請求書 ✓"):
        env.repo_for(moving).create_ticket(CreateTicketRequest(title=title), created_by="alice")
    env.repo_for(beside).create_ticket(CreateTicketRequest(title="Ünïcödé"), created_by="bob")
    records = audit.new_records()
    env.log_lines()
    with dynamodb_answers() as seen:
        assert audit.invoke(records) == []
    lines = _usage(env.log_lines(), AUDIT_TRAIL)

    def marks_of(tenant: str) -> list[dict[str, Any]]:
        partitions = set(keys.move_mark_partitions(tenant))
        puts = [params["Item"] for _, params, _ in seen if "Item" in params]
        return [item for item in puts if item["pk"]["S"] in partitions]

    def events_of(tenant: str) -> set[str]:
        puts = [params["Item"] for _, params, _ in seen if "Item" in params]
        return {
            item["sk"]["S"] for item in puts if keys.is_audit_day_suffix(keys.own_suffix(tenant, item["pk"]["S"]) or "")
        }

    # Two per event put into the trail, naming it: before it, and after it with another token (ops.move's
    # catch-up may have taken the first back before the event landed).
    assert len(marks_of(moving)) == 4
    assert {mark["sk"]["S"] for mark in marks_of(moving)} == events_of(moving)
    assert len({mark["written"]["S"] for mark in marks_of(moving)}) == 4
    assert len(events_of(beside)) == 1
    assert marks_of(beside) == []
    # Each line has its own calls' units, the marks' on the moving tenant's
    for tenant in (moving, beside):
        own = [
            (operation, answer["ConsumedCapacity"])
            for operation, params, answer in seen
            if _tenant_of_call(params) == tenant
        ]
        writes = sum(Decimal(str(c["CapacityUnits"])) for operation, c in own if operation not in ("Query", "GetItem"))
        assert lines[tenant]["dynamodb_calls"] == len(own)
        assert Decimal(str(lines[tenant]["write_units"])) == writes > 0


def test_the_aggregators_lines_share_its_units_and_add_up_to_what_dynamodb_answered(
    env: StreamEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the aggregator over a table that reports DynamoDB's units for its transactions
    aggregator = StreamHarness(env.dynamodb, env.streams, env.table_name)
    table = MemoryTable()
    answered: list[Decimal] = []
    transact = table.transact_write_items

    def reporting(**kwargs: Any) -> Any:
        answer = transact(**kwargs)
        answered.extend(Decimal(str(entry["CapacityUnits"])) for entry in answer.get("ConsumedCapacity", []))
        return answer

    monkeypatch.setattr(table, "transact_write_items", reporting)
    monkeypatch.setattr(aggregation, "aggregator_client", lambda: table)
    # and a batch of 3 new tickets of tenant 1 and 1 of tenant 10
    _create(env.repo_for, "1", 3)
    _create(env.repo_for, "10", 1)
    records = aggregator.new_records()
    env.log_lines()
    assert aggregator.invoke(records) == []
    lines = _usage(env.log_lines(), AGGREGATE_COUNTS)
    # Then each tenant has one line with its records, and the transaction's units are all
    # on the two lines, by items (a count item each; the journal 3:1)
    assert {tenant: line["records"] for tenant, line in lines.items()} == {"1": 3, "10": 1}
    (total,) = answered
    one, ten = (Decimal(str(lines[tenant]["write_units"])) for tenant in ("1", "10"))
    assert one + ten == total
    assert (one, ten) == (total * 7 / 12, total * 5 / 12)
    assert Counter(line["dynamodb_calls"] for line in lines.values()) == Counter({1: 2})


# ---------------------------------------------------------------- retries charged to their cause
def test_the_records_found_applied_are_charged_to_the_earliest_record_not_applied() -> None:
    tenants: list[str | None] = ["c", "a", "b", "b", None, "b"]
    # Nothing found applied: each record is its own tenant's
    assert charged_records(tenants, set()) == Counter({"b": 3, "c": 1, "a": 1})
    # A retry from a's failed record: b's records found written are a's
    assert payer_of(tenants[1:], {1, 2, 4}) == "a"
    assert charged_records(tenants[1:], {1, 2, 4}) == Counter({"a": 4})
    # The earliest record not applied pays, even behind applied ones (a bisected half)
    assert charged_records(["b", "b", "a", "c"], {0, 1}) == Counter({"a": 3, "c": 1})
    # A record without a tenant is nobody's and pays for nothing
    assert payer_of([None, "b", "a"], {1}) == "a"
    # Everything applied (Lambda's own redelivery, e.g. after a timeout): each stays its own
    assert payer_of(["b", "a"], {0, 1}) is None
    assert charged_records(["b", "a"], {0, 1}) == Counter({"a": 1, "b": 1})


def test_an_invocation_moves_the_units_of_records_handled_again_exactly() -> None:
    # Given an invocation of a's record and two of b's, b's second found applied after
    # costing 0.5 RRU and 1 WRU in 2 calls on b's account
    records = [
        {"dynamodb": {"Keys": {"pk": {"S": keys.ticket_pk(tenant, f"T{n}")}}, "SequenceNumber": str(n)}}
        for n, tenant in enumerate(["1", "10", "1"])
    ]
    invocation = StreamInvocation.of(records)
    meter.start()
    meter.METER.add_units(Decimal("0.5"), Decimal(2), "1")
    meter.METER.add_units(Decimal(0), Decimal(1), "10")
    index = invocation.index_of("2")
    before = invocation.units_so_far(index)
    meter.METER.add_units(Decimal("0.5"), Decimal(1), "1", calls=2)
    invocation.found_applied(index, since=before)
    consumed = meter.METER.by_tenant()
    charged = invocation.charged_units(consumed)
    # Then 1's first record (the earliest not applied) carries them; nothing is lost or made up
    assert invocation.payer() == "1"
    assert charged == consumed  # 1 pays for its own record handled again: nothing moves
    invocation = StreamInvocation.of(records)
    invocation.found_applied(0, since=meter.NOTHING)  # 1's first record applied before, all of it
    charged = invocation.charged_units(consumed)
    assert charged["10"] == meter.Consumed(Decimal(1), Decimal(4), 4)
    assert charged["1"] == meter.Consumed(Decimal(0), Decimal(0), 0)
    # and the duration is shared by the records each is charged for, exactly
    lines = usage_lines(
        AUDIT_TRAIL, None, Counter({"1": 2, "10": 1}), charged, 10.0, charged=invocation.charged_records()
    )
    assert {tenant: line["records"] for tenant, line in lines.items()} == {"1": 2, "10": 1}
    assert (lines["1"]["duration_ms"], lines["10"]["duration_ms"]) == (3.333, 6.667)
    assert sum(Decimal(str(line["duration_ms"])) for line in lines.values()) == Decimal("10.000")


def test_a_redelivery_of_a_journaled_prefix_charges_its_journal_read_to_the_next_records_tenant() -> None:
    # Given a delivery of tenant 1's two records, applied
    table = MemoryTable()
    ledger = CountLedger("t", table, on_poison=lambda record: None)  # type: ignore[arg-type]
    first = [_insert("e1", "1", "a"), _insert("e2", "1", "b")]
    ledger.apply(first)
    # When Lambda sends them again followed by a new record of tenant 10 (what a bisected
    # half does after the function failed on 10's record)
    meter.start()
    result = ledger.apply([*first, _insert("e3", "10", "c")])
    # Then the journal read that found them is 10's (1 RRU), as are the read at 10's record
    # (which finds none) and 10's own transaction
    assert result.skipped == 2
    units = meter.METER.by_tenant()
    assert set(units) == {"10"}
    assert units["10"].read_units == 2
    assert units["10"].calls == 3
    # and a redelivery of applied records only stays their own (no record it is for)
    meter.start()
    ledger.apply(first)
    assert set(meter.METER.by_tenant()) == {"1"}


class _Clock:
    """The meter's clock: 1 ms per record a stream function handles (the test's
    audit client ticks it), so durations are exact and shares comparable."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class _AuditClientFailing:
    """The audit writer's client: one tick of the clock per record handled (its
    first put), and every put of ``failing``'s items refused (its record fails)."""

    def __init__(self, client: Any, clock: _Clock, failing: str) -> None:
        self._client, self._clock, self._failing = client, clock, failing

    def put_item(self, **kwargs: Any) -> Any:
        pk = kwargs["Item"]["pk"]["S"]
        if keys.tenant_of_key(pk) == self._failing:
            self._clock.now += 0.001
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "boom"}}, "PutItem")
        if "|HISTORY#" in pk:
            self._clock.now += 0.001
        return self._client.put_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_failing_record_carries_the_retries_of_the_neighbours_lambda_sends_again_with_it(
    env: StreamEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the audit writer behind the local stack's stream poller (the template's
    # BatchSize, MaximumRetryAttempts 5, ReportBatchItemFailures), a meter clock that
    # advances 1 ms per record handled, and tenant 10's records always failing
    failing, neighbour, before_it = "10", "1", random_tenant_id()
    clock = _Clock()
    monkeypatch.setattr(meter, "time", clock)
    handler = stream_handler("AuditTrailFunction")
    module = sys.modules[handler.__module__]
    client = _AuditClientFailing(audit_client(), clock, failing)
    monkeypatch.setattr(module, "audit_writer", lambda: AuditWriter(table_name=env.table_name, client=client))  # type: ignore[arg-type]
    source = replace(stream_source("AuditTrailFunction"), batching_window_s=3600)  # a drain makes the batch
    assert (source.maximum_retry_attempts, source.report_batch_item_failures) == (5, True)
    stream_arn = env.dynamodb.describe_table(TableName=env.table_name)["Table"]["LatestStreamArn"]
    given_up: list[dict[str, Any]] = []
    poller = StreamPoller(
        env.streams,
        stream_arn,
        source,
        invoke=lambda event: handler(event, LambdaContext("AuditTrailFunction")),
        on_failure=given_up.append,
    )
    alone_b, alone_c = random_tenant_id(), random_tenant_id()
    poller.start()
    try:
        # the same creates alone: 3 of one tenant, 15 of another, one batch, nothing failing
        _create(env.repo_for, alone_c, 3)
        _create(env.repo_for, alone_b, 15)
        env.log_lines()
        assert poller.wait_drained(timeout=60)
        alone = _usage_totals(env.log_lines())
        # When a batch holds 3 creates of a tenant, then the failing record, then 15 creates of the neighbour
        _create(env.repo_for, before_it, 3)
        _create(env.repo_for, failing, 1)
        _create(env.repo_for, neighbour, 15)
        assert poller.wait_drained(timeout=60)
        mixed = _usage_totals(env.log_lines())
    finally:
        poller.stop()
    # Then Lambda retried the failed record with the neighbour's 15 behind it 5 times, then gave them up
    (failure,) = given_up
    assert (failure["DDBStreamBatchInfo"]["batchSize"], failure["requestContext"]["approximateInvokeCount"]) == (16, 6)
    assert mixed[neighbour]["records"] == 15 * 6
    # and the neighbour's figures are what the same 15 creates cost alone (1 ms each, once)
    for field_name in ("duration_ms", "read_units", "write_units", "dynamodb_calls"):
        assert mixed[neighbour][field_name] == alone[alone_b][field_name], field_name
        # the tenant whose records came before the failure is not moved either
        assert mixed[before_it][field_name] == alone[alone_c][field_name], field_name
    assert mixed[neighbour]["duration_ms"] == Decimal(15)
    # while the failing record's tenant carries the retries: its own 1 ms per attempt and the
    # neighbour's 15 ms per retry; every millisecond of the 6 invocations is on someone's line
    assert mixed[failing]["duration_ms"] == 1 + 5 * (1 + 15)
    assert sum((totals["duration_ms"] for totals in mixed.values()), Decimal(0)) == 19 + 5 * 16


def _usage_totals(lines: list[dict[str, Any]]) -> dict[str, dict[str, Decimal]]:
    """Each tenant's audit-trail usage lines summed (exact decimals)."""
    totals: dict[str, dict[str, Decimal]] = {}
    for line in lines:
        if line.get("message") != "usage" or line["usage"]["function"] != AUDIT_TRAIL:
            continue
        mine = totals.setdefault(line["tenant_id"], {})
        for name in ("records", "duration_ms", "read_units", "write_units", "dynamodb_calls"):
            mine[name] = mine.get(name, Decimal(0)) + Decimal(str(line["usage"][name]))
    return totals
