"""Rows in a tenant's GSI1 partitions that are not its tickets: another
tenant's items whose ``tenant_status`` names it (IAM confines only the table's
partition key), and malformed ones. Planted here with the operator's client
straight into moto, tenant "10" into tenant "1"'s keys and the other way round:
never a 500, never shown, never named in a cursor, reported, and a flood of
them still lets the tenant's own tickets through with bounded work per
request."""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from ops.reconcile import reconcile
from support_tickets.core import keys
from support_tickets.core.errors import InvalidCursor
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import CreateTicketRequest
from support_tickets.data import ticket_repository
from support_tickets.data.tenant_registry import TenantConfig
from support_tickets.data.ticket_repository import TicketRepository
from tests.conftest import REGION, tenant_table
from tests.functional.api_harness import Api, User
from tests.functional.conftest import TENANT_PAIRS
from tests.functional.stream_harness import StreamHarness

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

OPEN = TicketStatus.OPEN
# Sorts before "#UNASSIGNED", so planted rows come before the victim's own unassigned tickets.
EARLY_RESOLVER = "#AAAA"


class Reports:
    def __init__(self) -> None:
        self.foreign: list[dict[str, Any]] = []
        self.malformed: list[dict[str, Any]] = []


def repo(tenant: str, reports: Reports | None = None, shards: int = 1) -> TicketRepository:
    config = TenantConfig(tenant_id=tenant, shards=shards, read_shards=(shards,))
    hooks: dict[str, Any] = {}
    if reports is not None:
        hooks = {"on_foreign_row": reports.foreign.append, "on_malformed_row": reports.malformed.append}
    return TicketRepository(tenant_table(tenant), config=lambda _: config, **hooks)


def new_ticket(tickets: TicketRepository, resolver: str | None = None) -> str:
    return tickets.create_ticket(CreateTicketRequest(title="mine", resolver=resolver), created_by="ada").ticket_id


def summary(pk: str, tenant_status: str, resolver: str = EARLY_RESOLVER, **extra: Any) -> dict[str, Any]:
    """A ticket summary item whose GSI1 key is ``tenant_status`` (as the operator writes it)."""
    item: dict[str, Any] = {
        "pk": {"S": pk},
        "sk": {"S": keys.SUMMARY_SK},
        "tenant_status": {"S": tenant_status},
        "resolver": {"S": resolver},
        "title": {"S": "planted"},
        "created_by": {"S": "mallory"},
        "created_at": {"S": "2026-11-21T10:00:00.000Z"},
        "updated_at": {"S": "2026-11-21T10:00:00.000Z"},
        "version": {"N": "1"},
    }
    ticket_id = pk.rsplit("#", 1)[-1]
    if keys.is_valid_ticket_id(ticket_id):
        item["ticket_id"] = {"S": ticket_id}
    item.update(extra)
    return item


def plant(dynamodb: DynamoDBClient, table_name: str, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 25):
        requests: list[Any] = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
        dynamodb.batch_write_item(RequestItems={table_name: requests})


def foreign_rows(attacker: str, victim: str, count: int, resolver: str = EARLY_RESOLVER) -> list[dict[str, Any]]:
    status = keys.tenant_status(victim, OPEN)
    return [summary(keys.ticket_pk(attacker, f"planted_{n:05d}"), status, resolver) for n in range(count)]


def decoded(cursor: str) -> str:
    return zlib.decompress(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))).decode()


@pytest.fixture
def rows_read(aws: None) -> Callable[[TicketRepository], list[int]]:
    """Per Query call of a repository's client, how many rows DynamoDB returned."""
    counted: list[int] = []

    def count(tickets: TicketRepository) -> list[int]:
        client = tickets.table.clients.dynamodb()
        client.meta.events.register(
            "after-call.dynamodb.Query", lambda parsed, **_: counted.append(len(parsed["Items"]))
        )
        return counted

    return count


def page_through(tickets: TicketRepository, limit: int, resolver: str | None = None) -> Iterator[Any]:
    cursor = None
    for _ in range(500):
        page = tickets.list_tickets_by_status(OPEN, resolver, limit, cursor)
        yield page
        cursor = page.next_cursor
        if cursor is None:
            return
    raise AssertionError("paging never ended")


# ---------------------------------------------------------------- malformed and foreign rows
def malformed_variants(victim: str, attacker: str) -> dict[str, dict[str, Any]]:
    own_status = keys.tenant_status(victim, OPEN)
    own = keys.ticket_pk(victim, "M0001")
    without_id = summary(keys.ticket_pk(attacker, "X0001"), own_status)
    del without_id["ticket_id"]
    own_without_id = summary(own, own_status)
    del own_without_id["ticket_id"]
    missing = summary(own, own_status)
    del missing["title"], missing["created_at"]
    return {
        "foreign-without-ticket-id": without_id,
        "foreign-valid-looking": summary(keys.ticket_pk(attacker, "X0002"), own_status),
        "own-without-ticket-id": own_without_id,
        "own-wrong-types": summary(own, own_status, version={"S": "one"}, title={"N": "7"}),
        "own-missing-attributes": missing,
        "own-ticket-id-mismatch": summary(own, own_status, ticket_id={"S": "OTHER"}),
        "own-invalid-ticket-id": summary(keys.tenant_key(victim, "TICKET#not a ticket id!"), own_status),
        "own-comment-row": {**summary(own, own_status), "sk": {"S": "COMMENT#x"}},
        "own-not-a-ticket": summary(keys.tenant_key(victim, "JUNK"), own_status),
    }


@pytest.mark.parametrize(("victim", "attacker"), TENANT_PAIRS)
@pytest.mark.parametrize(
    "variant",
    [
        "foreign-without-ticket-id",
        "foreign-valid-looking",
        "own-without-ticket-id",
        "own-wrong-types",
        "own-missing-attributes",
        "own-ticket-id-mismatch",
        "own-invalid-ticket-id",
        "own-comment-row",
        "own-not-a-ticket",
    ],
)
def test_a_row_that_is_not_a_ticket_of_the_caller_is_dropped_and_reported(
    aws: None, dynamodb: DynamoDBClient, table_name: str, victim: str, attacker: str, variant: str
) -> None:
    # Given the victim's own tickets and one planted row before them in its GSI1 key
    reports = Reports()
    tickets = repo(victim, reports)
    own = {new_ticket(tickets) for _ in range(2)}
    planted = malformed_variants(victim, attacker)[variant]
    plant(dynamodb, table_name, [planted])
    # When it lists its open tickets, on one page and one row a page
    whole = tickets.list_tickets_by_status(OPEN, None, 25, None)
    one_by_one = [item.ticket_id for page in page_through(tickets, 1) for item in page.items]
    # Then: its own tickets only, no error, the row reported as what it is
    assert {item.ticket_id for item in whole.items} == own
    assert whole.next_cursor is None
    assert sorted(one_by_one) == sorted(own)
    reported = reports.foreign if variant.startswith("foreign") else reports.malformed
    assert reported
    assert all(row["pk"] == planted["pk"]["S"] for row in reported)
    assert not (reports.malformed if variant.startswith("foreign") else reports.foreign)


@pytest.mark.parametrize(("victim", "attacker"), TENANT_PAIRS)
def test_the_list_route_answers_200_over_a_row_without_ticket_id(
    api: Api, dynamodb: DynamoDBClient, table_name: str, victim: str, attacker: str
) -> None:
    user = User(victim)
    mine = api.new_ticket(user)["ticket_id"]
    planted = summary(keys.ticket_pk(attacker, "X0001"), keys.tenant_status(victim, OPEN))
    del planted["ticket_id"]
    plant(dynamodb, table_name, [planted])
    response = api.list_tickets(user)
    assert response.status == 200, response.body
    assert [item["ticket_id"] for item in response.body["items"]] == [mine]


def test_the_malformed_report_is_a_log_line_and_a_metric(caplog: pytest.LogCaptureFixture) -> None:
    from aws_lambda_powertools import Metrics

    metrics = Metrics(namespace="SupportTickets", service="support-tickets")
    ticket_repository._report_malformed_row({"pk": "TENANT#1|TICKET#x", "sk": "SUMMARY"})
    assert metrics.metric_set[ticket_repository.MALFORMED_INDEX_ROW_METRIC]["Value"] == [1.0]
    metrics.clear_metrics()
    (line,) = [record for record in caplog.records if record.getMessage() == "dropped a malformed GSI1 row"]
    assert line.row_pk == "TENANT#1|TICKET#x"  # type: ignore[attr-defined]


# ---------------------------------------------------------------- floods
@pytest.mark.parametrize(("victim", "attacker"), TENANT_PAIRS)
def test_500_planted_rows_before_the_tenants_own_still_give_its_tickets_on_the_first_page(
    aws: None,
    dynamodb: DynamoDBClient,
    table_name: str,
    rows_read: Callable[[TicketRepository], list[int]],
    victim: str,
    attacker: str,
) -> None:
    tickets = repo(victim, Reports())
    own = {new_ticket(tickets) for _ in range(3)}
    plant(dynamodb, table_name, foreign_rows(attacker, victim, 500))
    counted = rows_read(tickets)
    page = tickets.list_tickets_by_status(OPEN, None, 25, None)
    assert {item.ticket_id for item in page.items} == own
    assert page.next_cursor is None
    # No ticket has their resolver: past the first DynamoDB page the read goes on at
    # the next resolver one can have, without reading the rest of them.
    assert sum(counted) <= 503


@pytest.mark.parametrize(("victim", "attacker"), TENANT_PAIRS)
@pytest.mark.parametrize("resolver", [None, "ada"], ids=["any-resolver", "one-resolver"])
def test_a_flood_beyond_the_budget_ends_each_request_early_and_paging_still_finds_every_ticket(
    aws: None,
    dynamodb: DynamoDBClient,
    table_name: str,
    rows_read: Callable[[TicketRepository], list[int]],
    victim: str,
    attacker: str,
    resolver: str | None,
) -> None:
    # Given 2,500 planted rows with the resolver of the victim's own tickets: GSI1
    # orders them by table key, before the victim's ("TENANT#10|" < "TENANT#1|")
    # or after them ("TENANT#1|" > "TENANT#10|")
    tickets = repo(victim, Reports())
    own = {new_ticket(tickets, resolver="ada") for _ in range(4)}
    plant(dynamodb, table_name, foreign_rows(attacker, victim, 2500, resolver="ada"))
    counted = rows_read(tickets)
    need = 2 + 1
    # When it pages through (limit 2)
    seen: list[str] = []
    for page in page_through(tickets, 2, resolver):
        before = len(counted)
        seen.extend(item.ticket_id for item in page.items)
        if page.next_cursor is not None:
            # Then no cursor names a key of the other tenant (nor any tenant's)
            assert "planted" not in decoded(page.next_cursor)
            assert "TENANT#" not in decoded(page.next_cursor)
        assert len(counted) - before <= ticket_repository.MAX_QUERY_PAGES
    # Then every own ticket exactly once; no request read more than its budget
    assert sorted(seen) == sorted(own)
    assert max(counted) <= need + ticket_repository.MAX_SKIPPED_ROWS
    # Past the first DynamoDB page of planted rows, a request goes on from the
    # position derived after them (the edge of the victim's keys, or past the
    # resolver): it never reads every planted row.
    assert sum(counted) < 2504


def test_a_cursor_cut_short_by_planted_rows_stays_bound_to_the_tenant_and_query(
    aws: None, dynamodb: DynamoDBClient, table_name: str
) -> None:
    victim, attacker = "1", "10"
    tickets = repo(victim, Reports())
    new_ticket(tickets, resolver="ada")
    status = keys.tenant_status(victim, OPEN)
    plant(dynamodb, table_name, [summary(keys.tenant_key(victim, f"JUNK{n:04d}"), status, "ada") for n in range(1200)])
    page = tickets.list_tickets_by_status(OPEN, None, 2, None)
    assert page.items == []
    assert page.next_cursor is not None
    with pytest.raises(InvalidCursor):
        repo(attacker).list_tickets_by_status(OPEN, None, 2, page.next_cursor)
    with pytest.raises(InvalidCursor):
        tickets.list_tickets_by_status(TicketStatus.CLOSED, None, 2, page.next_cursor)


def test_an_own_malformed_row_at_the_edge_of_a_page_is_resumed_after_by_its_own_key(
    aws: None, dynamodb: DynamoDBClient, table_name: str
) -> None:
    tenant = "1"
    tickets = repo(tenant, Reports())
    own = new_ticket(tickets, resolver="ada")
    status = keys.tenant_status(tenant, OPEN)
    broken = [summary(keys.tenant_key(tenant, f"JUNK{n:04d}"), status, "ada") for n in range(1100)]
    plant(dynamodb, table_name, broken)
    first = tickets.list_tickets_by_status(OPEN, None, 2, None)
    assert first.items == []
    assert first.next_cursor is not None
    kind, resolver, suffix, sk, skip = json.loads(decoded(first.next_cursor))["p"]
    assert (kind, resolver, sk, skip) == ("k", "ada", keys.SUMMARY_SK, 0)
    assert suffix.startswith("JUNK")
    seen = [item.ticket_id for page in page_through(tickets, 2) for item in page.items]
    assert seen == [own]


@pytest.mark.parametrize(("victim", "attacker"), TENANT_PAIRS)
def test_a_sharded_tenant_with_planted_rows_in_one_shard(
    aws: None, dynamodb: DynamoDBClient, table_name: str, victim: str, attacker: str
) -> None:
    tickets = repo(victim, Reports(), shards=4)
    own = {new_ticket(tickets) for _ in range(8)}
    shard = keys.tenant_status(victim, OPEN, 2)
    planted = [summary(keys.ticket_pk(attacker, f"planted_{n:05d}"), shard) for n in range(1500)]
    plant(dynamodb, table_name, planted)
    seen = [item.ticket_id for page in page_through(tickets, 3) for item in page.items]
    assert sorted(seen) == sorted(own)


# ---------------------------------------------------------------- within one request
@pytest.mark.parametrize(("victim", "attacker"), TENANT_PAIRS)
@pytest.mark.parametrize("planted_resolver", [EARLY_RESOLVER, keys.UNASSIGNED_RESOLVER], ids=["no-tickets", "theirs"])
def test_a_request_never_continues_from_another_tenants_key_and_lists_its_own_to_the_end(
    aws: None, dynamodb: DynamoDBClient, table_name: str, victim: str, attacker: str, planted_resolver: str
) -> None:
    # Given the victim's 3 tickets, and 120 rows in the attacker's own partition whose
    # GSI1 key names the victim's OPEN list (what a buggy function could write)
    harness = StreamHarness(dynamodb, boto3.client("dynamodbstreams", region_name=REGION), table_name)
    reports = Reports()
    tickets = repo(victim, reports)
    own = {new_ticket(tickets) for _ in range(3)}
    plant(dynamodb, table_name, foreign_rows(attacker, victim, 120, resolver=planted_resolver))
    queries: list[dict[str, Any]] = []
    tickets.table.clients.dynamodb().meta.events.register(
        "provide-client-params.dynamodb.Query", lambda params, **_: queries.append(dict(params))
    )
    # When the victim lists its OPEN tickets 10 at a time, to the end
    pages = list(page_through(tickets, 10))
    seen = [item.ticket_id for page in pages for item in page.items]
    # Then exactly its own tickets, once, and no Query ever started at a key that is not its own
    assert sorted(seen) == sorted(own)
    assert len(queries) > len(pages)  # the planted rows did take more than one DynamoDB page
    start_keys = [query["ExclusiveStartKey"] for query in queries if "ExclusiveStartKey" in query]
    assert all(key["pk"]["S"].startswith(keys.tenant_prefix(victim)) for key in start_keys)
    assert reports.foreign
    # And once the stream is counted, the victim's counts show no drift: the planted rows count for nobody
    harness.deliver(harness.new_records())
    report = reconcile(dynamodb, table_name, victim)
    assert not report.drifted
    assert {count.status: count.actual for count in report.counts}["OPEN"] == 3
