"""DELETE /tickets/{id} (admin) through DeleteTicketFunction's handler, over moto."""

from __future__ import annotations

import io
from typing import Any

import pytest

from support_tickets.core import keys
from tests.conftest import SHARED_AWS, all_items, token_for_claims
from tests.functional.api_harness import Api, User, assert_error, aws_calls
from tests.functional.conftest import TENANT_PAIRS, Snapshot

pytestmark = SHARED_AWS  # tenants of their own; tests with fixed ones are FRESH_AWS

MISSING = "01JD3ZZZZZZZZZZZZZZZZZZZZZ"


def test_an_admin_deletes_the_ticket_and_every_comment_in_bounded_batches(
    api: Api, user: User, admin: User, snapshot: Snapshot, table_name: str
) -> None:
    # Given a ticket with 60 comments, and another ticket with one
    keep = api.new_ticket(user, title="keep")["ticket_id"]
    api.comment(user, keep, {"body": "stays"})
    doomed = api.new_ticket(user, title="doomed")["ticket_id"]
    for n in range(60):
        api.comment(user, doomed, {"body": f"c{n}"})
    # When an admin deletes it
    with aws_calls() as calls:
        response = api.delete(admin, doomed)
    sizes = [len(params["RequestItems"][table_name]) for _, operation, params in calls if operation == "BatchWriteItem"]
    # Then 204 with no body, and only the other ticket's items remain
    assert response.status == 204
    assert response.body is None
    assert "content-type" not in response.headers
    assert {item["pk"]["S"] for item in snapshot()} == {keys.ticket_pk(user.tenant_id, keep)}
    # And the comments went in BatchWriteItem calls of at most 25
    assert sum(sizes) == 60
    assert max(sizes) <= 25
    # And the ticket is gone from every view
    assert_error(api.summary(user, doomed), 404, "TICKET_NOT_FOUND")
    assert_error(api.get(user, doomed), 404, "TICKET_NOT_FOUND")
    assert doomed not in {item["ticket_id"] for item in api.list_tickets(user).body["items"]}


def test_deleting_twice_is_404_the_second_time(api: Api, user: User, admin: User) -> None:
    ticket_id = api.new_ticket(user)["ticket_id"]
    assert api.delete(admin, ticket_id).status == 204
    assert_error(api.delete(admin, ticket_id), 404, "TICKET_NOT_FOUND")


def test_a_non_admin_is_403_and_nothing_is_deleted(api: Api, user: User, snapshot: Snapshot) -> None:
    # Given a ticket and its comment
    ticket_id = api.new_ticket(user)["ticket_id"]
    api.comment(user, ticket_id, {"body": "hi"})
    before = snapshot()
    # When a member who is not an admin deletes it (even the creator)
    response = api.delete(user, ticket_id)
    # Then it is forbidden and everything stays
    assert_error(response, 403, "FORBIDDEN")
    assert snapshot() == before


# Group names as Cognito allows them (letters, marks, symbols, digits,
# punctuation): some look like other groups once API Gateway joins them.
@pytest.mark.parametrize(
    "groups",
    [
        (),
        ("admins",),
        ("support", "readers"),
        ("Admin",),
        ("[admin]",),
        ("x,admin",),
        ("admin,",),
        (",admin",),
        ("support", "x,admin"),
        ("[support", "admin]"),
    ],
)
def test_only_the_admin_group_counts(api: Api, user: User, snapshot: Snapshot, groups: tuple[str, ...]) -> None:
    ticket_id = api.new_ticket(user)["ticket_id"]
    before = snapshot()
    claims, headers = user.in_groups(*groups)
    assert_error(api.call("delete", None, ticket_id=ticket_id, claims=claims, headers=headers), 403, "FORBIDDEN")
    assert snapshot() == before


@pytest.mark.parametrize("groups", [("admin",), ("support", "admin"), ("admin", "x,y"), ("[admin]", "admin")])
def test_admin_among_other_groups_is_admin(api: Api, user: User, groups: tuple[str, ...]) -> None:
    ticket_id = api.new_ticket(user)["ticket_id"]
    claims, headers = user.in_groups(*groups)
    assert api.call("delete", None, ticket_id=ticket_id, claims=claims, headers=headers).status == 204


@pytest.mark.parametrize(
    "claim",
    [
        "[support admin]",  # an HTTP API's JWT authorizer's form, not a REST API's
        "support, admin",
        "admin ",
        " admin",
        "support,admin",  # looks joined, but the token says it is one group named "support,admin"
    ],
)
def test_only_the_form_api_gateway_sends_counts(api: Api, user: User, snapshot: Snapshot, claim: str) -> None:
    ticket_id = api.new_ticket(user)["ticket_id"]
    before = snapshot()
    claims = {**user.claims(), "cognito:groups": claim}
    headers = {"Authorization": f"Bearer {token_for_claims(claims, groups=[claim])}"}  # one group of that name
    response = api.call("delete", None, ticket_id=ticket_id, claims=claims, headers=headers)
    assert_error(response, 403, "FORBIDDEN")
    assert snapshot() == before


def test_a_missing_ticket_is_404(api: Api, admin: User) -> None:
    assert_error(api.delete(admin, MISSING), 404, "TICKET_NOT_FOUND")


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_another_tenants_admin_gets_404_and_nothing_is_deleted(
    api: Api, snapshot: Snapshot, owner: str, other: str
) -> None:
    # Given a ticket of `owner` with a comment
    ticket_id = api.new_ticket(User(owner))["ticket_id"]
    api.comment(User(owner), ticket_id, {"body": "hi"})
    before = snapshot()
    # When an admin of `other` deletes it
    response = api.delete(User(other, "root", admin=True), ticket_id)
    # Then it is the same 404 as a missing id, and nothing was deleted
    assert_error(response, 404, "TICKET_NOT_FOUND")
    assert response.body == api.delete(User(other, "root", admin=True), MISSING).body
    assert snapshot() == before


def test_a_comment_racing_a_delete_never_survives_it(
    api: Api, user: User, admin: User, dynamodb: Any, table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the 204 the ticket has no comment left: the delete removes the
    summary before it lists the comments, so a comment racing it either landed
    before (and is listed and deleted) or is refused (404)."""
    from support_tickets.data.table import TenantTable

    ticket = api.new_ticket(user)["ticket_id"]
    api.comment(user, ticket, {"body": "before"})
    raced: list[int] = []
    real_call = TenantTable.call

    def call(self: TenantTable, operation: str, **kwargs: Any) -> Any:
        if operation == "query" and not raced:  # the delete lists the comments: a comment arrives now
            raced.append(api.comment(user, ticket, {"body": "racing"}).status)
        return real_call(self, operation, **kwargs)

    monkeypatch.setattr(TenantTable, "call", call)
    assert api.delete(admin, ticket).status == 204
    monkeypatch.undo()
    left = [item for item in all_items(dynamodb, table_name) if ticket in item["pk"]["S"]]
    assert left == []
    assert raced == [404]  # the summary was already gone: the comment was refused, not orphaned


# ---------------------------------------------------------------- a delete the request could not finish
class Killed(BaseException):
    """The function's timeout: the invocation ends wherever it is (nothing catches it)."""


@pytest.fixture
def streams(aws: None) -> Any:
    import boto3

    from tests.conftest import REGION

    return boto3.client("dynamodbstreams", region_name=REGION)


@pytest.mark.parametrize("how", ["throttled", "killed"])
@pytest.mark.parametrize(("tenant", "neighbour"), TENANT_PAIRS)
def test_a_delete_the_request_cannot_finish_is_finished_by_the_system(
    api: Api,
    dynamodb: Any,
    streams: Any,
    table_name: str,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    tenant: str,
    neighbour: str,
) -> None:
    """More comments than the request deletes: its partition fails after 25 deletes
    (throttled: 204; killed: the gateway's 502). The ticket is gone at once and
    stays gone, export never lists it, and the audit-trail function, from the
    tombstone's records, deletes the rest one pass at a time; the trail and the
    counts see one deletion. The neighbour's ticket of the same shape is untouched."""
    from ops.export import export_tenant
    from ops.tenant_data import Progress
    from support_tickets.core.errors import Throttled
    from support_tickets.data.table import OwnClient, TenantTable
    from support_tickets.streams import ticket_deletions
    from tests.functional.stream_harness import StreamHarness

    audit = StreamHarness.of("AuditTrailFunction", dynamodb, streams, table_name)
    counts = StreamHarness(dynamodb, streams, table_name)
    alice, root = User(tenant, "alice"), User(tenant, "root", admin=True)
    doomed = api.new_ticket(alice, title="doomed")["ticket_id"]
    kept = api.new_ticket(User(neighbour, "alice"), title="doomed")["ticket_id"]
    for n in range(30):
        api.comment(alice, doomed, {"body": f"c{n}"})
    api.comment(User(neighbour, "alice"), kept, {"body": "stays"})
    audit.deliver(audit.new_records())
    counts.deliver(counts.new_records())
    open_before = counts.counts(tenant)[keys.TicketStatus.OPEN]
    prefix = keys.tenant_prefix(neighbour)
    neighbours = [item for item in all_items(dynamodb, table_name) if item["pk"]["S"].startswith(prefix)]

    def partition() -> list[str]:
        pk = keys.ticket_pk(tenant, doomed)
        return sorted(item["sk"]["S"] for item in all_items(dynamodb, table_name) if item["pk"]["S"] == pk)

    # Given a partition that takes 25 deletes and then fails
    real_batch_delete = TenantTable.batch_delete
    deleted: list[int] = []

    def batch_delete(self: TenantTable, item_keys: Any) -> int:
        if deleted:
            raise Throttled() if how == "throttled" else Killed()
        deleted.append(real_batch_delete(self, item_keys[:25]))
        raise Throttled() if how == "throttled" else Killed()

    # When an admin deletes the ticket
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TenantTable, "batch_delete", batch_delete)
        if how == "killed":
            with pytest.raises(Killed):
                api.delete(root, doomed)
        else:
            assert api.delete(root, doomed).status == 204
    # Then the ticket is gone from every read, though 5 comments and the tombstone are left
    assert partition() == sorted([*(sk for sk in partition() if sk.startswith("COMMENT#")), keys.DELETING_SK])
    assert len(partition()) == 6
    assert_error(api.get(root, doomed), 404, "TICKET_NOT_FOUND")
    assert_error(api.summary(root, doomed), 404, "TICKET_NOT_FOUND")
    assert_error(api.comment(alice, doomed, {"body": "late"}), 404, "TICKET_NOT_FOUND")
    out = io.StringIO()
    export_tenant(TenantTable(tenant, table_name, OwnClient(dynamodb)), out, Progress("export", io.StringIO()))
    assert doomed not in out.getvalue()
    # When the audit-trail function gets the tombstone's records, one comment a pass
    monkeypatch.setattr(ticket_deletions, "PASS_SECONDS", 0.0)
    passes = 0
    while records := audit.new_records():
        audit.deliver(records)
        passes += 1
        assert_error(api.get(root, doomed), 404, "TICKET_NOT_FOUND")
        assert passes < 20
    counts.deliver(counts.new_records())
    # Then nothing is left of the ticket, after more than one pass
    assert partition() == []
    assert passes > 2
    # And the trail and the counts saw one deletion
    events = api.history(alice, doomed, limit="100").body["events"]
    assert [event["type"] for event in events] == ["created"] + ["comment_added"] * 30 + ["deleted"]
    assert events[-1]["actor"] == "root"
    assert counts.counts(tenant) == counts.truth(tenant)
    assert counts.counts(tenant)[keys.TicketStatus.OPEN] == open_before - 1
    # And the neighbour's items are as they were
    after = [item for item in all_items(dynamodb, table_name) if item["pk"]["S"].startswith(prefix)]
    assert sorted(map(str, after)) == sorted(map(str, neighbours))
