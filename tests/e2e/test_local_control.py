"""The local stack's control endpoints (``/_local/...`` on the emulator's port):
the queues' drain says what it did and their clock moves as asked; and they
are the stack's tools' alone: a request without the stack's control token is
refused, a webhook can't be registered at any of the stack's own ports, and one
stored with such a URL (registered before the refusal existed) is refused at
delivery, so the queues' clock does not move (a delivery to
``/_local/queues/clock?advance=93600`` once moved every tenant's by 26 h)."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request

from local_stack.running_stack import CONTROL_TOKEN_HEADER
from support_tickets.core import keys
from tests.e2e.conftest import RunningStack, new_tenant_id

ADVANCE_26_HOURS = "/_local/queues/clock?advance=93600"


def control_status(url: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, method="POST", headers=headers)  # noqa: S310 - the local control endpoint
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_stack_drains_its_queues_and_moves_their_clock(stack: RunningStack) -> None:
    drained = stack.drain_queues(timeout=10)
    assert drained["drained"] is True
    assert set(drained) == {"drained", "invocations", "deleted", "failed_invocations"}
    before = stack.advance_queue_clock(0)
    assert stack.advance_queue_clock(5) == before + 5


def test_a_control_call_without_the_stacks_token_is_refused(stack: RunningStack) -> None:
    before = stack.advance_queue_clock(0)  # with the token, as the tools send it
    url = f"{stack.state['emulator_url']}{ADVANCE_26_HOURS}"
    assert control_status(url, {}) == 403
    assert control_status(url, {CONTROL_TOKEN_HEADER: "guess"}) == 403
    assert control_status(f"{stack.state['control_url']}/stream/drain?timeout=0", {}) == 403
    assert stack.advance_queue_clock(0) == before


def test_a_webhook_at_the_stacks_own_ports_is_refused_and_one_stored_anyway_is_never_posted(
    stack: RunningStack,
) -> None:
    tenant = new_tenant_id()
    admin = stack.token(tenant, f"root-{tenant}", admin=True)
    events = ["ticket.created"]
    for base in (stack.state["emulator_url"], stack.state["vpc_endpoint_url"], stack.api_url):
        port = urllib.parse.urlsplit(str(base)).port
        body = {"url": f"http://127.0.0.1:{port}{ADVANCE_26_HOURS}", "events": events}
        refused = stack.request("POST", "/webhooks", token=admin, body=body)
        assert (refused.status, refused.error_code) == (400, "INVALID_WEBHOOK_URL"), base
    # A webhook stored with the control URL (as one registered before the refusal was):
    created = stack.request("POST", "/webhooks", token=admin, body={"url": "http://127.0.0.1:9/hook", "events": events})
    assert created.status == 201, created.body
    webhook_id = created.body["webhook_id"]
    stack.operator("dynamodb").update_item(
        TableName=stack.state["table_name"],
        Key=keys.webhook_key(tenant, webhook_id),
        UpdateExpression="SET #url = :url",
        ExpressionAttributeNames={"#url": "url"},
        ExpressionAttributeValues={":url": {"S": f"{stack.state['emulator_url']}{ADVANCE_26_HOURS}"}},
    )
    before = stack.advance_queue_clock(0)
    user = stack.token(tenant, f"u-{tenant}")
    assert stack.request("POST", "/tickets", token=user, body={"title": "t"}).status == 201
    deliveries: list[dict[str, object]] = []
    deadline = time.monotonic() + 20
    while not deliveries and time.monotonic() < deadline:
        stack.drain()
        stack.drain_queues()
        listed = stack.request("GET", f"/webhooks/{webhook_id}/deliveries", token=admin).body["items"]
        deliveries = [item for item in listed if item["attempts"]]
    (attempted,) = deliveries
    # Refused at delivery: nothing answered, retried later; and the clock did not move.
    assert (attempted["status"], attempted["last_status_code"]) == ("PENDING", None)
    assert stack.advance_queue_clock(0) == before
    assert stack.request("DELETE", f"/webhooks/{webhook_id}", token=admin).status == 204
