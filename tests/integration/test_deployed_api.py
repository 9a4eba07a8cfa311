"""The REST contract over HTTPS against a deployed stack (skipped without
AWS_SAM_STACK_NAME; see conftest). The same scenarios as tests/functional,
end to end: API Gateway's Lambda TOKEN authorizer (AuthorizerFunction), the
functions, the tenant role's IAM conditions on the real table."""

from __future__ import annotations

import time
import uuid

import pytest

from ops.routes import api_routes
from tests.functional.api_harness import assert_error
from tests.integration.conftest import Caller, DeployedStack

pytestmark = pytest.mark.deployed

MISSING = "01JD3ZZZZZZZZZZZZZZZZZZZZZ"


@pytest.fixture(scope="module")
def member(deployed: DeployedStack) -> Caller:
    return deployed.caller(f"it-{deployed.run_id}", "member")


@pytest.fixture(scope="module")
def admin(deployed: DeployedStack) -> Caller:
    return deployed.caller(f"it-{deployed.run_id}", "admin", admin=True)


def test_a_ticket_through_its_whole_life(deployed: DeployedStack, member: Caller, admin: Caller) -> None:
    # Create
    created = deployed.request("POST", "/tickets", member, body={"title": "Printer on fire", "resolver": "johnd"})
    assert created.status == 201
    ticket = created.body
    ticket_id = ticket["ticket_id"]
    assert created.header("Location") == f"/tickets/{ticket_id}"
    assert (ticket["status"], ticket["version"], ticket["created_by"]) == ("OPEN", 1, member.username)
    # List (GSI1), with and without the resolver
    listed = deployed.request("GET", "/tickets", member, query={"status": "OPEN", "resolver": "johnd"})
    assert ticket_id in {item["ticket_id"] for item in listed.body["items"]}
    # Comment, then read it back with the ticket
    comment = deployed.request("POST", f"/tickets/{ticket_id}/comments", member, body={"body": "hot"})
    assert comment.status == 201
    whole = deployed.request("GET", f"/tickets/{ticket_id}", member)
    assert (whole.body["ticket"], whole.body["comments"]) == (ticket, [comment.body])
    # Update with If-Match, then a stale If-Match
    updated = deployed.request(
        "PATCH", f"/tickets/{ticket_id}", member, body={"status": "IN_PROGRESS"}, headers={"If-Match": "1"}
    )
    assert (updated.status, updated.body["version"]) == (200, 2)
    stale = deployed.request("PATCH", f"/tickets/{ticket_id}", member, body={"title": "x"}, headers={"If-Match": "1"})
    assert assert_error(stale, 412, "VERSION_MISMATCH")["details"] == {"current_version": 2}
    # Batch: a missing id fails the whole batch
    batch = deployed.request(
        "POST", "/tickets/status", member, body={"ticket_ids": [ticket_id, MISSING], "status": "CLOSED"}
    )
    assert assert_error(batch, 404, "TICKET_NOT_FOUND")["details"] == {"missing_ticket_ids": [MISSING]}
    assert deployed.request("GET", f"/tickets/{ticket_id}/summary", member).body["status"] == "IN_PROGRESS"
    # Delete: not for members, yes for admins
    assert_error(deployed.request("DELETE", f"/tickets/{ticket_id}", member), 403, "FORBIDDEN")
    deleted = deployed.request("DELETE", f"/tickets/{ticket_id}", admin)
    assert (deleted.status, deleted.body) == (204, None)
    assert_error(deployed.request("GET", f"/tickets/{ticket_id}", member), 404, "TICKET_NOT_FOUND")


def test_idempotent_create(deployed: DeployedStack, member: Caller, admin: Caller) -> None:
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = deployed.request("POST", "/tickets", member, body={"title": "once"}, headers=key)
    again = deployed.request("POST", "/tickets", member, body={"title": "once"}, headers=key)
    other = deployed.request("POST", "/tickets", member, body={"title": "twice"}, headers=key)
    assert (first.status, again.status) == (201, 201)
    assert again.body == first.body
    assert_error(other, 409, "CONFLICT")
    deployed.request("DELETE", f"/tickets/{first.body['ticket_id']}", admin)


def test_aggregates_are_for_admins(deployed: DeployedStack, member: Caller, admin: Caller) -> None:
    assert_error(deployed.request("GET", "/aggregates", member), 403, "FORBIDDEN")
    counts = deployed.request("GET", "/aggregates", admin)
    assert counts.status == 200
    assert set(counts.body["counts"]) == {"OPEN", "IN_PROGRESS", "CLOSED"}


def test_the_history_follows_the_stream_and_the_trail_is_for_admins(
    deployed: DeployedStack, member: Caller, admin: Caller
) -> None:
    ticket_id = deployed.request("POST", "/tickets", member, body={"title": "audited"}).body["ticket_id"]
    deployed.request("PATCH", f"/tickets/{ticket_id}", admin, body={"status": "CLOSED"})
    deployed.request("DELETE", f"/tickets/{ticket_id}", admin)
    events: list[tuple[str, str]] = []
    for _ in range(30):  # the trail follows the stream: seconds behind
        history = deployed.request("GET", f"/tickets/{ticket_id}/history", member)
        if history.status == 200:
            events = [(event["type"], event["actor"]) for event in history.body["events"]]
            if len(events) == 3:
                break
        time.sleep(2)
    assert events == [("created", member.username), ("updated", admin.username), ("deleted", admin.username)]
    assert_error(deployed.request("GET", "/audit", member), 403, "FORBIDDEN")
    trail = deployed.request("GET", "/audit", admin)
    assert ticket_id in {event["ticket_id"] for event in trail.body["events"]}


@pytest.mark.parametrize("token", [None, "not-a-jwt"])
def test_no_valid_token_is_401(deployed: DeployedStack, token: str | None) -> None:
    caller = Caller("x", "x", token) if token else None
    assert_error(deployed.request("GET", "/tickets", caller), 401, "UNAUTHORIZED")


@pytest.mark.parametrize(("method", "path"), [("GET", "/ticket"), ("PUT", "/tickets"), ("DELETE", "/aggregates")])
@pytest.mark.parametrize("with_token", [True, False])
def test_an_unknown_route_is_404_not_found(
    deployed: DeployedStack, member: Caller, method: str, path: str, with_token: bool
) -> None:
    # What the local gateway models (the template's MISSING_AUTHENTICATION_TOKEN and
    # INVALID_SIGNATURE responses), checked where API Gateway itself answers: a bearer
    # token on a route with no method is read as a malformed signature.
    assert_error(deployed.request(method, path, member if with_token else None), 404, "NOT_FOUND")


def test_bad_requests_are_400_and_413(deployed: DeployedStack, member: Caller) -> None:
    assert_error(deployed.request("POST", "/tickets", member, raw_body="{"), 400, "INVALID_JSON")
    assert_error(deployed.request("POST", "/tickets", member, body={"title": ""}), 400, "VALIDATION_ERROR")
    assert_error(deployed.request("GET", "/tickets", member, query={"limit": "0"}), 400, "VALIDATION_ERROR")
    assert_error(deployed.request("GET", "/tickets", member, query={"cursor": "x"}), 400, "INVALID_CURSOR")
    too_big = deployed.request("POST", "/tickets", member, raw_body="x" * (64 * 1024 + 1))
    assert_error(too_big, 413, "PAYLOAD_TOO_LARGE")


@pytest.mark.parametrize(("owner", "other"), [("1", "10"), ("10", "1")])
def test_tenant_1_and_10_never_meet(deployed: DeployedStack, owner: str, other: str) -> None:
    # Given a ticket of `owner`, with a list cursor
    mine = deployed.caller(owner, f"owner-{owner}", admin=True)
    theirs = deployed.caller(other, f"other-{other}", admin=True)
    ids = [deployed.request("POST", "/tickets", mine, body={"title": f"t{n}"}).body["ticket_id"] for n in range(2)]
    cursor = deployed.request("GET", "/tickets", mine, query={"limit": "1"}).body["next_cursor"]
    try:
        # When `other` reaches for it in every way
        ticket_id = ids[0]
        missing = deployed.request("GET", f"/tickets/{MISSING}", theirs)
        for route in [route for route in api_routes() if route.takes_ticket]:  # ops/routes.py
            response = deployed.request(route.method, route.url(ticket_id), theirs, body=route.body(ticket_id))
            # Then it is the same 404 as a missing ticket
            assert_error(response, 404, "TICKET_NOT_FOUND")
            assert response.body == missing.body
        batch = deployed.request("POST", "/tickets/status", theirs, body={"ticket_ids": ids, "status": "CLOSED"})
        assert assert_error(batch, 404, "TICKET_NOT_FOUND")["details"] == {"missing_ticket_ids": ids}
        listed = deployed.request("GET", "/tickets", theirs, query={"limit": "1", "cursor": cursor})
        assert_error(listed, 400, "INVALID_CURSOR")
        own = deployed.request("GET", f"/tickets/{ticket_id}", mine)
        assert (own.body["ticket"]["title"], own.body["ticket"]["version"], own.body["comments"]) == ("t0", 1, [])
    finally:
        for ticket_id in ids:
            deployed.request("DELETE", f"/tickets/{ticket_id}", mine)
