"""The aggregator crashing in the middle of a batch, after some of its
aggregate writes landed, retried the way Lambda retries a stream batch after a
function error (the local stack's StreamPoller: BisectBatchOnFunctionError,
MaximumRetryAttempts from template.yaml) over moto's real stream of the table:
the counts still equal a recount from scratch.

tests/functional/test_aggregation.py covers writes that fail with an AWS error
(reported as batch item failures, retried from the lowest one) and arbitrary
redeliveries; here the invocation itself dies, so Lambda sees no partial
batch response at all and bisects."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from local_stack.event_sources.stream_poller import StreamPoller
from local_stack.event_sources.stream_sources import stream_source
from local_stack.lambda_.runtime import LambdaContext
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import CreateTicketRequest
from support_tickets.streams import aggregation
from support_tickets.streams.aggregation import aggregator_client
from tests.conftest import REGION, RepoFactory, random_tenant_id
from tests.functional.stream_harness import StreamHarness, aggregator

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

SEED = 7
CRASH_BUDGET = 4  # below MaximumRetryAttempts (5): no record is given up


class Crash(RuntimeError):
    """The invocation dies (out of memory, timeout, a bug): not an AWS error."""


@dataclass
class CrashingWrites:
    """The aggregator's DynamoDB client; in a chosen invocation, the transaction
    after ``crash_after`` landed ones lands and then the invocation crashes."""

    client: DynamoDBClient
    rng: random.Random
    budget: int = CRASH_BUDGET
    crash_after: int | None = None
    writes_this_invocation: int = 0
    crashes: list[int] = field(default_factory=list)  # writes landed before each crash

    def start_invocation(self) -> None:
        self.writes_this_invocation = 0
        self.crash_after = self.rng.randint(0, 3) if self.budget > 0 and self.rng.random() < 0.6 else None

    def transact_write_items(self, **kwargs: Any) -> Any:
        response = self.client.transact_write_items(**kwargs)
        self.writes_this_invocation += 1
        if self.crash_after is not None and self.writes_this_invocation > self.crash_after:
            self.budget -= 1
            self.crashes.append(self.writes_this_invocation)
            self.crash_after = None
            raise Crash("the function died after this write landed")
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_crashes_after_partial_writes_then_lambda_retries_counts_stay_exact(
    aws: None, dynamodb: DynamoDBClient, table_name: str, repo_for: RepoFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(SEED)
    handler = aggregator()
    writes = CrashingWrites(aggregator_client(), random.Random(SEED + 1))
    monkeypatch.setattr(aggregation, "aggregator_client", lambda: writes)
    # Transactions of at most 2 count items: an invocation writes several, so it can die between them.
    ledger = aggregation.CountLedger
    monkeypatch.setattr(aggregation, "CountLedger", lambda **kwargs: ledger(**kwargs, max_transaction_items=3))
    invocations: list[int] = []

    def invoke(event: dict[str, Any]) -> Any:
        invocations.append(len(event["Records"]))
        writes.start_invocation()
        return handler(event, LambdaContext("AggregateCountsFunction"))

    streams = boto3.client("dynamodbstreams", region_name=REGION)
    stream_arn = dynamodb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
    source = replace(stream_source(), batching_window_s=0, batch_size=25)
    assert source.bisect_on_error
    assert source.maximum_retry_attempts > CRASH_BUDGET
    given_up: list[dict[str, Any]] = []
    poller = StreamPoller(streams, stream_arn, source, invoke=invoke, on_failure=given_up.append)

    # Given three tenants whose tickets are created, moved and deleted, in two rounds
    tenants = [random_tenant_id() for _ in range(3)]
    repos = {tenant: repo_for(tenant) for tenant in tenants}
    tickets: dict[str, list[str]] = {tenant: [] for tenant in tenants}
    statuses = list(TicketStatus)

    def history(rounds: int) -> None:
        for _ in range(rounds):
            tenant = rng.choice(tenants)
            repo, own = repos[tenant], tickets[tenant]
            action = rng.random()
            if action < 0.4 or not own:
                request = CreateTicketRequest(title="t")
                own.append(repo.create_ticket(request, created_by="alice").ticket_id)
            elif action < 0.7:
                repo.update_ticket(rng.choice(own), {"status": rng.choice(statuses)}, None, actor="alice")
            elif action < 0.9:
                repo.change_status(rng.sample(own, min(len(own), 3)), rng.choice(statuses), actor="alice")
            else:
                repo.delete_ticket(own.pop(rng.randrange(len(own))), actor="alice")

    poller.start()
    try:
        for rounds in (60, 40):
            # When the aggregator crashes in some invocations after some writes landed
            history(rounds)
            assert poller.wait_drained(timeout=60)
    finally:
        poller.stop()

    # Then the crashes did happen, some after writes had landed, and nothing was given up
    assert len(writes.crashes) == CRASH_BUDGET
    assert any(landed > 1 for landed in writes.crashes)
    assert given_up == []
    assert poller.given_up == 0
    # And every tenant's counts equal a recount from scratch
    harness = StreamHarness(dynamodb, streams, table_name)
    for tenant in tenants:
        assert harness.counts(tenant) == harness.truth(tenant), tenant
    assert sum(sum(harness.truth(tenant).values()) for tenant in tenants) > 0
    assert len(invocations) > len(writes.crashes)
