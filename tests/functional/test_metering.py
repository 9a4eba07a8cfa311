"""The metering function over moto: usage counters must equal a plain recount of
the distinct usage lines delivered, after any redelivery, partial failure or
crash, and nothing of one tenant may land on another's (``1`` and ``10``)."""

from __future__ import annotations

import base64
import gzip
import json
import random
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from local_stack.lambda_.runtime import LambdaContext
from stack_model.functions import function_specs, load_handler
from support_tickets.core import keys
from support_tickets.data.table import to_item
from support_tickets.data.tenant_registry import TenantConfig, TenantStatus
from support_tickets.usage import metering
from support_tickets.usage.counters import read_day
from support_tickets.usage.metering import (
    DEFAULT_REPLAY_HORIZON_SECONDS,
    MalformedDelivery,
    read_delivery,
)
from tests.conftest import all_items, random_tenant_id
from tests.depth import sized
from tests.functional.stream_harness import Crash, FailingTransactions

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

METERING = "MeteringFunction"
DAY = "2026-11-25"
MIDNIGHT_MS = 1_795_564_800_000  # 2026-11-25T00:00:00Z
GROUP = "/aws/lambda/support-tickets/CreateTicketFunction"
ROUTES = ("GET /tickets", "POST /tickets", "GET /tickets/{ticket_id}", "PATCH /tickets/{ticket_id}")


@dataclass(frozen=True)
class Line:
    """One request's usage line, as the resolver writes it, and its log event."""

    event_id: str
    tenant: str
    route: str = "GET /tickets"
    read_units: str = "1.5"
    write_units: str = "0.0"
    calls: int = 2
    duration_ms: str = "12.413"
    memory_mb: int = 512
    at_ms: int = MIDNIGHT_MS + 3_600_000

    def event(self) -> dict[str, Any]:
        message = (
            f'{{"level":"INFO","message":"request handled","tenant_id":"{self.tenant}",'
            f'"method":"{self.route.split()[0]}","resource":"{self.route.split()[1]}","status":200,'
            f'"usage":{{"route":"{self.route}","request_id":"req-{self.event_id}","read_units":{self.read_units},'
            f'"write_units":{self.write_units},"dynamodb_calls":{self.calls},"duration_ms":{self.duration_ms},'
            f'"memory_mb":{self.memory_mb}}}}}'
        )
        return {"id": self.event_id, "timestamp": self.at_ms, "message": message}


STREAM = "2026/11/25/[$LATEST]abc"


def payload(events: list[dict[str, Any]], stream: str = STREAM, group: str = GROUP) -> dict[str, Any]:
    body = {
        "messageType": "DATA_MESSAGE",
        "owner": "123456789012",
        "logGroup": group,
        "logStream": stream,
        "subscriptionFilters": ["usage"],
        "logEvents": events,
    }
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(body).encode())).decode()}}


def delivery_of(lines: list[Line], stream: str = STREAM) -> dict[str, Any]:
    return payload([line.event() for line in lines], stream)


def recount(lines: list[Line], tenant: str, day: str = DAY) -> dict[str, Decimal]:
    """What the counters must say: each distinct line (by event id) once."""
    distinct = {line.event_id: line for line in lines if line.tenant == tenant}
    chosen = [line for line in distinct.values() if metering.utc_day(line.at_ms) == day]
    if not chosen:
        return {}
    routes = Counter(line.route for line in chosen)
    return {
        "requests": Decimal(len(chosen)),
        **{f"requests:{route}": Decimal(count) for route, count in routes.items()},
        "read_units": sum((Decimal(line.read_units) for line in chosen), Decimal(0)),
        "write_units": sum((Decimal(line.write_units) for line in chosen), Decimal(0)),
        "dynamodb_calls": Decimal(sum(line.calls for line in chosen)),
        "duration_ms": sum((Decimal(line.duration_ms) for line in chosen), Decimal(0)),
        "mb_ms": sum((Decimal(line.duration_ms) * line.memory_mb for line in chosen), Decimal(0)),
    }


def load_function() -> ModuleType:
    """The function's handler module, as the template declares it (a module of its own per test)."""
    spec = function_specs()[METERING]
    return sys.modules[load_handler(spec.code_uri, spec.handler).__module__]


@dataclass
class Harness:
    dynamodb: DynamoDBClient
    table_name: str
    function: ModuleType
    client: FailingTransactions

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.function.lambda_handler(event, LambdaContext(METERING))
        return result

    def counters(self, tenant: str, day: str = DAY) -> dict[str, Decimal]:
        return read_day(self.dynamodb, self.table_name, tenant, day)


@pytest.fixture
def harness(aws: None, dynamodb: DynamoDBClient, table_name: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    function = load_function()
    flaky = FailingTransactions(dynamodb)
    monkeypatch.setattr(function, "metering_client", lambda: flaky)
    yield Harness(dynamodb, table_name, function, flaky)
    sys.modules.pop(function.__name__, None)


def journals(dynamodb: DynamoDBClient, table_name: str) -> list[dict[str, Any]]:
    return [item for item in all_items(dynamodb, table_name) if item["pk"]["S"].endswith("|USAGE#JOURNAL")]


# ---------------------------------------------------------------- reading a delivery
def test_a_delivery_is_counted_per_tenant_with_exact_decimal_sums(harness: Harness) -> None:
    acme, globex = random_tenant_id(), random_tenant_id()
    lines = [
        Line("1", acme, "POST /tickets", write_units="2.0", duration_ms="30.1"),
        Line("2", acme, read_units="0.5", duration_ms="0.1"),
        Line("3", acme, read_units="0.5", duration_ms="0.2"),
        Line("4", globex, "GET /tickets/{ticket_id}", read_units="1.0", memory_mb=1024),
    ]
    summary = harness.invoke(delivery_of(lines))
    assert summary | {"events": 4} == {
        "events": 4, "lines": 4, "ignored": 0, "duplicates": 0, "malformed": 0,
        "groups": 2, "applied": 2, "redelivered": 0, "offboarded": 0, "failed": 0,
    }  # fmt: skip
    assert harness.counters(acme) == recount(lines, acme)
    assert harness.counters(acme)["duration_ms"] == Decimal("30.4")  # 30.1 + 0.1 + 0.2, not 30.400000000000002
    assert harness.counters(acme)["requests:POST /tickets"] == 1
    assert harness.counters(globex) == recount(lines, globex)
    assert harness.counters(globex)["mb_ms"] == Decimal("12.413") * 1024


def test_tenants_1_and_10_are_counted_apart(harness: Harness) -> None:
    lines = [Line("a", "1"), Line("b", "10"), Line("c", "10"), Line("d", "100", "POST /tickets")]
    harness.invoke(delivery_of(lines))
    for tenant in ("1", "10", "100"):
        assert harness.counters(tenant) == recount(lines, tenant)
    assert harness.counters("1")["requests"] == 1
    assert harness.counters("10")["requests"] == 2
    pks = {item["pk"]["S"] for item in all_items(harness.dynamodb, harness.table_name)}
    assert pks == {f"TENANT#{t}|USAGE" for t in ("1", "10", "100")} | {
        f"TENANT#{t}|USAGE#JOURNAL" for t in ("1", "10", "100")
    }


def test_lines_are_grouped_by_the_utc_day_of_their_event(harness: Harness) -> None:
    tenant = random_tenant_id()
    lines = [Line("late", tenant, at_ms=MIDNIGHT_MS - 1), Line("early", tenant, at_ms=MIDNIGHT_MS)]
    summary = harness.invoke(delivery_of(lines))
    assert summary["groups"] == 2
    assert harness.counters(tenant, "2026-11-24")["requests"] == 1
    assert harness.counters(tenant, DAY)["requests"] == 1


def test_each_log_stream_writes_its_own_slot_and_a_day_sums_them(harness: Harness) -> None:
    tenant = random_tenant_id()
    streams = [f"2026/11/25/[$LATEST]{n:032x}" for n in range(64)]
    assert len({keys.usage_slot(stream) for stream in streams}) == keys.USAGE_SLOTS
    everything: list[Line] = []
    for n, stream in enumerate(streams):
        lines = [Line(f"{n}-{k}", tenant) for k in range(3)]
        everything += lines
        harness.invoke(delivery_of(lines, stream))
    counters = [i for i in all_items(harness.dynamodb, harness.table_name) if i["pk"]["S"] == keys.usage_pk(tenant)]
    assert {item["sk"]["S"] for item in counters} == {f"{DAY}#{slot}" for slot in range(keys.USAGE_SLOTS)}
    assert harness.counters(tenant) == recount(everything, tenant)


def test_duplicate_events_within_a_delivery_count_once(harness: Harness) -> None:
    tenant = random_tenant_id()
    lines = [Line("1", tenant), Line("2", tenant), Line("1", tenant), Line("2", tenant), Line("1", tenant)]
    summary = harness.invoke(delivery_of(lines))
    assert (summary["lines"], summary["duplicates"]) == (2, 3)
    assert harness.counters(tenant)["requests"] == 2


def test_malformed_lines_are_counted_and_reported_and_the_rest_is_counted(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    warnings: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(harness.function.logger, "warning", lambda message, **kw: warnings.append((message, kw)))
    tenant = random_tenant_id()
    good = [Line("good-1", tenant), Line("good-2", tenant)]
    usage = json.loads(Line("x", tenant).event()["message"])

    def with_(**changes: Any) -> str:
        line = json.loads(json.dumps(usage))
        for name, value in changes.items():
            if name in {"tenant_id"}:
                line[name] = value
            elif value is None:
                line["usage"].pop(name, None)
            else:
                line["usage"][name] = value
        return json.dumps(line)

    bad_messages = [
        '{"message": "request handled", "tenant_id": ',  # cut short
        json.dumps({"message": "request handled", "tenant_id": tenant}),  # no usage
        with_(tenant_id="Acme|x"),
        with_(tenant_id=None),
        with_(read_units=-1),
        with_(write_units="1"),
        with_(duration_ms=True),
        with_(memory_mb=1.5),
        with_(route="GET /tickets?x"),
        with_(request_id=None),
        with_(read_units=1e300),
    ]
    events: list[Any] = [good[0].event()]
    events += [{"id": f"bad-{n}", "timestamp": MIDNIGHT_MS, "message": m} for n, m in enumerate(bad_messages)]
    events += [
        {"id": "no-time", "message": good[0].event()["message"]},
        "not an object",
        {"id": "other", "timestamp": MIDNIGHT_MS, "message": json.dumps({"message": "something else"})},
        {"id": "text", "timestamp": MIDNIGHT_MS, "message": "START RequestId: 1 Version: $LATEST"},
        good[1].event(),
    ]
    summary = harness.invoke(payload(events))
    assert (summary["lines"], summary["malformed"], summary["ignored"]) == (2, len(bad_messages) + 2, 2)
    assert harness.counters(tenant) == recount(good, tenant)
    ((message, logged),) = warnings
    assert message == "malformed usage lines"
    assert logged["extra"]["malformed"] == len(bad_messages) + 2
    assert "Acme|x" not in json.dumps(logged)  # reasons only, never a line's content


@pytest.mark.parametrize(
    "event",
    [{}, {"awslogs": {}}, {"awslogs": {"data": "not base64!"}}, {"awslogs": {"data": base64.b64encode(b"x").decode()}}],
)
def test_a_payload_that_is_no_delivery_fails_the_invocation(harness: Harness, event: dict[str, Any]) -> None:
    # Nothing in it can be read: Lambda retries it, then keeps it in the failure queue.
    with pytest.raises(MalformedDelivery):
        harness.invoke(event)
    assert all_items(harness.dynamodb, harness.table_name) == []


def test_a_control_message_writes_nothing(harness: Harness) -> None:
    body = {"messageType": "CONTROL_MESSAGE", "logGroup": "", "logStream": "", "logEvents": []}
    event = {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(body).encode())).decode()}}
    assert harness.invoke(event) == {"control": True}
    assert all_items(harness.dynamodb, harness.table_name) == []


# ---------------------------------------------------------------- exactly once
def test_the_same_delivery_three_times_counts_once(harness: Harness) -> None:
    tenants = [random_tenant_id() for _ in range(3)]
    lines = [Line(str(n), tenants[n % 3], ROUTES[n % 4]) for n in range(30)]
    event = delivery_of(lines)
    first = harness.invoke(event)
    assert (first["applied"], first["redelivered"]) == (3, 0)
    for _ in range(2):
        again = harness.invoke(event)
        assert (again["applied"], again["redelivered"]) == (0, 3)
    for tenant in tenants:
        assert harness.counters(tenant) == recount(lines, tenant)


def test_a_retry_after_a_partial_failure_counts_each_group_once(harness: Harness) -> None:
    tenants = sorted(random_tenant_id() for _ in range(3))
    lines = [Line(str(n), tenants[n % 3]) for n in range(9)]
    event = delivery_of(lines)
    harness.client.fail_calls = {2}  # the second group (groups go in tenant order)
    with pytest.raises(harness.function.DeliveryIncomplete):
        harness.invoke(event)
    # Every other group was still tried and committed.
    assert [harness.counters(t).get("requests", 0) for t in tenants] == [3, 0, 3]
    retry = harness.invoke(event)
    assert (retry["applied"], retry["redelivered"]) == (1, 2)
    for tenant in tenants:
        assert harness.counters(tenant) == recount(lines, tenant)


def test_a_crash_after_some_groups_committed_then_the_retry(harness: Harness) -> None:
    tenants = sorted(random_tenant_id() for _ in range(3))
    lines = [Line(str(n), tenants[n % 3]) for n in range(12)]
    event = delivery_of(lines)
    harness.client.crash_after_calls = {2}
    with pytest.raises(Crash):
        harness.invoke(event)
    assert [harness.counters(t).get("requests", 0) for t in tenants] == [4, 4, 0]
    harness.invoke(event)
    harness.invoke(event)
    for tenant in tenants:
        assert harness.counters(tenant) == recount(lines, tenant)


def test_a_conflict_is_retried_and_is_not_mistaken_for_a_redelivery(harness: Harness) -> None:
    tenant = random_tenant_id()
    lines = [Line("1", tenant), Line("2", tenant)]
    harness.client.conflict_calls = {1, 2}
    summary = harness.invoke(delivery_of(lines))
    assert (summary["applied"], summary["redelivered"], harness.client.calls) == (1, 0, 3)
    assert harness.counters(tenant) == recount(lines, tenant)


def test_a_conflict_that_persists_fails_the_invocation_and_the_retry_counts_once(harness: Harness) -> None:
    tenant = random_tenant_id()
    lines = [Line("1", tenant)]
    harness.client.conflict_calls = set(range(1, metering.TRANSACTION_ATTEMPTS + 1))
    with pytest.raises(harness.function.DeliveryIncomplete):
        harness.invoke(delivery_of(lines))
    assert harness.counters(tenant) == {}
    harness.invoke(delivery_of(lines))
    harness.invoke(delivery_of(lines))
    assert harness.counters(tenant) == recount(lines, tenant)


def test_the_same_events_from_another_log_stream_are_another_delivery(harness: Harness) -> None:
    # Event ids are unique per log stream, not per account: the digest names the stream.
    tenant = random_tenant_id()
    harness.invoke(delivery_of([Line("1", tenant)], "stream-a"))
    assert harness.invoke(delivery_of([Line("1", tenant)], "stream-b"))["applied"] == 1
    assert harness.counters(tenant)["requests"] == 2


def test_a_journal_that_disagrees_is_never_guessed_at(harness: Harness) -> None:
    tenant = random_tenant_id()
    lines = [Line("1", tenant), Line("2", tenant)]
    harness.invoke(delivery_of(lines))
    (journal,) = journals(harness.dynamodb, harness.table_name)
    harness.dynamodb.put_item(TableName=harness.table_name, Item={**journal, "lines": {"N": "5"}})
    with pytest.raises(metering.JournalMismatch):
        harness.invoke(delivery_of(lines))
    assert harness.counters(tenant) == recount(lines, tenant)


# ---------------------------------------------------------------- bounded bookkeeping
def test_one_small_journal_per_delivery_tenant_and_day_expiring_after_the_horizon(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = harness.function.UsageLedger
    monkeypatch.setattr(harness.function, "UsageLedger", lambda **kw: real(**kw, clock=lambda: 1_800_000_000.0))
    tenants = [random_tenant_id() for _ in range(2)]
    lines = [Line(str(n), tenants[n % 2], at_ms=MIDNIGHT_MS + n) for n in range(500)]
    harness.invoke(delivery_of(lines))
    harness.invoke(delivery_of(lines))
    found = journals(harness.dynamodb, harness.table_name)
    assert len(found) == 2
    for journal in found:
        assert journal["expiration"] == {"N": str(1_800_000_000 + DEFAULT_REPLAY_HORIZON_SECONDS)}
        assert set(journal) == {"pk", "sk", "day", "lines", "expiration"}
        assert len(json.dumps(journal)) < 300  # whatever the number of lines
    assert keys.usage_journal_pk(tenants[0]) in {journal["pk"]["S"] for journal in found}


def test_the_table_expires_items_by_the_journals_attribute() -> None:
    from stack_model.template import load_template

    table = load_template()["Resources"]["SupportTicketTable"]["Properties"]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}


def test_the_replay_horizon_outlives_lambdas_longest_retry() -> None:
    from stack_model.template import load_template

    function = load_template()["Resources"]["MeteringFunction"]["Properties"]
    horizon = int(function["Environment"]["Variables"]["REPLAY_HORIZON_SECONDS"])
    assert horizon >= 6 * 3600  # an asynchronous event lives at most 6 h
    assert horizon == DEFAULT_REPLAY_HORIZON_SECONDS


def test_the_delivery_reader_keeps_event_order_and_fields() -> None:
    lines = [Line("2", "acme", "POST /tickets", read_units="0", write_units="3.5", calls=4), Line("1", "acme")]
    delivery = read_delivery(delivery_of(lines, "s"))
    assert (delivery.log_group, delivery.log_stream) == (GROUP, "s")
    assert [(line.event_id, line.route, line.write_units, line.dynamodb_calls) for line in delivery.lines] == [
        ("2", "POST /tickets", Decimal("3.5"), 4),
        ("1", "GET /tickets", Decimal("0.0"), 2),
    ]


# ---------------------------------------------------------------- any redelivery
LINES = st.lists(
    st.tuples(
        st.integers(0, 2),  # tenant
        st.integers(0, 3),  # log stream
        st.sampled_from(ROUTES),
        st.integers(0, 8),  # read units, in halves
        st.integers(0, 3),  # hour offset: some lines on the previous day
    ),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=sized(deep=60, ci=15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(specs=LINES, seed=st.integers(0, 2**32 - 1))
def test_any_sequence_of_redeliveries_counts_each_distinct_line_once(
    harness: Harness, specs: list[tuple[int, int, str, int, int]], seed: int
) -> None:
    rng = random.Random(seed)
    base = random_tenant_id()
    tenants = [random_tenant_id(), base, base + "0"]  # a prefix pair, like "1" and "10"
    by_stream: dict[int, list[Line]] = {}
    for n, (tenant, stream, route, halves, hours) in enumerate(specs):
        line = Line(
            f"{seed}-{n}",
            tenants[tenant],
            route,
            read_units=str(Decimal(halves) / 2),
            duration_ms=f"{rng.randint(1, 99999) / 1000}",
            at_ms=MIDNIGHT_MS + (hours - 1) * 3_600_000 + n,
        )
        by_stream.setdefault(stream, []).append(line)
    # Each stream's lines are cut into deliveries; some events are repeated inside one.
    deliveries: list[dict[str, Any]] = []
    for stream, stream_lines in by_stream.items():
        rest = stream_lines
        while rest:
            cut = rng.randint(1, len(rest))
            chosen, rest = rest[:cut], rest[cut:]
            events = [line.event() for line in chosen]
            events += [rng.choice(events) for _ in range(rng.randint(0, 2))]
            deliveries.append(payload(events, f"{seed}-stream-{stream}"))
    everything = [line for lines in by_stream.values() for line in lines]
    # Deliver each at least once until it succeeds, redelivering at random, with failures.
    pending = list(deliveries)
    done: list[dict[str, Any]] = []
    for _ in range(len(deliveries) * 6):
        source = pending if pending and (not done or rng.random() < 0.7) else done
        event = rng.choice(source)
        harness.client.calls = 0
        harness.client.fail_calls = {rng.randint(1, 3)} if rng.random() < 0.3 else set()
        harness.client.crash_after_calls = {rng.randint(1, 3)} if rng.random() < 0.2 else set()
        try:
            harness.invoke(event)
        except (Crash, harness.function.DeliveryIncomplete):
            continue
        if event in pending:
            pending.remove(event)
            done.append(event)
    harness.client.fail_calls = harness.client.crash_after_calls = set()
    for event in pending:
        harness.invoke(event)
    for tenant_id in tenants:
        for day in ("2026-11-24", DAY):
            assert harness.counters(tenant_id, day) == recount(everything, tenant_id, day)


def authorizer_event(event_id: str, tenant: str, *, function: str = "authorizer", units: str = "1.0") -> dict[str, Any]:
    message = (
        f'{{"level":"INFO","message":"usage","tenant_id":"{tenant}","usage":{{"function":"{function}",'
        f'"request_id":"a-{event_id}","read_units":{units},"write_units":0.0,"dynamodb_calls":1,'
        f'"duration_ms":3.5,"memory_mb":256}}}}'
    )
    return {"id": event_id, "timestamp": MIDNIGHT_MS + 3_600_000, "message": message}


def test_the_authorizers_usage_lines_count_its_invocations_not_requests(harness: Harness) -> None:
    # Given a delivery of the authorizer's log group: two verified tokens of tenant 1, one of 10,
    # and a line naming a function that writes no usage lines
    events = [
        authorizer_event("e1", "1"),
        authorizer_event("e2", "1", units="0.5"),
        authorizer_event("e3", "10"),
        authorizer_event("e4", "1", function="mystery"),
    ]
    result = harness.invoke(payload(events, group="/aws/lambda/support-tickets/AuthorizerFunction"))
    assert result["malformed"] == 1
    # Then each tenant has its invocations, GB-seconds and units, and no request
    one = harness.counters("1")
    assert one["authorizer_invocations"] == 2
    assert one["authorizer_mb_ms"] == Decimal("3.5") * 256 * 2
    assert one["read_units"] == Decimal("1.5")
    assert one["requests"] == 0
    assert not [name for name in one if name.startswith("requests:")]
    assert harness.counters("10")["authorizer_invocations"] == 1
    # and a redelivery counts nothing again
    harness.invoke(payload(events, group="/aws/lambda/support-tickets/AuthorizerFunction"))
    assert harness.counters("1")["authorizer_invocations"] == 2


def stream_event(event_id: str, tenant: str, function: str, *, write_units: str, duration_ms: str) -> dict[str, Any]:
    message = (
        f'{{"level":"INFO","message":"usage","tenant_id":"{tenant}","usage":{{"function":"{function}",'
        f'"request_id":"s-1","records":2,"read_units":0.0,"write_units":{write_units},"dynamodb_calls":1,'
        f'"duration_ms":{duration_ms},"memory_mb":512}}}}'
    )
    return {"id": event_id, "timestamp": MIDNIGHT_MS + 3_600_000, "message": message}


@pytest.mark.parametrize("function", ["aggregate_counts", "audit_trail"])
def test_the_stream_functions_usage_lines_add_gb_seconds_and_units_not_invocations(
    harness: Harness, function: str
) -> None:
    # Given one invocation's lines (tenants 1 and 10, the units and duration shared 7:5)
    events = [
        stream_event("s1", "1", function, write_units="3.5", duration_ms="5.833"),
        stream_event("s2", "10", function, write_units="2.5", duration_ms="4.167"),
    ]
    group = f"/aws/lambda/support-tickets/{function}"
    harness.invoke(payload(events, group=group))
    # Then each tenant has exactly its own share: units, MB x ms; no request, no invocation
    one, ten = harness.counters("1"), harness.counters("10")
    assert (one["write_units"], one["stream_mb_ms"]) == (Decimal("3.5"), Decimal("5.833") * 512)
    assert (ten["write_units"], ten["stream_mb_ms"]) == (Decimal("2.5"), Decimal("4.167") * 512)
    for counters in (one, ten):
        assert counters["requests"] == 0
        assert "authorizer_invocations" not in counters
        assert "stream_invocations" not in counters
    # and a redelivery counts nothing again
    harness.invoke(payload(events, group=group))
    assert harness.counters("1")["stream_mb_ms"] == Decimal("5.833") * 512


def delivery_event(event_id: str, tenant: str, **counts: Any) -> dict[str, Any]:
    fields = {"invocations": 0, "attempts": 2, "deliveries": 1, "sqs_requests": 1, "kms_requests": 1, **counts}
    usage = {
        "function": "deliver_webhook", "request_id": "d-1", "messages": 2, **fields,
        "read_units": 2.0, "write_units": 3.0, "dynamodb_calls": 5, "duration_ms": 250.5, "memory_mb": 512,
    }  # fmt: skip
    message = json.dumps({"level": "INFO", "message": "usage", "tenant_id": tenant, "usage": usage})
    return {"id": event_id, "timestamp": MIDNIGHT_MS + 3_600_000, "message": message}


def test_the_delivery_functions_usage_lines_add_webhook_counters_and_units(harness: Harness) -> None:
    # Given one invocation's lines of the delivery function (tenants 1 and 10: the
    # invocation is 1's, whose messages took most of it)
    group = "/aws/lambda/support-tickets/DeliverWebhookFunction"
    events = [delivery_event("w1", "1", invocations=1), delivery_event("w2", "10", attempts=1, deliveries=0)]
    harness.invoke(payload(events, group=group))
    # Then each tenant's counters hold exactly its own line's figures
    one, ten = harness.counters("1"), harness.counters("10")
    webhook = ("webhook_invocations", "webhook_attempts", "webhook_deliveries")
    assert [one[name] for name in webhook] == [1, 2, 1]
    assert [ten[name] for name in webhook] == [0, 1, 0]
    for counters in (one, ten):
        assert [counters["webhook_sqs_requests"], counters["webhook_kms_requests"]] == [1, 1]
        assert counters["webhook_mb_ms"] == Decimal("250.5") * 512
        assert [counters["read_units"], counters["write_units"], counters["requests"]] == [2, 3, 0]
    # and a redelivery counts nothing again
    harness.invoke(payload(events, group=group))
    assert harness.counters("1") == one
    # A line with more than one invocation, or no counts, is malformed: not counted
    bad = [delivery_event("w3", "1", invocations=2), delivery_event("w4", "1", attempts=-1)]
    assert harness.invoke(payload(bad, group=group))["malformed"] == 2
    assert harness.counters("1") == one


def store_active_record(dynamodb: DynamoDBClient, table_name: str, tenant: str) -> None:
    """An active tenant's stored record (every field stored: ``offboarding_since`` NULL)."""
    item = to_item(TenantConfig(tenant_id=tenant, api_key="k").item())
    assert item["offboarding_since"] == {"NULL": True}
    dynamodb.put_item(TableName=table_name, Item=item)


def offboard_usage(dynamodb: DynamoDBClient, table_name: str, tenant: str, *, erase: bool = True) -> None:
    """What ``make offboard`` does that matters here: the tenant record marked
    (``offboarding_since``; kept until the replay horizon passed), then the usage
    partitions, journals included, erased (``ops.tenant_data.fixed_partitions``)."""
    record = TenantConfig(tenant_id=tenant, status=TenantStatus.SUSPENDED, offboarding_since=1, erasable_at=2)
    dynamodb.put_item(TableName=table_name, Item=to_item(record.item()))
    for pk in keys.usage_partitions(tenant) if erase else ():
        page = dynamodb.query(
            TableName=table_name, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": pk}}
        )
        for item in page["Items"]:
            dynamodb.delete_item(TableName=table_name, Key={"pk": item["pk"], "sk": item["sk"]})


def test_a_late_redelivery_never_writes_an_offboarded_tenants_usage_again(harness: Harness) -> None:
    # Given a delivery of tenants 1 and 10 (both with a stored record), counted
    for tenant in ("1", "10"):
        store_active_record(harness.dynamodb, harness.table_name, tenant)
    lines = [Line("a1", "1"), Line("a2", "10"), Line("a3", "1")]
    harness.invoke(delivery_of(lines))
    assert harness.counters("1") == recount(lines, "1")
    # When tenant 1 is offboarded (its record marked, its usage and journals erased)
    offboard_usage(harness.dynamodb, harness.table_name, "1")
    assert harness.counters("1") == {}
    # and Lambda retries the same delivery hours later, then a new one arrives
    late = harness.invoke(delivery_of(lines))
    newer = [Line("b1", "1"), Line("b2", "10")]
    later = harness.invoke(delivery_of(newer, stream="2026/11/25/[$LATEST]def"))
    # Then nothing of tenant 1 is written again, and it is reported as skipped
    assert harness.counters("1") == {}
    assert not [i for i in all_items(harness.dynamodb, harness.table_name) if i["pk"]["S"].startswith("TENANT#1|USAGE")]
    assert (late["offboarded"], late["redelivered"], late["applied"]) == (1, 1, 0)
    assert (later["offboarded"], later["applied"]) == (1, 1)
    # while tenant 10, active, has each of its lines counted exactly once
    assert harness.counters("10") == recount([*lines, *newer], "10")


def test_a_tenant_being_offboarded_is_skipped_before_its_usage_is_erased(harness: Harness) -> None:
    # Given tenant 10 marked for offboarding, its usage not erased yet, and tenant 1 active
    offboard_usage(harness.dynamodb, harness.table_name, "10", erase=False)
    store_active_record(harness.dynamodb, harness.table_name, "1")
    # When a delivery of tenants 1 and 10 arrives
    result = harness.invoke(delivery_of([Line("c1", "10"), Line("c2", "1")]))
    # Then only tenant 1's is written (the offboarding would erase 10's, but not a later one's)
    assert (result["offboarded"], result["applied"]) == (1, 1)
    assert harness.counters("10") == {}
    assert harness.counters("1") == recount([Line("c2", "1")], "1")
