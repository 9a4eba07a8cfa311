"""`python -m bench --quick`: the benchmark harness runs end to end on tiny
sizes and its deterministic findings hold. No timing is asserted: the
figures of a quick run say nothing about speed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from bench.report import markdown
from bench.routes import bench_name
from ops.routes import api_routes
from stack_model.template import PROJECT_ROOT
from tests.depth import DEEP

BUILD = PROJECT_ROOT / ".aws-sam" / "build" / "SharedLayer" / "python"


# The quick bench runs in the first test's set-up; on a loaded 2-core machine it takes minutes
# (under make test-deep, five of its processes under callgrind, some 50 times slower).
pytestmark = pytest.mark.timeout(1600)
# Instruction counts (callgrind) cost minutes of CPU: make test-deep checks them, make
# test the rest of the harness; the ratio code is the same either way.
COUNT_INSTRUCTIONS = DEEP and shutil.which("valgrind") is not None


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not BUILD.is_dir():
        pytest.skip("no sam build output (make build)")
    out = tmp_path_factory.mktemp("bench")
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT / "layers" / "shared"), str(PROJECT_ROOT)])
    completed = subprocess.run(  # noqa: S603 - our interpreter, our module
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--out",
            str(out),
            "--cold-instructions" if COUNT_INSTRUCTIONS else "--no-cold-instructions",
        ],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,  # a hang guard, not a speed goal: a loaded 2-core machine takes minutes
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert (out / "results.md").read_text().startswith("# Benchmark results")
    # The charts results.md embeds, as PNG images, and progress on stderr while it ran.
    for chart in ("cold_start.png", "warm_latency.png", "partition_heat.png"):
        assert (out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", chart
    assert "phase 5/5: partition heat" in completed.stderr
    loaded: dict[str, Any] = json.loads((out / "results.json").read_text())
    return loaded


def route_work(design: dict[str, Any]) -> float:
    """DynamoDB calls per request, without the tenant record's re-reads."""
    reads: float = design["requests_with_a_tenant_record_read"] / design["latency_ms"]["n"]
    calls: float = design["dynamodb_calls_per_request"]
    return round(calls - reads, 6)


def test_warm_requests_of_ours_make_no_credential_call_and_the_naive_design_an_exchange(
    results: dict[str, Any],
) -> None:
    routes = results["warm"]
    assert len(routes) == len(api_routes())
    for route in routes:
        assert route["ours"]["max_credential_calls_in_a_request"] == 0, route["route"]
        # GetId + GetCredentialsForIdentity on every request, and never STS (the functions can't assume anything)
        assert route["naive"]["credential_calls_per_request"] == 2, route["route"]
        assert route["naive"]["calls_by_operation_per_request"]["cognito-identity.GetId"] == 1, route["route"]
        assert route["naive"]["sts_calls_per_request"] == route["ours"]["sts_calls_per_request"] == 0
        # The designs differ by the session strategy only: same DynamoDB work, once the
        # tenant record's re-reads are set aside (one GetItem per TENANT_CONFIG_TTL_SECONDS
        # per container, whichever design's request a slow machine lets the TTL run out on).
        assert route_work(route["ours"]) == route_work(route["naive"]), route["route"]
        assert route["ours"]["wru_per_request"] == route["naive"]["wru_per_request"]


def test_every_read_route_is_exactly_one_dynamodb_call(results: dict[str, Any]) -> None:
    # Every read route of the route table is benchmarked
    read_routes = {bench_name(route) for route in api_routes() if route.read_only}
    assert {route["route"] for route in results["warm"] if route["read_only"]} == read_routes
    reads = [route for route in results["warm"] if route["read_only"] and not route["scatter"]]
    # The tenant's trail: one Query per partition (8) of each day of its window, nothing else
    (trail,) = [route for route in results["warm"] if route["scatter"]]
    assert trail["route"] == "GET /audit"
    # One query per partition of each date of the window (8 a day; one or two dates), plus the
    # few a page makes to read on from partitions whose first slice ran out.
    assert 8 <= trail["ours"]["dynamodb_calls_in_most_requests"] <= 32
    for route in reads:
        ours = route["ours"]
        assert ours["dynamodb_calls_in_most_requests"] == 1, route["route"]
        # A request that re-reads the tenant record (its cache's TTL ran out: a loaded machine
        # stretches the run past it) makes that one GetItem more, and nothing else does.
        extra = 1 if ours["requests_with_a_tenant_record_read"] else 0
        assert ours["max_dynamodb_calls_in_a_request"] <= 1 + extra, route["route"]
        assert ours["rru_per_request"] > 0
        assert route["ours"]["wru_per_request"] == 0


def test_aggregation_writes_at_most_once_per_tenant_status_pair_plus_a_journal(results: dict[str, Any]) -> None:
    aggregation = results["aggregation"]
    ours = aggregation["ours"]
    assert all(count <= max(aggregation["pairs_per_batch"]) for count in ours["count_items_per_batch"])
    assert ours["journal_items_per_batch"] == [1.0]  # one chunk: fewer than 100 pairs
    assert aggregation["naive"]["dynamodb_writes_per_batch"][0] > aggregation["pairs_per_batch"][0]
    assert 0 < ours["largest_item_bytes"]["journal"] < 40_000
    assert 0 < ours["largest_item_bytes"]["count_item"] < 200


def test_the_credential_mix_counts_per_token_against_per_tenant_and_per_request(results: dict[str, Any]) -> None:
    renew_early, renew_at_expiry = results["credentials"]["mixes"]
    for mix in (renew_early, renew_at_expiry):
        designs, shape = mix["designs"], mix["mix"]
        users = shape["tenants"] * shape["users_per_tenant"]
        # One identity per user and container, at most; at least once per user somewhere
        assert users <= designs["ours"]["calls"]["GetId"] <= users * shape["containers"]
        assert "AssumeRole" not in designs["ours"]["calls"]
        assert set(designs["before"]["calls"]) == {"AssumeRole"}
        # Per token costs more calls than per tenant did, and far fewer than an exchange per request
        steady = {name: row["steady_calls_per_request"] for name, row in designs.items()}
        assert steady["before"] < steady["ours"] < steady["naive"] == 2
        # Revocation's price: an exchange per cache window costs more than keeping credentials per token
        assert steady["kept"] <= steady["ours"]
        assert designs["ours"]["calls_per_token"] >= 1
        assert mix["users_at_quota"] > 0
        assert mix["quota_rps_for_100k_users"] >= 100_000 * mix["exchanges_per_user_hour"] / 3600
    # Kept credentials of tokens used to their last minute cost more exchanges (the margin): never fewer
    assert (
        renew_at_expiry["designs"]["kept"]["steady_calls_per_user_hour"]
        >= renew_early["designs"]["kept"]["steady_calls_per_user_hour"]
    )
    exchange = results["credentials"]["exchange"]
    assert exchange["exchange_ms"]["n"] == exchange["assume_role_ms"]["n"] > 0
    assert "## Credential calls per request" in markdown(results)
    assert "## The data perimeter's fixed monthly cost" in markdown(results)


def test_a_warm_container_holds_one_connection_pool_whatever_its_callers(results: dict[str, Any]) -> None:
    callers = results["callers"]
    assert callers["first_failure"] is None
    assert callers["first_request_ms"]["n"] == callers["callers"] > 0
    # One client's pool (max_pool_connections = 10) at most, not a pool per caller
    assert callers["descriptors_growth"] <= 10, callers["checkpoints"]
    assert "## Many callers on one warm container" in markdown(results)


def test_report_has_cold_starts_costs_and_goals(results: dict[str, Any]) -> None:
    cold = results["cold"]
    assert set(cold["functions"]) == {"GetTicketSummaryFunction", "AuthorizerFunction"}
    # The authorizer: warm cache misses measured, a hit costs no invocation, the cost at the assumed hit rate.
    authorizer = results["authorizer"]
    assert authorizer["miss_ms"]["n"] == authorizer["runs"] > 0
    assert authorizer["hit_ms"] == 0.0
    assert (
        0
        < authorizer["cost_per_million_requests_usd"]["total"]
        < authorizer["cost_per_million_invocations_usd"]["total"]
    )
    assert "### The Lambda authorizer" in markdown(results)
    assert set(cold["traced"]) == {"GetTicketSummaryFunction, Tracing: Active"}
    assert cold["floor"]["heaviest_imports"]
    if COUNT_INSTRUCTIONS:
        # The ratios and the goal come from instruction counts (callgrind), which the machine's load does not move.
        assert cold["ratio_basis"] == "instructions"
        floor = cold["floor"]["instructions_m"]
        assert 0 < cold["prelude_instructions_m"] < floor
        for row in cold["functions"].values():
            assert row["over_floor"] == round(row["instructions_m"] / floor, 2)
        (goal,) = [goal for goal in results["goals"] if goal["goal"].startswith("cold start as shipped")]
        assert "instructions executed" in goal["goal"]
        assert goal["measured"] == {name: row["over_floor"] for name, row in cold["functions"].items()}
    else:
        # Without counts, the ratios are the medians' and the report says so.
        assert cold["ratio_basis"] == "ms"
    # Measured on the build output as shipped: every module of the layer byte-compiled.
    assert cold["layer"]["py"] == cold["layer"]["pyc"] > 100
    assert {row["route"] for row in results["cost"]["routes"]} == {route["route"] for route in results["warm"]}
    assert all(row["ours"]["total"] > 0 for row in results["cost"]["routes"])
    assert any(goal["goal"].startswith("exactly one DynamoDB call per read request") for goal in results["goals"])


def test_partition_heat_spreads_a_hot_tenants_status_lists(results: dict[str, Any]) -> None:
    rows = {row["shards"]: row for row in results["heat"]["rows"]}
    assert set(rows) == {1, 4, 16}
    assert rows[1]["gsi1"]["key"].endswith("|OPEN")  # the blog's key, unsharded
    assert rows[1]["gsi1_keys_written"] < rows[4]["gsi1_keys_written"] < rows[16]["gsi1_keys_written"]
    assert rows[16]["gsi1"]["wcu_per_second"] < rows[1]["gsi1"]["wcu_per_second"]
    for row in rows.values():
        assert row["table"]["key"].startswith("TENANT#hot|")


def test_a_warm_webhook_delivery_takes_a_lease_and_is_priced(results: dict[str, Any]) -> None:
    webhooks = results["webhooks"]
    # The webhook, the delivery's progress and the webhook's parking circuit read, the tier's
    # counter, the in-flight lease (its Query, taken and given back) and the record written; the
    # tenant's record and the secret come from the warm container's caches.
    assert webhooks["warm"]["calls_per_delivery"] == {
        "dynamodb.GetItem": 3,
        "dynamodb.Query": 1,
        "dynamodb.UpdateItem": 4,
    }
    assert webhooks["warm"]["wru_per_delivery"] >= 2
    # The fan-out's record of each delivery, written before its message is queued: one small item.
    assert webhooks["warm"]["fanout_wru_per_delivery"] == 1
    cost = webhooks["cost_per_million_deliveries"]
    assumed = cost["assumptions"]
    assert assumed["wru_per_delivery"] == pytest.approx(
        webhooks["warm"]["wru_per_delivery"] + assumed["fanout_wru_per_delivery"]
    )
    items = ("lambda", "sqs_fifo", "dynamodb", "kms_decrypt")
    assert cost["total"] == pytest.approx(sum(cost[item] for item in items), abs=1e-3)
    assert cost["sqs_fifo"] == pytest.approx(1.5)  # 3 requests per delivery at $0.50 per million
    assert cost["kms_decrypt"] == pytest.approx(3.0)
    # A ticket change reached its receiver through the local stack: stream, audit trail, queue, delivery
    assert webhooks["changes"] == 1
    assert webhooks["delay_ms"]["p50"] > 0
    assert "## Webhook deliveries: cost and delay" in markdown(results)


def test_the_quick_run_parks_a_failing_endpoints_messages_and_drains_them_in_order(results: dict[str, Any]) -> None:
    parking = results["webhooks"]["parking"]
    failing, recovering = parking["phases"]["failing"], parking["phases"]["recovering"]
    # Its 2 slots and the drain's token at most in the queue; the rest parked, then all delivered in order.
    assert failing["in_flight_peak"] <= parking["retry_slots"] + 1
    assert failing["parked_at_end"] > 0
    assert recovering["parked_at_start"] > 0
    assert recovering["lot_drained_after_s"] is not None
    assert (parking["out_of_order"], parking["duplicates"]) == (0, 0)
    assert "### A webhook endpoint failing for minutes: parking" in markdown(results)


def test_the_fanouts_freshness_read_is_one_getitem_per_tenant_and_batch(results: dict[str, Any]) -> None:
    cases = results["webhooks"]["freshness"]["cases"]
    # The webhook version read consistently once per batch; the webhooks queried only when it moved.
    assert cases["without webhooks"]["calls_per_batch"] == {"dynamodb.GetItem": 1}
    assert cases["with webhooks"]["calls_per_batch"] == {"dynamodb.GetItem": 1}
    assert cases["version moved"]["calls_per_batch"] == {"dynamodb.GetItem": 1, "dynamodb.Query": 1}
    assert cases["without webhooks"]["rru_per_batch"] == 1  # a consistent read of a missing item
    for row in cases.values():
        assert row["usd_per_million_events"]["dynamodb"] > 0
    # The delivery cost counts that read as the fan-out's share of a delivery.
    assumed = results["webhooks"]["cost_per_million_deliveries"]["assumptions"]
    assert assumed["fanout_rru_per_delivery"] == cases["with webhooks"]["rru_per_batch"]
    assert "### The fan-out's freshness read" in markdown(results)


def test_the_quick_run_has_the_hang_section_with_its_counts(results: dict[str, Any]) -> None:
    hang = results["webhooks"]["hang"]
    # The quick version: no delays of its own (the full run's), its counts and the bound.
    assert hang["quick"] is True
    assert hang["tier"] == "basic"
    assert hang["in_flight"] == 2  # WEBHOOK_TIER_IN_FLIGHT's basic=2
    assert hang["pool"] == results["webhooks"]["queue_concurrency"] == 50  # MaximumConcurrency
    assert hang["a_sent"] == hang["in_flight"] + 1
    assert hang["b_deliveries"] == 1
    assert hang["a_most_held"] <= hang["in_flight"]
    assert "### Another tenant's delay while one tenant's endpoint hangs" in markdown(results)
    # No goal is judged on a quick run's delays.
    assert not any(goal["goal"].startswith("webhooks:") for goal in results["goals"])


def test_the_quick_run_times_the_edge_routers_work_per_request(results: dict[str, Any]) -> None:
    router = results["router"]
    # Every timed request was routed (run_router refuses a run where one was not).
    assert router["function_us"]["n"] == 200
    assert 0 < router["function_us"]["min"] <= router["function_us"]["median"]
    assert "µs of work a routed request" in markdown(results)
