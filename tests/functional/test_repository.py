"""Every access pattern of the repository, over moto, with the table from
template.yaml. Each test uses fresh random tenants plus the 1/10 pair."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from support_tickets.core import keys
from support_tickets.core.errors import InvalidCursor, TicketNotFound, VersionMismatch
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import AggregatesResponse, CreateTicketRequest
from support_tickets.data.aggregate_repository import AggregateRepository
from support_tickets.data.comment_repository import CommentRepository
from support_tickets.data.ticket_repository import TicketRepository
from tests.conftest import RepoFactory, all_items, random_tenant_id

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def new_ticket(repo: TicketRepository, title: str = "Printer on fire", resolver: str | None = None) -> str:
    return repo.create_ticket(CreateTicketRequest(title=title, resolver=resolver), created_by="alice").ticket_id


def test_create_then_view_summary(repo_for: RepoFactory) -> None:
    repo = repo_for(random_tenant_id())
    created = repo.create_ticket(
        CreateTicketRequest(title="Printer on fire", description="Third floor", resolver="johnd"), created_by="alice"
    )
    assert created.status is TicketStatus.OPEN
    assert created.version == 1
    assert created.created_at == created.updated_at
    assert created.created_at.endswith("Z")
    assert repo.get_ticket_summary(created.ticket_id) == created


def test_stored_item_follows_the_single_table_model(
    repo_for: RepoFactory, dynamodb: DynamoDBClient, table_name: str
) -> None:
    tenant = random_tenant_id()
    ticket_id = new_ticket(repo_for(tenant))
    (item,) = all_items(dynamodb, table_name)
    assert item["pk"] == {"S": f"TENANT#{tenant}|TICKET#{ticket_id}"}
    assert item["sk"] == {"S": "SUMMARY"}
    assert item["tenant_status"] == {"S": f"TENANT#{tenant}|OPEN"}
    assert item["resolver"] == {"S": keys.UNASSIGNED_RESOLVER}
    assert "status" not in item  # the status lives only in tenant_status


def test_ticket_ids_are_time_ordered(repo_for: RepoFactory) -> None:
    repo = repo_for(random_tenant_id())
    ids = [new_ticket(repo) for _ in range(5)]
    assert ids == sorted(ids)


@pytest.mark.parametrize(("owner", "intruder"), [("1", "10"), ("10", "1"), ("a", "a-b")])
def test_another_tenants_ticket_is_not_found(repo_for: RepoFactory, owner: str, intruder: str) -> None:
    ticket_id = new_ticket(repo_for(owner))
    other = repo_for(intruder)
    with pytest.raises(TicketNotFound):
        other.get_ticket_summary(ticket_id)
    with pytest.raises(TicketNotFound):
        CommentRepository(other.table).get_ticket_with_comments(ticket_id, 25, None)
    with pytest.raises(TicketNotFound):
        other.update_ticket(ticket_id, {"title": "mine now"}, None, actor="alice")
    with pytest.raises(TicketNotFound):
        CommentRepository(other.table).add_comment(ticket_id, "mallory", "hello")
    with pytest.raises(TicketNotFound) as missing:
        other.change_status([ticket_id], TicketStatus.CLOSED, actor="alice")
    assert missing.value.details == {"missing_ticket_ids": [ticket_id]}
    with pytest.raises(TicketNotFound):
        other.delete_ticket(ticket_id, actor="alice")
    assert other.list_tickets_by_status(TicketStatus.OPEN, None, 100, None).items == []
    assert repo_for(owner).get_ticket_summary(ticket_id).title == "Printer on fire"


def test_list_by_status_pages_through_every_ticket_once(repo_for: RepoFactory) -> None:
    repo = repo_for(random_tenant_id())
    created = {new_ticket(repo, resolver=resolver) for resolver in ["johnd", None, "mary", None, "johnd"] * 3}
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = repo.list_tickets_by_status(TicketStatus.OPEN, None, 4, cursor)
        pages += 1
        seen.extend(item.ticket_id for item in page.items)
        assert len(page.items) <= 4
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(created)
    assert pages == 4  # 15 tickets / 4 per page; no empty trailing page


def test_list_includes_unassigned_and_filters_by_resolver(repo_for: RepoFactory) -> None:
    repo = repo_for(random_tenant_id())
    unassigned = new_ticket(repo)
    johns = {new_ticket(repo, resolver="johnd") for _ in range(3)}
    new_ticket(repo, resolver="mary")
    everything = repo.list_tickets_by_status(TicketStatus.OPEN, None, 100, None)
    assert unassigned in {item.ticket_id for item in everything.items}
    assert len(everything.items) == 5
    only_john = repo.list_tickets_by_status(TicketStatus.OPEN, "johnd", 100, None)
    assert {item.ticket_id for item in only_john.items} == johns
    assert all(item.resolver == "johnd" for item in only_john.items)
    (row,) = [item for item in everything.items if item.ticket_id == unassigned]
    assert row.resolver is None


def test_cursor_is_bound_to_tenant_and_query(repo_for: RepoFactory) -> None:
    one, ten = repo_for("1"), repo_for("10")
    for repo in (one, ten):
        for _ in range(3):
            new_ticket(repo, resolver="johnd")
    cursor = one.list_tickets_by_status(TicketStatus.OPEN, None, 1, None).next_cursor
    assert cursor is not None
    assert len(one.list_tickets_by_status(TicketStatus.OPEN, None, 1, cursor).items) == 1
    with pytest.raises(InvalidCursor):
        ten.list_tickets_by_status(TicketStatus.OPEN, None, 1, cursor)
    with pytest.raises(InvalidCursor):
        one.list_tickets_by_status(TicketStatus.CLOSED, None, 1, cursor)
    with pytest.raises(InvalidCursor):
        one.list_tickets_by_status(TicketStatus.OPEN, "johnd", 1, cursor)


def test_update_moves_the_ticket_between_status_and_resolver_lists(repo_for: RepoFactory) -> None:
    repo = repo_for(random_tenant_id())
    ticket_id = new_ticket(repo, resolver="johnd")
    updated = repo.update_ticket(ticket_id, {"status": TicketStatus.IN_PROGRESS, "resolver": "mary"}, 1, actor="alice")
    assert (updated.status, updated.resolver, updated.version) == (TicketStatus.IN_PROGRESS, "mary", 2)
    assert repo.list_tickets_by_status(TicketStatus.OPEN, None, 100, None).items == []
    assert repo.list_tickets_by_status(TicketStatus.OPEN, "johnd", 100, None).items == []
    (row,) = repo.list_tickets_by_status(TicketStatus.IN_PROGRESS, "mary", 100, None).items
    assert row.ticket_id == ticket_id
    unassigned = repo.update_ticket(ticket_id, {"resolver": None}, None, actor="alice")
    assert unassigned.resolver is None
    assert unassigned.version == 3
    (row,) = repo.list_tickets_by_status(TicketStatus.IN_PROGRESS, None, 100, None).items
    assert row.resolver is None


def test_update_with_a_stale_version_changes_nothing(repo_for: RepoFactory) -> None:
    repo = repo_for(random_tenant_id())
    ticket_id = new_ticket(repo)
    repo.update_ticket(ticket_id, {"title": "v2"}, 1, actor="alice")
    with pytest.raises(VersionMismatch) as mismatch:
        repo.update_ticket(ticket_id, {"title": "lost update"}, 1, actor="alice")
    assert mismatch.value.details == {"current_version": 2}
    assert repo.get_ticket_summary(ticket_id).title == "v2"


def test_comments_come_oldest_first_and_page(repo_for: RepoFactory) -> None:
    repo = repo_for(random_tenant_id())
    ticket_id = new_ticket(repo)
    bodies = [f"comment {n}" for n in range(7)]
    for body in bodies:
        CommentRepository(repo.table).add_comment(ticket_id, "bob", body)
    seen: list[str] = []
    cursor = None
    while True:
        page = CommentRepository(repo.table).get_ticket_with_comments(ticket_id, 3, cursor)
        assert page.ticket.ticket_id == ticket_id
        seen.extend(comment.body for comment in page.comments)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == bodies
    whole = CommentRepository(repo.table).get_ticket_with_comments(ticket_id, 25, None)
    assert [comment.body for comment in whole.comments] == bodies
    assert whole.next_cursor is None


def test_comment_cursor_is_bound_to_the_ticket(repo_for: RepoFactory) -> None:
    repo = repo_for(random_tenant_id())
    first, second = new_ticket(repo), new_ticket(repo)
    for ticket_id in (first, second):
        for n in range(3):
            CommentRepository(repo.table).add_comment(ticket_id, "bob", f"c{n}")
    cursor = CommentRepository(repo.table).get_ticket_with_comments(first, 1, None).next_cursor
    assert cursor is not None
    with pytest.raises(InvalidCursor):
        CommentRepository(repo.table).get_ticket_with_comments(second, 1, cursor)


def test_change_status_is_all_or_nothing(repo_for: RepoFactory, dynamodb: DynamoDBClient, table_name: str) -> None:
    repo = repo_for(random_tenant_id())
    ids = [new_ticket(repo) for _ in range(3)]
    before = all_items(dynamodb, table_name)
    with pytest.raises(TicketNotFound) as missing:
        repo.change_status([*ids, "01NOTATICKET"], TicketStatus.CLOSED, actor="alice")
    assert missing.value.details == {"missing_ticket_ids": ["01NOTATICKET"]}
    assert all_items(dynamodb, table_name) == before
    result = repo.change_status(ids, TicketStatus.CLOSED, actor="alice")
    assert result.updated == ids
    assert {item.ticket_id for item in repo.list_tickets_by_status(TicketStatus.CLOSED, None, 100, None).items} == set(
        ids
    )
    assert all(repo.get_ticket_summary(ticket_id).version == 2 for ticket_id in ids)


def test_change_status_of_100_tickets_in_one_transaction(repo_for: RepoFactory) -> None:
    repo = repo_for(random_tenant_id())
    ids = [new_ticket(repo) for _ in range(100)]
    assert repo.change_status(ids, TicketStatus.IN_PROGRESS, actor="alice").updated == ids
    assert len(repo.list_tickets_by_status(TicketStatus.IN_PROGRESS, None, 100, None).items) == 100


def test_delete_removes_summary_and_every_comment(
    repo_for: RepoFactory, dynamodb: DynamoDBClient, table_name: str
) -> None:
    repo = repo_for(random_tenant_id())
    keep = new_ticket(repo)
    ticket_id = new_ticket(repo)
    for n in range(60):  # more than two BatchWriteItem chunks
        CommentRepository(repo.table).add_comment(ticket_id, "bob", f"c{n}")
    repo.delete_ticket(ticket_id, actor="alice")
    remaining = all_items(dynamodb, table_name)
    assert [item["pk"]["S"] for item in remaining] == [keys.ticket_pk(repo.tenant_id, keep)]
    with pytest.raises(TicketNotFound):
        repo.delete_ticket(ticket_id, actor="alice")


def test_comment_on_a_missing_ticket_writes_nothing(
    repo_for: RepoFactory, dynamodb: DynamoDBClient, table_name: str
) -> None:
    repo = repo_for(random_tenant_id())
    with pytest.raises(TicketNotFound):
        CommentRepository(repo.table).add_comment("01MISSING", "bob", "hello")
    assert all_items(dynamodb, table_name) == []


def test_aggregates_list_every_status_with_zero_default(
    repo_for: RepoFactory, dynamodb: DynamoDBClient, table_name: str
) -> None:
    repo = repo_for(random_tenant_id())
    assert AggregateRepository(repo.table).get_aggregates() == AggregatesResponse(
        counts={TicketStatus.OPEN: 0, TicketStatus.IN_PROGRESS: 0, TicketStatus.CLOSED: 0}, total=0
    )
    dynamodb.put_item(
        TableName=table_name,
        Item={"pk": {"S": keys.aggregate_pk(repo.tenant_id)}, "sk": {"S": "OPEN"}, "count": {"N": "4"}},
    )
    dynamodb.put_item(
        TableName=table_name,
        Item={"pk": {"S": keys.aggregate_pk("other")}, "sk": {"S": "OPEN"}, "count": {"N": "9"}},
    )
    aggregates = AggregateRepository(repo.table).get_aggregates()
    assert aggregates.counts[TicketStatus.OPEN] == 4
    assert aggregates.total == 4


def test_comments_past_dynamodbs_1_mb_page_are_all_returned(repo_for: RepoFactory) -> None:
    # Given 31 comments of 10,000 emoji each (about 1.2 MB: more than one DynamoDB page)
    repo = repo_for(random_tenant_id())
    ticket_id = new_ticket(repo)
    comments = CommentRepository(repo.table)
    for n in range(31):
        comments.add_comment(ticket_id, "bob", chr(0x1F600 + n) * 10_000)
    # When a client asks for up to 100 of them
    page = comments.get_ticket_with_comments(ticket_id, 100, None)
    # Then it gets all of them (the read followed DynamoDB's continuation) and the ticket
    assert len(page.comments) == 31
    assert page.next_cursor is None
    assert page.ticket.ticket_id == ticket_id
    # And paging in smaller pages past the 1 MB boundary skips nothing either
    seen: list[str] = []
    cursor = None
    while True:
        part = comments.get_ticket_with_comments(ticket_id, 20, cursor)
        seen.extend(comment.comment_id for comment in part.comments)
        cursor = part.next_cursor
        if cursor is None:
            break
    assert seen == [comment.comment_id for comment in page.comments]


def test_a_start_key_dynamodb_refuses_is_an_invalid_cursor_not_a_500(
    repo_for: RepoFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError

    repo = repo_for(random_tenant_id())
    for _ in range(3):
        new_ticket(repo)
    cursor = repo.list_tickets_by_status(TicketStatus.OPEN, None, 1, None).next_cursor
    real_call = repo.table.call

    def refusing(operation: str, **kwargs: object) -> object:
        if "ExclusiveStartKey" in kwargs:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "bad key"}}, "Query")
        return real_call(operation, **kwargs)

    monkeypatch.setattr(type(repo.table), "call", lambda self, operation, **kwargs: refusing(operation, **kwargs))
    with pytest.raises(InvalidCursor):
        repo.list_tickets_by_status(TicketStatus.OPEN, None, 1, cursor)
