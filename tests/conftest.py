"""Shared fixtures: fake AWS credentials, moto with the table from template.yaml,
random tenant ids. Nothing here can reach real AWS."""

from __future__ import annotations

import base64
import json
import os
import secrets
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from local_stack import moto_fixes
from local_stack.events import SAMPLE_CLIENT_ID
from local_stack.template import table_definition
from support_tickets.aggregation import aggregator_client
from support_tickets.audit import audit_client, audit_writer
from support_tickets.comment_repository import CommentRepository
from support_tickets.session import tenant_session
from support_tickets.settings import get_settings
from support_tickets.stream import failure_queue_client
from support_tickets.table import TenantTable
from support_tickets.tenant_registry import tenant_configs
from support_tickets.ticket_repository import TicketRepository

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

moto_fixes.apply()

REGION = "us-east-1"
TENANT_ROLE_ARN = "arn:aws:iam::123456789012:role/TenantAccessRole"
FAILURE_QUEUE_NAME = "aggregate-counts-failures"
FAILURE_QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/123456789012/{FAILURE_QUEUE_NAME}"


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fake credentials and the functions' environment, for every test."""
    for name in list(os.environ):
        if name.startswith("AWS_") and name not in {"AWS_SAM_STACK_NAME"}:
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("TABLE_NAME", table_definition()["TableName"])
    monkeypatch.setenv("TENANT_ROLE_ARN", TENANT_ROLE_ARN)
    monkeypatch.setenv("FAILURE_QUEUE_URL", FAILURE_QUEUE_URL)
    monkeypatch.setenv("ALLOWED_CLIENT_IDS", SAMPLE_CLIENT_ID)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "support-tickets")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "SupportTickets")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setenv("POWERTOOLS_DEV", "false")
    _clear_container_caches()
    yield
    _clear_container_caches()


def _clear_container_caches() -> None:
    """What a fresh Lambda container starts without."""
    caches = (get_settings, tenant_session, tenant_configs)
    for cached in (*caches, aggregator_client, audit_client, audit_writer, failure_queue_client):
        cached.cache_clear()


@pytest.fixture
def aws() -> Iterator[None]:
    """moto, with the SupportTicket table created from template.yaml's definition
    and the aggregator's failure queue."""
    with mock_aws():
        boto3.client("dynamodb", region_name=REGION).create_table(**table_definition())
        boto3.client("sqs", region_name=REGION).create_queue(QueueName=FAILURE_QUEUE_NAME)
        yield


@pytest.fixture
def dynamodb(aws: None) -> DynamoDBClient:
    """An admin client on the mocked table, for arranging and asserting (not for code under test)."""
    return boto3.client("dynamodb", region_name=REGION)


@pytest.fixture
def table_name() -> str:
    return str(table_definition()["TableName"])


RepoFactory = Callable[[str], TicketRepository]
CommentsFactory = Callable[[str], CommentRepository]


def tenant_table(tenant_id: str) -> TenantTable:
    """A tenant's view of the mocked table, through the real tenant session."""
    return TenantTable(tenant_id, str(table_definition()["TableName"]), tenant_session())


@pytest.fixture
def repo_for(aws: None) -> RepoFactory:
    """Ticket repositories on the mocked table, through the real tenant session."""

    def make(tenant_id: str) -> TicketRepository:
        return TicketRepository(tenant_table(tenant_id))

    return make


@pytest.fixture
def comments_for(aws: None) -> CommentsFactory:
    def make(tenant_id: str) -> CommentRepository:
        return CommentRepository(tenant_table(tenant_id))

    return make


def jwt_shaped(payload: Mapping[str, Any]) -> str:
    """A token with this payload and a signature nobody checks: what a function
    finds in the Authorization header after API Gateway verified the real one."""

    def part(value: Mapping[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'kid': 'k'})}.{part(payload)}.c2lnbmF0dXJl"


def random_tenant_id() -> str:
    return f"t-{secrets.token_hex(4)}"


@pytest.fixture
def new_tenant() -> Callable[[], str]:
    return random_tenant_id


def all_items(dynamodb: DynamoDBClient, table_name: str) -> list[dict[str, Any]]:
    """Every item of the table, for before/after comparisons in tests only."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table_name}
    while True:
        page = dynamodb.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
