"""Webhook deliveries are their tenant's usage, through the local stack: the
delivery function's usage lines reach the metering function through its log
subscription, and a slow receiver's deliveries show in its tenant's figures
(attempts, deliveries, GB-seconds, cost) and nowhere else (docs/usage.md)."""

from __future__ import annotations

import time
from decimal import Decimal

from stack_model.functions import function_specs
from support_tickets.usage.counters import read_day
from tests.e2e.conftest import RunningStack, new_tenant_id
from tests.functional.test_webhook_usage import ALL_TYPES, receiver

HOLD_SECONDS = 1.0  # how long the receiver holds each delivery
DELIVERIES = 2  # a basic tenant's attempts in flight: both go out at once
SLACK_SECONDS = 2.0  # an invocation's own work around a held POST, on a loaded laptop


def test_a_slow_receivers_deliveries_are_its_tenants_usage_and_nobody_elses(stack: RunningStack) -> None:
    tenant, neighbour = new_tenant_id(), new_tenant_id()
    table = str(stack.state["table_name"])
    day = time.strftime("%Y-%m-%d", time.gmtime())
    admin = stack.token(tenant, f"root-{tenant}", admin=True)
    user = stack.token(tenant, f"u-{tenant}")
    # Given a neighbour with usage of its own, its figures read once everything settled
    assert stack.request("GET", "/tickets", token=stack.token(neighbour, f"u-{neighbour}")).status == 200
    with receiver(hold=HOLD_SECONDS) as url:
        hook = stack.request("POST", "/webhooks", token=admin, body={"url": url, "events": ALL_TYPES})
        assert hook.status == 201, hook.body
        assert stack.drain_logs()["drained"]
        neighbours = read_day(stack.operator("dynamodb"), table, neighbour, day)
        before = read_day(stack.operator("dynamodb"), table, tenant, day)
        # When the tenant's changes are delivered to a receiver that holds each one
        for number in range(DELIVERIES):
            assert stack.request("POST", "/tickets", token=user, body={"title": f"t{number}"}).status == 201
        assert stack.drain()["drained"]
        assert stack.drain_queues()["drained"]
        assert stack.drain_logs()["drained"]
    after = read_day(stack.operator("dynamodb"), table, tenant, day)
    # Then its counters hold the attempts and deliveries, each once
    zero = Decimal(0)
    moved = {name: after.get(name, zero) - before.get(name, zero) for name in after if name.startswith("webhook_")}
    assert [moved["webhook_attempts"], moved["webhook_deliveries"]] == [DELIVERIES, DELIVERIES]
    assert moved["webhook_invocations"] >= 1
    assert moved["webhook_sqs_requests"] == 0  # delivered at once: no visibility change, no dead letter
    # and the GB-seconds the delivery function spent holding them: at least one hold (the
    # deliveries may share an invocation), at most every hold plus an invocation's own work
    memory_gb = Decimal(function_specs()["DeliverWebhookFunction"].memory_mb) / 1024
    gb_seconds = moved["webhook_mb_ms"] / 1024 / 1000
    assert Decimal(HOLD_SECONDS) * memory_gb <= gb_seconds
    assert gb_seconds <= DELIVERIES * Decimal(HOLD_SECONDS + SLACK_SECONDS) * memory_gb
    # The tenant's admin sees them in its usage object
    usage = stack.request("GET", "/usage", token=admin).body
    assert usage["webhooks"] == {
        "deliveries": int(after["webhook_deliveries"]),
        "attempts": int(after["webhook_attempts"]),
    }
    assert usage["cost_usd"]["webhooks"] > 0
    assert Decimal(str(usage["lambda"]["gb_seconds"])) >= gb_seconds.quantize(Decimal("1e-9"))
    # and the neighbour's figures did not move
    assert read_day(stack.operator("dynamodb"), table, neighbour, day) == neighbours
