"""What the move tests share (tests/functional/test_ops_move.py, test_cell_move.py):
the world's clock, a mover killed at a step, a dedicated table made in moto, and
a tenant's items in a table as a move sees them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from unittest import mock

import boto3
import botocore.client

from local_stack.local_values import offline_values
from ops.reconcile import recount, stored_counts
from stack_model import dedicated
from stack_model.template import REGION, table_protections
from support_tickets.core import keys
from support_tickets.core.keys import TicketStatus
from tests.conftest import all_items

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

POOL_VALUES = offline_values(user_pool_id="p", client_id="c", identity_pool_id="i")
WAIT_S = 30  # a generous bound for a thread to reach a point; never a sleep
WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


class FakeClock:
    """The time of the world (moto's: its responses' Date headers and its stream
    records' ApproximateCreationDateTime follow it: the move tests patch moto with it) and the
    mover's monotonic clock: its sleeps pass at once. Starts ten minutes behind
    the real time (the days it reads are still the audit writer's)."""

    def __init__(self) -> None:
        self.now = time.time() - 600
        # Run once at the next sleep (what happens while the mover waits).
        self.meanwhile: list[Callable[[], None]] = []

    def __call__(self) -> float:
        return self.now

    def utc(self) -> datetime:
        """What moto takes for now (naive UTC)."""
        return datetime.fromtimestamp(self.now, UTC).replace(tzinfo=None)

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        while self.meanwhile:
            self.meanwhile.pop(0)()


class Stop(RuntimeError):
    """The mover was killed here."""


def kill_at(step: str) -> Callable[[str], None]:
    """A checkpoint that kills the mover when it reaches ``step``."""

    def checkpoint(reached: str) -> None:
        if reached == step:
            raise Stop(step)

    return checkpoint


def dedicated_table_in_moto(tenant_id: str, pool_table: str | None = None) -> str:
    """What ``ops.dedicated`` deploys, made in moto from the dedicated template
    (beside ``pool_table``: the template's by default)."""
    client = boto3.client("dynamodb", region_name=REGION)
    (resource,) = dedicated.dedicated_resources("AWS::DynamoDB::Table").values()
    pool_values = POOL_VALUES
    if pool_table is not None:
        parameters = {"TableName": pool_table}
        pool_values = offline_values(user_pool_id="p", client_id="c", identity_pool_id="i", parameters=parameters)
    values = dedicated.dedicated_values(tenant_id, pool_values)
    definition = dedicated.table_definition(values)
    if definition["TableName"] not in client.list_tables()["TableNames"]:
        client.create_table(**definition, **table_protections(values.resolve({"Tags": resource["Properties"]["Tags"]})))
    return str(definition["TableName"])


def not_copied(tenant_id: str) -> set[str]:
    """The partitions a move leaves behind (ops.move's docstring)."""
    return {
        keys.tenant_config_key(tenant_id)["pk"]["S"],
        *keys.usage_partitions(tenant_id),
        keys.aggregate_pk(tenant_id),
        *keys.aggregate_journal_partitions(tenant_id),
        keys.webhook_rate_pk(tenant_id),
        *keys.move_mark_partitions(tenant_id),
    }


def items_of(dynamodb: DynamoDBClient, table: str, tenant_id: str) -> list[dict[str, Any]]:
    return [item for item in all_items(dynamodb, table) if item["pk"]["S"].startswith(keys.tenant_prefix(tenant_id))]


def copied_items(dynamodb: DynamoDBClient, table: str, tenant_id: str) -> list[dict[str, Any]]:
    """The tenant's items in ``table`` that a move carries."""
    skipped = not_copied(tenant_id)
    return [item for item in items_of(dynamodb, table, tenant_id) if item["pk"]["S"] not in skipped]


def counts_in(dynamodb: DynamoDBClient, table: str, tenant_id: str) -> dict[TicketStatus, int]:
    stored = stored_counts(dynamodb, table, tenant_id)
    return {status: stored[status][0] for status in TicketStatus}


def recounted(dynamodb: DynamoDBClient, table: str, tenant_id: str) -> dict[TicketStatus, int]:
    return {status: recount(dynamodb, table, tenant_id, status, [1]) for status in TicketStatus}


class HeldWrite:
    """A request made on a thread of its own whose DynamoDB writes wait, once on
    their way, until :meth:`release` (a read timeout and the SDK's retry do that):
    its function read the tenant's record before, its write lands after. Its answer
    is :attr:`answers`' one item; the writes wait only within :meth:`holding`."""

    def __init__(self, request: Callable[[], Any]) -> None:
        self.answers: list[Any] = []
        self._held, self._released = threading.Event(), threading.Event()
        self._writer = threading.Thread(target=lambda: self.answers.append(request()))

    def start(self) -> None:
        """The request runs until its first write is on its way, not landed."""
        self._writer.start()
        assert self._held.wait(WAIT_S)

    def release(self) -> None:
        self._released.set()
        self._writer.join(WAIT_S)

    @contextmanager
    def holding(self) -> Iterator[None]:
        make_api_call = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009 - private on purpose

        def delayed(client: Any, operation: str, params: Any) -> Any:
            if threading.current_thread() is self._writer and operation in WRITE_OPERATIONS:
                self._held.set()
                assert self._released.wait(WAIT_S)
            return make_api_call(client, operation, params)

        with mock.patch.object(botocore.client.BaseClient, "_make_api_call", delayed):
            yield
