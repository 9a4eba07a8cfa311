"""Two cells in one mocked account, as two stacks that share nothing have them:
each its own pool table (template.yaml's, another ``TableName``), webhook
secrets key, usage plans and stack name (its API keys), and its functions
reading its own environment (``TABLE_NAME``, ``WEBHOOK_KEY_ARN``, ``CELL_ID``:
:meth:`Cells.in_cell` runs code as that cell's containers, caches cleared as a
fresh container's). The control plane's directory and the router's store are
stand-ins (:class:`MemoryDirectory`, the router tests' ``FakeStore``).

What moto cannot tell apart in one account (one identity pool, one queue,
clients that may reach either table) the tests of ``test_cell_move.py``
check by what was written where, and the local stack's guard by the template's
policies (``test_each_cells_tenant_credentials_reach_nothing_of_the_other``)."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import boto3

from ops.api_keys import ApiKeys
from ops.cell_move import Cell, CellMover
from ops.cell_routes import publish_tenant_route
from ops.move import Outcome
from ops.sample_events import delivery_item
from ops.tenants import TenantAdmin
from stack_model import dedicated
from stack_model.template import REGION, table_definition
from support_tickets.core import keys
from support_tickets.data.table import OwnClient, TenantTable, from_item
from support_tickets.data.tenant_registry import TIERS, tenant_configs
from support_tickets.webhooks.delivery_records import DELIVERED, PENDING, Attempt, DeliveryRecords
from support_tickets.webhooks.events import read_queue_message
from tests.conftest import WEBHOOK_QUEUE_URL, _clear_container_caches, all_items, webhook_key_arn
from tests.functional.api_harness import ROUTES, Api, User
from tests.functional.conftest import STACK_NAME, stack_usage_plans
from tests.functional.move_harness import FakeClock, dedicated_table_in_moto
from tests.functional.stream_harness import StreamHarness
from tests.functional.webhook_harness import receive
from tests.unit.test_cell_routes import ARN as ROUTES_ARN
from tests.unit.test_cell_routes import FakeStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CELL_A, CELL_B = "cell-a", "cell-b"
B_TABLE = "SupportTicketsCellB"
B_STACK = "cellb"
STREAM_FUNCTIONS = ("AggregateCountsFunction", "AuditTrailFunction")
SECRETS = ("secret", "previous_secret")
# A day of the usage ledger, and the slot of the counter item populate puts there.
USAGE_DAY, USAGE_SLOT = "2026-11-20", 3
AUTHORIZER_CACHE_SECONDS = 40.0


class MemoryDirectory:
    """The control plane's directory, in memory: tenant -> (cell, epoch), and its ``moving_to``."""

    def __init__(self) -> None:
        self.placed: dict[str, tuple[str, int]] = {}
        self.moving_to: dict[str, str] = {}

    def cell_of(self, tenant_id: str) -> str | None:
        return self.placed[tenant_id][0] if tenant_id in self.placed else None

    def moving(self, tenant_id: str, to_cell: str | None) -> None:
        if to_cell is None:
            self.moving_to.pop(tenant_id, None)
        else:
            self.moving_to[tenant_id] = to_cell

    def place(self, tenant_id: str, cell_id: str) -> int:
        cell, epoch = self.placed.get(tenant_id, ("", 0))
        if cell != cell_id:
            self.placed[tenant_id] = (cell_id, epoch + 1)
        self.moving_to.pop(tenant_id, None)
        return self.placed[tenant_id][1]


@dataclass
class CellStack:
    """What one cell's stack has that the other's does not."""

    cell_id: str
    table: str
    key_arn: str
    plans: dict[str, str]
    stack: str

    def dedicated_table(self, tenant_id: str) -> str:
        return dedicated.table_name(self.table, tenant_id)


@dataclass
class Populated:
    """What :meth:`Cells.populate` made of a tenant."""

    tickets: list[str]
    webhook: str
    secret: str
    idempotent_ticket: str


@dataclass
class Cells:
    api: Api
    dynamodb: DynamoDBClient
    clock: FakeClock
    stacks: dict[str, CellStack] = field(default_factory=dict)
    directory: MemoryDirectory = field(default_factory=MemoryDirectory)
    routes: FakeStore = field(default_factory=FakeStore)
    log: io.StringIO = field(default_factory=io.StringIO)
    # How far the operator's machine's clock is off (the mover must not care).
    skew: float = 0.0
    # Each cell's operator clients (one account here: the same moto behind them, as distinct targets).
    _operators: dict[str, dict[str, Any]] = field(default_factory=dict)
    _harnesses: dict[tuple[str, str], StreamHarness] = field(default_factory=dict)

    def __post_init__(self) -> None:
        a_table = str(table_definition()["TableName"])
        self.stacks[CELL_A] = CellStack(CELL_A, a_table, webhook_key_arn(), stack_usage_plans(), STACK_NAME)
        self.dynamodb.create_table(**{**table_definition(), "TableName": B_TABLE})
        b_key = boto3.client("kms", region_name=REGION).create_key(Description="cell-b WebhookSecretsKey")
        apigateway = boto3.client("apigateway", region_name=REGION)
        b_plans = {tier: apigateway.create_usage_plan(name=f"{B_STACK}-{tier}")["id"] for tier in TIERS}
        self.stacks[CELL_B] = CellStack(CELL_B, B_TABLE, b_key["KeyMetadata"]["Arn"], b_plans, B_STACK)
        for cell in self.stacks:
            self._operators[cell] = {
                service: boto3.client(service, region_name=REGION) for service in ("dynamodb", "apigateway", "kms")
            }

    # ------------------------------------------------------------ each cell's operator
    def keys(self, cell: str) -> ApiKeys:
        stack = self.stacks[cell]
        return ApiKeys(self._operators[cell]["apigateway"], stack.plans, stack.stack)

    def admin(self, cell: str) -> TenantAdmin:
        return TenantAdmin(
            self._operators[cell]["dynamodb"],
            self.stacks[cell].table,
            phase_seconds=35,
            sleep=lambda seconds: self.clock.sleep(seconds),  # noqa: PLW0108 (the clock's sleep then: a test wraps it)
            clock=lambda: self.clock() + self.skew,
            keys=self.keys(cell),
        )

    def cell(self, cell: str) -> Cell:
        stack = self.stacks[cell]
        return Cell(
            cell,
            self.admin(cell),
            keys=self.keys(cell),
            kms=self._operators[cell]["kms"],
            webhook_key_arn=stack.key_arn,
            deploy=partial(dedicated_table_in_moto, pool_table=stack.table),
        )

    def mover(self, to: str, checkpoint: Callable[[str], None] | None = None) -> CellMover:
        mover = CellMover(
            self.admin(to),
            cells={cell: self.cell(cell) for cell in self.stacks},
            directory=self.directory,
            publish=partial(publish_tenant_route, self.routes, ROUTES_ARN),
            workers=1,
            drain_seconds=0,
            stream=self.log,
            # A short authorizer cache, as the local stack may run with (its state's authorizer_cache_seconds):
            # each second waited is a heartbeat's share of the test's time.
            authorizer_cache_seconds=AUTHORIZER_CACHE_SECONDS,
        )
        mover.monotonic = self.clock
        if checkpoint is not None:
            mover.checkpoint = checkpoint
        return mover

    def move(
        self, tenant: str, to: str, placement: str | None = None, checkpoint: Callable[[str], None] | None = None
    ) -> Outcome:
        mover = self.mover(to, checkpoint)
        mover.placement = placement
        try:
            return mover.move(tenant, to)
        finally:
            _clear_container_caches()  # what every container's cache does within a second

    # ------------------------------------------------------------ each cell's functions
    @contextmanager
    def in_cell(self, cell: str) -> Iterator[None]:
        """Code run here runs as ``cell``'s functions (fresh containers of it)."""
        stack = self.stacks[cell]
        names = {"TABLE_NAME": stack.table, "WEBHOOK_KEY_ARN": stack.key_arn, "CELL_ID": cell}
        before = {name: os.environ.get(name) for name in names}
        os.environ.update(names)
        _clear_container_caches()
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            _clear_container_caches()

    def tables(self, cell: str) -> list[str]:
        """The cell's pool table and the dedicated tables made in it."""
        pool = self.stacks[cell].table
        names = self.dynamodb.list_tables()["TableNames"]
        return [pool, *(name for name in names if name.startswith(dedicated.table_name(pool, "")))]

    def deliver_streams(self) -> None:
        """Every table's new stream records, through the aggregator and the audit
        writer of the table's cell (a harness reads a table from its first record)."""
        streams = boto3.client("dynamodbstreams", region_name=REGION)
        for cell in self.stacks:
            with self.in_cell(cell):
                for table in self.tables(cell):
                    for function in STREAM_FUNCTIONS:
                        harness = self._harnesses.get((function, table))
                        if harness is None:
                            harness = StreamHarness.of(function, self.dynamodb, streams, table)
                            self._harnesses[(function, table)] = harness
                        harness.deliver(harness.new_records())

    def populate(self, tenant: str, cell: str) -> Populated:
        """Every kind of item of ``tenant`` in ``cell``'s pool, through its API and
        stream functions (a delivery, a parked message and a usage counter put as
        their functions write them)."""
        with self.in_cell(cell):
            self.admin(cell).ensure(tenant)
            member, root = User(tenant, f"alice-{tenant}"), User(tenant, f"root-{tenant}", admin=True)
            ids = [self.api.new_ticket(member, title=f"{tenant} {n}")["ticket_id"] for n in range(3)]
            assert self.api.comment(member, ids[0], {"body": "c"}).status == 201
            assert self.api.update(member, ids[0], {"status": "CLOSED"}).ok
            once = self.api.create(member, {"title": "once"}, headers={"Idempotency-Key": "k"})
            assert once.status == 201
            assert self.api.delete(root, ids[-1]).status == 204
            hook = self.api.call("webhook_create", root, body=ROUTES["webhook_create"].body(""))
            assert hook.status == 201, hook.body
            webhook = str(hook.body["webhook_id"])
            pool = self.stacks[cell].table
            self.dynamodb.put_item(TableName=pool, Item=delivery_item(tenant, webhook))
            parked = keys.webhook_parked_pk(tenant, webhook)
            self.dynamodb.put_item(
                TableName=pool, Item={"pk": {"S": parked}, "sk": {"S": "CIRCUIT"}, "parked": {"N": "1"}}
            )
            self.dynamodb.put_item(
                TableName=pool, Item={"pk": {"S": parked}, "sk": {"S": "PARKED#0001"}, "message": {"S": "{}"}}
            )
            usage = {"pk": {"S": keys.usage_pk(tenant)}, "sk": {"S": keys.usage_sk(USAGE_DAY, USAGE_SLOT)}}
            self.dynamodb.put_item(TableName=pool, Item={**usage, "requests": {"N": "7"}})
        self.deliver_streams()
        self.delivered(tenant, cell)
        tenant_configs().clear()
        return Populated(ids[:-1], webhook, str(hook.body["secret"]), str(once.body["ticket_id"]))

    def delivered(self, tenant: str, cell: str) -> None:
        """The tenant's queued deliveries in ``cell`` delivered, as its delivery function
        records a 200 (each ``DELIVERED`` after one attempt) and lets its message go:
        what :meth:`populate`'s own events leave once their receiver answered."""
        pool = self.stacks[cell].table
        records = DeliveryRecords(TenantTable(tenant, pool, OwnClient(self.dynamodb)))
        prefix = keys.tenant_prefix(tenant)
        for item in all_items(self.dynamodb, pool):
            row = from_item(item)
            if not (item["pk"]["S"].startswith(prefix) and item["sk"]["S"].startswith(keys.DELIVERY_SK_PREFIX)):
                continue
            if row.get("status") != PENDING or row.get("attempts"):
                continue
            fields = ("delivery_id", "webhook_id", "event_id", "type", "ticket_id")
            records.record_attempt(
                Attempt(
                    **{name: str(row[name]) for name in fields},
                    body=str(row["event"]),
                    status=DELIVERED,
                    status_code=200,
                    next_attempt_at=None,
                    at=str(row["created_at"]),
                    expiration=int(row["expiration"]),
                )
            )
        sqs = boto3.client("sqs", region_name=REGION)
        for message in receive():
            if read_queue_message(message["body"])[2].get("tenant_id") == tenant:
                sqs.delete_message(QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=message["receiptHandle"])
            else:
                sqs.change_message_visibility(
                    QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=message["receiptHandle"], VisibilityTimeout=0
                )

    def items(self, cell: str, tenant: str) -> list[dict[str, Any]]:
        """Every item of ``tenant`` in every table of ``cell``."""
        prefix = keys.tenant_prefix(tenant)
        return [
            item
            for table in self.tables(cell)
            for item in all_items(self.dynamodb, table)
            if item["pk"]["S"].startswith(prefix)
        ]


def without_secrets(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items with their webhook secrets' ciphertext taken out (each cell's is its own key's)."""
    return [{name: value for name, value in item.items() if name not in SECRETS} for item in items]
