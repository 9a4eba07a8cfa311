"""Rows of another tenant in a tenant's status list, against the local stack
(its IAM guard refuses any Query whose start key names another tenant's
partition): the tenant still lists exactly its own tickets, to the end, and
its counts show no drift. The rows stand for what a buggy function could
write: items in tenant A's own partition whose GSI1 key names tenant B's
OPEN list, put here with the operator's client."""

from __future__ import annotations

from typing import Any

from ops.reconcile import reconcile
from support_tickets.core import keys
from tests.depth import sized
from tests.e2e.conftest import Caller, RunningStack

# Rows planted per direction and resolver. The victim's first list request reads them in
# DynamoDB pages of 11, 11, 22, 44... rows (ticket_repository._read_partition), and a page
# that ends on a planted row must not start the next one from its key (the guard refuses
# it): 40 rows end at least two pages there, 120 at least four. The stream functions
# handle every planted row.
PLANTED = sized(deep=120, ci=40)


def planted_rows(owner: str, victim: str, resolver: str, label: str) -> list[dict[str, Any]]:
    return [
        {
            "pk": {"S": keys.ticket_pk(owner, f"planted_{label}{n:04d}")},
            "sk": {"S": keys.SUMMARY_SK},
            "tenant_status": {"S": keys.tenant_status(victim, "OPEN")},
            "resolver": {"S": resolver},
            "ticket_id": {"S": f"planted_{n:04d}"},
            "title": {"S": "planted"},
            "created_by": {"S": "mallory"},
            "created_at": {"S": "2026-11-21T10:00:00.000Z"},
            "updated_at": {"S": "2026-11-21T10:00:00.000Z"},
            "version": {"N": "1"},
        }
        for n in range(PLANTED)
    ]


def list_all(stack: RunningStack, caller: Caller) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(50):
        query = "?status=OPEN&limit=10" + (f"&cursor={cursor}" if cursor else "")
        response = stack.request("GET", "/tickets" + query, token=caller.token)
        assert response.status == 200, response.body
        seen.extend(item["ticket_id"] for item in response.body["items"])
        cursor = response.body["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError("paging did not end")


def test_a_tenant_lists_its_own_tickets_to_the_end_under_another_tenants_rows(
    stack: RunningStack, tenant_pair: tuple[Caller, Caller]
) -> None:
    dynamodb, table = stack.operator("dynamodb"), stack.state["table_name"]
    directions = (tenant_pair, tenant_pair[::-1])  # "1" plants in "10"'s list, and "10" in "1"'s
    # Given each tenant's 3 tickets
    own = {
        victim.tenant_id: {
            stack.request("POST", "/tickets", token=victim.token, body={"title": f"mine {n}"}).body["ticket_id"]
            for n in range(3)
        }
        for _, victim in directions
    }
    # And, in each direction, PLANTED rows of the owner naming the victim's OPEN list unassigned
    # like the victim's tickets (GSI1 orders them by table key among them) and PLANTED with no
    # user's resolver (ordered before them): all planted at once, so the stream functions
    # see them in one pass
    rows = [
        row
        for owner, victim in directions
        for resolver, label in ((keys.UNASSIGNED_RESOLVER, "u"), ("#AAAA", "a"))
        for row in planted_rows(owner.tenant_id, victim.tenant_id, resolver, label)
    ]
    write(dynamodb, table, [{"PutRequest": {"Item": item}} for item in rows])
    assert stack.drain()["drained"]
    for _, victim in directions:
        # When the victim lists its OPEN tickets 10 at a time (403 FORBIDDEN before)
        # Then exactly its own tickets, to the end
        assert sorted(list_all(stack, victim)) == sorted(own[victim.tenant_id])
        # And its counts show no drift: the planted rows count for nobody
        report = reconcile(dynamodb, table, victim.tenant_id)
        assert not report.drifted, report.as_dict()
        assert {count.status: count.actual for count in report.counts}["OPEN"] == 3
    # The planted rows stay: the pair's tenants are this test's own.


def write(dynamodb: Any, table: str, requests: list[dict[str, Any]]) -> None:
    for start in range(0, len(requests), 25):
        dynamodb.batch_write_item(RequestItems={table: requests[start : start + 25]})
