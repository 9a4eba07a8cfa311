"""The naive designs the public samples use, for comparison only (never in
production code).

- :class:`NaiveCredentials`: every request exchanges the caller's token with
  the identity pool (GetId and GetCredentialsForIdentity, as the samples call
  ``CognitoIdentityCredentials`` per request) and builds a new DynamoDB client
  from the credentials. Inside the data perimeter a function could only do
  that through a Cognito interface endpoint (the emulator's main listener
  stands for one here). Generous to the baseline: its Cognito client is built
  once and reused, the DynamoDB client comes from boto3's default session
  (whose loaders cache the service model), as ``boto3.client(...)`` in a
  handler would, and it is reused for the rest of the request (one exchange
  per request, not per call).
- :class:`NaiveAggregator`: one ``UpdateItem ADD`` per count change (an INSERT or
  REMOVE is one, a status change two), with the same record parsing as ours.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from support_tickets.core import keys
from support_tickets.core.identity import Caller, IdToken
from support_tickets.core.settings import Settings, get_settings
from support_tickets.data.session import BOTO_CONFIG, logins
from support_tickets.domain import tenancy
from support_tickets.streams.aggregation import ledger_record_from_stream

if TYPE_CHECKING:
    from mypy_boto3_cognito_identity import CognitoIdentityClient
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass
class NaiveTimings:
    """Where the naive design's extra time goes (measured inside it)."""

    exchange_ms: list[float] = field(default_factory=list)
    new_client_ms: list[float] = field(default_factory=list)


class NaiveCredentials:
    """The token exchanged + a new client on every request (what the samples
    do). One instance serves one request, as the domain layer's credential
    cache would: ``for_token`` gives that request's clients."""

    def __init__(
        self, settings: Settings, cognito: CognitoIdentityClient, identity_pool_id: str, timings: NaiveTimings
    ) -> None:
        self._settings = settings
        self._cognito = cognito
        self._identity_pool_id = identity_pool_id
        self._timings = timings

    def for_caller(self, caller: Caller) -> _OneRequestsClient:
        return _OneRequestsClient(self, caller.token)

    def new_client(self, token: IdToken) -> DynamoDBClient:
        started = time.perf_counter_ns()
        identity = self._cognito.get_id(IdentityPoolId=self._identity_pool_id, Logins=logins(self._settings, token))[
            "IdentityId"
        ]
        credentials = self._cognito.get_credentials_for_identity(
            IdentityId=identity, Logins=logins(self._settings, token)
        )["Credentials"]
        exchanged = time.perf_counter_ns()
        client: DynamoDBClient = boto3.client(
            "dynamodb",
            region_name=self._settings.region,
            endpoint_url=self._settings.endpoint_url,
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretKey"],
            aws_session_token=credentials["SessionToken"],
            config=BOTO_CONFIG,
        )
        self._timings.exchange_ms.append((exchanged - started) / 1e6)
        self._timings.new_client_ms.append((time.perf_counter_ns() - exchanged) / 1e6)
        return client


class _OneRequestsClient:
    def __init__(self, naive: NaiveCredentials, token: IdToken) -> None:
        self._naive = naive
        self._token = token
        self._client: DynamoDBClient | None = None
        self._lock = threading.Lock()  # one exchange per request, also for its worker threads

    def dynamodb(self) -> DynamoDBClient:
        with self._lock:
            if self._client is None:
                self._client = self._naive.new_client(self._token)
            return self._client

    def invalidate(self) -> None:
        self._client = None


class Designs:
    """Swaps the credentials the domain layer uses: ``ours`` is production's
    :func:`support_tickets.data.session.tenant_clients` (the authorizer's
    credentials, one client signing each call with them), ``naive`` the above. Everything else
    (handlers, events, emulator) is shared."""

    def __init__(self, cognito_endpoint_url: str | None, identity_pool_id: str) -> None:
        self._ours: Callable[[], Any] = vars(tenancy)["tenant_clients"]
        self._cognito_endpoint_url = cognito_endpoint_url
        self._identity_pool_id = identity_pool_id
        self._cognito: CognitoIdentityClient | None = None
        self.timings = NaiveTimings()

    @contextmanager
    def use(self, design: str) -> Iterator[None]:
        """For the naive design, a new :class:`NaiveCredentials` per use (one request)."""
        if design == "ours":
            yield
            return
        settings = get_settings()
        if self._cognito is None:  # generous to the baseline: one Cognito client, reused
            self._cognito = boto3.client(
                "cognito-identity",
                region_name=settings.region,
                endpoint_url=self._cognito_endpoint_url,
                config=BOTO_CONFIG,
            )
        naive = NaiveCredentials(settings, self._cognito, self._identity_pool_id, self.timings)
        vars(tenancy)["tenant_clients"] = lambda: naive
        try:
            yield
        finally:
            vars(tenancy)["tenant_clients"] = self._ours


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
