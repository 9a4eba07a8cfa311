"""Partition heat of a hot tenant: the busiest partition key of the table and
of GSI1, for 1, 4 and 16 GSI1 shards, against DynamoDB's 1,000 WCU/s per
partition.

One simulated second of a hot tenant's traffic (``CREATES_PER_SECOND``
idempotent creates and ``STATUS_CHANGES_PER_SECOND`` status changes, scaled
down by ``fraction`` and the rates scaled back up) runs through the real
domain code (``support_tickets.domain.tickets``: tenant session, tenant record,
repositories), then the real stream aggregator over the stream records it
produced, all in-process over moto with the table from ``template.yaml``.
Every DynamoDB write is recorded with botocore hooks and sized as DynamoDB
bills it (``stack_model.capacity``): the table partition it lands on and, when GSI1
changes, the index partitions it removes from and adds to. Writes are
attributed to partition *keys*; DynamoDB may split a hot key's partition by
sort key only for the table, never across one GSI1 key's items in the same
way, so a key over 1,000 WCU/s is the limit that matters.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3

from bench.calls import CallRecorder
from bench.warm import progress, quiet_stdout
from stack_model.capacity import TRANSACTION_FACTOR, CapacityMeter, TableShape, item_size, write_units

if TYPE_CHECKING:
    from local_stack.cognito.identity_pool import SigningUserPool
    from support_tickets.core.identity import Caller

CREATES_PER_SECOND = 3000
STATUS_CHANGES_PER_SECOND = 1000
SHARD_COUNTS = (1, 4, 16)
PARTITION_WCU_PER_SECOND = 1000
POOL = 100  # existing open tickets the status changes pick from (at most; fewer for a small fraction)
TENANT = "hot"
# The in-process user pool and identity pool the simulated callers' tokens come from.
USER_POOL_ID = "us-east-1_bench"
CLIENT_ID = "benchclient"
IDENTITY_POOL_ID = "us-east-1:00000000-0000-4000-8000-0000000be0c0"


class PartitionHeat(CapacityMeter):
    """A capacity meter that also says which partition key each write unit lands on."""

    def __init__(self, client: Any, shape: TableShape) -> None:
        super().__init__(client, shape)
        self.table: defaultdict[str, float] = defaultdict(float)
        self.gsi1: defaultdict[str, float] = defaultdict(float)

    def after(self, operation: str, parsed: Any) -> tuple[float, float]:
        pending = self._pending[-1] if self._pending and self._pending[-1].operation == operation else None
        if pending is not None and "Error" not in parsed and operation not in ("Query", "GetItem"):
            factor = TRANSACTION_FACTOR if operation == "TransactWriteItems" else 1
            for kind, key in self._write_keys(operation, pending.params):
                old = pending.before.get(key)
                new = None if kind in ("Delete", "DeleteItem", "ConditionCheck") else self._get(key)
                self.table[key[0]] += write_units(max(item_size(old), item_size(new)), factor)
                before, after = self.shape.index_entry("GSI1", old), self.shape.index_entry("GSI1", new)
                if before is not None and after is not None and before == after:
                    continue
                if before is not None:
                    self.gsi1[before["tenant_status"]["S"]] += write_units(item_size(before))
                if after is not None:
                    self.gsi1[after["tenant_status"]["S"]] += write_units(item_size(after))
        return super().after(operation, parsed)


FUNCTION_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "IDENTITY_POOL_ID": IDENTITY_POOL_ID,
    "USER_POOL_PROVIDER_NAME": f"cognito-idp.us-east-1.amazonaws.com/{USER_POOL_ID}",
    "FAILURE_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/failures",
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_METRICS_NAMESPACE": "SupportTickets",
    "POWERTOOLS_SERVICE_NAME": "support-tickets",
    "ALLOWED_CLIENT_IDS": CLIENT_ID,
}


@contextmanager
def _functions_environment(table_name: str) -> Iterator[None]:
    """The functions' environment and fresh container caches, for one simulation."""
    from support_tickets.core.settings import get_settings
    from support_tickets.data.session import tenant_clients, token_exchange
    from support_tickets.data.tenant_registry import tenant_configs
    from support_tickets.streams.aggregation import aggregator_client

    environment = {**FUNCTION_ENVIRONMENT, "TABLE_NAME": table_name}
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    for cached in (get_settings, token_exchange, tenant_clients, aggregator_client, tenant_configs):
        cached.cache_clear()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _requests(rng: random.Random, fraction: float, pool: list[str], seed: int) -> None:
    """One (scaled) second of the hot tenant's API traffic, through the domain code."""
    from support_tickets.core.keys import TicketStatus
    from support_tickets.core.models import CreateTicketRequest, UpdateTicketRequest
    from support_tickets.domain import tickets

    users = [_caller(f"agent{n}") for n in range(20)]
    statuses = [TicketStatus.IN_PROGRESS, TicketStatus.CLOSED, TicketStatus.OPEN]
    work = ["create"] * max(1, round(CREATES_PER_SECOND * fraction))
    work += ["change"] * max(1, round(STATUS_CHANGES_PER_SECOND * fraction))
    rng.shuffle(work)
    for number, kind in enumerate(work):
        caller = rng.choice(users)
        if kind == "create":
            request = CreateTicketRequest(title=f"hot {number}", resolver=rng.choice([None, "ann", "bob"]))
            tickets.create_ticket(caller, request, idempotency_key=f"k-{seed}-{number}")
        else:
            tickets.update_ticket(caller, rng.choice(pool), UpdateTicketRequest(status=rng.choice(statuses)), None)


@cache
def _user_pool() -> SigningUserPool:
    from local_stack.cognito.identity_pool import SigningUserPool

    return SigningUserPool(USER_POOL_ID, CLIENT_ID)


@cache
def _caller(username: str) -> Caller:
    """A caller of the hot tenant with a token of the in-process user pool (its
    credentials come from the in-process identity pool, as in production)."""
    from stack_model.events import authorizer_context
    from support_tickets.core.identity import IdToken, caller_from_context, token_payload
    from support_tickets.data.session import token_exchange

    token = _user_pool().id_token(TENANT, username)
    payload = token_payload(token) or {}
    # What the authorizer passes: the in-process identity pool's credentials for the token.
    credentials = token_exchange().credentials(IdToken(token, str(payload["sub"]), int(payload["exp"])))
    context = authorizer_context(payload, credentials=credentials)
    return caller_from_context(context, {CLIENT_ID}, f"Bearer {token}")


def _aggregate(records: list[dict[str, Any]]) -> None:
    """The stream function over the records the requests produced, in its batches."""
    from local_stack.event_sources.stream_sources import stream_source
    from local_stack.lambda_.runtime import LambdaContext
    from stack_model.functions import function_specs, load_handler

    source = stream_source()
    passed = [record for record in records if source.matches(record)]
    spec = function_specs()["AggregateCountsFunction"]
    aggregator = load_handler(spec.code_uri, spec.handler, module_name="_bench_heat_aggregator")
    for start in range(0, len(passed), source.batch_size):
        aggregator({"Records": passed[start : start + source.batch_size]}, LambdaContext(spec.logical_id))


def _simulate(shards: int, fraction: float, seed: int) -> dict[str, Any]:
    from moto import mock_aws

    from local_stack.cognito import identity_pool
    from local_stack.emulator import moto_fixes
    from local_stack.event_sources.stream_sources import lambda_record
    from ops.tenants import TenantAdmin
    from stack_model.template import table_definition
    from support_tickets.core.models import CreateTicketRequest
    from support_tickets.domain import tickets

    moto_fixes.apply()
    rng = random.Random(seed)
    definition = table_definition()
    table_name = str(definition["TableName"])
    recorder = CallRecorder()
    recorder.install()  # before any session exists: every client gets the hooks
    try:
        with _functions_environment(table_name), mock_aws(), quiet_stdout():
            operator = boto3.client("dynamodb", region_name="us-east-1")
            operator.create_table(**definition)
            boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="failures")
            # A new table no function has read: no phase to wait out (with phase_seconds=0 the
            # reshard would still sleep until the next whole second, twice).
            TenantAdmin(operator, table_name, phase_seconds=0.0, sleep=lambda _: None).reshard(TENANT, shards)
            identity_pool.register(_user_pool().identity_pool(IDENTITY_POOL_ID))
            owner = _caller("agent0")
            pool_size = max(5, min(POOL, round(STATUS_CHANGES_PER_SECOND * fraction * 2)))
            pool = [
                tickets.create_ticket(owner, CreateTicketRequest(title=f"pool {n}")).ticket_id for n in range(pool_size)
            ]
            streams = boto3.client("dynamodbstreams", region_name="us-east-1")
            stream_arn = operator.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
            iterator = _latest_iterator(streams, stream_arn)
            heat = PartitionHeat(operator, TableShape.from_template(table_name))
            recorder.meter = heat
            with recorder.request():
                _requests(rng, fraction, pool, seed)
                _aggregate(_read_stream(streams, iterator, stream_arn, lambda_record))
    finally:
        recorder.uninstall()
    scale = 1 / fraction
    table_ranked = sorted(heat.table.items(), key=lambda entry: -entry[1])
    table_top, gsi_top = table_ranked[0], max(heat.gsi1.items(), key=lambda entry: entry[1])
    return {
        "shards": shards,
        "requests_per_second": {"creates": CREATES_PER_SECOND, "status_changes": STATUS_CHANGES_PER_SECOND},
        "table": {"key": table_top[0], "wcu_per_second": round(table_top[1] * scale)},
        "gsi1": {"key": gsi_top[0], "wcu_per_second": round(gsi_top[1] * scale)},
        "gsi1_keys_written": len(heat.gsi1),
        "table_top5": [(key, round(units * scale)) for key, units in table_ranked[:5]],
    }


def _latest_iterator(streams: Any, stream_arn: str) -> str:
    (shard,) = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    iterator: str = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
    )["ShardIterator"]
    return iterator


def _read_stream(streams: Any, iterator: str, stream_arn: str, convert: Any) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    while True:
        page = streams.get_records(ShardIterator=iterator)
        records.extend(convert(record, stream_arn) for record in page["Records"])
        iterator = page.get("NextShardIterator")
        if not page["Records"] or not iterator:
            return records


def run_heat(*, fraction: float, seed: int = 1) -> dict[str, Any]:
    rows = []
    for shards in SHARD_COUNTS:
        progress(f"partition heat: {shards} shard(s), {fraction:g} of a second of a hot tenant")
        rows.append(_simulate(shards, fraction, seed))
    return {
        "fraction_simulated": fraction,
        "partition_limit_wcu_per_second": PARTITION_WCU_PER_SECOND,
        "rows": rows,
        "note": (
            f"How: a tenant sending {CREATES_PER_SECOND:,} idempotent creates/s and {STATUS_CHANGES_PER_SECOND:,} "
            "status changes/s through the real domain code and stream aggregator, in-process, each write's key "
            "recorded and sized as DynamoDB bills it (transactional writes twice). The table's busiest keys are "
            "each ticket's own and the tenant's aggregate partition; GSI1's are the status lists, which sharding "
            "spreads."
        ),
    }


def markdown(heat: dict[str, Any]) -> list[str]:
    limit = heat["partition_limit_wcu_per_second"]
    lines = [
        "## Partition heat: one hot tenant",
        "",
        "| GSI1 shards | busiest table key | its WCU/s | busiest GSI1 key | its WCU/s | vs 1,000 WCU/s |",
        "|---:|---|---:|---|---:|---|",
    ]
    for row in heat["rows"]:
        worst = max(row["table"]["wcu_per_second"], row["gsi1"]["wcu_per_second"])
        verdict = "**over**" if worst > limit else "under"
        lines.append(
            f"| {row['shards']} | `{row['table']['key']}` | {row['table']['wcu_per_second']:,} "
            f"| `{row['gsi1']['key']}` | {row['gsi1']['wcu_per_second']:,} | {verdict} ({worst / limit:.0%}) |"
        )
    lines += ["", heat["note"], ""]
    return lines
