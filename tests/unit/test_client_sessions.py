"""A function's clients share one boto3 session: each session loads botocore's
endpoint and service data again, which cost a cold start about 0.24x of the
floor per extra client (bench/results.md, "Cold start as shipped"). Sessions
are counted here, never time."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from support_tickets.core.settings import get_settings
from support_tickets.data.session import TenantClients
from support_tickets.streams import records


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every boto3 session made while the test runs (own_client's cache emptied first)."""
    made: list[Any] = []
    original = boto3.session.Session

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(original(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(boto3.session, "Session", counted)
    monkeypatch.setattr(boto3, "Session", counted)
    monkeypatch.setattr(records, "_sessions", {}, raising=False)
    return made


def test_a_function_s_own_clients_come_from_one_session(sessions: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the delivery function's three clients, made with its role's credentials,
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIADELIVERY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "delivery-secret")
    for service in ("dynamodb", "kms", "sqs"):
        records.own_client(service)
    # then one session made them all,
    assert len(sessions) == 1
    # and another role's credentials in the environment (another function in this process) get their own.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAAUDIT")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "audit-secret")
    records.own_client("dynamodb")
    assert len(sessions) == 2


def test_the_tenant_signing_clients_of_a_container_come_from_one_session(sessions: list[Any]) -> None:
    # Given a webhook function's container-wide clients (DynamoDB and KMS, signed per request),
    clients = TenantClients(get_settings())
    clients.client()
    with clients._lock:
        clients._signing_client("kms")
    # then one session made both.
    assert len(sessions) == 1
