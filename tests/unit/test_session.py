"""The tenant session cache: one AssumeRole per tenant per credential lifetime,
renewed before expiry, tagged, never a fallback."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from support_tickets.errors import Throttled, Unavailable
from support_tickets.session import TenantSession
from support_tickets.settings import get_settings

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def credentials(expiration: datetime) -> dict[str, Any]:
    return {
        "Credentials": {
            "AccessKeyId": "ASIAEXAMPLEEXAMPLE",
            "SecretAccessKey": "secret-secret-secret",
            "SessionToken": "token-token-token",
            "Expiration": expiration,
        }
    }


def expected_assume(tenant_id: str) -> dict[str, Any]:
    return {
        "RoleArn": get_settings().tenant_role_arn,
        "RoleSessionName": f"tenant-{tenant_id}",
        "DurationSeconds": 3600,
        "Tags": [{"Key": "TenantId", "Value": tenant_id}],
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sts() -> Iterator[Stubber]:
    client = boto3.client("sts", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def session(sts: Stubber, clock: FakeClock) -> TenantSession:
    return TenantSession(get_settings(), sts_client=sts.client, clock=clock)  # type: ignore[arg-type]


def test_assume_role_is_tagged_with_the_tenant(sts: Stubber, session: TenantSession) -> None:
    sts.add_response("assume_role", credentials(START + timedelta(hours=1)), expected_assume("acme"))
    session.dynamodb("acme")


def test_warm_requests_reuse_the_client_without_sts(sts: Stubber, session: TenantSession, clock: FakeClock) -> None:
    sts.add_response("assume_role", credentials(START + timedelta(hours=1)), expected_assume("acme"))
    first = session.dynamodb("acme")
    for minutes in (1, 10, 30, 54):
        clock.now = START + timedelta(minutes=minutes)
        assert session.dynamodb("acme") is first  # the stubber has no second response to give


def test_credentials_are_renewed_before_they_expire(sts: Stubber, session: TenantSession, clock: FakeClock) -> None:
    sts.add_response("assume_role", credentials(START + timedelta(hours=1)), expected_assume("acme"))
    first = session.dynamodb("acme")
    clock.now = START + timedelta(minutes=55)  # 5 minutes before expiry: renew
    sts.add_response("assume_role", credentials(clock.now + timedelta(hours=1)), expected_assume("acme"))
    second = session.dynamodb("acme")
    assert second is not first
    clock.now += timedelta(minutes=30)
    assert session.dynamodb("acme") is second


def test_each_tenant_gets_its_own_credentials(sts: Stubber, session: TenantSession) -> None:
    for tenant in ("1", "10"):
        sts.add_response("assume_role", credentials(START + timedelta(hours=1)), expected_assume(tenant))
    one, ten = session.dynamodb("1"), session.dynamodb("10")
    assert one is not ten
    assert session.dynamodb("1") is one
    assert session.dynamodb("10") is ten


def test_invalidate_forces_a_new_assume_role(sts: Stubber, session: TenantSession) -> None:
    sts.add_response("assume_role", credentials(START + timedelta(hours=1)), expected_assume("acme"))
    first = session.dynamodb("acme")
    session.invalidate("acme")
    sts.add_response("assume_role", credentials(START + timedelta(hours=1)), expected_assume("acme"))
    assert session.dynamodb("acme") is not first


def test_sts_throttling_is_throttled_never_a_fallback(sts: Stubber, session: TenantSession) -> None:
    sts.add_client_error("assume_role", service_error_code="Throttling", http_status_code=400)
    with pytest.raises(Throttled):
        session.dynamodb("acme")


def test_sts_failure_is_unavailable_and_not_cached(sts: Stubber, session: TenantSession) -> None:
    sts.add_client_error("assume_role", service_error_code="AccessDenied", http_status_code=403)
    with pytest.raises(Unavailable):
        session.dynamodb("acme")
    sts.add_response("assume_role", credentials(START + timedelta(hours=1)), expected_assume("acme"))
    session.dynamodb("acme")


@pytest.mark.parametrize("tenant_id", ["", "a|b", "*", "A"])
def test_invalid_tenant_never_reaches_sts(session: TenantSession, tenant_id: str) -> None:
    with pytest.raises(ValueError, match="tenant id"):
        session.dynamodb(tenant_id)


def test_cache_is_bounded(sts: Stubber, session: TenantSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("support_tickets.session.MAX_CACHED_TENANTS", 2)
    clients: dict[str, list[object]] = {}
    for tenant in ("a", "b", "c", "a"):
        sts.add_response("assume_role", credentials(START + timedelta(hours=1)), expected_assume(tenant))
        clients.setdefault(tenant, []).append(session.dynamodb(tenant))
    # "a" was evicted by "c": it needed a second AssumeRole and got a new client.
    assert clients["a"][0] is not clients["a"][1]
