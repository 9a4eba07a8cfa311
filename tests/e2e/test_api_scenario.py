"""The whole API.md scenario over HTTP against the local stack, for two tenants
whose ids are prefixes of each other: everything one does is invisible and
untouchable for the other."""

from __future__ import annotations

import uuid

from tests.e2e.conftest import Caller, RunningStack


def test_two_tenants_through_the_whole_api(stack: RunningStack, tenant_pair: tuple[Caller, Caller]) -> None:
    alice, bob = tenant_pair
    admin_token = stack.token(alice.tenant_id, f"admin-{alice.tenant_id}", admin=True)
    bob_admin_token = stack.token(bob.tenant_id, f"admin-{bob.tenant_id}", admin=True)

    # Given: alice files tickets, one of them idempotently, twice
    key = str(uuid.uuid4())
    body = {"title": "Printer on fire", "description": "Third floor", "resolver": "johnd"}
    created = stack.request("POST", "/tickets", token=alice.token, body=body, headers={"Idempotency-Key": key})
    assert created.status == 201, created.body
    first = created.body
    assert created.headers["location"] == f"/tickets/{first['ticket_id']}"
    assert first["status"] == "OPEN"
    assert first["version"] == 1
    assert first["created_by"] == alice.username
    again = stack.request("POST", "/tickets", token=alice.token, body=body, headers={"Idempotency-Key": key})
    assert again.status == 201
    assert again.body["ticket_id"] == first["ticket_id"]
    others = [
        stack.request("POST", "/tickets", token=alice.token, body={"title": f"Ticket {n}"}).body for n in range(3)
    ]
    ids = [first["ticket_id"]] + [ticket["ticket_id"] for ticket in others]

    # When/then: lists by status, by resolver, paged with a cursor
    listed = stack.request("GET", "/tickets", token=alice.token)
    assert listed.status == 200
    assert sorted(item["ticket_id"] for item in listed.body["items"]) == sorted(ids)
    assert listed.body["next_cursor"] is None
    for_johnd = stack.request("GET", "/tickets?status=OPEN&resolver=johnd", token=alice.token)
    assert [item["ticket_id"] for item in for_johnd.body["items"]] == [first["ticket_id"]]
    page = stack.request("GET", "/tickets?limit=2", token=alice.token)
    assert len(page.body["items"]) == 2
    cursor = page.body["next_cursor"]
    assert cursor
    rest = stack.request("GET", f"/tickets?limit=2&cursor={cursor}", token=alice.token)
    assert rest.status == 200
    seen = {item["ticket_id"] for item in page.body["items"] + rest.body["items"]}
    assert seen == set(ids)

    # comments, oldest first, with the ticket; the summary alone
    for text in ("first!", "second"):
        comment = stack.request(
            "POST", f"/tickets/{first['ticket_id']}/comments", token=alice.token, body={"body": text}
        )
        assert comment.status == 201, comment.body
        assert comment.body["author"] == alice.username
    full = stack.request("GET", f"/tickets/{first['ticket_id']}", token=alice.token)
    assert full.status == 200
    assert full.body["ticket"]["ticket_id"] == first["ticket_id"]
    assert [c["body"] for c in full.body["comments"]] == ["first!", "second"]
    summary = stack.request("GET", f"/tickets/{first['ticket_id']}/summary", token=alice.token)
    assert summary.status == 200
    assert summary.body["description"] == "Third floor"

    # optimistic concurrency with If-Match
    patched = stack.request(
        "PATCH", f"/tickets/{first['ticket_id']}", token=alice.token, body={"resolver": None}, headers={"If-Match": "1"}
    )
    assert patched.status == 200, patched.body
    assert patched.body["version"] == 2
    assert patched.body["resolver"] is None
    stale = stack.request(
        "PATCH", f"/tickets/{first['ticket_id']}", token=alice.token, body={"title": "x"}, headers={"If-Match": "1"}
    )
    assert stale.status == 412
    assert stale.error_code == "VERSION_MISMATCH"

    # batch status: all or nothing (the literal route /tickets/status, not /tickets/{ticket_id})
    moved = stack.request(
        "POST", "/tickets/status", token=alice.token, body={"ticket_ids": ids[:2], "status": "IN_PROGRESS"}
    )
    assert moved.status == 200, moved.body
    assert moved.body == {"updated": ids[:2], "status": "IN_PROGRESS"}
    missing = stack.request(
        "POST", "/tickets/status", token=alice.token, body={"ticket_ids": [ids[2], "NOPE"], "status": "CLOSED"}
    )
    assert missing.status == 404
    assert stack.request("GET", f"/tickets/{ids[2]}/summary", token=alice.token).body["status"] == "OPEN"
    closed = stack.request(
        "POST", "/tickets/status", token=alice.token, body={"ticket_ids": [ids[2]], "status": "CLOSED"}
    )
    assert closed.status == 200
    in_progress = stack.request("GET", "/tickets?status=IN_PROGRESS", token=alice.token)
    assert sorted(item["ticket_id"] for item in in_progress.body["items"]) == sorted(ids[:2])

    # The other tenant ("1" vs "10"): nothing of alice's exists for bob
    assert stack.request("GET", "/tickets?status=IN_PROGRESS", token=bob.token).body["items"] == []
    for path in (f"/tickets/{ids[0]}", f"/tickets/{ids[0]}/summary"):
        foreign = stack.request("GET", path, token=bob.token)
        assert foreign.status == 404
        assert foreign.error_code == "TICKET_NOT_FOUND"
    assert stack.request("PATCH", f"/tickets/{ids[0]}", token=bob.token, body={"title": "mine"}).status == 404
    assert stack.request("POST", f"/tickets/{ids[0]}/comments", token=bob.token, body={"body": "hi"}).status == 404
    batch = stack.request("POST", "/tickets/status", token=bob.token, body={"ticket_ids": ids[:1], "status": "CLOSED"})
    assert batch.status == 404
    assert stack.request("DELETE", f"/tickets/{ids[0]}", token=bob_admin_token).status == 404
    stolen_cursor = stack.request("GET", f"/tickets?limit=2&cursor={cursor}", token=bob.token)
    assert stolen_cursor.status == 400
    assert stolen_cursor.error_code == "INVALID_CURSOR"
    unchanged = stack.request("GET", f"/tickets/{ids[0]}", token=alice.token).body
    assert unchanged["ticket"]["title"] == "Printer on fire"
    assert unchanged["ticket"]["status"] == "IN_PROGRESS"
    assert len(unchanged["comments"]) == 2

    # Deleting is for admins only
    forbidden = stack.request("DELETE", f"/tickets/{ids[3]}", token=alice.token)
    assert forbidden.status == 403
    assert forbidden.error_code == "FORBIDDEN"
    deleted = stack.request("DELETE", f"/tickets/{first['ticket_id']}", token=admin_token)
    assert deleted.status == 204
    assert stack.request("GET", f"/tickets/{first['ticket_id']}", token=alice.token).status == 404

    # Aggregates are for admins only
    assert stack.request("GET", "/aggregates", token=alice.token).status == 403
    counts = stack.request("GET", "/aggregates", token=admin_token)
    assert counts.status == 200
    assert set(counts.body["counts"]) == {"OPEN", "IN_PROGRESS", "CLOSED"}
