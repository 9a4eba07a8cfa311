"""Fixtures for the API tests: the eleven handlers over moto, users of random
tenants, and a table snapshot for "a failed write changes nothing"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from local_stack.running_stack import OPERATOR_CREDENTIALS
from support_tickets.data.tenant_registry import TIERS
from support_tickets.webhooks import urls
from tests.conftest import REGION, all_items, random_tenant_id
from tests.functional.api_harness import Api, User
from tests.functional.stream_harness import StreamHarness

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Tenant "1" must never reach tenant "10" (a prefix of its id) and the other way round.
TENANT_PAIRS = [pytest.param("1", "10", id="1-vs-10"), pytest.param("10", "1", id="10-vs-1")]

Snapshot = Callable[[], list[dict[str, Any]]]


@pytest.fixture
def api(aws: None) -> Api:
    return Api()


@pytest.fixture
def user() -> User:
    return User(random_tenant_id(), "alice")


@pytest.fixture
def admin(user: User) -> User:
    return User(user.tenant_id, "root", admin=True)


# What a webhook's host name resolves to in the webhook suites: a public address,
# while the receivers themselves listen on 127.0.0.1 (WEBHOOK_ALLOW_LOCAL_HTTP).
PUBLIC_ADDRESS = "93.184.215.14"


@pytest.fixture
def local_receivers(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Webhooks may target the suites' receivers on 127.0.0.1 (``usefixtures`` in their modules)."""
    monkeypatch.setenv("WEBHOOK_ALLOW_LOCAL_HTTP", "true")
    monkeypatch.setattr(urls, "system_resolver", lambda host, port: [PUBLIC_ADDRESS])


@pytest.fixture
def audit_stream(dynamodb: DynamoDBClient, table_name: str) -> StreamHarness:
    """The audit-trail function fed the table's stream (the webhook fan-out is its)."""
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    return StreamHarness.of("AuditTrailFunction", dynamodb, streams, table_name)


@pytest.fixture
def snapshot(dynamodb: DynamoDBClient, table_name: str) -> Snapshot:
    """Every item of the table, to compare before and after a failed write."""
    return lambda: all_items(dynamodb, table_name)


def ticket_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if item["sk"]["S"] == "SUMMARY"]


@pytest.fixture
def log_lines(capsys: pytest.CaptureFixture[str]) -> Callable[[], list[dict[str, Any]]]:
    """The JSON lines the functions printed (Powertools Logger lines and EMF
    metric blobs; the Logger writes to the current stdout: tests/conftest.py)."""

    def read() -> list[dict[str, Any]]:
        lines = capsys.readouterr().out.splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    return read


STACK_NAME = "st"


def stack_usage_plans() -> dict[str, str]:
    """The mocked stack's usage plan per tier (created on first use, as the
    template creates them)."""
    apigateway = boto3.client("apigateway", region_name="us-east-1")
    plans = {plan["name"]: plan["id"] for plan in apigateway.get_usage_plans()["items"]}
    for tier in TIERS:
        if tier not in plans:
            plans[tier] = apigateway.create_usage_plan(name=tier)["id"]
    return {tier: plans[tier] for tier in TIERS}


# The operator's key, as `make dev` names it in its state file (the --local ops tools sign with it).
OPERATOR_STATE = {
    "operator_access_key_id": OPERATOR_CREDENTIALS["aws_access_key_id"],
    "operator_secret_access_key": OPERATOR_CREDENTIALS["aws_secret_access_key"],
}


def local_state_file(directory: Path, table_name: str) -> Path:
    """What `make dev` writes to ``.local/stack.json``, for the mocked stack:
    operator commands run with ``--local --local-state <it>`` find its table,
    usage plans and stack name there."""
    state = directory / "stack.json"
    state.write_text(
        json.dumps(
            {
                "emulator_url": None,
                "table_name": table_name,
                "usage_plan_ids": stack_usage_plans(),
                "stack_name": STACK_NAME,
                **OPERATOR_STATE,
            }
        )
    )
    return state
