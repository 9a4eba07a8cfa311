"""Every function routed by the tenant's placement, in process over moto (the
pool table and the dedicated tables made from templates/dedicated-table.yaml):

- a dedicated tenant's requests, on every route, read and write its own table
  and nothing of the pool but its record (and its usage ledger); a pooled
  tenant's never name a dedicated table;
- the stream functions count, audit and fan out a dedicated table's records
  into that table; a move's copy, its sync and its erase count nothing, write
  no audit event and fire no webhook, and a change the old table made before
  the switch, handled late, lands in the old table (its webhooks read from the
  new one);
- while a move switches tables, every write route answers 503 TENANT_MOVING
  with Retry-After and nothing is written (an Idempotency-Key left usable),
  every read route 200;
- the delivery function holds a moving tenant's messages (nothing written),
  records a dedicated tenant's deliveries in its table, waits out the erase
  for a webhook it does not find, and re-reads the record after its attempt;
- the ticket repository reads shard counts from the pool, never a dedicated
  table (where no record is); a stream batch of a tenant that never moved
  costs one record read per container and TTL, not one per record.

Tenants ``1`` and ``10`` (one id a prefix of the other) both ways. The records'
times: a move puts whole seconds between its copy and ``placed_at`` and between
``placed_at`` and its erase (support_tickets.data.placement); the tests stamp the
stream records they hand over with those seconds instead of sleeping."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from local_stack.event_sources.stream_sources import lambda_record
from local_stack.local_values import offline_values
from ops.routes import SUBJECT_SEPARATOR
from ops.sample_events import delivery_item, sample_delivery_id
from stack_model import dedicated
from stack_model.template import REGION, table_definition
from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import CreateTicketRequest
from support_tickets.data.placement import MovePhase, Placement
from support_tickets.data.table import to_item
from support_tickets.data.tenant_registry import TenantConfig, tenant_configs
from support_tickets.data.ticket_repository import TicketRepository
from support_tickets.domain.tenancy import table_for
from support_tickets.webhooks.urls import CheckedUrl
from tests.conftest import WEBHOOK_QUEUE_URL, all_items, caller_for
from tests.functional.api_harness import ROUTES, Api, User, aws_calls, sample_request
from tests.functional.conftest import PUBLIC_ADDRESS
from tests.functional.stream_harness import StreamHarness
from tests.functional.webhook_harness import RecordingSqs, receive
from tests.functional.webhook_harness import deliverer as harness_deliverer

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = pytest.mark.usefixtures("local_receivers")

POOL = str(table_definition()["TableName"])
PAIRS = [pytest.param("1", "10", id="1-dedicated-10-pooled"), pytest.param("10", "1", id="10-dedicated-1-pooled")]
HOOK_URL = "https://mine.example.com/in"
WRITE_ROUTES = [name for name, route in ROUTES.items() if not route.read_only]
READ_ROUTES = [name for name, route in ROUTES.items() if route.read_only]
OPEN, CLOSED = TicketStatus.OPEN, TicketStatus.CLOSED


# ---------------------------------------------------------------- arranging placements
def own_table(dynamodb: DynamoDBClient, tenant: str) -> str:
    """The tenant's dedicated table in moto, as its template declares it."""
    values = dedicated.dedicated_values(tenant, offline_values(user_pool_id="p", client_id="c", identity_pool_id="i"))
    definition = dedicated.table_definition(values)
    name = str(definition["TableName"])
    if name not in dynamodb.list_tables()["TableNames"]:
        dynamodb.create_table(**definition)
    return name


def place(dynamodb: DynamoDBClient, record: TenantConfig) -> None:
    """Store the tenant's record (as an operator's command would) and let this process's
    containers see it now (in-process tests clear the cache instead of waiting for it)."""
    dynamodb.put_item(TableName=POOL, Item=to_item(record.item()))
    tenant_configs().clear()


def dedicated_record(tenant: str, table: str, placed_at: int = 1, **fields: Any) -> TenantConfig:
    return TenantConfig(tenant_id=tenant, placement=Placement.DEDICATED, table=table, placed_at=placed_at, **fields)


def items_of(dynamodb: DynamoDBClient, table: str, tenant: str) -> list[dict[str, Any]]:
    prefix = keys.tenant_prefix(tenant)
    return [item for item in all_items(dynamodb, table) if item["pk"]["S"].startswith(prefix)]


def tables_named(params: Mapping[str, Any]) -> set[str]:
    """The tables a DynamoDB call's parameters name (a transaction's and a batch's included)."""
    named = {str(params["TableName"])} if "TableName" in params else set()
    for entry in params.get("TransactItems", []):
        named.update(str(action["TableName"]) for action in entry.values())
    named.update(str(table) for table in params.get("RequestItems", {}))
    return named


def keys_named(params: Mapping[str, Any]) -> frozenset[str]:
    """The partition keys a call's parameters name (its key, its item, its query's ``:pk``)."""
    found = set()
    for holder in (params.get("Key"), params.get("Item")):
        if holder and "pk" in holder:
            found.add(str(holder["pk"]["S"]))
    for name, value in (params.get("ExpressionAttributeValues") or {}).items():
        if name.startswith(":pk") and "S" in value:
            found.add(str(value["S"]))
    return frozenset(found)


def subject(api: Api, dynamodb: DynamoDBClient, route: str, user: User, table: str) -> str:
    """What a request to ``route`` is about, made in ``user``'s tenant: a ticket, a
    webhook, or a webhook's delivery (seeded where the tenant's data is: ``table``)."""
    spec = ROUTES[route]
    if not spec.takes_webhook:
        return str(api.new_ticket(user)["ticket_id"])
    body = ROUTES["webhook_create"].body("")
    created = api.call("webhook_create", user.as_admin(), body=body)
    assert created.status == 201, created.body
    webhook_id = str(created.body["webhook_id"])
    if not spec.takes_delivery:
        return webhook_id
    dynamodb.put_item(TableName=table, Item=delivery_item(user.tenant_id, webhook_id))
    return f"{webhook_id}{SUBJECT_SEPARATOR}{sample_delivery_id(webhook_id)}"


def stamped(records: list[dict[str, Any]], second: int) -> list[dict[str, Any]]:
    """``records`` as created in ``second`` (the mover's whole seconds, without sleeping)."""
    return [{**record, "dynamodb": {**record["dynamodb"], "ApproximateCreationDateTime": second}} for record in records]


def latest_second(*batches: list[dict[str, Any]]) -> int:
    return max(int(record["dynamodb"]["ApproximateCreationDateTime"]) for batch in batches for record in batch)


@pytest.fixture
def streams(aws: None) -> Any:
    return boto3.client("dynamodbstreams", region_name=REGION)


# ---------------------------------------------------------------- the API
@pytest.mark.parametrize(("tenant", "neighbour"), PAIRS)
def test_a_dedicated_tenants_requests_use_its_own_table_on_every_route_and_a_pooled_ones_never_do(
    api: Api, dynamodb: DynamoDBClient, tenant: str, neighbour: str
) -> None:
    own = own_table(dynamodb, tenant)
    place(dynamodb, dedicated_record(tenant, own))
    own_user, pooled_user = User(tenant, "alice"), User(neighbour, "bob")
    subjects = {route: subject(api, dynamodb, route, own_user, own) for route in ROUTES}
    pooled = {route: subject(api, dynamodb, route, pooled_user, POOL) for route in ROUTES}
    pool_before, own_before = all_items(dynamodb, POOL), items_of(dynamodb, own, tenant)
    # When the dedicated tenant calls every route (the record read again: a fresh container)
    tenant_configs().clear()
    with aws_calls() as calls:
        for route, about in subjects.items():
            response = sample_request(api, route, own_user, about)
            assert response.ok, (route, response.status, response.body)
    # Then every DynamoDB call named its own table, but the read of its record and of its usage ledger
    record, ledger = keys.tenant_config_key(tenant)["pk"]["S"], keys.usage_pk(tenant)
    for service, operation, params in calls:
        if service != "dynamodb":
            continue
        if tables_named(params) == {POOL}:
            allowed = {("GetItem", frozenset({record})), ("Query", frozenset({ledger}))}
            assert (operation, keys_named(params)) in allowed, (operation, params)
        else:
            assert tables_named(params) == {own}, (operation, params)
    assert ("dynamodb", "GetItem") in {(service, operation) for service, operation, _ in calls}
    # and nothing of the pool changed, while its own table did (only ever its own keys there)
    assert all_items(dynamodb, POOL) == pool_before
    assert items_of(dynamodb, own, tenant) != own_before
    assert all(item["pk"]["S"].startswith(keys.tenant_prefix(tenant)) for item in all_items(dynamodb, own))
    # When the pooled neighbour calls every route, no call names a dedicated table, and the tenant's is untouched
    own_after = all_items(dynamodb, own)
    with aws_calls() as calls:
        for route, about in pooled.items():
            response = sample_request(api, route, pooled_user, about)
            assert response.ok, (route, response.status, response.body)
    named = {table for service, _, params in calls if service == "dynamodb" for table in tables_named(params)}
    assert named == {POOL}
    assert all_items(dynamodb, own) == own_after


# Each phase once, tenants 1 and 10 each the moving one once.
PHASES = [
    pytest.param(MovePhase.SWITCHING, "1", "10", id="SWITCHING-1-moves-10-pooled"),
    pytest.param(MovePhase.FLIPPED, "10", "1", id="FLIPPED-10-moves-1-pooled"),
]


@pytest.mark.parametrize(("phase", "tenant", "neighbour"), PHASES)
def test_while_a_move_switches_tables_writes_answer_503_tenant_moving_and_reads_200(
    api: Api, dynamodb: DynamoDBClient, tenant: str, neighbour: str, phase: MovePhase
) -> None:
    own = own_table(dynamodb, tenant)
    user, other = User(tenant, "alice"), User(neighbour, "bob")
    subjects = {route: subject(api, dynamodb, route, user, POOL) for route in ROUTES}
    neighbours = subject(api, dynamodb, "update", other, POOL)
    # Given the tenant's data copied to its own table, and the move at the phase
    for item in items_of(dynamodb, POOL, tenant):
        if not item["pk"]["S"].startswith(keys.tenant_config_key(tenant)["pk"]["S"]):
            dynamodb.put_item(TableName=own, Item=item)
    moving: dict[str, Any] = {"move_to": "dedicated", "move_table": own, "move_phase": phase, "move_started_at": 1}
    if phase is MovePhase.FLIPPED:
        place(dynamodb, dedicated_record(tenant, own, placed_at=2, previous_placed_at=0, **moving))
    else:
        place(dynamodb, TenantConfig(tenant_id=tenant, **moving))
    before = {table: all_items(dynamodb, table) for table in (POOL, own)}
    # Then every write route answers 503 TENANT_MOVING, Retry-After 2, and writes nothing anywhere
    for route in WRITE_ROUTES:
        response = sample_request(api, route, user, subjects[route])
        assert (response.status, response.error_code, response.header("Retry-After")) == (503, "TENANT_MOVING", "2")
    key = {"Idempotency-Key": "k-1"}
    response = api.create(user, {"title": "once"}, headers=key)
    assert (response.status, response.error_code) == (503, "TENANT_MOVING")
    assert {table: all_items(dynamodb, table) for table in (POOL, own)} == before
    # while every read route answers 200 (from the table the record names) and the neighbour writes on
    for route in READ_ROUTES:
        response = sample_request(api, route, user, subjects[route])
        assert response.status == 200, (route, response.body)
    assert api.update(other, neighbours, {"title": "mine"}).status == 200
    # Once the move is over, the same Idempotency-Key creates its ticket (no record was left in progress)
    place(dynamodb, dedicated_record(tenant, own, placed_at=2) if phase is MovePhase.FLIPPED else TenantConfig(tenant))
    created = api.create(user, {"title": "once"}, headers=key)
    assert created.status == 201, created.body
    assert api.create(user, {"title": "once"}, headers=key).body["ticket_id"] == created.body["ticket_id"]


def test_the_shard_counts_come_from_the_pool_whatever_table_the_repository_is_on(dynamodb: DynamoDBClient) -> None:
    # Given tenant 1 dedicated, on 4 shards (its record in the pool; no record in its own table)
    own = own_table(dynamodb, "1")
    place(dynamodb, dedicated_record("1", own, shards=4, read_shards=(4,)))
    repository = TicketRepository(table_for(caller_for("1")))
    assert repository.table_name == own
    # When the container's copy of the record expires between the route's table and its write
    tenant_configs().clear()
    ticket = repository.create_ticket(CreateTicketRequest(title="t"), created_by="alice")
    # Then the ticket sits on one of its 4 shards (the record was read from the pool)
    stored = dynamodb.get_item(TableName=own, Key=keys.ticket_key("1", ticket.ticket_id))["Item"]
    assert stored["tenant_status"]["S"] == keys.ticket_tenant_status("1", OPEN, ticket.ticket_id, 4)
    # and the container's copy of the record still sends the tenant to its own table
    assert table_for(caller_for("1")).table_name == own
    assert items_of(dynamodb, POOL, "10") == []


# ---------------------------------------------------------------- the stream functions
def register(api: Api, tenant: str, url: str = HOOK_URL) -> str:
    body = {"url": url, "events": ["ticket.created", "ticket.updated", "ticket.deleted", "comment.added"]}
    response = api.call("webhook_create", User(tenant, "root", admin=True), body=body)
    assert response.status == 201, response.body
    return str(response.body["webhook_id"])


def queued_tenants() -> list[str]:
    """The tenants of the webhook messages queued since the last look (received and deleted:
    a FIFO group holds its next message back while one is in flight)."""
    sqs = boto3.client("sqs", region_name=REGION)
    records = receive()
    for record in records:
        sqs.delete_message(QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=record["receiptHandle"])
    return [str(json.loads(record["body"])["tenant_id"]) for record in records]


def count_items(dynamodb: DynamoDBClient, table: str, tenant: str) -> list[dict[str, Any]]:
    """The tenant's count items in ``table`` (not the aggregator's journals)."""
    return [item for item in all_items(dynamodb, table) if item["pk"]["S"] == keys.aggregate_pk(tenant)]


def audit_items(dynamodb: DynamoDBClient, table: str, tenant: str) -> list[dict[str, Any]]:
    history = f"{keys.tenant_prefix(tenant)}HISTORY#"  # keys.history_pk's, without a ticket
    return [item for item in all_items(dynamodb, table) if item["pk"]["S"].startswith(history)]


@pytest.mark.parametrize(("tenant", "neighbour"), PAIRS)
def test_a_dedicated_tables_stream_counts_audits_and_fans_out_into_that_table(
    api: Api, dynamodb: DynamoDBClient, streams: Any, tenant: str, neighbour: str
) -> None:
    own = own_table(dynamodb, tenant)
    place(dynamodb, dedicated_record(tenant, own))
    counts = StreamHarness.of("AggregateCountsFunction", dynamodb, streams, own)
    audit = StreamHarness.of("AuditTrailFunction", dynamodb, streams, own)
    register(api, tenant)
    user = User(tenant, "alice")
    ticket = api.new_ticket(user)["ticket_id"]
    api.new_ticket(user)
    assert api.update(user, ticket, {"status": "CLOSED"}).status == 200
    api.new_ticket(User(neighbour, "bob"))  # in the pool, on the pool's stream
    # When the functions get its table's stream
    counts.deliver(counts.new_records())
    audit.deliver(audit.new_records())
    # Then its counts, its trail and its webhook messages come from its own table
    assert counts.counts(tenant) == counts.truth(tenant) == {OPEN: 1, CLOSED: 1, TicketStatus.IN_PROGRESS: 0}
    history = api.history(user, ticket).body["events"]
    assert [event["type"] for event in history] == ["created", "updated"]
    assert queued_tenants() == [tenant, tenant, tenant]
    assert count_items(dynamodb, POOL, tenant) == audit_items(dynamodb, POOL, tenant) == []
    assert all(item["pk"]["S"].startswith(keys.tenant_prefix(tenant)) for item in all_items(dynamodb, own))


def copy_tenant(dynamodb: DynamoDBClient, source: str, target: str, tenant: str) -> None:
    """What a move copies: every item of the tenant but its record, its ledger and its counts."""
    skipped = (keys.tenant_config_key(tenant)["pk"]["S"], keys.aggregate_pk(tenant), keys.usage_pk(tenant))
    for item in items_of(dynamodb, source, tenant):
        if not item["pk"]["S"].startswith(skipped):
            dynamodb.put_item(TableName=target, Item=item)


def erase_tenant(dynamodb: DynamoDBClient, table: str, tenant: str) -> None:
    """What a move's erase does to the table it left: every item of the tenant but its record."""
    record = keys.tenant_config_key(tenant)["pk"]["S"]
    for item in items_of(dynamodb, table, tenant):
        if item["pk"]["S"] != record:
            dynamodb.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})


@pytest.mark.parametrize(("tenant", "neighbour"), PAIRS)
def test_a_moves_copy_sync_and_erase_count_nothing_audit_nothing_and_fire_nothing(
    api: Api, dynamodb: DynamoDBClient, streams: Any, tenant: str, neighbour: str
) -> None:
    """And the change the pool made while the tenant was being copied, handled after the
    switch, is counted and audited in the pool (the table it came from), its webhook
    read from the tenant's new table."""
    own = own_table(dynamodb, tenant)
    harness = {
        (table, function): StreamHarness.of(function, dynamodb, streams, table)
        for table in (POOL, own)
        for function in ("AggregateCountsFunction", "AuditTrailFunction")
    }

    def records(table: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return harness[(table, "AggregateCountsFunction")].new_records(), harness[
            (table, "AuditTrailFunction")
        ].new_records()

    def deliver(table: str, batches: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
        harness[(table, "AggregateCountsFunction")].deliver(batches[0])
        harness[(table, "AuditTrailFunction")].deliver(batches[1])

    # Given the tenant in the pool with two tickets, a comment and a webhook, its neighbour too, all processed
    user = User(tenant, "alice")
    register(api, tenant)
    register(api, neighbour)
    first, second = api.new_ticket(user)["ticket_id"], api.new_ticket(user)["ticket_id"]
    assert api.comment(user, second, {"body": "hi"}).status == 201
    theirs = api.new_ticket(User(neighbour, "bob"))["ticket_id"]
    deliver(POOL, records(POOL))
    assert sorted(queued_tenants()) == sorted([tenant] * 3 + [neighbour])
    neighbours_counts = count_items(dynamodb, POOL, neighbour)
    # When a move announces itself and copies the tenant into its own table
    moving: dict[str, Any] = {"move_to": "dedicated", "move_table": own, "move_started_at": 1}
    place(dynamodb, TenantConfig(tenant_id=tenant, move_phase=MovePhase.COPYING, **moving))
    copy_tenant(dynamodb, POOL, own, tenant)
    # ... the pool changes meanwhile (a write before the switch), the switch syncs that change ...
    assert api.update(user, first, {"status": "CLOSED"}).status == 200
    copy_tenant(dynamodb, POOL, own, tenant)
    copied, lagging = records(own), records(POOL)
    placed_at = latest_second(*copied, *lagging) + 1
    # ... the record names its own table, and the erase of the pool begins
    flipped = dedicated_record(tenant, own, placed_at=placed_at, move_phase=MovePhase.ERASING, **moving)
    place(dynamodb, flipped)
    own_audit = audit_items(dynamodb, own, tenant)
    # Then the copy and the sync, handed to the functions, count nothing, audit nothing, fire nothing
    deliver(own, copied)
    assert count_items(dynamodb, own, tenant) == []
    assert audit_items(dynamodb, own, tenant) == own_audit
    assert queued_tenants() == []
    # and the pool's change, handled late, is counted and audited in the pool, its webhook still reached
    pool_history = audit_items(dynamodb, POOL, tenant)
    deliver(POOL, lagging)
    assert harness[(POOL, "AggregateCountsFunction")].counts(tenant) == {
        OPEN: 1,
        CLOSED: 1,
        TicketStatus.IN_PROGRESS: 0,
    }
    (event,) = [item for item in audit_items(dynamodb, POOL, tenant) if item not in pool_history]
    assert (event["type"]["S"], event["ticket_id"]["S"]) == ("updated", first)
    assert queued_tenants() == [tenant]
    # When the erase of the pool (after placed_at) reaches the functions
    erase_tenant(dynamodb, POOL, tenant)
    erased = records(POOL)
    deliver(POOL, (stamped(erased[0], placed_at + 2), stamped(erased[1], placed_at + 2)))
    # Then nothing is counted, audited or sent for it: the pool holds nothing of the tenant but its
    # record and the aggregator's journals of those records (bookkeeping that expires after the replay
    # horizon; an erase that marks the tickets `erasing` first, as an offboarding does, reaches neither function)
    left = {item["pk"]["S"] for item in items_of(dynamodb, POOL, tenant)}
    assert left - set(keys.aggregate_journal_partitions(tenant)) == {keys.tenant_config_key(tenant)["pk"]["S"]}
    assert queued_tenants() == []
    # and once writes go to its own table, its changes there are its own: counted, audited and sent from there
    assert api.update(user, second, {"status": "CLOSED"}).status == 200
    new = records(own)
    deliver(own, (stamped(new[0], placed_at + 3), stamped(new[1], placed_at + 3)))
    assert harness[(own, "AggregateCountsFunction")].counts(tenant)[CLOSED] == 1
    assert [event["type"] for event in api.history(user, second).body["events"]] == [
        "created",
        "comment_added",
        "updated",
    ]
    assert queued_tenants() == [tenant]
    # The neighbour's counts and items never moved
    assert count_items(dynamodb, POOL, neighbour) == neighbours_counts
    assert api.summary(User(neighbour, "bob"), theirs).status == 200
    assert items_of(dynamodb, own, neighbour) == []


def test_a_record_of_a_table_that_is_not_its_tenants_is_poison(
    api: Api, dynamodb: DynamoDBClient, streams: Any
) -> None:
    """Tenant 10's changes handed over as records of tenant 1's table's stream (and of no
    stream at all): poison, nothing written anywhere."""
    own = own_table(dynamodb, "1")
    counts = StreamHarness.of("AggregateCountsFunction", dynamodb, streams, POOL)
    audit = StreamHarness.of("AuditTrailFunction", dynamodb, streams, POOL)
    api.new_ticket(User("10", "alice"))
    forged_arn = dynamodb.describe_table(TableName=own)["Table"]["LatestStreamArn"]
    before = {table: all_items(dynamodb, table) for table in (POOL, own)}
    for harness in (counts, audit):
        records = harness.new_records()
        forged = [{**record, "eventSourceARN": forged_arn} for record in records]
        bare = [{key: value for key, value in record.items() if key != "eventSourceARN"} for record in records]
        with aws_calls() as calls:
            assert harness.invoke(forged) == []
            assert harness.invoke(bare) == []
        poison = [call for call in calls if call[1] == "SendMessage" and "security" in call[2]["MessageBody"]]
        assert len(poison) == len(records)
        assert any("without its stream" in call[2]["MessageBody"] for call in calls if call[1] == "SendMessage")
    after = {table: all_items(dynamodb, table) for table in (POOL, own)}
    assert after == before


# ---------------------------------------------------------------- what a batch costs
def test_a_tenant_that_never_moved_costs_one_record_read_per_container_not_one_per_record(
    api: Api, dynamodb: DynamoDBClient, streams: Any
) -> None:
    counts = StreamHarness.of("AggregateCountsFunction", dynamodb, streams, POOL)
    audit = StreamHarness.of("AuditTrailFunction", dynamodb, streams, POOL)
    for tenant in ("1", "10"):
        for _ in range(3):
            api.new_ticket(User(tenant, "alice"))
    batches = counts.new_records(), audit.new_records()
    tenant_configs().clear()  # the stream functions' containers start cold

    def record_reads(calls: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
        return sorted(
            str(params["Key"]["pk"]["S"])
            for _, operation, params in calls
            if operation == "GetItem" and str(params["Key"]["pk"]["S"]).endswith("|CONFIG")
        )

    with aws_calls() as cold:
        counts.invoke(batches[0])
    with aws_calls() as warm:
        counts.invoke(batches[0])  # the same batch again (a redelivery), the records cached
        audit.invoke(batches[1])
    # One read of each tenant's record for six records, then none for the next twelve
    assert record_reads(cold) == ["TENANT#10|CONFIG", "TENANT#1|CONFIG"]
    assert record_reads(warm) == []


# ---------------------------------------------------------------- the delivery function
class RecordingPost:
    """The delivery function's POST (answered 204), and a hook run while it is "in flight"."""

    def __init__(self, during: Any = None) -> None:
        self.posted: list[str] = []
        self.during = during

    def __call__(self, checked: CheckedUrl, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
        self.posted.append(checked.url)
        if self.during is not None:
            self.during()
        return 204


def deliverer(**options: Any) -> Any:
    return harness_deliverer(POOL, resolve=lambda host, port: [PUBLIC_ADDRESS], **options)


def one_message(
    api: Api, dynamodb: DynamoDBClient, streams: Any, tenant: str, table: str
) -> tuple[str, dict[str, Any]]:
    """A webhook of ``tenant`` and the queued message of a new ticket's event to it."""
    hook = register(api, tenant)
    api.new_ticket(User(tenant, "alice"))
    audit = StreamHarness.of("AuditTrailFunction", dynamodb, streams, table)
    audit.deliver(audit.new_records())
    (record,) = receive()
    return hook, record


def deliveries(dynamodb: DynamoDBClient, table: str, tenant: str, hook: str) -> list[dict[str, Any]]:
    pk = keys.webhook_deliveries_pk(tenant, hook)
    return [item for item in all_items(dynamodb, table) if item["pk"]["S"] == pk]


def as_queued(dynamodb: DynamoDBClient, table: str, tenant: str, hook: str) -> list[dict[str, Any]]:
    """The delivery's record as the fan-out wrote it before queueing its message: PENDING, no attempt."""
    found = deliveries(dynamodb, table, tenant, hook)
    assert [(item["status"]["S"], item["attempts"]["N"]) for item in found] == [("PENDING", "0")]
    return found


@pytest.mark.parametrize(("tenant", "neighbour"), PAIRS)
def test_a_dedicated_tenants_delivery_is_recorded_in_its_own_table(
    api: Api, dynamodb: DynamoDBClient, streams: Any, tenant: str, neighbour: str
) -> None:
    own = own_table(dynamodb, tenant)
    place(dynamodb, dedicated_record(tenant, own))
    hook, record = one_message(api, dynamodb, streams, tenant, own)
    post = RecordingPost()
    assert deliverer(post=post).process_batch([record]) == []
    assert post.posted == [HOOK_URL]
    (delivered,) = deliveries(dynamodb, own, tenant, hook)
    assert (delivered["status"]["S"], delivered["attempts"]["N"]) == ("DELIVERED", "1")
    assert deliveries(dynamodb, POOL, tenant, hook) == []
    listed = api.call("webhook_deliveries", User(tenant, "root", admin=True), ticket_id=hook).body["items"]
    assert [item["status"] for item in listed] == ["DELIVERED"]
    assert items_of(dynamodb, own, neighbour) == []


@pytest.mark.parametrize(("phase", "tenant", "neighbour"), PHASES)
def test_a_moving_tenants_delivery_is_held_with_nothing_written_and_goes_out_after(
    api: Api, dynamodb: DynamoDBClient, streams: Any, tenant: str, neighbour: str, phase: MovePhase
) -> None:
    own = own_table(dynamodb, tenant)
    hook, record = one_message(api, dynamodb, streams, tenant, POOL)
    queued = as_queued(dynamodb, POOL, tenant, hook)
    _, theirs = one_message(api, dynamodb, streams, neighbour, POOL)
    copy_tenant(dynamodb, POOL, own, tenant)
    moving: dict[str, Any] = {"move_to": "dedicated", "move_table": own, "move_phase": phase, "move_started_at": 1}
    if phase is MovePhase.FLIPPED:
        place(dynamodb, dedicated_record(tenant, own, placed_at=2, **moving))
    else:
        place(dynamodb, TenantConfig(tenant_id=tenant, **moving))
    before = {table: all_items(dynamodb, table) for table in (POOL, own)}
    post, sqs = RecordingPost(), RecordingSqs()
    # When the batch holds the moving tenant's message and its neighbour's
    assert deliverer(post=post, sqs=sqs).process_batch([record, theirs]) == [record["messageId"]]
    # Then only the neighbour's was sent; the tenant's comes back in 2 s (± jitter), nothing of it written
    assert post.posted == [HOOK_URL]
    (delay,) = sqs.visibility
    assert 2 <= delay <= 3
    assert all_items(dynamodb, own) == before[own]
    assert deliveries(dynamodb, POOL, tenant, hook) == queued
    # Once the move is over, it goes out and is recorded in the tenant's table
    place(dynamodb, dedicated_record(tenant, own, placed_at=2))
    assert deliverer(post=post, sqs=sqs).process_batch([record]) == []
    assert post.posted == [HOOK_URL, HOOK_URL]
    (delivered,) = deliveries(dynamodb, own, tenant, hook)
    assert delivered["status"]["S"] == "DELIVERED"


def test_while_a_move_erases_a_webhook_not_found_is_looked_for_later_and_dropped_after(
    api: Api, dynamodb: DynamoDBClient, streams: Any
) -> None:
    own = own_table(dynamodb, "10")
    hook, record = one_message(api, dynamodb, streams, "10", POOL)
    queued = as_queued(dynamodb, POOL, "10", hook)
    moving: dict[str, Any] = {"move_to": "dedicated", "move_table": own, "move_started_at": 1}
    # The tenant's own table does not have the webhook (its copy not there)
    place(dynamodb, dedicated_record("10", own, placed_at=2, move_phase=MovePhase.ERASING, **moving))
    post, sqs = RecordingPost(), RecordingSqs()
    assert deliverer(post=post, sqs=sqs).process_batch([record]) == [record["messageId"]]
    assert (post.posted, len(sqs.visibility), sqs.dead_letters) == ([], 1, [])
    assert all_items(dynamodb, own) == []
    # The move over, a webhook still not there drops the message (deleted since): nothing sent
    place(dynamodb, dedicated_record("10", own, placed_at=2))
    assert deliverer(post=post, sqs=sqs).process_batch([record]) == []
    assert (post.posted, len(sqs.visibility)) == ([], 1)
    assert deliveries(dynamodb, POOL, "10", hook) == queued


def test_an_attempt_whose_tenant_began_switching_tables_meanwhile_records_nothing_and_comes_back(
    api: Api, dynamodb: DynamoDBClient, streams: Any
) -> None:
    own = own_table(dynamodb, "1")
    hook, record = one_message(api, dynamodb, streams, "1", POOL)
    queued = as_queued(dynamodb, POOL, "1", hook)
    copy_tenant(dynamodb, POOL, own, "1")
    switching = TenantConfig(
        tenant_id="1", move_to="dedicated", move_table=own, move_phase=MovePhase.SWITCHING, move_started_at=1
    )
    records = deliverer().tenant_configs  # the deliverer's own cache, as a container holds it

    def switch_tables() -> None:
        dynamodb.put_item(TableName=POOL, Item=to_item(switching.item()))
        records.clear()  # its copy expired while the POST was in flight (a second at most while moving)

    post, sqs = RecordingPost(during=switch_tables), RecordingSqs()
    pool_before, own_before = all_items(dynamodb, POOL), all_items(dynamodb, own)
    assert deliverer(post=post, sqs=sqs, tenant_configs=records).process_batch([record]) == [record["messageId"]]
    # The POST went out, its outcome was recorded nowhere (the tables are switching), and it comes back
    assert post.posted == [HOOK_URL]
    assert sqs.visibility
    assert sqs.dead_letters == []
    assert deliveries(dynamodb, POOL, "1", hook) == deliveries(dynamodb, own, "1", hook) == queued
    changed = [item for item in all_items(dynamodb, POOL) if item not in pool_before]
    assert [item["pk"]["S"] for item in changed] == [keys.tenant_config_key("1")["pk"]["S"]]  # the switch's record
    assert all_items(dynamodb, own) == own_before


# ---------------------------------------------------------------- the local stack's records
def test_a_dedicated_tables_records_carry_its_streams_arn_and_whole_seconds(
    dynamodb: DynamoDBClient, streams: Any
) -> None:
    """As the local stack's poller hands them to the functions
    (local_stack.event_sources.stream_sources.lambda_record)."""
    own = own_table(dynamodb, "1")
    dynamodb.put_item(TableName=own, Item=keys.ticket_key("1", "T1"))
    arn = dynamodb.describe_table(TableName=own)["Table"]["LatestStreamArn"]
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
    (raw,) = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    record = lambda_record(raw, arn)
    assert record["eventSourceARN"] == arn
    assert arn.startswith(f"arn:aws:dynamodb:{REGION}:")
    assert f":table/{own}/stream/" in arn
    created = record["dynamodb"]["ApproximateCreationDateTime"]
    assert isinstance(created, int)
    assert created == int(raw["dynamodb"]["ApproximateCreationDateTime"].timestamp())
    assert abs(created - time.time()) < 3600  # epoch seconds, not milliseconds
