"""Usage plans as the local gateway enforces them (local_stack.apigateway.usage_plans): a token
bucket per API key for the rate and burst, a count per UTC day for the quota,
with fake clocks; and the key directory over moto's API Gateway."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local_stack.apigateway.usage_plans import SECONDS_PER_DAY, DailyQuota, KeyDirectory, Plan, TokenBucket, UsageMeter


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_its_burst_then_its_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=2.0, burst=4, clock=clock)
    assert [bucket.take() for _ in range(4)] == [0.0] * 4
    assert bucket.take() == pytest.approx(0.5)  # the next token in 1/rate s
    clock.now += 0.5
    assert bucket.take() == 0.0
    assert bucket.take() == pytest.approx(0.5)
    clock.now += 100  # refills up to the burst, never beyond
    assert [bucket.take() for _ in range(5)].count(0.0) == 4


def test_reshaping_a_bucket_keeps_its_tokens_within_the_new_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=1.0, burst=10, clock=clock)
    for _ in range(8):
        bucket.take()
    bucket.reshape(rate=100.0, burst=200)
    assert bucket.tokens == pytest.approx(2.0)
    clock.now += 1
    assert bucket.tokens + 100 == pytest.approx(102.0)
    assert bucket.take() == 0.0
    bucket.reshape(rate=1.0, burst=1)
    assert bucket.tokens <= 1.0


def test_the_quota_counts_per_utc_day_and_says_when_it_resets() -> None:
    clock = Clock(now=20 * SECONDS_PER_DAY + 23 * 3600)  # 23:00 UTC
    quota = DailyQuota(clock)
    assert [quota.take(3) for _ in range(3)] == [0.0] * 3
    assert quota.take(3) == pytest.approx(3600)  # until 00:00 UTC
    clock.now += 1800
    assert quota.take(3) == pytest.approx(1800)
    clock.now += 1800  # a new UTC day
    assert quota.take(3) == 0.0
    assert quota.take(None) == 0.0  # no quota: counted, never refused


class StaticDirectory:
    def __init__(self, keys: dict[str, tuple[str, Plan]]) -> None:
        self.keys = keys

    def lookup(self, key_value: str) -> tuple[str, Plan] | None:
        return self.keys.get(key_value)


BASIC = Plan("p-basic", "basic", rate=1.0, burst=2, quota=5)
PREMIUM = Plan("p-premium", "premium", rate=100.0, burst=200, quota=1000)


def meter(keys: dict[str, tuple[str, Plan]], clock: Clock) -> tuple[UsageMeter, StaticDirectory]:
    directory = StaticDirectory(keys)
    return UsageMeter(directory, clock=clock, monotonic=clock), directory  # type: ignore[arg-type]


def test_each_key_has_its_own_bucket_tenants_1_and_10_included() -> None:
    clock = Clock()
    usage, _ = meter({"key-1": ("k1", BASIC), "key-10": ("k10", BASIC)}, clock)
    outcomes_1 = [usage.admit("key-1").outcome for _ in range(5)]
    assert outcomes_1 == ["ALLOWED", "ALLOWED", "THROTTLED", "THROTTLED", "THROTTLED"]
    # Tenant 10's key is untouched by tenant 1's flood.
    assert [usage.admit("key-10").outcome for _ in range(2)] == ["ALLOWED", "ALLOWED"]


def test_throttled_requests_say_when_to_retry_and_do_not_count_against_the_quota() -> None:
    clock = Clock()
    usage, _ = meter({"key": ("k", BASIC)}, clock)
    usage.admit("key")
    usage.admit("key")
    throttled = usage.admit("key")
    assert (throttled.outcome, throttled.retry_after) == ("THROTTLED", 1)
    for _ in range(3):
        clock.now += 1
        assert usage.admit("key").outcome == "ALLOWED"  # 5 counted: the quota
    clock.now += 1
    over = usage.admit("key")
    assert over.outcome == "QUOTA_EXCEEDED"
    assert over.retry_after == SECONDS_PER_DAY - 4  # until 00:00 UTC (the clock is at 00:00:04)


def test_moving_a_key_to_another_plan_raises_its_limits() -> None:
    clock = Clock()
    usage, directory = meter({"key": ("k", BASIC)}, clock)
    assert [usage.admit("key").outcome for _ in range(3)][-1] == "THROTTLED"
    directory.keys["key"] = ("k", PREMIUM)
    # In its new plan the key starts with that plan's full burst.
    assert [usage.admit("key").outcome for _ in range(200)] == ["ALLOWED"] * 200
    assert usage.admit("key").outcome == "THROTTLED"
    # The day's count moved with it: 2 + 200 of PREMIUM's 1,000.
    outcomes = []
    for _ in range(5):
        clock.now += 10  # a full bucket again
        outcomes += [usage.admit("key").outcome for _ in range(200)]
    assert outcomes.count("ALLOWED") == 798
    assert set(outcomes[798:]) == {"QUOTA_EXCEEDED"}


def test_an_unknown_key_or_none_is_an_invalid_api_key() -> None:
    usage, _ = meter({}, Clock())
    assert usage.admit("nope").outcome == "INVALID_API_KEY"
    assert usage.admit(None).outcome == "INVALID_API_KEY"


@pytest.fixture
def apigateway() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("apigateway", region_name="us-east-1")


def test_the_directory_reads_keys_and_plans_and_refreshes(apigateway: Any) -> None:
    basic = apigateway.create_usage_plan(
        name="basic", throttle={"rateLimit": 10.0, "burstLimit": 20}, quota={"limit": 100, "period": "DAY"}
    )["id"]
    premium = apigateway.create_usage_plan(
        name="premium", throttle={"rateLimit": 200.0, "burstLimit": 400}, quota={"limit": 9000, "period": "DAY"}
    )["id"]
    foreign = apigateway.create_usage_plan(name="another stack's")["id"]
    key = apigateway.create_api_key(name="t", enabled=True)
    clock = Clock()
    directory = KeyDirectory(apigateway, {basic, premium}, refresh_seconds=5, monotonic=clock)
    assert directory.lookup(key["value"]) is None  # in no plan yet
    apigateway.create_usage_plan_key(usagePlanId=foreign, keyId=key["id"], keyType="API_KEY")
    clock.now += 5
    assert directory.lookup(key["value"]) is None  # another stack's plan is not ours
    apigateway.create_usage_plan_key(usagePlanId=basic, keyId=key["id"], keyType="API_KEY")
    clock.now += 5
    assert directory.lookup(key["value"]) == (key["id"], Plan(basic, "basic", 10.0, 20, 100))
    apigateway.delete_usage_plan_key(usagePlanId=basic, keyId=key["id"])
    apigateway.create_usage_plan_key(usagePlanId=premium, keyId=key["id"], keyType="API_KEY")
    assert directory.lookup(key["value"]) == (key["id"], Plan(basic, "basic", 10.0, 20, 100))  # cached
    clock.now += 5
    assert directory.lookup(key["value"]) == (key["id"], Plan(premium, "premium", 200.0, 400, 9000))
    assert directory.lookup("not-a-key") is None
    # a disabled key (an offboarded tenant's tombstone) is refused, though still in a plan
    disable = [{"op": "replace", "path": "/enabled", "value": "false"}]
    apigateway.update_api_key(apiKey=key["id"], patchOperations=disable)
    clock.now += 5
    assert directory.lookup(key["value"]) is None
