"""A tenant moved to its own table and back through the running local stack
while its clients write (``ops.move`` with the local stack's 1 s record cache
as its wait): every write the API acknowledged is there afterwards, as the
client last wrote it; writes answered 503 ``TENANT_MOVING`` (with
``Retry-After``) only from the switch until a second after writes reopened
(the record cache's bound), and nothing else but 2xx; reads never failed;
after the streams drain, the counts are the clients' and the trail holds one
``created`` event per ticket (the move counted and audited nothing); nothing
of the tenant is left in the table it left (in the pool, its record and usage
ledger); nothing of its neighbour (whose id extends its own) nor of any other
tenant changed. The move there runs in process (its steps' times taken at its
checkpoints), the move back as ``make tenant PLACEMENT=pool`` does."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ops.dedicated import deploy_to_local
from ops.move import Mover
from ops.tenants import TenantAdmin
from support_tickets.core import keys
from support_tickets.data.placement import MOVING_TTL_SECONDS
from tests.depth import DEEP
from tests.e2e.conftest import (
    BACKGROUND_PK_MARKS,
    TENANT_CONFIG_TTL_SECONDS,
    Response,
    RunningStack,
    new_tenant_id,
    run_main,
)

WRITERS = 2
# Each client paces its writes (the emulator serves them, the stream functions and the mover in
# one process) and stops creating after a few tickets: then it updates and comments on them.
# Every request costs the stack CPU for the move's whole duration: make test paces them at half
# make test-deep's rate, still dozens of writes in each phase of each move.
PACE_SECONDS = 0.3 if DEEP else 0.6
TICKETS_EACH = 4
# The move's waits with the local stack's record cache (1 s): a phase's, and the trailing copy's.
PHASE_SECONDS = TENANT_CONFIG_TTL_SECONDS + 1
# The local stack's stream pollers hand a record over within a second or two; what a function
# lagging longer writes into the old table, the erase copies over before it goes (ops/move.py).
DRAIN_SECONDS = 3
# A request's start is taken by the client before the function reads the record: a request
# started this long after writes reopened can no longer see a paused record (same clock).
CLOCK_SLACK_SECONDS = 0.25
STATUSES = ("OPEN", "IN_PROGRESS", "CLOSED")


@dataclass
class Writer:
    """One client writing its own tickets in a loop: what the API acknowledged,
    and every answer that was not a 2xx, with its request's start and end."""

    stack: RunningStack
    token: str
    name: str
    tickets: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> title, status
    comments: Counter[str] = field(default_factory=Counter)
    refused: list[tuple[float, float, int, str | None, str | None]] = field(default_factory=list)
    writes: int = 0

    def run(self, stop: threading.Event) -> None:
        n = 0
        while not stop.wait(PACE_SECONDS):
            n += 1
            if len(self.tickets) < TICKETS_EACH and n % 3 == 0:
                self.write("POST", "/tickets", {"title": f"{self.name} {n}"})
            elif n % 2 == 1:
                ticket = random.choice(sorted(self.tickets))
                change = {"title": f"{self.name} {n}", "status": random.choice(STATUSES)}
                self.write("PATCH", f"/tickets/{ticket}", change, ticket)
            else:
                ticket = random.choice(sorted(self.tickets))
                self.write("POST", f"/tickets/{ticket}/comments", {"body": f"{self.name} {n}"}, ticket)

    def write(self, method: str, path: str, body: dict[str, str], ticket: str | None = None) -> None:
        started = time.time()
        response = self.stack.request(method, path, token=self.token, body=body)
        ended = time.time()
        if not 200 <= response.status < 300:
            self.refused.append(
                (started, ended, response.status, response.error_code, response.headers.get("retry-after"))
            )
            time.sleep(0.2)
            return
        self.writes += 1
        if method == "POST" and path == "/tickets":
            self.tickets[response.body["ticket_id"]] = {"title": body["title"], "status": "OPEN"}
        elif method == "PATCH" and ticket is not None:
            self.tickets[ticket] = dict(body)
        elif ticket is not None:
            self.comments[ticket] += 1


def moving_while_written(stack: RunningStack, writers: list[Writer], move: Any) -> tuple[Any, list[Response]]:
    """``move()`` while the writers write (and one reader reads); what it returned, and
    every answer the reader got."""
    stop = threading.Event()
    threads = [threading.Thread(target=writer.run, args=(stop,)) for writer in writers]
    reads: list[Response] = []

    def read() -> None:
        while not stop.is_set():
            reads.append(stack.request("GET", "/tickets?status=OPEN", token=writers[0].token))
            time.sleep(PACE_SECONDS)

    threads.append(threading.Thread(target=read))
    for thread in threads:
        thread.start()
    try:
        time.sleep(1)  # the clients are at it before the move begins
        result = move()
        time.sleep(1)  # and after it ended
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    return result, reads


def assert_reads_never_failed(reads: list[Response]) -> None:
    assert [read.status for read in reads if read.status != 200] == []


def assert_acknowledged_writes_there(stack: RunningStack, writers: list[Writer], admin: str) -> None:
    """Every acknowledged write as its client last made it, the counts and the trail the clients'."""
    tally: Counter[str] = Counter()
    for writer in writers:
        for ticket, last in writer.tickets.items():
            got = stack.request("GET", f"/tickets/{ticket}?limit=100", token=writer.token)
            assert got.status == 200, (ticket, got.body)
            assert (got.body["ticket"]["title"], got.body["ticket"]["status"]) == (last["title"], last["status"])
            assert len(got.body["comments"]) == writer.comments[ticket]
            tally[last["status"]] += 1
    assert stack.drain()["drained"]
    counts = stack.request("GET", "/aggregates", token=admin).body["counts"]
    assert counts == {status: tally.get(status, 0) for status in STATUSES}
    created: list[str] = []
    cursor = None
    while True:
        page = stack.request("GET", "/audit?limit=100" + (f"&cursor={cursor}" if cursor else ""), token=admin).body
        created += [event["ticket_id"] for event in page["events"] if event["type"] == "created"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(created) == sorted(ticket for writer in writers for ticket in writer.tickets)


def assert_only_paused_while_switching(writers: list[Writer], paused_from: float, reopened_at: float) -> int:
    """Every refusal a 503 TENANT_MOVING with Retry-After, answered after the
    pause began and asked before the record cache let every function see writes
    reopen; how many there were."""
    refusals = [refusal for writer in writers for refusal in writer.refused]
    for started, ended, status, code, retry_after in refusals:
        assert (status, code, retry_after) == (503, "TENANT_MOVING", "2")
        assert ended >= paused_from
        assert started <= reopened_at + MOVING_TTL_SECONDS + CLOCK_SLACK_SECONDS
    return len(refusals)


def tenant_keys(stack: RunningStack, table: str, tenant: str) -> set[str]:
    """The partition keys of the tenant's items in ``table`` (a Scan: a test's check)."""
    found: set[str] = set()
    request: dict[str, Any] = {
        "TableName": table,
        "ProjectionExpression": "pk",
        "FilterExpression": "begins_with(pk, :prefix)",
        "ExpressionAttributeValues": {":prefix": {"S": keys.tenant_prefix(tenant)}},
    }
    while True:
        page = stack.operator("dynamodb").scan(**request)
        found |= {item["pk"]["S"] for item in page["Items"]}
        if "LastEvaluatedKey" not in page:
            return found
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_a_tenant_moves_to_its_own_table_and_back_while_its_clients_write(stack: RunningStack) -> None:
    tenant = new_tenant_id()
    neighbour = tenant + "0"
    pool = str(stack.state["table_name"])
    writers = [Writer(stack, stack.token(tenant, f"u{n}-{tenant}"), f"w{n}") for n in range(WRITERS)]
    admin = stack.token(tenant, f"root-{tenant}", admin=True)
    stack.token(neighbour, f"u-{neighbour}")
    for writer in writers:
        writer.write("POST", "/tickets", {"title": "before"})
    assert all(writer.tickets for writer in writers)
    assert stack.drain()["drained"]
    others = stack.table_fingerprint(skip_pk_containing=(keys.tenant_prefix(tenant), *BACKGROUND_PK_MARKS))
    kept_in_pool = {keys.tenant_config_key(tenant)["pk"]["S"], *keys.usage_partitions(tenant)}

    # When it moves to its own table while its clients write
    steps: dict[str, float] = {}

    def reached(step: str) -> None:
        steps.setdefault(step, time.time())

    admin_tool = TenantAdmin(stack.operator("dynamodb"), pool, phase_seconds=PHASE_SECONDS)
    mover = Mover(
        admin_tool,
        deploy=lambda tenant_id: deploy_to_local(stack.state, tenant_id)["TableName"],
        drain_seconds=DRAIN_SECONDS,
        checkpoint=reached,
    )
    outcome, reads = moving_while_written(stack, writers, lambda: mover.move(tenant, "dedicated"))
    assert_reads_never_failed(reads)

    # Then it is there, every acknowledged write with it, paused only while switching
    own = str(outcome.record.table)
    assert (outcome.record.placement, outcome.record.moving) == ("dedicated", False)
    assert own == f"{pool}-dedicated-{tenant}"
    # "copied" is taken just before SWITCHING is written, "erasing" just after writes reopen
    paused = assert_only_paused_while_switching(writers, steps["copied"], steps["erasing"])
    assert sum(writer.writes for writer in writers) > paused
    assert_acknowledged_writes_there(stack, writers, admin)
    assert tenant_keys(stack, pool, tenant) <= kept_in_pool

    # When it moves back to the pool with the command, while its clients write
    for writer in writers:
        writer.refused.clear()
    result, reads = moving_while_written(
        stack,
        writers,
        lambda: run_main(
            "ops.tenants",
            "--tenant",
            tenant,
            "--placement",
            "pool",
            "--local",
            "--local-state",
            str(stack.state_dir / "stack.json"),
            "--phase-seconds",
            str(PHASE_SECONDS),
            "--drain-seconds",
            str(DRAIN_SECONDS),
        ),
    )
    assert_reads_never_failed(reads)

    # Then it is in the pool, every acknowledged write with it, its own table empty
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert (record["placement"], record["table"], record["previous_table"]) == ("pool", None, own)
    assert "write pause: " in result.stderr
    # what becomes of the table it left, as the local stack has it: no AWS command to run
    assert f"the emptied table {own} and its key stay in the local stack" in result.stderr
    assert not re.search(r"\baws (dynamodb|kms|cloudformation)\b", result.stderr), result.stderr
    for _, _, status, code, retry_after in (refusal for writer in writers for refusal in writer.refused):
        assert (status, code, retry_after) == (503, "TENANT_MOVING", "2")
    assert_acknowledged_writes_there(stack, writers, admin)
    assert tenant_keys(stack, own, tenant) == set()
    # and nothing of its neighbour, nor of any other tenant of the pool, changed
    assert stack.table_fingerprint(skip_pk_containing=(keys.tenant_prefix(tenant), *BACKGROUND_PK_MARKS)) == others
