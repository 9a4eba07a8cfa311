"""The naive designs the public samples use, for comparison only (never in
production code).

- :class:`NaiveTenantSession`: every request assumes the tenant role (with the
  same session tag) and builds a new DynamoDB client from the credentials.
  Generous to the baseline: its STS client is built once and reused, the
  DynamoDB client comes from boto3's default session (whose loaders cache the
  service model), as ``boto3.client(...)`` in a handler would, and it is
  reused for the rest of the request (one AssumeRole per request, not per call).
- :class:`NaiveAggregator`: one ``UpdateItem ADD`` per count change (an INSERT or
  REMOVE is one, a status change two), with the same record parsing as ours.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from support_tickets import keys, tickets
from support_tickets.aggregation import ledger_record_from_stream
from support_tickets.session import BOTO_CONFIG, assume_role_request
from support_tickets.settings import Settings, get_settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sts import STSClient


@dataclass
class NaiveTimings:
    """Where the naive design's extra time goes (measured inside it)."""

    assume_role_ms: list[float] = field(default_factory=list)
    new_client_ms: list[float] = field(default_factory=list)


class NaiveTenantSession:
    """AssumeRole + a new client on every request (what the samples do). One
    instance serves one request: the repository asks for the client before
    each DynamoDB call, and a handler of the samples assumes once per request."""

    def __init__(self, settings: Settings, sts_client: STSClient, timings: NaiveTimings) -> None:
        self._settings = settings
        self._sts_client = sts_client
        self._timings = timings
        self._clients: dict[str, DynamoDBClient] = {}

    def dynamodb(self, tenant_id: str) -> DynamoDBClient:
        keys.validate_tenant_id(tenant_id)
        if tenant_id not in self._clients:
            self._clients[tenant_id] = self._new_client(tenant_id)
        return self._clients[tenant_id]

    def _new_client(self, tenant_id: str) -> DynamoDBClient:
        started = time.perf_counter_ns()
        credentials = self._sts_client.assume_role(**assume_role_request(self._settings, tenant_id))["Credentials"]
        assumed = time.perf_counter_ns()
        client: DynamoDBClient = boto3.client(
            "dynamodb",
            region_name=self._settings.region,
            endpoint_url=self._settings.endpoint_url,
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
            config=BOTO_CONFIG,
        )
        self._timings.assume_role_ms.append((assumed - started) / 1e6)
        self._timings.new_client_ms.append((time.perf_counter_ns() - assumed) / 1e6)
        return client

    def invalidate(self, tenant_id: str) -> None:
        return


class Designs:
    """Swaps the tenant session the domain layer uses: ``ours`` is production's
    cached :func:`support_tickets.session.tenant_session`, ``naive`` the above.
    Everything else (handlers, events, emulator) is shared."""

    def __init__(self) -> None:
        self._ours: Callable[[], Any] = vars(tickets)["tenant_session"]
        self._sts: STSClient | None = None
        self.timings = NaiveTimings()

    @contextmanager
    def use(self, design: str) -> Iterator[None]:
        """For the naive design, a new :class:`NaiveTenantSession` per use (one request)."""
        if design == "ours":
            yield
            return
        settings = get_settings()
        if self._sts is None:  # generous to the baseline: one STS client, reused
            self._sts = boto3.client(
                "sts", region_name=settings.region, endpoint_url=settings.endpoint_url, config=BOTO_CONFIG
            )
        naive = NaiveTenantSession(settings, self._sts, self.timings)
        vars(tickets)["tenant_session"] = lambda: naive
        try:
            yield
        finally:
            vars(tickets)["tenant_session"] = self._ours


class NaiveAggregator:
    """The samples' stream handler: Powertools' BatchProcessor like ours, but
    each record's count changes are written at once, one ``ADD`` each (an
    INSERT or REMOVE is one write, a status change two); no folding, no
    exactly-once. Same record parsing, same client as ours."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self.client = client
        self.table_name = table_name
        self.writes = 0
        self.processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)

    def _record(self, record: DynamoDBRecord) -> None:
        for change in ledger_record_from_stream(record).changes:
            self.client.update_item(
                TableName=self.table_name,
                Key={"pk": {"S": keys.aggregate_pk(change.tenant_id)}, "sk": {"S": change.status.value}},
                UpdateExpression="ADD #count :delta",
                ExpressionAttributeNames={"#count": "count"},
                ExpressionAttributeValues={":delta": {"N": str(change.delta)}},
            )
            self.writes += 1

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self.processor(records=event.get("Records", []), handler=self._record):
            self.processor.process()
        return dict(self.processor.response())
