"""POST /tickets with an ``Idempotency-Key`` whose invocation ends right after
the ticket's write (Lambda's timeout), through CreateTicketFunction's handler
over moto.

API Gateway then answers 502/504 ``UNAVAILABLE``, which API.md tells the client
to retry with the same key. Powertools set the in-progress record to expire at
the invocation's deadline, which has passed when that answer arrives: the retry
must find the ticket the killed invocation wrote, never write a second one.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Self
from unittest import mock

import botocore.client
import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency import base as idempotency_handler
from aws_lambda_powertools.utilities.idempotency.persistence import base as persistence_base
from aws_lambda_powertools.utilities.idempotency.persistence import datarecord
from aws_lambda_powertools.utilities.idempotency.persistence import dynamodb as persistence_dynamodb
from botocore.exceptions import ReadTimeoutError

from stack_model import dedicated
from support_tickets.core import keys
from support_tickets.core.models import CreateTicketRequest
from support_tickets.data.placement import MovePhase
from support_tickets.data.table import to_item
from support_tickets.data.tenant_registry import TenantConfig, tenant_configs
from support_tickets.data.ticket_repository import TicketRepository
from support_tickets.domain import tickets
from tests.conftest import SHARED_AWS
from tests.functional.api_harness import Api, ApiResponse, User, assert_error, aws_calls
from tests.functional.conftest import TENANT_PAIRS, Snapshot, ticket_items

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = SHARED_AWS  # each test has tenants, or keys, of its own

TITLE = "Printer on fire"
# When the client's retry arrives: after API Gateway's 504 (29 s), past the
# in-progress record's expiry (the invocation's deadline: its timeout at most),
# well within the 24 h the record lasts.
RETRY_AFTER_SECONDS = 60


class Killed(BaseException):
    """Lambda ending the invocation at its timeout: nothing of the function runs
    after it (a ``BaseException``, which Powertools' idempotency, catching
    ``Exception`` to clean up or to save the result, lets through)."""


def kill_after_the_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next create's invocation is killed right after the ticket's write
    returned, before Powertools saves the result."""
    create = TicketRepository.create_ticket

    def write_then_die(self: TicketRepository, *args: Any, **kwargs: Any) -> object:
        monkeypatch.setattr(TicketRepository, "create_ticket", create)
        create(self, *args, **kwargs)
        raise Killed

    monkeypatch.setattr(TicketRepository, "create_ticket", write_then_die)


@pytest.fixture
def advance_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Moves forward the clock Powertools' idempotency reads (``datetime.now``
    in its modules): the next request arrives that many seconds later."""
    offset = [0.0]

    class Later(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> Self:
            return cls.fromtimestamp(time.time() + offset[0], tz)

    clock = SimpleNamespace(datetime=Later, timedelta=datetime.timedelta)
    for module in (idempotency_handler, persistence_base, persistence_dynamodb, datarecord):
        monkeypatch.setattr(module, "dt", clock)

    def advance(seconds: float) -> None:
        offset[0] += seconds

    return advance


@contextmanager
def ticket_write_unanswered() -> Iterator[None]:
    """The ticket's write lands in DynamoDB, and every answer to it is lost (the
    SDK's retries ran out): the function learns nothing of its outcome."""
    original = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009 - private on purpose
    lost: list[str] = []

    def land_then_lose(client: Any, operation: str, params: Any) -> Any:
        response = original(client, operation, params)
        if not lost and operation in ("PutItem", "TransactWriteItems") and "|TICKET#" in json.dumps(params):
            lost.append(operation)
            raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
        return response

    with mock.patch.object(botocore.client.BaseClient, "_make_api_call", land_then_lose):
        yield
    assert lost, "no ticket write was made"


def create_with_key(api: Api, user: User, key: str, title: str = TITLE) -> ApiResponse:
    return api.create(user, {"title": title}, headers={"Idempotency-Key": key})


def tickets_of(items: list[dict[str, Any]], tenant_id: str) -> list[str]:
    prefix = keys.tenant_prefix(tenant_id)
    return [item["ticket_id"]["S"] for item in ticket_items(items) if item["pk"]["S"].startswith(prefix)]


def record_of(items: list[dict[str, Any]], user: User, key: str) -> dict[str, Any]:
    """The idempotency record of ``user``'s requests with ``key``."""
    pk = keys.idempotency_pk(user.tenant_id, f"{user.username}\x1f{key}")
    (record,) = [item for item in items if item["pk"]["S"] == pk]
    return record


# ---------------------------------------------------------------- the retry of a killed create
@pytest.mark.parametrize("later", [0, RETRY_AFTER_SECONDS], ids=["at-once", "after-the-in-progress-expiry"])
def test_the_retry_of_a_create_killed_after_its_write_answers_the_ticket_it_wrote(
    api: Api,
    user: User,
    snapshot: Snapshot,
    monkeypatch: pytest.MonkeyPatch,
    advance_clock: Callable[[float], None],
    later: int,
) -> None:
    # Given a create with a key whose invocation was killed right after the ticket's write
    kill_after_the_write(monkeypatch)
    with pytest.raises(Killed):
        create_with_key(api, user, "key-1")
    (written,) = tickets_of(snapshot(), user.tenant_id)
    # When the client retries with the same key and body (API Gateway answered 502/504), at once
    # or once the record's in-progress expiry (the killed invocation's deadline) has passed
    in_progress_until_ms = int(record_of(snapshot(), user, "key-1")["in_progress_expiration"]["N"])
    advance_clock(later)
    if later:
        assert in_progress_until_ms < (time.time() + later) * 1000
    retry = create_with_key(api, user, "key-1")
    # Then it gets the ticket the killed invocation wrote, and there is still that one ticket
    assert retry.status == 201, retry.body
    assert retry.body["ticket_id"] == written
    assert retry.header("Location") == f"/tickets/{written}"
    assert retry.body == api.summary(user, written).body
    assert tickets_of(snapshot(), user.tenant_id) == [written]
    # And every retry after it too
    assert create_with_key(api, user, "key-1").body["ticket_id"] == written


def test_a_retry_of_a_killed_create_with_another_body_is_409_and_writes_nothing(
    api: Api, user: User, snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch, advance_clock: Callable[[float], None]
) -> None:
    # Given a create with a key killed right after its write, and its in-progress expiry passed
    kill_after_the_write(monkeypatch)
    with pytest.raises(Killed):
        create_with_key(api, user, "key-1", title="first")
    advance_clock(RETRY_AFTER_SECONDS)
    before = snapshot()
    # When the same key comes with another body
    response = create_with_key(api, user, "key-1", title="second")
    # Then it is 409 as ever, and nothing was written
    assert_error(response, 409, "CONFLICT")
    assert snapshot() == before


def test_a_create_whose_write_landed_unanswered_is_503_and_its_retry_answers_that_ticket(
    api: Api, user: User, snapshot: Snapshot
) -> None:
    # Given a create with a key whose ticket write lands, but whose every answer is lost
    with ticket_write_unanswered():
        response = create_with_key(api, user, "key-1")
    # Then it is 503 UNAVAILABLE ("a write may have been applied")
    assert_error(response, 503, "UNAVAILABLE")
    (written,) = tickets_of(snapshot(), user.tenant_id)
    # And the client's retry with the same key answers the ticket that was written, the one ticket
    retry = create_with_key(api, user, "key-1")
    assert retry.status == 201, retry.body
    assert retry.body["ticket_id"] == written
    assert tickets_of(snapshot(), user.tenant_id) == [written]


def test_a_write_that_lands_after_the_retry_took_the_key_over_writes_nothing(
    api: Api, user: User, snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch, advance_clock: Callable[[float], None]
) -> None:
    # Given a create whose ticket write lands late: after its in-progress expiry, once the
    # client's retry took the key over and created the ticket
    create = TicketRepository.create_ticket
    retries: list[ApiResponse] = []

    def retried_before_the_write(self: TicketRepository, *args: Any, **kwargs: Any) -> object:
        monkeypatch.setattr(TicketRepository, "create_ticket", create)
        advance_clock(RETRY_AFTER_SECONDS)
        retries.append(create_with_key(api, user, "key-1"))
        return create(self, *args, **kwargs)

    monkeypatch.setattr(TicketRepository, "create_ticket", retried_before_the_write)
    late = create_with_key(api, user, "key-1")
    # Then the late write wrote nothing (409), and the retry's ticket is the one ticket, its record kept
    (retry,) = retries
    assert retry.status == 201, retry.body
    assert_error(late, 409, "CONFLICT")
    assert tickets_of(snapshot(), user.tenant_id) == [retry.body["ticket_id"]]
    assert create_with_key(api, user, "key-1").body["ticket_id"] == retry.body["ticket_id"]


def test_the_record_a_killed_create_completed_reads_as_the_one_powertools_completes(
    api: Api,
    user: User,
    snapshot: Snapshot,
    monkeypatch: pytest.MonkeyPatch,
    dynamodb: DynamoDBClient,
    table_name: str,
) -> None:
    # Given a create killed right after its write (its record completed by that write alone)
    kill_after_the_write(monkeypatch)
    with pytest.raises(Killed):
        create_with_key(api, user, "killed")
    (written,) = tickets_of(snapshot(), user.tenant_id)
    killed = record_of(snapshot(), user, "killed")
    # When Powertools reads it as it reads its records (get_record: the key and body hashed again)
    persistence = DynamoDBPersistenceLayer(
        table_name=table_name,
        key_attr="pk",
        sort_key_attr="sk",
        static_pk_value=killed["pk"]["S"],
        boto3_client=dynamodb,
    )
    persistence.configure(tickets.idempotency_config(), key_prefix=killed["sk"]["S"].rsplit("#", 1)[0])
    stored = persistence.get_record(
        tickets.idempotency_payload(user.username, "killed", CreateTicketRequest(title=TITLE))
    )
    # Then it is COMPLETED, and its response is the ticket's id
    assert stored is not None
    assert stored.status == "COMPLETED"
    assert stored.response_json_as_dict() == {"ticket_id": written}
    # And it has the very attributes, in the very format, of a record Powertools completed itself
    whole = create_with_key(api, user, "whole").body["ticket_id"]
    completed = record_of(snapshot(), user, "whole")
    assert set(killed) == set(completed)
    assert killed["data"] == {"S": completed["data"]["S"].replace(whole, written)}
    assert (killed["status"], killed["validation"]) == (completed["status"], completed["validation"])
    assert int(killed["expiration"]["N"]) == pytest.approx(int(completed["expiration"]["N"]), abs=5)


def test_a_fenced_create_writes_its_ticket_and_completes_its_record_in_one_transaction(
    api: Api,
    user: User,
    snapshot: Snapshot,
    monkeypatch: pytest.MonkeyPatch,
    dynamodb: DynamoDBClient,
    table_name: str,
) -> None:
    # Given the tenant's data being copied into its own table: every write is fenced by its record
    moving = TenantConfig(
        tenant_id=user.tenant_id,
        move_to="dedicated",
        move_table=dedicated.table_name(table_name, user.tenant_id),
        move_phase=MovePhase.COPYING,
        move_started_at=1,
    )
    dynamodb.put_item(TableName=table_name, Item=to_item(moving.item()))
    tenant_configs().clear()
    # When a create with a key is killed right after its write
    kill_after_the_write(monkeypatch)
    with aws_calls() as calls, pytest.raises(Killed):
        create_with_key(api, user, "key-1")
    (written,) = tickets_of(snapshot(), user.tenant_id)
    # Then that write was one transaction: the ticket, its move mark, its record completed with its id, the fence
    (transaction,) = [
        params["TransactItems"]
        for service, operation, params in calls
        if (service, operation) == ("dynamodb", "TransactWriteItems") and f"|TICKET#{written}" in json.dumps(params)
    ]
    by_kind = {
        kind: [action for action in transaction if kind in action] for kind in ("Put", "Update", "ConditionCheck")
    }
    assert len(transaction) == 4  # far from TransactWriteItems' 100
    assert sorted(action["Put"]["Item"]["pk"]["S"] for action in by_kind["Put"]) == sorted(
        [keys.ticket_pk(user.tenant_id, written), keys.move_mark_key(user.tenant_id, written)["pk"]["S"]]
    )
    (completion,) = by_kind["Update"]
    assert completion["Update"]["Key"]["pk"]["S"] == keys.idempotency_pk(user.tenant_id, f"{user.username}\x1fkey-1")
    assert {"S": "COMPLETED"} in completion["Update"]["ExpressionAttributeValues"].values()
    assert {"S": json.dumps({"ticket_id": written})} in completion["Update"]["ExpressionAttributeValues"].values()
    (fence,) = by_kind["ConditionCheck"]
    assert fence["ConditionCheck"]["Key"] == keys.tenant_config_key(user.tenant_id)
    # And the retry, still during the copy, answers that ticket, the one ticket
    retry = create_with_key(api, user, "key-1")
    assert retry.status == 201, retry.body
    assert retry.body["ticket_id"] == written
    assert tickets_of(snapshot(), user.tenant_id) == [written]


@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_killed_creates_with_the_same_user_and_key_in_two_tenants_stay_apart(
    api: Api, snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch, owner: str, other: str
) -> None:
    # Given alice of one tenant killed right after her create's write
    key = f"shared-{uuid.uuid4()}"
    mine, theirs = User(owner, "alice"), User(other, "alice")
    before = set(tickets_of(snapshot(), owner))
    kill_after_the_write(monkeypatch)
    with pytest.raises(Killed):
        create_with_key(api, mine, key)
    (written,) = set(tickets_of(snapshot(), owner)) - before
    # When alice of the other tenant sends the same key and body, and then the first alice retries
    their_ticket = create_with_key(api, theirs, key)
    retry = create_with_key(api, mine, key)
    # Then each gets a ticket of her own tenant, the retry the one its killed invocation wrote, no other
    assert their_ticket.status == retry.status == 201
    assert retry.body["ticket_id"] == written
    assert their_ticket.body["ticket_id"] != written
    assert set(tickets_of(snapshot(), owner)) - before == {written}
    assert their_ticket.body["ticket_id"] in tickets_of(snapshot(), other)
    assert api.summary(theirs, retry.body["ticket_id"]).status == 404
    assert api.summary(mine, their_ticket.body["ticket_id"]).status == 404
