"""Usage plans as API Gateway enforces them, per API key: a token bucket for
the rate and burst, and a request count per UTC day for the quota.

The plans and the keys are read from the emulator's API Gateway (``GetApiKeys``,
``GetUsagePlans``), where the stack created the template's plans and where
``ops.api_keys`` creates and moves tenants' keys with the same calls it makes
against a deployed stack. A key's plan is re-read at most every
``refresh_seconds``, so moving a key between plans (``make tenant TIER=...``)
takes effect locally within that bound.

What API Gateway documents and this follows: throttling and quotas apply per
API key of a usage plan; the rate is a token bucket refilled at ``rateLimit``
per second holding at most ``burstLimit``; a throttled request (429
``THROTTLED``) does not count against the quota; the ``DAY`` quota counts
requests per key from 00:00 UTC, and once used up every request is a 429
``QUOTA_EXCEEDED`` until the next UTC day. A key that is unknown, disabled, or
in no plan of the API is refused (``INVALID_API_KEY``: 403 by default, the
template's 503 ``TENANT_MOVING``).

What is local only: the ``Retry-After`` values. API Gateway's gateway responses
can carry only fixed header values (template.yaml), so a deployed stack sends
``1`` for ``THROTTLED`` and ``3600`` for ``QUOTA_EXCEEDED``; here
:class:`Decision` carries the seconds until the bucket has a token, or until
the quota resets (docs/API.md). A bucket belongs to a key in a plan: when a key
moves to another plan it starts with a full bucket of the new plan (as a key
newly added to a plan does), and its count for the day is kept; when a plan's
own limits change, the key's bucket takes them, keeping its tokens.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Clock = Callable[[], float]
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class Plan:
    plan_id: str
    name: str
    rate: float  # requests per second
    burst: int
    quota: int | None  # requests per UTC day, None for no quota


@dataclass
class TokenBucket:
    """``burst`` tokens at most, refilled at ``rate`` per second."""

    rate: float
    burst: int
    clock: Clock
    tokens: float = field(init=False)
    updated: float = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = float(self.burst)
        self.updated = self.clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + max(0.0, now - self.updated) * self.rate)
        self.updated = now

    def take(self) -> float:
        """0 if a token was taken, else the seconds until one is there."""
        self._refill()
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate if self.rate > 0 else math.inf

    def reshape(self, rate: float, burst: int) -> None:
        self._refill()
        self.rate, self.burst = rate, burst
        self.tokens = min(self.tokens, float(burst))


@dataclass
class DailyQuota:
    """Requests counted per UTC day (the epoch clock's)."""

    clock: Clock
    day: int = -1
    used: int = 0

    def _today(self) -> int:
        return int(self.clock() // SECONDS_PER_DAY)

    def take(self, limit: int | None) -> float:
        """0 if the request fits today's quota (and is counted), else the seconds until it resets."""
        today = self._today()
        if today != self.day:
            self.day, self.used = today, 0
        if limit is not None and self.used >= limit:
            return (today + 1) * SECONDS_PER_DAY - self.clock()
        self.used += 1
        return 0.0


Outcome = Literal["ALLOWED", "INVALID_API_KEY", "THROTTLED", "QUOTA_EXCEEDED"]


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    retry_after: int = 0  # whole seconds, at least 1 for a 429
    key_id: str | None = None
    plan: Plan | None = None


def _retry_after(seconds: float) -> int:
    return max(1, math.ceil(seconds)) if math.isfinite(seconds) else SECONDS_PER_DAY


class UsageMeter:
    """Buckets and quotas per API key, plans from a :class:`KeyDirectory`."""

    def __init__(
        self,
        directory: KeyDirectory,
        *,
        clock: Clock = time.time,
        monotonic: Clock = time.monotonic,
    ) -> None:
        self._directory = directory
        self._clock = clock
        self._monotonic = monotonic
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._quotas: dict[str, DailyQuota] = {}
        self._lock = threading.Lock()

    def admit(self, key_value: str | None) -> Decision:
        found = self._directory.lookup(key_value) if key_value else None
        if found is None:
            return Decision("INVALID_API_KEY")
        key_id, plan = found
        with self._lock:
            bucket = self._buckets.get((key_id, plan.plan_id))
            if bucket is None:
                # A key in a (new) plan: a full bucket of that plan's; the old plan's is dropped.
                for stale in [entry for entry in self._buckets if entry[0] == key_id]:
                    del self._buckets[stale]
                bucket = self._buckets[key_id, plan.plan_id] = TokenBucket(plan.rate, plan.burst, self._monotonic)
            elif (bucket.rate, bucket.burst) != (plan.rate, plan.burst):
                bucket.reshape(plan.rate, plan.burst)
            wait = bucket.take()
            if wait > 0:
                return Decision("THROTTLED", _retry_after(wait), key_id, plan)
            quota = self._quotas.setdefault(key_id, DailyQuota(self._clock))
            wait = quota.take(plan.quota)
            if wait > 0:
                return Decision("QUOTA_EXCEEDED", _retry_after(wait), key_id, plan)
        return Decision("ALLOWED", 0, key_id, plan)


class KeyDirectory:
    """API keys and their usage plans, as an API Gateway client lists them,
    cached per key value for ``refresh_seconds``."""

    def __init__(
        self,
        apigateway: Any,
        plan_ids: set[str],
        *,
        refresh_seconds: float = 1.0,
        monotonic: Clock = time.monotonic,
    ) -> None:
        self._client = apigateway
        self._plan_ids = plan_ids
        self._refresh = refresh_seconds
        self._monotonic = monotonic
        self._cache: dict[str, tuple[float, tuple[str, Plan] | None]] = {}
        self._lock = threading.Lock()

    def lookup(self, key_value: str) -> tuple[str, Plan] | None:
        now = self._monotonic()
        with self._lock:
            cached = self._cache.get(key_value)
            if cached is not None and now - cached[0] < self._refresh:
                return cached[1]
        found = self._read(key_value)
        with self._lock:
            self._cache[key_value] = (now, found)
        return found

    def _read(self, key_value: str) -> tuple[str, Plan] | None:
        keys: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"includeValues": True, "limit": 500}
        while True:
            page = self._client.get_api_keys(**kwargs)
            keys.extend(page.get("items", []))
            if not page.get("position"):
                break
            kwargs["position"] = page["position"]
        key = next((item for item in keys if item.get("value") == key_value), None)
        if key is None or not key.get("enabled", False):
            return None
        plans = list(self._client.get_usage_plans(keyId=key["id"]).get("items", []))
        ours = [plan for plan in plans if plan["id"] in self._plan_ids]
        if not ours:
            return None
        plan = ours[0]
        throttle = plan.get("throttle") or {}
        quota = plan.get("quota") or {}
        return key["id"], Plan(
            plan_id=plan["id"],
            name=plan.get("name", ""),
            rate=float(throttle.get("rateLimit", math.inf)),
            burst=int(throttle.get("burstLimit", 2**31)),
            quota=int(quota["limit"]) if quota.get("period") == "DAY" and "limit" in quota else None,
        )
