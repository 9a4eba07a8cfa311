"""Noisy neighbours: each tenant is throttled by its own tier's usage
plan, through the local stack exactly as `make dev` runs it (the template's
authorizer function, its API key, usage plans in the emulator's API Gateway),
with small tiers given as template parameters, as `sam deploy
--parameter-overrides` would give them. Tiers change with the operator command
(`make tenant TIER=...`, i.e. `python -m ops.tenants`).

No assertion here is about speed: the flooding tenant sends far more than its
rate however slow the machine is (one request after another, each answered
within the same second), and the steady tenant sends at most one request per
0.7 s, under its 2 requests/s whatever the machine's speed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_stack.state import STATE_FILE
from tests.e2e.conftest import Response, RunningStack, new_tenant_id, python_module, start_stack, stop_stack

BASIC_RATE, BASIC_BURST = 2, 4
STANDARD_QUOTA = 6
# How long the local gateway keeps a key's usage plan before reading it again.
PLAN_REFRESH_SECONDS = 0.5
SMALL_TIERS = (
    f"--parameter=BasicRateLimit={BASIC_RATE}",
    f"--parameter=BasicBurstLimit={BASIC_BURST}",
    "--parameter=BasicDailyQuota=100000",
    "--parameter=StandardRateLimit=1000",
    "--parameter=StandardBurstLimit=2000",
    f"--parameter=StandardDailyQuota={STANDARD_QUOTA}",
    "--parameter=PremiumRateLimit=1000",
    "--parameter=PremiumBurstLimit=2000",
    "--parameter=PremiumDailyQuota=100000",
    "--authorizer-cache-seconds=1",
    f"--usage-plan-refresh-seconds={PLAN_REFRESH_SECONDS}",
)
FLOOD = 40


@pytest.fixture(scope="module")
def small_tiers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(tmp_path_factory.mktemp("throttled-stack"), "--no-seed", *SMALL_TIERS)
    try:
        yield running
    finally:
        stop_stack(running)


def make_tenant(stack: RunningStack, tenant: str, tier: str) -> None:
    """`make tenant TENANT=<t> TIER=<tier>` against this stack (its state file)."""
    state = str(Path(stack.state_dir) / STATE_FILE)
    completed = python_module("ops.tenants", "--tenant", tenant, "--tier", tier, "--local", "--local-state", state)
    assert completed.returncode == 0, completed.stderr
    assert f'"tier": "{tier}"' in completed.stdout


def flood(stack: RunningStack, token: str, count: int = FLOOD) -> list[Response]:
    return [stack.request("GET", "/tickets", token=token) for _ in range(count)]


def assert_throttled(response: Response) -> None:
    assert response.status == 429
    assert response.error_code == "THROTTLED"
    assert int(response.headers["retry-after"]) >= 1


def test_a_flooding_tenant_meets_its_own_limit_never_its_neighbours(small_tiers: RunningStack) -> None:
    stack = small_tiers
    # Tenants "1" and "10" (ids that are prefixes of each other), both basic.
    noisy = new_tenant_id()
    neighbour = noisy + "0"
    noisy_token = stack.token(noisy, "flooder")
    neighbour_token = stack.token(neighbour, "steady")
    neighbour_answers: list[Response] = []
    done = threading.Event()

    def steady() -> None:
        while not done.is_set():
            neighbour_answers.append(stack.request("GET", "/tickets", token=neighbour_token))
            done.wait(0.7)

    thread = threading.Thread(target=steady)
    thread.start()
    try:
        answers = flood(stack, noisy_token)
    finally:
        done.set()
        thread.join(timeout=60)
    throttled = [answer for answer in answers if answer.status == 429]
    assert throttled, "40 requests in a row were not throttled at 2 requests/s"
    for answer in throttled:
        assert_throttled(answer)
    assert {answer.status for answer in answers} == {200, 429}
    # The neighbour kept its own bucket: not one 429.
    assert neighbour_answers
    assert {answer.status for answer in neighbour_answers} == {200}

    # Upgraded with the operator command, the same flood passes.
    make_tenant(stack, noisy, "premium")
    time.sleep(PLAN_REFRESH_SECONDS + 0.5)  # the documented delay, locally: the gateway's plan refresh
    assert {answer.status for answer in flood(stack, noisy_token)} == {200}
    # And back down: throttled again.
    make_tenant(stack, noisy, "basic")
    time.sleep(PLAN_REFRESH_SECONDS + 0.5)
    assert any(answer.status == 429 for answer in flood(stack, noisy_token))


def test_the_daily_quota_is_per_tenant_and_says_when_it_resets(small_tiers: RunningStack) -> None:
    stack = small_tiers
    spender, other = new_tenant_id(), new_tenant_id()
    spender_token, other_token = stack.token(spender, "spender"), stack.token(other, "other")
    for tenant in (spender, other):
        make_tenant(stack, tenant, "standard")
    time.sleep(PLAN_REFRESH_SECONDS + 0.5)
    answers = [stack.request("GET", "/tickets", token=spender_token) for _ in range(STANDARD_QUOTA + 3)]
    assert [answer.status for answer in answers] == [200] * STANDARD_QUOTA + [429] * 3
    for answer in answers[STANDARD_QUOTA:]:
        assert answer.error_code == "QUOTA_EXCEEDED"
        # Until 00:00 UTC (the local gateway computes it; a deployed stack sends a fixed 3600, docs/API.md).
        until_midnight = 86_400 - int(time.time()) % 86_400
        assert abs(int(answer.headers["retry-after"]) - until_midnight) <= 60
    # Another tenant of the same tier has its own quota.
    assert stack.request("GET", "/tickets", token=other_token).status == 200


def test_a_tenant_without_an_api_key_is_refused_by_the_gateway(small_tiers: RunningStack) -> None:
    from ops.users import ensure_user, id_token

    # A user created by hand, for a tenant nobody onboarded: no record, no API key.
    tenant = new_tenant_id()
    pool = small_tiers.pool()
    ensure_user(pool, "lonely", tenant)
    response = small_tiers.request("GET", "/tickets", token=id_token(pool, "lonely"))
    assert (response.status, response.error_code) == (403, "FORBIDDEN")
