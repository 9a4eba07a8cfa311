"""Credential calls (Cognito and STS) per request for a realistic mix, ours
against the design it replaced, and what one exchange costs.

**The mix** (:func:`simulate`): tenants x users x warm containers, each user
sending requests (Poisson) that land on a random warm container, its ID token
renewed every hour (the template's ``IdTokenValidity``), shortly before it
expires as client SDKs do, or at expiry. A virtual clock runs the whole day in
milliseconds: only the *number* of calls depends on the caching logic, and
that is what is counted, with the real code wherever it exists:

- ours: API Gateway's authorizer cache (one answer per token for
  ``ReauthorizeEvery`` = 300 s, credentials included) in front of the
  authorizer's warm containers, each with one
  :class:`support_tickets.data.session.TokenExchange` (the production class:
  an exchange on every invocation, so that Cognito's ``ServerSideTokenCheck``
  refuses a revoked user within the 300 s) against a Cognito stub that counts
  ``GetId`` and ``GetCredentialsForIdentity``; credentials last an hour, as
  Cognito's do. The API functions make no credential call at all.
- kept per token: the same, with the credentials kept per token in each
  authorizer container until 600 s before they or the token expire
  (:class:`KeptPerToken`, the design before revocation was required): fewer
  exchanges, but a revoked user kept its access for up to about 55 minutes.
- functions: that per-token cache in every API function container, each
  exchanging the tokens it sees (the design before the data perimeter).
- per tenant: per container, one ``AssumeRole`` with the tag ``TenantId`` per
  tenant, cached until 300 s before its one-hour expiry
  (:class:`PerTenantAssumeRole`): fewer calls, but the function, not IAM, would
  choose the tenant.
- the naive designs of the public samples: an exchange (ours) or an
  AssumeRole (before) on every request.

**One exchange** (:func:`exchange_timing`): GetId + GetCredentialsForIdentity
against the local stack's identity pool, and an AssumeRole of the emulator's
STS for comparison, in the same run. The emulator is not AWS: the count of
round trips is what carries over (2 instead of 1 on a cold container's first
request of a user, 1 instead of 0 or 1 on each new token), not the milliseconds.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.stackproc import StackProcess
from bench.stats import summary
from stack_model.template import role_arn
from support_tickets.core.identity import IdToken
from support_tickets.core.settings import Settings
from support_tickets.data.session import TokenExchange

CREDENTIAL_SECONDS = 3600  # Cognito's enhanced flow; the old AssumeRole's DurationSeconds
AUTHORIZER_CACHE_SECONDS = 300  # the template's ReauthorizeEvery
OLD_RENEW_BEFORE_SECONDS = 300  # what the replaced per-tenant cache used
KEPT_RENEW_BEFORE_SECONDS = 600  # what the replaced per-token cache used
# Identity pools' default request-rate quotas, per account and Region (Cognito
# developer guide, "Quotas": adjustable; the minimum across Regions).
QUOTA_RPS = {"GetId": 25, "GetCredentialsForIdentity": 200}
START = datetime(2026, 11, 21, 0, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Mix:
    tenants: int = 3
    users_per_tenant: int = 20
    containers: int = 5
    hours: int = 8
    requests_per_user_per_hour: float = 60.0
    token_minutes: float = 60.0
    renew_before_minutes: float = 5.0  # a client renews its token this long before it expires
    seed: int = 13


class _Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@dataclass
class _CountingCognito:
    """What the credential cache calls, counted; answers as Cognito does."""

    clock: _Clock
    calls: Counter[str] = field(default_factory=Counter)

    def get_id(self, **params: Any) -> dict[str, Any]:
        self.calls["GetId"] += 1
        (token,) = params["Logins"].values()
        return {"IdentityId": f"us-east-1:{token.split('|')[0]}"}

    def get_credentials_for_identity(self, **params: Any) -> dict[str, Any]:
        self.calls["GetCredentialsForIdentity"] += 1
        expiration = self.clock() + timedelta(seconds=CREDENTIAL_SECONDS)
        return {
            "IdentityId": params["IdentityId"],
            "Credentials": {"AccessKeyId": "A", "SecretKey": "S", "SessionToken": "T", "Expiration": expiration},
        }


class _NoBoto3:
    """Stands in for boto3's session: the simulation needs no real client."""

    def client(self, *_: Any, **__: Any) -> object:
        return object()


class KeptPerToken:
    """The replaced per-token cache, per container: the exchange's credentials
    kept until ``KEPT_RENEW_BEFORE_SECONDS`` before they or the token expire."""

    def __init__(self, exchange: TokenExchange, clock: _Clock) -> None:
        self._exchange = exchange
        self._clock = clock
        self._until: dict[str, datetime] = {}

    def credentials(self, token: IdToken) -> None:
        until = self._until.get(token.value)
        if until is not None and self._clock() < until:
            return
        credentials = self._exchange.credentials(token)
        expires = min(credentials.expires_at, token.expires_at)
        self._until[token.value] = datetime.fromtimestamp(expires, UTC) - timedelta(seconds=KEPT_RENEW_BEFORE_SECONDS)


class PerTenantAssumeRole:
    """The replaced design's cache, per container: one AssumeRole per tenant,
    kept until ``OLD_RENEW_BEFORE_SECONDS`` before its one-hour expiry."""

    def __init__(self, clock: _Clock, calls: Counter[str]) -> None:
        self._clock = clock
        self._calls = calls
        self._expires: dict[str, datetime] = {}

    def request(self, tenant_id: str) -> None:
        expires = self._expires.get(tenant_id)
        if expires is None or self._clock() >= expires - timedelta(seconds=OLD_RENEW_BEFORE_SECONDS):
            self._calls["AssumeRole"] += 1
            self._expires[tenant_id] = self._clock() + timedelta(seconds=CREDENTIAL_SECONDS)


def _exchange(cognito: _CountingCognito) -> TokenExchange:
    return TokenExchange(_settings(), cognito_client=cognito, boto3_session=_NoBoto3())  # type: ignore[arg-type]


def _settings() -> Settings:
    return Settings.from_environment(
        {
            "TABLE_NAME": "SupportTicket",
            "ALLOWED_CLIENT_IDS": "benchclient",
            "IDENTITY_POOL_ID": "us-east-1:00000000-0000-4000-8000-000000000000",
            "USER_POOL_PROVIDER_NAME": "cognito-idp.us-east-1.amazonaws.com/us-east-1_bench",
        }
    )


@dataclass(frozen=True)
class _Request:
    at: datetime
    tenant: str
    user: str
    container: int


def _requests(mix: Mix, rng: random.Random) -> list[_Request]:
    made: list[_Request] = []
    rate = mix.requests_per_user_per_hour / 3600
    for tenant in range(mix.tenants):
        for user in range(mix.users_per_tenant):
            at = rng.expovariate(rate)
            while at < mix.hours * 3600:
                made.append(_Request(START + timedelta(seconds=at), f"t{tenant}", f"t{tenant}-u{user}", 0))
                at += rng.expovariate(rate)
    made.sort(key=lambda request: request.at)
    return [_Request(request.at, request.tenant, request.user, rng.randrange(mix.containers)) for request in made]


def _token_at(mix: Mix, user: str, phase: float, at: datetime) -> IdToken:
    """The token ``user`` holds at ``at``: a new one every (lifetime - renewal
    lead), the first issued ``phase`` of a period before the start (so tokens
    are staggered as in a steady state)."""
    period = (mix.token_minutes - mix.renew_before_minutes) * 60
    elapsed = (at - START).total_seconds() + phase * period
    number = int(elapsed // period)
    issued = START + timedelta(seconds=number * period - phase * period)
    expires = issued + timedelta(minutes=mix.token_minutes)
    return IdToken(value=f"{user}|{number}", subject=user, expires_at=int(expires.timestamp()))


def simulate(mix: Mix) -> dict[str, Any]:
    """Calls per design over the mix, in total and for the hours after the first
    (steady state: every container has seen every user)."""
    rng = random.Random(mix.seed)
    requests = _requests(mix, rng)
    phases = {
        f"t{tenant}-u{user}": rng.random() for tenant in range(mix.tenants) for user in range(mix.users_per_tenant)
    }
    clock = _Clock()
    cognito = _CountingCognito(clock)
    authorizers = [_exchange(cognito) for _ in range(mix.containers)]
    gateway_cache: dict[str, datetime] = {}
    kept_cognito = _CountingCognito(clock)
    kept = [KeptPerToken(_exchange(kept_cognito), clock) for _ in range(mix.containers)]
    functions_cognito = _CountingCognito(clock)
    functions = [KeptPerToken(_exchange(functions_cognito), clock) for _ in range(mix.containers)]
    tokens: set[str] = set()
    before_calls: Counter[str] = Counter()
    before = [PerTenantAssumeRole(clock, before_calls) for _ in range(mix.containers)]
    steady_from = START + timedelta(hours=1)
    at_steady: dict[str, Counter[str]] = {}
    steady_requests = 0
    for request in requests:
        if request.at >= steady_from and not at_steady:
            at_steady = {
                "ours": Counter(cognito.calls),
                "kept": Counter(kept_cognito.calls),
                "functions": Counter(functions_cognito.calls),
                "before": Counter(before_calls),
            }
        steady_requests += request.at >= steady_from
        clock.now = request.at
        token = _token_at(mix, request.user, phases[request.user], request.at)
        tokens.add(token.value)
        cached_until = gateway_cache.get(token.value)
        if cached_until is None or request.at >= cached_until:
            # API Gateway's cache missed: one authorizer invocation, on some warm container.
            authorizers[request.container].credentials(token)
            kept[request.container].credentials(token)
            gateway_cache[token.value] = request.at + timedelta(seconds=AUTHORIZER_CACHE_SECONDS)
        functions[request.container].credentials(token)
        before[request.container].request(request.tenant)
    users = mix.tenants * mix.users_per_tenant
    total = {
        "ours": dict(cognito.calls),
        "kept": dict(kept_cognito.calls),
        "functions": dict(functions_cognito.calls),
        "before": dict(before_calls),
    }
    steady = {design: dict(Counter(total[design]) - at_steady.get(design, Counter())) for design in total}
    steady_hours = mix.hours - 1
    rows = {}
    for design, label in (
        ("ours", "ours: an exchange per authorizer invocation"),
        ("kept", "the authorizer keeps credentials per token (revocation up to ~55 min late)"),
        ("functions", "each API function container keeps them per token"),
        ("before", "per tenant (AssumeRole)"),
    ):
        calls = sum(total[design].values())
        steady_calls = sum(steady[design].values())
        rows[design] = {
            "label": label,
            "calls": total[design],
            "credential_calls_per_request": round(calls / len(requests), 4),
            "steady_calls": steady[design],
            "steady_calls_per_request": round(steady_calls / max(1, steady_requests), 4),
            "steady_calls_per_user_hour": round(steady_calls / (users * steady_hours), 3),
            "calls_per_token": round(calls / len(tokens), 3),
        }
    rows["naive"] = {
        "label": "naive, ours: GetId + GetCredentialsForIdentity every request",
        "credential_calls_per_request": 2.0,
        "steady_calls_per_request": 2.0,
        "steady_calls_per_user_hour": 2 * mix.requests_per_user_per_hour,
    }
    rows["naive_before"] = {
        "label": "naive, before: AssumeRole every request",
        "credential_calls_per_request": 1.0,
        "steady_calls_per_request": 1.0,
        "steady_calls_per_user_hour": mix.requests_per_user_per_hour,
    }
    exchanges_per_user_hour = steady["ours"].get("GetCredentialsForIdentity", 0) / (users * steady_hours)
    return {
        "mix": asdict(mix),
        "requests": len(requests),
        "steady_requests": steady_requests,
        "designs": rows,
        "quota_rps": QUOTA_RPS,
        # How many active users the default GetCredentialsForIdentity quota carries at this mix's exchange rate.
        "users_at_quota": round(QUOTA_RPS["GetCredentialsForIdentity"] * 3600 / exchanges_per_user_hour)
        if exchanges_per_user_hour
        else None,
        "exchanges_per_user_hour": round(exchanges_per_user_hour, 3),
        # The GetCredentialsForIdentity rate that 100,000 such users need (a quota increase past the default).
        "quota_rps_for_100k_users": math.ceil(100_000 * exchanges_per_user_hour / 3600),
    }


def exchange_timing(stack: StackProcess, tenant_prefix: str, samples: int) -> dict[str, Any]:
    """Round trips against the local stack: the identity pool's exchange for
    new tokens (GetId + GetCredentialsForIdentity), and an STS AssumeRole, as
    the replaced design's first request made."""
    pool = stack.identity_pool()
    sts = stack.operator("sts")
    provider = str(stack.state["user_pool_provider_name"])
    get_id_ms: list[float] = []
    credentials_ms: list[float] = []
    assume_ms: list[float] = []
    for number in range(samples):
        logins = {provider: stack.token(f"{tenant_prefix}-x", f"exchange-{number}")}
        started = time.perf_counter()
        identity = pool.get_id(IdentityPoolId=stack.state["identity_pool_id"], Logins=logins)["IdentityId"]
        got_id = time.perf_counter()
        pool.get_credentials_for_identity(IdentityId=identity, Logins=logins)
        exchanged = time.perf_counter()
        sts.assume_role(RoleArn=role_arn("ApiFunctionRole"), RoleSessionName=f"bench-{number}")
        assumed = time.perf_counter()
        get_id_ms.append((got_id - started) * 1000)
        credentials_ms.append((exchanged - got_id) * 1000)
        assume_ms.append((assumed - exchanged) * 1000)
    both = [a + b for a, b in zip(get_id_ms, credentials_ms, strict=True)]
    return {
        "samples": samples,
        "get_id_ms": summary(get_id_ms),
        "get_credentials_for_identity_ms": summary(credentials_ms),
        "exchange_ms": summary(both),
        "assume_role_ms": summary(assume_ms),
        "exchange_over_assume_role": round(statistics.median(both) / statistics.median(assume_ms), 2),
    }


def run_credentials(stack: StackProcess, tenant_prefix: str, *, quick: bool) -> dict[str, Any]:
    mixes = [Mix(hours=2 if quick else 8), Mix(hours=2 if quick else 8, renew_before_minutes=0.0)]
    return {
        "mixes": [simulate(mix) for mix in mixes],
        "exchange": exchange_timing(stack, tenant_prefix, 3 if quick else 30),
    }
