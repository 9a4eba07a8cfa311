"""Noisy neighbours: each tenant is throttled by its own tier's usage
plan, through the local stack exactly as `make dev` runs it (the template's
authorizer function, its API key, usage plans in the emulator's API Gateway).
The session's stack gives two tiers small limits as template parameters, as
`sam deploy --parameter-overrides` would (tests/e2e/conftest.py), and these
tests move their own tenants into them with the operator command (`make
tenant TIER=...`, i.e. `python -m ops.tenants`): every other tenant stays in
the roomy default tier.

No assertion here is about speed: the flooding tenant sends far more than its
rate however slow the machine is (one request after another, each answered
within the same second), and the steady tenant sends at most one request per
0.7 s, under its 2 requests/s whatever the machine's speed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from local_stack.running_stack import STATE_FILE
from tests.e2e.conftest import (
    DAILY_QUOTA,
    QUOTA_TIER,
    ROOMY_TIER,
    THROTTLED_TIER,
    Response,
    RunningStack,
    new_tenant_id,
    run_main,
)

# How long the local gateway keeps a key's usage plan before reading it again (its default).
PLAN_REFRESH_SECONDS = 1.0
FLOOD = 40


def make_tenant(stack: RunningStack, tenant: str, tier: str) -> None:
    """`make tenant TENANT=<t> TIER=<tier>` against this stack (its state file)."""
    state = str(Path(stack.state_dir) / STATE_FILE)
    completed = run_main("ops.tenants", "--tenant", tenant, "--tier", tier, "--local", "--local-state", state)
    assert completed.returncode == 0, completed.stderr
    assert f'"tier": "{tier}"' in completed.stdout


def flood(stack: RunningStack, token: str, count: int = FLOOD) -> list[Response]:
    return [stack.request("GET", "/tickets", token=token) for _ in range(count)]


def assert_throttled(response: Response) -> None:
    assert response.status == 429
    assert response.error_code == "THROTTLED"
    assert int(response.headers["retry-after"]) >= 1


def test_a_flooding_tenant_meets_its_own_limit_never_its_neighbours(stack: RunningStack) -> None:
    # Tenants "1" and "10" (ids that are prefixes of each other), both in the 2 requests/s tier.
    noisy = new_tenant_id()
    neighbour = noisy + "0"
    noisy_token = stack.token(noisy, f"flooder-{noisy}")
    neighbour_token = stack.token(neighbour, f"steady-{neighbour}")
    for tenant in (noisy, neighbour):
        make_tenant(stack, tenant, THROTTLED_TIER)
    time.sleep(PLAN_REFRESH_SECONDS + 0.5)
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
    make_tenant(stack, noisy, ROOMY_TIER)
    time.sleep(PLAN_REFRESH_SECONDS + 0.5)  # the documented delay, locally: the gateway's plan refresh
    assert {answer.status for answer in flood(stack, noisy_token)} == {200}
    # And back down: throttled again.
    make_tenant(stack, noisy, THROTTLED_TIER)
    time.sleep(PLAN_REFRESH_SECONDS + 0.5)
    assert any(answer.status == 429 for answer in flood(stack, noisy_token))


def test_the_daily_quota_is_per_tenant_and_says_when_it_resets(stack: RunningStack) -> None:
    spender, other = new_tenant_id(), new_tenant_id()
    spender_token, other_token = stack.token(spender, f"spender-{spender}"), stack.token(other, f"other-{other}")
    for tenant in (spender, other):
        make_tenant(stack, tenant, QUOTA_TIER)
    time.sleep(PLAN_REFRESH_SECONDS + 0.5)
    answers = [stack.request("GET", "/tickets", token=spender_token) for _ in range(DAILY_QUOTA + 3)]
    assert [answer.status for answer in answers] == [200] * DAILY_QUOTA + [429] * 3
    for answer in answers[DAILY_QUOTA:]:
        assert answer.error_code == "QUOTA_EXCEEDED"
        # Until 00:00 UTC (the local gateway computes it; a deployed stack sends a fixed 3600, docs/API.md).
        until_midnight = 86_400 - int(time.time()) % 86_400
        assert abs(int(answer.headers["retry-after"]) - until_midnight) <= 60
    # Another tenant of the same tier has its own quota.
    assert stack.request("GET", "/tickets", token=other_token).status == 200


def test_a_tenant_without_an_api_key_is_refused_by_the_gateway(stack: RunningStack) -> None:
    from ops.users import ensure_user, id_token

    # A user created by hand, for a tenant nobody onboarded: no record, no API key.
    tenant = new_tenant_id()
    pool = stack.pool()
    ensure_user(pool, f"lonely-{tenant}", tenant)
    response = stack.request("GET", "/tickets", token=id_token(pool, f"lonely-{tenant}"))
    assert (response.status, response.error_code) == (403, "FORBIDDEN")
