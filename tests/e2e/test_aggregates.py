"""The aggregates follow the stream: once the poller has drained it, each
tenant's counts equal its number of tickets per status, whatever the API did
(create, status changes one by one and in a transaction, delete)."""

from __future__ import annotations

from collections import Counter

from tests.e2e.conftest import Caller, RunningStack


def counts(stack: RunningStack, token: str) -> dict[str, int]:
    response = stack.request("GET", "/aggregates", token=token)
    assert response.status == 200, response.body
    assert response.body["total"] == sum(response.body["counts"].values())
    return dict(response.body["counts"])


def test_aggregates_catch_up_after_the_stream_drains(stack: RunningStack, tenant_pair: tuple[Caller, Caller]) -> None:
    # Given: two tenants with tickets in every status, moved around, one deleted
    expected: dict[str, Counter[str]] = {}
    admins = {}
    for caller, n_tickets in zip(tenant_pair, (7, 4), strict=True):
        admins[caller.tenant_id] = stack.token(caller.tenant_id, f"admin-{caller.tenant_id}", admin=True)
        ids = [
            stack.request("POST", "/tickets", token=caller.token, body={"title": f"t{n}"}).body["ticket_id"]
            for n in range(n_tickets)
        ]
        status = dict.fromkeys(ids, "OPEN")
        moved = stack.request(
            "POST", "/tickets/status", token=caller.token, body={"ticket_ids": ids[:3], "status": "IN_PROGRESS"}
        )
        assert moved.status == 200
        status.update(dict.fromkeys(ids[:3], "IN_PROGRESS"))
        closed = stack.request("PATCH", f"/tickets/{ids[0]}", token=caller.token, body={"status": "CLOSED"})
        assert closed.status == 200
        status[ids[0]] = "CLOSED"
        # a rejected transaction changes nothing, in the table or in the counts
        rejected = stack.request(
            "POST", "/tickets/status", token=caller.token, body={"ticket_ids": [ids[1], "NOPE"], "status": "CLOSED"}
        )
        assert rejected.status == 404
        assert stack.request("DELETE", f"/tickets/{ids[-1]}", token=admins[caller.tenant_id]).status == 204
        del status[ids[-1]]
        expected[caller.tenant_id] = Counter(status.values())

    # When: the stream is drained
    result = stack.drain()
    assert result["drained"], result

    # Then: the counts are exact, per tenant, zero included
    for caller in tenant_pair:
        want = {name: expected[caller.tenant_id].get(name, 0) for name in ("OPEN", "IN_PROGRESS", "CLOSED")}
        assert counts(stack, admins[caller.tenant_id]) == want
