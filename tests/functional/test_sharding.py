"""Hot tenants: GSI1 status lists sharded per tenant, scatter-gather listing with
one cursor, resharding at any time without hiding a ticket, and isolation
between a sharded and an unsharded tenant on every route."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ops.routes import by_name, route_names
from ops.tenants import TenantAdmin, TenantRecordError, main
from support_tickets.core import keys
from support_tickets.core.errors import InvalidCursor
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import CreateTicketRequest
from support_tickets.data.session import token_exchange
from support_tickets.data.tenant_registry import TenantConfig, tenant_configs
from support_tickets.data.ticket_repository import TicketRepository
from tests.conftest import all_items, instant_tenant_admin, mocked_aws, random_tenant_id, tenant_table
from tests.depth import sized
from tests.functional.api_harness import Api, User, new_subject, sample_request
from tests.functional.conftest import local_state_file, stack_usage_plans
from tests.functional.test_dedicated_routing import items_of, own_table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

OPEN, CLOSED = TicketStatus.OPEN, TicketStatus.CLOSED


def fixed(config: TenantConfig) -> Callable[[Any], TenantConfig]:
    """A container whose cached tenant record is ``config``."""
    return lambda table: config


def repo_with(tenant: str, shards: int = 1, read: tuple[int, ...] | None = None) -> TicketRepository:
    config = TenantConfig(tenant_id=tenant, shards=shards, read_shards=read or (shards,))
    return TicketRepository(tenant_table(tenant), config=fixed(config))


def new_ticket(repo: TicketRepository, resolver: str | None = None) -> str:
    return repo.create_ticket(CreateTicketRequest(title="t", resolver=resolver), created_by="alice").ticket_id


def page_through(repo: TicketRepository, status: TicketStatus, limit: int, resolver: str | None = None) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(1000):
        page = repo.list_tickets_by_status(status, resolver, limit, cursor)
        assert len(page.items) <= limit
        seen.extend(item.ticket_id for item in page.items)
        cursor = page.next_cursor
        if cursor is None:
            return seen
    raise AssertionError("paging never ended")


# ---------------------------------------------------------------- keys as stored
def test_a_sharded_tenants_tickets_spread_over_its_shards(aws: None, dynamodb: DynamoDBClient, table_name: str) -> None:
    tenant = random_tenant_id()
    repo = repo_with(tenant, shards=4)
    ids = [new_ticket(repo) for _ in range(40)]
    placed = {item["ticket_id"]["S"]: item["tenant_status"]["S"] for item in all_items(dynamodb, table_name)}
    assert {placed[ticket] for ticket in ids} == {f"TENANT#{tenant}|OPEN#{k}" for k in range(4)}
    for ticket in ids:
        assert placed[ticket] == keys.ticket_tenant_status(tenant, OPEN, ticket, 4)


# ---------------------------------------------------------------- scatter-gather
@settings(max_examples=sized(deep=15, ci=5), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shards=st.integers(1, 8),
    tickets=st.integers(0, 20),
    limit=st.integers(1, 12),
    resolvers=st.lists(st.sampled_from([None, "ann", "bob", "zed"]), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_paging_returns_exactly_the_tenants_tickets_of_that_status_each_once(
    shards: int, tickets: int, limit: int, resolvers: list[str | None], seed: int
) -> None:
    rng = random.Random(seed)
    token_exchange.cache_clear()
    with mocked_aws():
        tenant, neighbour = random_tenant_id(), random_tenant_id()
        repo = repo_with(tenant, shards=shards)
        other = repo_with(neighbour, shards=rng.randint(1, 8))
        expected: dict[TicketStatus, set[str]] = {status: set() for status in TicketStatus}
        for _ in range(tickets):
            ticket = new_ticket(repo, rng.choice(resolvers))
            status = rng.choice(list(TicketStatus))
            if status is not OPEN:
                repo.update_ticket(ticket, {"status": status}, None, actor="alice")
            expected[status].add(ticket)
            new_ticket(other, rng.choice(resolvers))  # a neighbour's OPEN tickets never show up
        for status in TicketStatus:
            seen = page_through(repo, status, limit)
            assert sorted(seen) == sorted(expected[status])  # each once, nothing else
        for resolver in {r for r in resolvers if r is not None}:
            seen = page_through(repo, OPEN, limit, resolver)
            assert all(repo.get_ticket_summary(ticket).resolver == resolver for ticket in seen)
            assert len(seen) == len(set(seen))


def test_the_merged_order_is_by_resolver_then_shard(aws: None) -> None:
    repo = repo_with(random_tenant_id(), shards=4)
    for resolver in ["mary", None, "ann", "zed", "ann", None]:
        new_ticket(repo, resolver)
    page = repo.list_tickets_by_status(OPEN, None, 100, None)
    resolvers = [item.resolver for item in page.items]
    assert resolvers == [None, None, "ann", "ann", "mary", "zed"]  # unassigned first


def test_a_page_reads_every_shard_in_parallel_once(aws: None) -> None:
    repo = repo_with(random_tenant_id(), shards=8)
    for _ in range(20):
        new_ticket(repo)
    calls: list[str] = []
    client = repo.table.clients.dynamodb()
    client.meta.events.register(
        "provide-client-params.dynamodb.Query", lambda params, **_: calls.append(params["KeyConditionExpression"])
    )
    page = repo.list_tickets_by_status(OPEN, None, 5, None)
    assert len(page.items) == 5
    assert len(calls) == 8


def test_a_cursor_stays_valid_while_the_shard_count_changes(aws: None) -> None:
    tenant = random_tenant_id()
    before = repo_with(tenant, shards=1)
    ids = {new_ticket(before) for _ in range(6)}
    page = before.list_tickets_by_status(OPEN, None, 2, None)
    # The record widens to 1 and 4 shards; a ticket is created under the new count
    during = repo_with(tenant, shards=4, read=(1, 4))
    ids.add(new_ticket(during))
    seen = [item.ticket_id for item in page.items]
    cursor = page.next_cursor
    while cursor is not None:
        next_page = during.list_tickets_by_status(OPEN, None, 2, cursor)
        seen.extend(item.ticket_id for item in next_page.items)
        cursor = next_page.next_cursor
    assert sorted(seen) == sorted(ids)


@pytest.mark.parametrize(
    "forge",
    [
        lambda p: {**p, "p": {"": ["", "#UNASSIGNED"]}},  # an empty ticket id: DynamoDB's ValidationException
        lambda p: {**p, "p": {"": ["x" * 2000, "#UNASSIGNED"]}},  # a key part over 1,024 bytes
        lambda p: {**p, "p": {"": ["01J", "not a resolver!"]}},
        lambda p: {**p, "p": {"99": ["01J", "#UNASSIGNED"]}},  # a shard no count can have
        lambda p: {**p, "p": {"01": ["01J", "#UNASSIGNED"]}},
        lambda p: {**p, "p": {"": "01J"}},  # a resolver missing where the query has none
        lambda p: {**p, "q": "0" * 24},
        lambda p: {**p, "extra": 1},
    ],
)
def test_a_forged_cursor_is_invalid_before_it_reaches_dynamodb(aws: None, forge: Callable[[Any], Any]) -> None:
    import base64
    import zlib

    repo = repo_with(random_tenant_id(), shards=1)
    for _ in range(3):
        new_ticket(repo)
    cursor = repo.list_tickets_by_status(OPEN, None, 1, None).next_cursor
    assert cursor is not None
    payload = json.loads(zlib.decompress(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))))
    forged = base64.urlsafe_b64encode(zlib.compress(json.dumps(forge(payload)).encode())).decode().rstrip("=")
    with pytest.raises(InvalidCursor):
        repo.list_tickets_by_status(OPEN, None, 1, forged)


def test_a_compressed_cursor_bomb_is_refused(aws: None) -> None:
    import base64
    import zlib

    repo = repo_with(random_tenant_id())
    bomb = base64.urlsafe_b64encode(zlib.compress(b"[" * 5_000_000, 9)).decode()
    assert len(bomb) < 8192
    with pytest.raises(InvalidCursor):
        repo.list_tickets_by_status(OPEN, None, 1, bomb)


# ---------------------------------------------------------------- foreign GSI rows
def test_a_foreign_row_in_the_callers_index_key_is_dropped_and_reported(
    aws: None, table_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given acme's credentials put an item of its own whose GSI1 key names globex (IAM can't stop that)
    acme, globex = random_tenant_id(), random_tenant_id()
    tenant_table(acme).call(
        "put_item",
        TableName=table_name,
        Item={
            "pk": {"S": keys.ticket_pk(acme, "01JD3Z8W1X4K6M9P2R5T7V0BQE")},
            "sk": {"S": "SUMMARY"},
            "tenant_status": {"S": keys.tenant_status(globex, OPEN)},
            "resolver": {"S": keys.UNASSIGNED_RESOLVER},
            "ticket_id": {"S": "01JD3Z8W1X4K6M9P2R5T7V0BQE"},
            "title": {"S": "planted by acme"},
        },
    )
    reported: list[Any] = []
    repo = TicketRepository(
        tenant_table(globex), config=fixed(TenantConfig(tenant_id=globex)), on_foreign_row=reported.append
    )
    own = new_ticket(repo)
    # When globex lists its open tickets
    page = repo.list_tickets_by_status(OPEN, None, 25, None)
    # Then it sees its own ticket only, and the planted row was reported
    assert [item.ticket_id for item in page.items] == [own]
    assert [row["pk"] for row in reported] == [keys.ticket_pk(acme, "01JD3Z8W1X4K6M9P2R5T7V0BQE")]


def test_the_default_report_is_a_security_log_line_and_a_metric(caplog: pytest.LogCaptureFixture) -> None:
    from aws_lambda_powertools import Metrics

    from support_tickets.data.ticket_repository import FOREIGN_INDEX_ROW_METRIC, _report_foreign_row

    metrics = Metrics(namespace="SupportTickets", service="support-tickets")
    _report_foreign_row({"pk": "TENANT#x|TICKET#1"})
    assert metrics.metric_set[FOREIGN_INDEX_ROW_METRIC]["Value"] == [1.0]
    metrics.clear_metrics()
    (line,) = [record for record in caplog.records if record.getMessage().startswith("security:")]
    assert line.levelname == "WARNING"
    assert line.row_pk == "TENANT#x|TICKET#1"  # type: ignore[attr-defined]


# ---------------------------------------------------------------- resharding
class Containers:
    """Stand-ins for warm containers holding tenant records of different ages:
    the record as it was at each phase of a reshard."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self.records: list[TenantConfig] = []

    def see(self, record: TenantConfig) -> None:
        self.records.append(record)

    def current_and_previous(self) -> list[TicketRepository]:
        """A container that sees the record now, and one still holding the previous phase's."""
        chosen = self.records[-2:]
        return [TicketRepository(tenant_table(self.tenant), config=fixed(record)) for record in chosen]


@pytest.mark.parametrize(("start", "target"), [(1, 4), (4, 1), (4, 16), (16, 4), (3, 5)])
def test_resharding_never_hides_a_ticket_from_any_container(
    aws: None, dynamodb: DynamoDBClient, table_name: str, start: int, target: int
) -> None:
    # Given a tenant with tickets in every status under `start` shards
    tenant = random_tenant_id()
    admin = instant_tenant_admin(dynamodb, table_name)
    admin.ensure(tenant)
    if start != 1:
        admin.reshard(tenant, start)
    repo = TicketRepository(tenant_table(tenant), config=fixed(admin.record(tenant)))
    expected = {status: set[str]() for status in TicketStatus}
    for n in range(12):
        ticket = new_ticket(repo)
        status = list(TicketStatus)[n % 3]
        if status is not OPEN:
            repo.update_ticket(ticket, {"status": status}, None, actor="alice")
        expected[status].add(ticket)
    containers = Containers(tenant)
    containers.see(admin.record(tenant))

    # When the operator reshards, and at every phase containers of this phase and
    # of the previous one (their cache is that stale) write and read
    def phase(_: float) -> None:
        containers.see(admin.record(tenant))
        for container in containers.current_and_previous():
            expected[OPEN].add(new_ticket(container))
        for container in containers.current_and_previous():
            for status in TicketStatus:
                assert sorted(page_through(container, status, 5)) == sorted(expected[status])

    admin.sleep = phase
    admin.phase_seconds = 1.0
    final = admin.reshard(tenant, target)

    # Then the tenant is on `target` shards only, every ticket under a key of that count
    assert (final.shards, final.read_shards, final.target_shards) == (target, (target,), None)
    after = TicketRepository(tenant_table(tenant), config=fixed(final))
    for status in TicketStatus:
        assert sorted(page_through(after, status, 7)) == sorted(expected[status])
    keys_in_use = {
        item["tenant_status"]["S"] for item in all_items(dynamodb, table_name) if item["sk"]["S"] == "SUMMARY"
    }
    allowed = {p for status in TicketStatus for p in keys.status_partitions(tenant, status, [target])}
    assert keys_in_use <= allowed


def test_an_interrupted_reshard_continues_where_it_stopped(
    aws: None, dynamodb: DynamoDBClient, table_name: str
) -> None:
    tenant = random_tenant_id()
    admin = instant_tenant_admin(dynamodb, table_name)
    admin.ensure(tenant)
    repo = TicketRepository(tenant_table(tenant), config=fixed(admin.record(tenant)))
    ids = {new_ticket(repo) for _ in range(5)}

    class Interrupted(Exception):
        pass

    def interrupt(_: float) -> None:
        raise Interrupted

    admin.sleep = interrupt
    admin.phase_seconds = 10.0
    with pytest.raises(Interrupted):
        admin.reshard(tenant, 8)
    halfway = admin.record(tenant)
    assert (halfway.shards, halfway.read_shards, halfway.target_shards) == (1, (1, 8), 8)
    admin.sleep = lambda _: None
    done = admin.reshard(tenant, None)  # `make tenant TENANT=<t>` again, without SHARDS
    assert (done.shards, done.read_shards, done.target_shards) == (8, (8,), None)
    reader = TicketRepository(tenant_table(tenant), config=fixed(done))
    assert sorted(page_through(reader, OPEN, 3)) == sorted(ids)


def listed(api: Api, user: User) -> dict[str, list[str]]:
    """The tenant's tickets per status, as ``GET /tickets?status=`` lists them."""
    tenant_configs().clear()  # the functions see the record now (in-process: no TTL to wait out)
    found = {}
    for status in TicketStatus:
        response = api.list_tickets(user, status=status.value, limit="100")
        assert response.status == 200, response.body
        found[status.value] = sorted(item["ticket_id"] for item in response.body["items"])
    return found


@pytest.mark.parametrize(("dedicated", "pooled"), [("1", "10"), ("10", "1")])
def test_a_reshard_moves_tickets_where_the_tenant_lives_and_touches_no_other_tenant(
    api: Api, dynamodb: DynamoDBClient, table_name: str, dedicated: str, pooled: str
) -> None:
    """A dedicated tenant's tickets are in its own table (its record, in the pool,
    names it): resharding it moves them there and lists still show every one;
    resharding the pooled one moves its tickets in the pool; neither reshard
    changes an item of the other tenant."""
    # Given a dedicated and a pooled tenant, each with tickets in every status
    admin = instant_tenant_admin(dynamodb, table_name)
    own = own_table(dynamodb, dedicated)
    admin.write(admin.record(dedicated), {"placement": "dedicated", "table": own, "placed_at": 1})
    admin.ensure(pooled)
    users = {tenant: User(tenant, "alice") for tenant in (dedicated, pooled)}
    where = {dedicated: own, pooled: table_name}
    tenant_configs().clear()
    for user in users.values():
        for status in TicketStatus:
            for _ in range(3):
                ticket = api.new_ticket(user)["ticket_id"]
                if status is not OPEN:
                    assert api.update(user, ticket, {"status": status.value}).status == 200
    before = {tenant: listed(api, user) for tenant, user in users.items()}
    assert all(len(ids) == 3 for lists in before.values() for ids in lists.values())

    for tenant, other in ((dedicated, pooled), (pooled, dedicated)):
        untouched = items_of(dynamodb, where[other], other)
        # When the operator reshards the tenant to 2 shards
        done = admin.reshard(tenant, 2)
        # Then every ticket of it is under a 2-shard key in the table where it lives, and listed as before
        assert (done.shards, done.read_shards) == (2, (2,))
        allowed = {p for status in TicketStatus for p in keys.status_partitions(tenant, status, [2])}
        summaries = [item for item in items_of(dynamodb, where[tenant], tenant) if item["sk"]["S"] == "SUMMARY"]
        assert len(summaries) == 9
        assert {item["tenant_status"]["S"] for item in summaries} <= allowed
        assert listed(api, users[tenant]) == before[tenant]
        # and nothing of the other tenant changed
        assert items_of(dynamodb, where[other], other) == untouched
        assert listed(api, users[other]) == before[other]


def test_bad_values_are_refused_before_anything_is_written(
    aws: None, dynamodb: DynamoDBClient, table_name: str
) -> None:
    admin = instant_tenant_admin(dynamodb, table_name)
    tenant = random_tenant_id()
    with pytest.raises(ValueError, match="shard count"):
        admin.reshard(tenant, 65)
    with pytest.raises(TenantRecordError, match="tier"):
        admin.set_tier(tenant, "gold")
    assert all_items(dynamodb, table_name) == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--tenant", "A|b"], "tenant id"),
        (["--shards", "0"], "shard count"),
        (["--shards", "65"], "shard count"),
        (["--shards", "four"], "shard count"),
        (["--tier", "gold"], "unknown tier"),
    ],
)
def test_cli_bad_values_are_a_one_line_error_and_exit_1(
    aws: None,
    dynamodb: DynamoDBClient,
    table_name: str,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    arguments: list[str],
    message: str,
) -> None:
    state = tmp_path / "stack.json"
    state.write_text(json.dumps({"emulator_url": None, "table_name": table_name}))
    argv = ["--tenant", "acme", "--local", "--local-state", str(state), *arguments]
    if arguments[0] == "--tenant":
        argv = [*arguments, "--local", "--local-state", str(state)]
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert message in error
    assert all_items(dynamodb, table_name) == []


def test_cli_prints_the_record_and_changes_it_with_options(
    aws: None, dynamodb: DynamoDBClient, table_name: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    state = local_state_file(tmp_path, table_name)
    apigateway, plans = boto3.client("apigateway", region_name="us-east-1"), stack_usage_plans()
    local = ["--local", "--local-state", str(state), "--phase-seconds", "0"]
    TenantAdmin(dynamodb, table_name).ensure("acme")  # onboarded (its record; no API key yet)
    onboarded = all_items(dynamodb, table_name)
    assert main(["--tenant", "acme", *local]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["shards"], shown["tier"], shown["status"], shown["version"]) == (1, "basic", "ACTIVE", 1)
    assert all_items(dynamodb, table_name) == onboarded  # showing writes nothing
    assert main(["--tenant", "acme", "--shards", "4", "--tier", "premium", *local]) == 0
    changed = json.loads(capsys.readouterr().out)
    assert (changed["shards"], changed["read_shards"], changed["tier"]) == (4, [4], "premium")
    stored = [item for item in all_items(dynamodb, table_name) if item["sk"]["S"] == "CONFIG"]
    assert [item["pk"]["S"] for item in stored] == ["TENANT#acme|CONFIG"]
    # The tenant got its API key, in the premium plan only; the record names it (printed without its value).
    assert "api_key" not in changed
    (key,) = apigateway.get_api_keys(nameQuery="st.acme", includeValues=True)["items"]
    assert changed["api_key_id"] == key["id"] == stored[0]["api_key_id"]["S"]
    assert stored[0]["api_key"]["S"] == key["value"]
    assert [plan["id"] for plan in apigateway.get_usage_plans(keyId=key["id"])["items"]] == [plans["premium"]]


def test_the_layer_reads_the_record_once_per_ttl(aws: None, dynamodb: DynamoDBClient, table_name: str) -> None:
    tenant = random_tenant_id()
    instant_tenant_admin(dynamodb, table_name).reshard(tenant, 4)
    calls: list[str] = []
    repo = TicketRepository(tenant_table(tenant))  # reads the record (the suspension gate)...
    tenant_configs.cache_clear()  # ...which a fresh container has not
    repo.table.clients.dynamodb().meta.events.register(
        "provide-client-params.dynamodb.GetItem", lambda params, **_: calls.append(params["Key"]["pk"]["S"])
    )
    for _ in range(3):
        new_ticket(repo)
    assert calls == [f"TENANT#{tenant}|CONFIG"]  # one read, then the cache
    assert len(page_through(repo, OPEN, 10)) == 3


# ---------------------------------------------------------------- 1 (4 shards) against 10 (1 shard)
@pytest.mark.parametrize(("sharded", "plain"), [("1", "10"), ("10", "1")])
@pytest.mark.parametrize("route", route_names())
def test_a_sharded_tenant_and_a_prefix_tenant_never_reach_each_other(
    aws: None, dynamodb: DynamoDBClient, table_name: str, sharded: str, plain: str, route: str
) -> None:
    admin = instant_tenant_admin(dynamodb, table_name)
    admin.reshard(sharded, 4)
    admin.ensure(plain)
    api = Api()
    spec = by_name()[route]
    owners = {tenant: User(tenant) for tenant in (sharded, plain)}
    mine = {tenant: [api.new_ticket(user)["ticket_id"] for _ in range(3)] for tenant, user in owners.items()}
    # A webhook of each tenant, for the routes whose path names one.
    hooks = {tenant: new_subject(api, route, user) for tenant, user in owners.items()} if spec.takes_webhook else {}
    for owner, intruder in ((sharded, plain), (plain, sharded)):
        before = all_items(dynamodb, table_name)
        subject = hooks[owner] if spec.takes_webhook else mine[owner][0]
        response = sample_request(api, route, owners[intruder], subject)
        if spec.names_ticket or spec.takes_webhook:
            assert response.status == 404, response.body
            assert all_items(dynamodb, table_name) == before
            continue
        # A route that names no ticket answers about the intruder's own tenant, and writes only there.
        assert response.status == spec.needs.success, response.body
        changed = [item for item in all_items(dynamodb, table_name) if item not in before]
        assert all(item["pk"]["S"].startswith(f"TENANT#{intruder}|") for item in changed), changed
        if route == "list":
            assert {item["ticket_id"] for item in response.body["items"]} == set(mine[intruder])
        if response.status == 201 and "ticket_id" in response.body:
            mine[intruder].append(response.body["ticket_id"])
    for tenant, user in owners.items():
        listed = api.list_tickets(user).body["items"]
        assert {item["ticket_id"] for item in listed} == set(mine[tenant])


@pytest.mark.parametrize(("before", "after"), [(1, 4), (4, 1), (8, 2)])
def test_a_ticket_moved_by_the_migration_while_a_list_reads_is_shown_once(
    aws: None, dynamodb: DynamoDBClient, table_name: str, monkeypatch: pytest.MonkeyPatch, before: int, after: int
) -> None:
    # Given a tenant in the migrate phase of a reshard, a ticket still under a key only the old count uses
    tenant = random_tenant_id()
    old = repo_with(tenant, shards=before)
    new_keys = keys.status_partitions(tenant, OPEN, [after])
    candidates = [new_ticket(old) for _ in range(40)]  # 40 tries: at least one under an old-only key
    ticket = next(t for t in candidates if keys.ticket_tenant_status(tenant, OPEN, t, before) not in new_keys)
    migrating = repo_with(tenant, shards=after, read=(before, after))
    moved_to = keys.ticket_tenant_status(tenant, OPEN, ticket, after)
    read_partition = TicketRepository._read_partition
    moves: list[str] = []

    def read_then_move(self: TicketRepository, partition: str, *args: Any) -> Any:
        result = read_partition(self, partition, *args)
        if not moves:  # the migration moves the ticket right after the first key was read
            dynamodb.update_item(
                TableName=table_name,
                Key={"pk": {"S": keys.ticket_pk(tenant, ticket)}, "sk": {"S": "SUMMARY"}},
                UpdateExpression="SET tenant_status = :new",
                ExpressionAttributeValues={":new": {"S": moved_to}},
            )
            moves.append(partition)
        return result

    monkeypatch.setattr(TicketRepository, "_read_partition", read_then_move)
    # When a list request reads every key
    page = migrating.list_tickets_by_status(OPEN, None, 100, None)
    # Then an old-only key was read first, and the ticket is listed exactly once
    assert moves[0] not in keys.status_partitions(tenant, OPEN, [after])
    listed_ids = [item.ticket_id for item in page.items]
    assert listed_ids.count(ticket) == 1
    assert sorted(listed_ids) == sorted(candidates)


# ---------------------------------------------------------------- the longest cursors
@pytest.mark.parametrize(("tenant", "other"), [("1", "10"), ("10", "1")])
def test_paging_64_shards_of_the_longest_resolvers_accepts_every_cursor_it_gets(
    aws: None, tenant: str, other: str
) -> None:
    # Given a tenant in the middle of a reshard from 1 to 64 shards (65 partitions read),
    # its tickets assigned to 128-character resolvers (incompressible ones)
    rng = random.Random(7)
    alphabet = "-._@0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    repo = repo_with(tenant, shards=64, read=(1, 64))
    own = {new_ticket(repo, "".join(rng.choice(alphabet) for _ in range(128))) for _ in range(260)}
    other_ticket = new_ticket(repo_with(other, shards=64), "z" * 128)
    # When it pages through 100 at a time, every cursor is one the next request accepts
    seen = page_through(repo, OPEN, 100)
    # Then every ticket once, none of the other tenant's
    assert sorted(seen) == sorted(own)
    assert other_ticket not in seen
