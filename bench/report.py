"""results.json and the Markdown tables (results.md, printed by make bench)."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from bench.authorizer import markdown as authorizer_markdown
from bench.cell_move import cell_move_markdown
from bench.charts import CHART_TITLES
from bench.cost import cells_cost, dedicated_fixed_cost, perimeter_fixed_cost
from bench.heat import markdown as heat_markdown
from bench.isolation import isolation_markdown
from bench.move import move_markdown
from stack_model.capacity import ASSUMPTIONS


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()  # noqa: S607
    except (OSError, subprocess.CalledProcessError):
        nproc = str(os.cpu_count())
    return {
        "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": nproc,
        "cpu": cpu,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "command": "make bench",
    }


def _ms(figures: dict[str, float]) -> str:
    return f"{figures['median']:.1f} / {figures['p95']:.1f}"


def _calls(value: float) -> str:
    return f"{value:g}"


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    warm = results["warm"]
    made = []
    credential = max(route["ours"]["max_credential_calls_in_a_request"] for route in warm)
    made.append(
        {
            "goal": "0 credential calls (Cognito, STS) on a warm request with a known token (ours, every route)",
            "met": credential == 0,
            "measured": credential,
        }
    )
    reads = {
        route["route"]: route["ours"].get(
            "dynamodb_calls_in_most_requests", route["ours"]["max_dynamodb_calls_in_a_request"]
        )
        for route in warm
        if route["read_only"] and not route.get("scatter")
    }
    scatter = {
        route["route"]: route["ours"]["dynamodb_calls_in_most_requests"] for route in warm if route.get("scatter")
    }
    refreshes = {route["route"]: route["ours"].get("requests_with_a_tenant_record_read", 0) for route in warm}
    made.append(
        {
            "goal": "exactly one DynamoDB call per read request (plus the tenant record, once per 30 s per container; "
            "the tenant's trail reads each of its 8 partitions per day of its window, then only those a page "
            "needs more of)",
            "met": all(count == 1 for count in reads.values()),
            "measured": {
                "calls": reads,
                "trail_calls_per_request": scatter,
                "requests_that_re_read_the_tenant_record": refreshes,
            },
        }
    )
    by_route = {route["route"]: route["ours"]["latency_ms"]["median"] for route in warm}
    patch = by_route.get("PATCH /tickets/{id}")
    transactions = {
        name: value
        for name, value in by_route.items()
        if name.startswith(("POST /tickets/{id}/comm", "POST /tickets/status"))
    }
    if patch and transactions:
        tickets = results.get("table", {}).get("tickets", 0)
        ratios = {name: round(value / patch, 2) for name, value in transactions.items()}
        made.append(
            {
                "goal": f"comment and 10-ticket status change p50 <= 3x a PATCH's, {tickets:,} tickets in the table",
                "met": all(ratio <= 3 for ratio in ratios.values()),
                "measured": ratios,
            }
        )
    cold = results.get("cold")
    if cold:
        over = {name: row["over_floor"] for name, row in cold["functions"].items()}
        basis = (
            "instructions executed, callgrind"
            if cold.get("ratio_basis") == "instructions"
            else "milliseconds, median (valgrind not installed)"
        )
        made.append(
            {
                "goal": f"cold start as shipped, every function <= 1.5x the floor (import + first request, {basis})",
                "met": all(value <= 1.5 for value in over.values()),
                "measured": over,
            }
        )
    aggregation = results["aggregation"]
    counted, pairs = aggregation["ours"]["count_items_per_batch"], aggregation["pairs_per_batch"]
    # A delivery is applied in chunks of at most 250 records, each with its own
    # journal item (a Lambda batch, BatchSize <= 250, is one chunk): the bound
    # is per chunk.
    chunks = max(aggregation["ours"].get("journal_items_per_batch") or [1])
    made.append(
        {
            "goal": "aggregation: at most one count write per distinct (tenant, status) pair per chunk of at most "
            "250 records (one chunk = one journal item; a Lambda batch of the template's BatchSize is one chunk)",
            "met": all(count <= max(pairs) * chunks for count in counted),
            "measured": {"count_writes": counted, "pairs": pairs, "chunks": chunks},
        }
    )
    if "heat" in results:
        by_shards = {
            row["shards"]: max(row["table"]["wcu_per_second"], row["gsi1"]["wcu_per_second"])
            for row in results["heat"]["rows"]
        }
        made.append(
            {
                "goal": "hot tenant: some shard count keeps every partition key under 1,000 WCU/s",
                "met": min(by_shards.values()) < results["heat"]["partition_limit_wcu_per_second"],
                "measured": by_shards,
            }
        )
    largest = aggregation["ours"]["largest_item_bytes"]
    made.append(
        {
            "goal": "aggregator bookkeeping: every item under 40 KB",
            "met": max(largest.values()) < 40_000,
            "measured": largest,
        }
    )
    hang = results.get("webhooks", {}).get("hang")
    if hang and not hang["quick"]:
        alone, beside = hang["alone"]["delay_ms"], hang["hanging"]
        made.append(
            {
                "goal": f"webhooks: while a {hang['tier']} tenant's endpoint hangs (its events at its tier's rate, "
                f"then its bound kept held), it has at most its {hang['in_flight']} attempts in flight and another "
                "tenant's delivery delay p50 and p99 "
                f"stay within {HANG_DELAY_GOAL_MS / 1000:g} s of their baseline",
                "met": beside["a_most_held"] <= hang["in_flight"]
                and beside["delay_ms"]["p50"] - alone["p50"] <= HANG_DELAY_GOAL_MS
                and beside["delay_ms"]["p99"] - alone["p99"] <= HANG_DELAY_GOAL_MS,
                "measured": {
                    "most_in_flight": beside["a_most_held"],
                    "p50_ms": [alone["p50"], beside["delay_ms"]["p50"]],
                    "p99_ms": [alone["p99"], beside["delay_ms"]["p99"]],
                },
            }
        )
    if "metering" in results:
        overhead = {row["route"]: row["overhead"] for row in results["metering"]["overhead"]}
        made.append(
            {
                "goal": "per-tenant metering adds under 2% to the warm path (the function's CPU time, median; "
                "ReturnConsumedCapacity and the usage fields)",
                "met": max(overhead.values()) < METERING_OVERHEAD_GOAL,
                "measured": overhead,
            }
        )
    return made


METERING_OVERHEAD_GOAL = 0.02
# "Within a few seconds of its baseline" (docs/webhooks.md): the delay goal beside a hanging endpoint.
HANG_DELAY_GOAL_MS = 3000


def metering_markdown(metering: dict[str, Any]) -> list[str]:
    """The per-tenant metering's own cost and its warm-path overhead (docs/usage.md)."""
    lines, delivered, cost = metering["line_bytes"], metering["deliveries"], metering["cost_per_million_requests"]
    when = metering.get("machine")
    made = [
        "## Per-tenant metering: its own cost and overhead",
        "",
        *([f"Measured {when['date_utc']} (`{when['command']}`).", ""] if when else []),
        "| per million requests | USD |",
        "|---|---:|",
        f"| log ingestion of the usage fields ($0.50/GB) | {cost['log_ingestion']:.4f} |",
        f"| metering function: {cost['assumptions']['invocations']:,} invocations, "
        f"{cost['assumptions']['gb_seconds']:,} GB-s | {cost['lambda']:.4f} |",
        f"| its writes: {cost['assumptions']['wru']:,.0f} WRU | {cost['dynamodb_writes']:.4f} |",
        f"| **total** (API Gateway alone: {cost['api_gateway_for_comparison']:.2f}) | **{cost['total']:.4f}** |",
        "",
        "| route | CPU metered / unmetered p50 ms | overhead (CPU p50) | wall metered / unmetered p50 ms "
        "| overhead (wall p50) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in metering["overhead"]:
        made.append(
            f"| `{row['route']}` | {row['metered_cpu_ms']['median']:.2f} / {row['unmetered_cpu_ms']['median']:.2f} "
            f"| {row['overhead']:+.1%} | {row['metered_ms']['median']:.2f} / {row['unmetered_ms']['median']:.2f} "
            f"| {row['overhead_wall']:+.1%} |"
        )
    return [
        *made,
        "",
        f"A `request handled` line is {lines['with_usage']:,} bytes, {lines['without_usage']:,} without its usage "
        f"fields: **{lines['usage_fields']} bytes more per request**. The metering function "
        f"({delivered['memory_mb']} MB), {delivered['deliveries']} deliveries of {delivered['lines_per_delivery']} "
        f"lines of {delivered['tenants_per_delivery']} tenants each: {_ms(delivered['duration_ms'])} ms per delivery "
        f"(p50 / p95), {delivered['wru_per_delivery']:g} WRU per delivery.",
        "",
        "How: requests interleaved between the shipped path and the same path with the metering off (no "
        "`ReturnConsumedCapacity`, no usage fields), against a local stack started with `--no-capacity-model` "
        "(moto's constant `ConsumedCapacity`, as fast as none, as DynamoDB's); the goal is judged on the function's "
        "own CPU time, what Lambda bills. A delivery writes, per tenant, a transaction of a journal item, a counter "
        "update and a check of the tenant record.",
        "",
    ]


def webhooks_markdown(webhooks: dict[str, Any]) -> list[str]:
    """A webhook delivery's cost and a ticket change's delay to its receiver (docs/webhooks.md)."""
    warm, cost = webhooks["warm"], webhooks["cost_per_million_deliveries"]
    assumed = cost["assumptions"]
    when = webhooks.get("machine")
    calls = ", ".join(f"{count:g} {call}" for call, count in warm["calls_per_delivery"].items())
    return [
        "## Webhook deliveries: cost and delay",
        "",
        *([f"Measured {when['date_utc']} (`{when['command']}`).", ""] if when else []),
        "| per million deliveries | USD |",
        "|---|---:|",
        f"| delivery function: {assumed['invocations']:,} invocations, {assumed['gb_seconds']:,} GB-s "
        f"| {cost['lambda']:.4f} |",
        f"| SQS FIFO: {assumed['sqs_requests_per_delivery']} requests per delivery | {cost['sqs_fifo']:.4f} |",
        f"| DynamoDB: {assumed['rru_per_delivery']:g} RRU and {assumed['wru_per_delivery']:g} WRU per delivery "
        f"| {cost['dynamodb']:.4f} |",
        f"| KMS Decrypt: {assumed['kms_decrypts_per_delivery']} per delivery | {cost['kms_decrypt']:.4f} |",
        f"| **total** | **{cost['total']:.4f}** |",
        f"| each failed attempt adds (per million) | {cost['per_million_retries']:.4f} |",
        "",
        f"The delivery function ({warm['memory_mb']} MB), warm, one message per invocation, {warm['deliveries']} "
        f"deliveries to a receiver on 127.0.0.1: {_ms(warm['duration_ms'])} ms (p50 / p95), per delivery {calls}; "
        f"{warm['rru_per_delivery']:g} RRU and {warm['wru_per_delivery']:g} WRU. {_change_delay(webhooks)}",
        "",
        webhooks["note"],
        "",
        *(freshness_markdown(webhooks["freshness"]) if "freshness" in webhooks else []),
        *(hang_markdown(webhooks["hang"], when) if "hang" in webhooks else []),
        *(parking_markdown(webhooks["parking"]) if "parking" in webhooks else []),
    ]


def _change_delay(webhooks: dict[str, Any]) -> str:
    """A ticket change's delay to its receiver, unless the hang section's first row shows the same figures."""
    if "hang" in webhooks and not webhooks["hang"]["quick"]:
        return (
            "From a ticket change's API response to its event at the receiver: "
            "[below](#another-tenants-delay-while-one-tenants-endpoint-hangs), B alone."
        )
    delay = webhooks["delay_ms"]
    return (
        f"From a ticket change's API response to its event at the receiver ({webhooks['changes']} tickets created "
        f"one at a time, alone): **p50 {delay['p50']:,.0f} ms, p99 {delay['p99']:,.0f} ms** (min "
        f"{delay['min']:,.0f}, max {delay['max']:,.0f})."
    )


def parking_markdown(parking: dict[str, Any]) -> list[str]:
    """A webhook endpoint failing for minutes: what the queue holds for it, what parking costs,
    how fast its lot drains (docs/webhooks.md, "Parking")."""
    phases = parking["phases"]
    healthy, failing, recovering = phases["healthy"], phases["failing"], phases["recovering"]
    rows = [
        ("healthy (204)", healthy, f"{healthy['seconds']} s"),
        ("**failing (500)**", failing, f"{failing['seconds']} s"),
        (
            f"recovering (204, no new events; {recovering['parked_at_start']:,} parked)",
            recovering,
            f"lot drained after {recovering['lot_drained_after_s']} s",
        ),
    ]
    return [
        "### A webhook endpoint failing for minutes: parking",
        "",
        "| phase | simulated | events | **most in flight** | parked at its end | DynamoDB calls / event "
        "| RRU / event | WRU / event |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {label} | {span} | {row['events']:,} | **{row['in_flight_peak']:,}** | "
            f"{row.get('parked_at_end', 0):,} | {row['dynamodb_calls_per_event']:g} | {row['rru_per_event']:g} | "
            f"{row['wru_per_event']:g} |"
            for label, row, span in rows
        ),
        "",
        f"A {parking['tier']} tenant at {parking['rate_per_second']} events a second ({parking['events']:,} events, "
        f"{parking['tickets_with_two_events']:,} tickets with two), {parking['retry_slots']} retry slots: every "
        f"event was delivered ({parking['attempts']:,} POSTs, {parking['duplicates']} duplicates), "
        f"{parking['out_of_order']} of a ticket's events out of order.",
        "",
        parking["note"],
        "",
    ]


FRESHNESS_CASES = {
    "without webhooks": "a tenant without webhooks",
    "with webhooks": "a tenant with webhooks, version unchanged",
    "version moved": "the first batch after a webhook's create or delete",
}


def freshness_markdown(freshness: dict[str, Any]) -> list[str]:
    """What the fan-out's per-batch read of a tenant's webhook version costs (docs/webhooks.md)."""
    made = [
        "### The fan-out's freshness read: what a new webhook hearing the next change costs",
        "",
        "| per tenant and batch | calls | RRU | ms p50 / p95 | USD per million events (one per batch) |",
        "|---|---|---:|---:|---:|",
    ]
    for case, row in freshness["cases"].items():
        calls = ", ".join(f"{count:g} {call.split('.', 1)[1]}" for call, count in row["calls_per_batch"].items())
        usd = row["usd_per_million_events"]
        made.append(
            f"| {FRESHNESS_CASES.get(case, case)} | {calls} | {row['rru_per_batch']:g} | {_ms(row['duration_ms'])} "
            f"| {usd['total']:.4f} (DynamoDB {usd['dynamodb']:.4f}, Lambda {usd['lambda']:.4f}) |"
        )
    return [
        *made,
        "",
        f"How: the audit-trail function ({freshness['memory_mb']} MB), warm, in this process, as each batch first "
        f"asks for a tenant's webhooks; {freshness['batches']} batches per case, interleaved. USD when each event is "
        "its tenant's only one in its batch (the worst case); the last row is paid once per webhook created or "
        "deleted, not per event.",
        "",
    ]


def hang_markdown(hang: dict[str, Any], when: dict[str, Any] | None) -> list[str]:
    """Another tenant's delivery delay while one tenant's endpoint hangs (docs/webhooks.md)."""
    bounds = ", ".join(f"{tier} {count}" for tier, count in hang["in_flight_by_tier"].items())
    made = ["### Another tenant's delay while one tenant's endpoint hangs", ""]
    bound = (
        f"A tenant has at most its tier's attempts in flight ({bounds}) of the delivery function's {hang['pool']} "
        f"invocations; A is {hang['tier']} ({hang['in_flight']}), its events at {hang['rate_per_second']} a second."
    )
    if hang["quick"]:
        return [
            *made,
            f"{bound} Quick run (`--quick`): A had {hang['a_sent']} events for its hanging endpoint, which held at "
            f"most {hang['a_most_held']} attempts; B's {hang['b_deliveries']} change, made just before them, was "
            "delivered. No delay figures: the full run measures them.",
            "",
        ]
    alone, beside = hang["alone"]["delay_ms"], hang["hanging"]
    held = beside["held_at_b_arrivals"]
    load = hang["load_average"]
    rows = [
        ("B alone: change to delivery (API response to receipt)", hang["baseline"]),
        ("B alone: event to delivery (queued to receipt)", hang["alone"]),
        ("**B while A's endpoint hangs**: event to delivery", beside),
    ]
    return [
        *made,
        "| condition | n | p50 ms | p99 ms | min | max |",
        "|---|---:|---:|---:|---:|---:|",
        *(
            f"| {label} | {row['changes']} | **{row['delay_ms']['p50']:,.0f}** | **{row['delay_ms']['p99']:,.0f}** "
            f"| {row['delay_ms']['min']:,.0f} | {row['delay_ms']['max']:,.0f} |"
            for label, row in rows
        ),
        "",
        f"{bound} {hang['rounds']} rounds of {hang['changes_per_block']} per condition. Beside the hang, B's event "
        f"to delivery: p50 {beside['delay_ms']['p50'] - alone['p50']:+,.0f} ms, p99 "
        f"{beside['delay_ms']['p99'] - alone['p99']:+,.0f} ms against B alone. A had {beside['a_sent']} events; "
        f"its endpoint received {beside['a_attempts']} "
        f"attempts and held **at most {beside['a_most_held']} at once**, {hang['in_flight']} at {held['at_bound']} "
        f"of B's {held['n']} receipts. The delivery function ran {beside['invocations_per_second']:g} invocations a "
        f"second in {beside['delivery_environments']} execution environments. Load average "
        f"{load['start'][0]:g} at the start, {load['end'][0]:g} at the end, on {when['nproc'] if when else '?'} "
        "shared cores running A's work and B's alike.",
        "",
        hang["note"],
        "",
    ]


def credentials_markdown(credentials: dict[str, Any]) -> list[str]:
    first = credentials["mixes"][0]
    mix = first["mix"]
    lines = [
        f"## Credential calls per request: {mix['tenants']} tenants x {mix['users_per_tenant']} users x "
        f"{mix['containers']} warm containers, {mix['requests_per_user_per_hour']:g} requests per user-hour, "
        f"tokens renewed hourly, {mix['hours']} hours",
        "",
        "| clients renew their token | design | GetId | GetCredentialsForIdentity | AssumeRole | credential calls "
        "per request | steady state: per request | per user-hour | per token |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in credentials["mixes"]:
        when = result["mix"]["renew_before_minutes"]
        renew = f"{when:g} min before expiry" if when else "at expiry"
        for row in result["designs"].values():
            calls = row.get("calls", {})
            lines.append(
                f"| {renew} | {row['label']} | {calls.get('GetId', '-')} | "
                f"{calls.get('GetCredentialsForIdentity', '-')} | {calls.get('AssumeRole', '-')} "
                f"| {row['credential_calls_per_request']:g} | {row['steady_calls_per_request']:g} "
                f"| {row['steady_calls_per_user_hour']:g} | {row.get('calls_per_token', '-')} |"
            )
    exchange = credentials["exchange"]
    lines += [
        "",
        f"Requests: {first['requests']:,} ({first['steady_requests']:,} in the steady state, after the first hour). "
        f"At {first['exchanges_per_user_hour']:g} exchanges per active user-hour, the default quota of "
        f"{first['quota_rps']['GetCredentialsForIdentity']} GetCredentialsForIdentity/s per account and Region "
        f"carries about **{first['users_at_quota']:,} active users**; 100,000 need "
        f"**{first['quota_rps_for_100k_users']}/s**. GetId's default {first['quota_rps']['GetId']}/s bounds how "
        f"fast new authorizer containers warm up. One exchange against the local stack (median of "
        f"{exchange['samples']}): GetId {exchange['get_id_ms']['median']:.1f} ms + GetCredentialsForIdentity "
        f"{exchange['get_credentials_for_identity_ms']['median']:.1f} ms = {exchange['exchange_ms']['median']:.1f} "
        f"ms, against {exchange['assume_role_ms']['median']:.1f} ms for an AssumeRole "
        f"({exchange['exchange_over_assume_role']:.2f}x).",
        "",
        "How: a virtual clock (`bench/credentials.py`): API Gateway's 300 s authorizer cache in front of warm "
        "authorizer containers running the production `TokenExchange`, against a Cognito stub that counts calls. "
        "Per tenant (AssumeRole), the function, not IAM, would choose the tenant.",
        "",
    ]
    return lines + perimeter_markdown() + dedicated_markdown()


def callers_markdown(callers: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    """Many callers on one warm container: now, and (when recorded) the design before."""
    lines = [
        f"## Many callers on one warm container: {callers['callers']:,} credential sets on one `{callers['function']}`",
        "",
        "| design | descriptors at start | after 100 callers | at the end | memory growth | first failure "
        "| new caller's first request / repeat (medians) |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for label, result in (
        ("before: a client per credential set", before),
        ("ours: one client, signed per call", callers),
    ):
        if result is None:
            continue
        points = {point["callers"]: point for point in result["checkpoints"]}
        end = result["checkpoints"][-1]
        failure = result["first_failure"]
        failed = f"caller {failure['caller']}: {failure['status']}" if failure else "none"
        growth = f"{result['rss_growth_mb']:g} MB" if result["rss_growth_mb"] is not None else "-"
        after_100 = points.get(100, {}).get("open_descriptors", "-")
        lines.append(
            f"| {label} | {result['checkpoints'][0]['open_descriptors']} | {after_100} | "
            f"{end['open_descriptors']} (caller {end['callers']:,}) | {growth} | {failed} | "
            f"{result['first_request_ms']['median']:.1f} / {result['repeat_request_ms']['median']:.1f} ms = "
            f"{result['first_over_repeat']:.2f}x |"
        )
    return [
        *lines,
        "",
        "How: `bench/callers.py`, the handler in this process with Lambda's 1,024 file descriptors and connections "
        "kept alive as AWS keeps them (`bench/keepalive.py`); each caller a new credential set of the identity pool, "
        "a first request then a repeat. The design before: `bench/callers_before.json`.",
        "",
    ]


def perimeter_markdown() -> list[str]:
    """What the data perimeter costs a month, from the template's resources."""
    fixed = perimeter_fixed_cost()
    lines = [
        "## The data perimeter's fixed monthly cost",
        "",
        "| design | resources | USD a month |",
        "|---|---|---:|",
    ]
    for row in fixed["designs"]:
        lines.append(f"| {row['design']} | {row['resources']} | {row['usd_per_month']:.2f} |")
    lines += [
        "",
        f"How: from `template.yaml`'s resources ({fixed['region']}, {fixed['hours_per_month']} hours a month, "
        "public price pages).",
        "",
    ]
    return lines


def cells_markdown(results: dict[str, Any]) -> list[str]:
    """What cells add: a cell's fixed monthly cost, the router's per request, the shared quotas."""
    figures = cells_cost()
    timed = results.get("router")
    cell, router, quotas = figures["cell"], figures["router"], figures["quotas"]
    lines = [
        "## Cells: a cell's fixed monthly cost, the router's cost per request",
        "",
        "| | USD |",
        "|---|---:|",
        *(f"| a cell, a month, its keys' {row['year']} year | {row['usd_per_month']:.2f} |" for row in cell["years"]),
        f"| the router, per million requests | {router['usd_per_million_requests']:.2f} |",
        f"| (API Gateway, per million requests) | {router['api_gateway_usd_per_million_requests']:.2f} |",
        "",
        f"How: from `template.yaml`'s resources and list prices ({figures['region']}): the perimeter's interface "
        f"endpoint (${cell['perimeter_usd_per_month']:.2f}), {cell['keys']} customer managed keys, {cell['alarms']} "
        f"alarms reading {cell['alarm_metrics']} metrics ({cell['metrics_insights_alarms']} Metrics Insights alarms "
        f"priced by the functions they read: an upper bound) and {cell['dashboards']} dashboard; the rest is paid "
        f"per request. The router: CloudFront's HTTPS request, its function and {router['reads_per_request']} "
        f"KeyValueStore reads, plus ${router['upload_usd_per_gb']:.2f} a GB of request bodies. Shared quotas: a "
        f"store holds {quotas['tenants_per_store_at_longest_ids']:,} tenants at the longest ids; cells sharing an "
        f"account and Region share its {quotas['api_keys_per_account_region']:,} API keys (one a tenant), its "
        "identity-pool exchange rate (above) and its Metrics Insights alarms (at most "
        f"{quotas['cells_per_account_region_by_metrics_insights_alarms']} cells): give each cell an account.",
        "",
    ]
    if timed is not None:
        work = timed["function_us"]
        lines += [
            f"The router's function does {work['median']:.1f} µs of work a routed request (p95 {work['p95']:.1f}; "
            f"{work['n']:,} requests, a store of {timed['tenants']:,} tenants, Node {timed['node']}, "
            "`python -m bench.router`). CloudFront runs it on its own runtime; the hop its edge adds in front "
            "of a cell's API is not measurable here.",
            "",
        ]
    return lines


def dedicated_markdown() -> list[str]:
    """What a dedicated tenant's own resources cost a month, from its template."""
    fixed = dedicated_fixed_cost()
    per_gb = fixed["per_gb_month_usd"]
    lines = [
        "## A dedicated tenant's monthly cost beyond its requests",
        "",
        "| the key's year | key | alarms | USD a month |",
        "|---|---:|---:|---:|",
    ]
    for row in fixed["years"]:
        lines.append(
            f"| {row['year']} | {row['keys_usd_per_month']:.2f} | {row['alarms_usd_per_month']:.2f} | "
            f"{row['usd_per_month']:.2f} |"
        )
    lines += [
        "",
        f"How: from `templates/dedicated-table.yaml` ({fixed['region']}, list prices): {fixed['keys']} customer "
        f"managed key ({fixed['rotating_keys']} rotating yearly; KMS bills its first two rotations, $1 a month each) "
        f"and {fixed['alarms']} alarms reading {fixed['alarm_metrics']} metrics ($0.10 a month each). Its requests "
        "cost the same in either table; `cost_usd.dedicated` prices the key day by day (docs/usage.md). Per GB, as "
        f"in the pool: storage ${per_gb['storage']:.2f} and point-in-time recovery ${per_gb['pitr']:.2f} a GB-month.",
        "",
    ]
    return lines


def _measured(value: Any) -> str:
    """A goal's measurement, short: a long list of equal or numeric values summarised."""
    if isinstance(value, dict):
        numbers = [item for item in value.values() if isinstance(item, int | float)]
        if value and len(numbers) == len(value) and len(value) > 3:
            highest = max(value, key=lambda key: value[key])
            if min(numbers) == max(numbers):
                return f"{numbers[0]:g} for each of {len(value)}"
            return f"{min(numbers):g} to {max(numbers):g} over {len(value)}, highest {highest}"
        return "; ".join(f"{key}: {_measured(item)}" for key, item in value.items())
    if isinstance(value, list):
        return "/".join(_measured(item) for item in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def goals_markdown(made: Sequence[dict[str, Any]]) -> list[str]:
    """The goals, met or not, first: what the run set out to show."""
    lines = ["## Goals", "", "| goal | met | measured |", "|---|---|---|"]
    for goal in made:
        met = "met" if goal["met"] else "**not met**"
        lines.append(f"| {goal['goal']} | {met} | {_measured(goal['measured'])} |")
    return [*lines, ""]


def markdown(results: dict[str, Any], charts: Sequence[str] = ()) -> str:
    """results.md: every figure of the run (the README and docs/ only link here), tables first, each section's
    method under its tables, the charts and the whole method at the end."""
    where = results["machine"]
    lines = [
        "# Benchmark results",
        "",
        f"Measured {where['date_utc']} on {where['cpu']} (`nproc` = {where['nproc']}), Python {where['python']}, "
        f"{where['platform']}, with `{where['command']}` (it writes `bench/results.json` and this file); a section "
        "measured on its own says when. Each section's method is under its tables, "
        "[the whole method](#how-it-is-measured) at the end.",
        "",
        *goals_markdown(results["goals"]),
    ]
    warm = results["warm"]
    runs = results["parameters"]
    lines += [
        f"## Warm requests: ours vs naive (the token exchanged + a new client per request), {runs['warm_runs']} "
        "requests each, interleaved",
        "",
        "| route | ours p50 / p95 ms | naive p50 / p95 ms | naive/ours (p50) | AWS calls ours / naive "
        "| credential calls ours / naive | DynamoDB calls | RRU | WRU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for route in warm:
        ours, naive = route["ours"], route["naive"]
        lines.append(
            f"| `{route['route']}` | {_ms(ours['latency_ms'])} | {_ms(naive['latency_ms'])} "
            f"| **{route['naive_over_ours_median']:.2f}x** "
            f"| {_calls(ours['aws_calls_per_request'])} / {_calls(naive['aws_calls_per_request'])} "
            f"| {_calls(ours['credential_calls_per_request'])} / {_calls(naive['credential_calls_per_request'])} "
            f"| {_calls(ours['dynamodb_calls_per_request'])} | {ours['rru_per_request']:g} "
            f"| {ours['wru_per_request']:g} |"
        )
    naive_parts = results["naive_overhead"]
    lines += [
        "",
        "Where the naive design's extra time goes (medians): GetId + GetCredentialsForIdentity "
        f"{naive_parts['exchange_ms']['median']:.1f} ms, building the DynamoDB client "
        f"{naive_parts['new_client_ms']['median']:.1f} ms. How: both designs run the same handlers in this process "
        f"against the local stack. Capacity units: {ASSUMPTIONS}; identical for both designs.",
        "",
    ]
    lines += [
        *(credentials_markdown(results["credentials"]) if "credentials" in results else []),
        *cells_markdown(results),
    ]
    lines += callers_markdown(results["callers"], results.get("callers_before")) if "callers" in results else []
    lines += authorizer_markdown(results["authorizer"]) if "authorizer" in results else []
    cold = results.get("cold")
    if cold:
        layer = cold["layer"]
        counted = cold.get("ratio_basis") == "instructions"
        lines += [
            f"## Cold start as shipped: fresh interpreter, read-only build output, first request "
            f"(median of {cold['runs']} runs{', instructions of one' if counted else ''})",
            "",
        ]
        if "machine" in cold:  # measured alone, after the rest of this file
            lines += [f"Measured {cold['machine']['date_utc']} with `{cold['machine']['command']}`.", ""]
        lines += [
            "| function | import ms | first request ms | import + first ms | M instructions | x floor "
            "| x floor (ms) | three heaviest imports (self ms, by package) |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        rows = {**cold["functions"], **cold.get("traced", {}), cold["floor_name"]: cold["floor"]}
        for name, row in rows.items():
            imports = ", ".join(f"{item['package']} {item['ms']:.0f}" for item in row["heaviest_imports"][:3])
            ratio = f"**{row['over_floor']:.2f}x**" if "over_floor" in row else "1.00x"
            by_ms = f"{row.get('over_floor_ms', row.get('over_floor', 1.0)):.2f}x"
            executed = f"{row['instructions_m']:,.0f}" if "instructions_m" in row else "-"
            lines.append(
                f"| {name} | {row['import_ms']['median']:.0f} | {row['first_request_ms']['median']:.0f} "
                f"| {row['init_plus_first_ms']['median']:.0f} | {executed} | {ratio} | {by_ms} | {imports} |"
            )
        breakdown = cold.get("import_breakdown")
        if breakdown:
            floor_m = cold["floor"]["instructions_m"]
            lines += [
                "",
                f"Where an API function's import goes ({breakdown['function']}: each step imports the one before it "
                "and more, under callgrind; the share is of the floor's import + first request):",
                "",
                "| import | M instructions | adds | adds, share of the floor |",
                "|---|---:|---:|---:|",
            ]
            for step in breakdown["steps"]:
                adds = step["adds_m"]
                added = "-" if adds is None else f"{adds:,.0f}"
                share = "-" if adds is None else f"{adds / floor_m:.2f}x"
                lines.append(f"| {step['step']} | {step['instructions_m']:,.0f} | {added} | {share} |")
        lines += [
            "",
            f"The layer ships {layer['bytes'] / 1e6:.1f} MB in {layer['files']:,} files ({layer['py']:,} modules, "
            f"{layer['pyc']:,} of them byte-compiled).",
            "",
            cold["note"],
            "",
        ]
    aggregation = results["aggregation"]
    lines += [
        f"## Aggregation: {aggregation['records_per_batch']:,}-record batch over {aggregation['tenants']} tenants "
        f"(median of {aggregation['runs']} runs)",
        "",
        "| design | records/s | batch s p50 / p95 | DynamoDB writes per batch | distinct (tenant, status) pairs "
        "| WRU per batch | USD per million records |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for design, label in (("ours", "ours (one write per pair + journal)"), ("naive", "naive (one ADD per change)")):
        figures = aggregation[design]
        writes = "/".join(str(int(value)) for value in figures["dynamodb_writes_per_batch"])
        lines.append(
            f"| {label} | {figures['records_per_second']:,.0f} "
            f"| {figures['batch_seconds']['median']:.2f} / {figures['batch_seconds']['p95']:.2f} | {writes} "
            f"| {'/'.join(str(p) for p in aggregation['pairs_per_batch'])} | {figures['wru_per_batch']:g} "
            f"| {results['cost']['aggregation'][design]['total']:.2f} |"
        )
    lines += [
        "",
        f"ours/naive throughput: **{aggregation['ours_over_naive_records_per_second']:.1f}x**. Ours per batch: "
        f"{'/'.join(str(int(v)) for v in aggregation['ours']['count_items_per_batch'])} count writes and "
        f"{'/'.join(str(int(v)) for v in aggregation['ours']['journal_items_per_batch'])} journal item(s), "
        f"{aggregation['ours']['items_written_per_record']:.3f} items written per record.",
        "",
        aggregation["note"],
        "",
        "## Cost per million requests (USD, us-east-1 on-demand)",
        "",
        "| route | ours | naive | naive/ours | Lambda duration ours / naive | API Gateway | DynamoDB R + W "
        "| credential calls per million, naive (free) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["cost"]["routes"]:
        ours, naive = row["ours"], row["naive"]
        lines.append(
            f"| `{row['route']}` | {ours['total']:.2f} | {naive['total']:.2f} | {row['naive_over_ours']:.2f}x "
            f"| {ours['lambda_duration']:.2f} / {naive['lambda_duration']:.2f} | {ours['api_gateway']:.2f} "
            f"| {ours['dynamodb_reads'] + ours['dynamodb_writes']:.2f} | {naive['credential_calls']:,.0f} |"
        )
    prices = results["cost"]["prices"]
    lines += [
        "",
        f"How: the list prices of `support_tickets.usage.prices` ({prices['region']}, {prices['as_of']}; not "
        f"fetched live), memory {results['cost']['memory_mb']} MB from template.yaml, duration the warm median "
        "above billed per whole ms: indicative only.",
        "",
        *(heat_markdown(results["heat"]) if "heat" in results else []),
        *(metering_markdown(results["metering"]) if "metering" in results else []),
        *(webhooks_markdown(results["webhooks"]) if "webhooks" in results else []),
        *(isolation_markdown(results["isolation"]) if "isolation" in results else []),
        *(move_markdown(results["move"]) if "move" in results else []),
        *(cell_move_markdown(results["cell_move"]) if "cell_move" in results else []),
    ]
    if charts:
        lines += [
            "## Charts",
            "",
            *(line for name in charts for line in (f"![{CHART_TITLES.get(name, name)}]({name})", "")),
        ]
    anomalies = len(results.get("setup_retries", [])) + sum(len(r.get("unexpected_responses", [])) for r in warm)
    lines += [
        "## How it is measured",
        "",
        results["method"],
        "",
        f"Emulator anomalies: {anomalies} request(s) answered 409 (a cancelled TransactWriteItems) and were retried, "
        "not measured (listed in results.json).",
        "",
    ]
    return "\n".join(lines)
