"""The stream aggregator on one large batch: ours (per chunk of up to 99
(tenant, status) pairs, one transaction: one ADD per pair and the delivery's
journal) against one ADD per count change.

Records are synthesized in exactly the shape Lambda delivers DynamoDB stream
records (``local_stack.event_sources.stream_sources.lambda_record``'s output), with fresh
event ids every run, so both designs count every record (ours on its fast
path, as for any first delivery). Each run uses its own tenants. After the
runs, the sizes of the items the aggregator keeps are read back: its count
items and its journals (bounded by the batch size, whatever the change rate). The handler
is the real ``functions/aggregate_counts`` one, with the aggregator's own
role credentials, writing to the emulator over loopback.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import boto3
from boto3.dynamodb.types import TypeSerializer

from bench.calls import CallRecorder
from bench.naive import NaiveAggregator
from bench.stackproc import StackProcess
from bench.stats import summary
from bench.warm import progress, quiet_stdout
from local_stack.lambda_.runtime import LambdaContext, environment
from stack_model.capacity import CapacityMeter, TableShape, item_size
from stack_model.functions import FunctionSpec, load_handler
from support_tickets.core import keys
from support_tickets.streams.aggregation import aggregator_client

AGGREGATOR = "AggregateCountsFunction"
STATUSES = ("OPEN", "IN_PROGRESS", "CLOSED")
_serializer = TypeSerializer()


def _image(tenant_id: str, ticket_id: str, status: str, version: int) -> dict[str, Any]:
    now = "2026-01-01T10:00:00.000Z"
    item = {
        "pk": f"TENANT#{tenant_id}|TICKET#{ticket_id}",
        "sk": "SUMMARY",
        "tenant_status": f"TENANT#{tenant_id}|{status}",
        "resolver": "johnd",
        "ticket_id": ticket_id,
        "title": "Printer on fire",
        "description": "Benchmark ticket. " * 8,
        "created_by": "alice",
        "created_at": now,
        "updated_at": now,
        "version": version,
    }
    return {name: _serializer.serialize(value) for name, value in item.items()}


def synthesize(records: int, tenants: list[str], seed: int, stream_arn: str) -> tuple[list[dict[str, Any]], int]:
    """``records`` ticket-summary records spread over ``tenants``: new tickets
    (INSERT), status changes and edits (MODIFY), deletes (REMOVE). Returns the
    records and the number of distinct (tenant, status) pairs they touch."""
    rng = random.Random(seed)
    state: dict[str, tuple[str, str, int]] = {}  # ticket id -> (tenant, status, version)
    made: list[dict[str, Any]] = []
    pairs: set[tuple[str, str]] = set()
    sequence = 10**20 + seed * 10**7
    created = int(time.time())
    while len(made) < records:
        tenant = tenants[len(made) % len(tenants)]
        own = [ticket for ticket, (owner, _, _) in state.items() if owner == tenant]
        roll = rng.random()
        if not own or roll < 0.4:
            ticket, status, version, event = uuid.uuid4().hex[:26], "OPEN", 1, "INSERT"
            old, new = None, _image(tenant, ticket, status, version)
            pairs.add((tenant, status))
        else:
            ticket = rng.choice(own)
            _, status, version = state[ticket]
            if roll < 0.85:
                moved = rng.choice([other for other in STATUSES if other != status]) if roll < 0.75 else status
                event = "MODIFY"
                old, new = _image(tenant, ticket, status, version), _image(tenant, ticket, moved, version + 1)
                if moved != status:
                    pairs.update({(tenant, status), (tenant, moved)})
                status, version = moved, version + 1
            else:
                event = "REMOVE"
                old, new = _image(tenant, ticket, status, version), None
                pairs.add((tenant, status))
        if event == "REMOVE":
            del state[ticket]
        else:
            state[ticket] = (tenant, status, version)
        sequence += 1
        stream: dict[str, Any] = {
            "ApproximateCreationDateTime": created,
            "Keys": {"pk": {"S": f"TENANT#{tenant}|TICKET#{ticket}"}, "sk": {"S": "SUMMARY"}},
            "SequenceNumber": str(sequence),
            "SizeBytes": 600,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        }
        if old is not None:
            stream["OldImage"] = old
        if new is not None:
            stream["NewImage"] = new
        made.append(
            {
                "eventID": uuid.uuid4().hex,
                "eventName": event,
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": stream,
                "eventSourceARN": stream_arn,
            }
        )
    return made, len(pairs)


def run_aggregation(
    stack: StackProcess,
    specs: dict[str, FunctionSpec],
    *,
    records: int,
    tenants: int,
    runs: int,
    tenant_prefix: str,
) -> dict[str, Any]:
    spec = specs[AGGREGATOR]
    env = stack.function_environment(spec)
    table = str(stack.state["table_name"])
    stream_arn = str(stack.state["stream_arn"])
    recorder = CallRecorder()
    recorder.install()
    meter = CapacityMeter(stack.operator("dynamodb"), TableShape.from_template(table))
    measured: dict[str, dict[str, list[float]]] = {
        design: {"seconds": [], "writes": [], "calls": [], "rru": [], "wru": []} for design in ("ours", "naive")
    }
    pairs_per_batch: list[int] = []
    items_written = {"count": 0, "journal": 0}

    def count_items(params: dict[str, Any], **_: Any) -> None:
        for action in params.get("TransactItems", []):
            items_written["journal" if "Put" in action else "count"] += 1

    used_tenants: list[str] = []
    try:
        with environment(env), quiet_stdout():
            # One process plays several functions: the aggregator's client must
            # resolve the aggregator role's credentials, not a session's cached ones.
            boto3.DEFAULT_SESSION = None
            aggregator_client.cache_clear()
            ours = load_handler(spec.code_uri, spec.handler, module_name="_bench_aggregator")
            naive = NaiveAggregator(aggregator_client(), table)
            aggregator_client().meta.events.register("provide-client-params.dynamodb.TransactWriteItems", count_items)
            handlers: dict[str, Callable[[dict[str, Any], Any], Any]] = {"ours": ours, "naive": naive}
            for design, handler in handlers.items():  # warm containers: clients built, code paths loaded
                names = [f"{tenant_prefix}-{design}-warmup"]
                warmup = {"Records": synthesize(20, names, seed=10**6, stream_arn=stream_arn)[0]}
                handler(warmup, LambdaContext(AGGREGATOR, spec.memory_mb, spec.timeout_s))
            progress(f"aggregation: {runs} run(s) of {records} records over {tenants} tenants, each design")
            for run in range(runs + 1):  # the last run is sized (capacity units), not timed
                sized = run == runs
                order = ("ours", "naive") if run % 2 == 0 else ("naive", "ours")
                for design in order:
                    names = [f"{tenant_prefix}-{design}-{run}-{number}" for number in range(tenants)]
                    used_tenants.extend(names if design == "ours" else [])
                    batch, pairs = synthesize(records, names, seed=run, stream_arn=stream_arn)
                    event = {"Records": batch}
                    naive.writes = 0
                    items_written.update(count=0, journal=0)
                    recorder.meter = meter if sized else None
                    with recorder.request() as tally:
                        started = time.perf_counter_ns()
                        response = handlers[design](event, LambdaContext(AGGREGATOR, spec.memory_mb, spec.timeout_s))
                        elapsed = (time.perf_counter_ns() - started) / 1e9
                        recorder.meter = None
                    if response["batchItemFailures"]:
                        raise RuntimeError(f"{design} aggregator reported failures: {response}")
                    if not sized:
                        pairs_per_batch.append(pairs)
                    written = {"count": float(naive.writes), "journal": 0.0} if design == "naive" else items_written
                    _record(measured[design], tally, elapsed, written, sized=sized)
    finally:
        recorder.uninstall()
    result = _result(measured, records=records, tenants=tenants, runs=runs, pairs_per_batch=pairs_per_batch)
    result["ours"]["largest_item_bytes"] = _largest_items(stack.operator("dynamodb"), table, used_tenants)
    return result


def _record(
    series: dict[str, list[float]], tally: Any, elapsed: float, written: dict[str, Any], *, sized: bool
) -> None:
    """One run's figures: capacity units for the sized run, times and writes otherwise."""
    if sized:
        series["rru"].append(tally.rru)
        series["wru"].append(tally.wru)
        return
    series["seconds"].append(elapsed)
    series["calls"].append(tally.total)
    series["writes"].append(float(written["count"] + written["journal"]))
    series.setdefault("count_items", []).append(float(written["count"]))
    series.setdefault("journal_items", []).append(float(written["journal"]))


def _result(
    measured: dict[str, dict[str, list[float]]], *, records: int, tenants: int, runs: int, pairs_per_batch: list[int]
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "records_per_batch": records,
        "tenants": tenants,
        "runs": runs,
        "pairs_per_batch": sorted(set(pairs_per_batch)),
    }
    for design, series in measured.items():
        seconds = summary(series["seconds"])
        result[design] = {
            "batch_seconds": seconds,
            "records_per_second": round(records / seconds["median"], 1),
            "dynamodb_writes_per_batch": sorted(set(series["writes"])),
            "aws_calls_per_batch": sorted(set(series["calls"])),
            "rru_per_batch": series["rru"][0],
            "wru_per_batch": series["wru"][0],
        }
    result["ours"]["count_items_per_batch"] = sorted(set(measured["ours"].get("count_items", [])))
    result["ours"]["journal_items_per_batch"] = sorted(set(measured["ours"].get("journal_items", [])))
    result["ours"]["items_written_per_record"] = round(
        sum(measured["ours"]["writes"]) / (records * max(1, len(measured["ours"]["writes"]))), 4
    )
    result["ours_over_naive_records_per_second"] = round(
        result["ours"]["records_per_second"] / result["naive"]["records_per_second"], 2
    )
    return result


def _largest_items(client: Any, table: str, tenants: list[str]) -> dict[str, int]:
    """The largest count item and journal the aggregator left for ``tenants``."""
    largest = {"count_item": 0, "journal": 0}
    partitions = [(keys.aggregate_pk(tenant), "count_item") for tenant in tenants]
    partitions += [
        (f"{keys.aggregate_pk(tenant)}#JOURNAL#{n}", "journal")
        for tenant in tenants
        for n in range(keys.AGGREGATE_JOURNAL_PARTITIONS)
    ]
    for pk, kind in partitions:
        query: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}},
        }
        for item in client.query(**query)["Items"]:
            largest[kind] = max(largest[kind], item_size(item))
    return largest
