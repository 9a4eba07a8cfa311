"""What every stream function shares: its own AWS clients, and what it does with a poison record.

The stream functions (the aggregator, the audit writer) run with their own
execution role, never a tenant's: each role may write only its own items
(see template.yaml). A record that can never be processed (not what the
function's FilterCriteria promise, a summary whose ``tenant_status`` names
another tenant than its key, images missing) is *poison*: it is logged (a
security event when tenants disagree), counted in the ``PoisonRecord``
metric, sent to the function's failure queue (where to find it in the stream,
never the item's content) and then treated as done, so that one bad record
never stalls a shard.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord


class PoisonRecord(ValueError):
    """A record that can never be processed (not a valid record of its kind)."""


def record_fields(record: DynamoDBRecord) -> dict[str, Any]:
    """What the stream functions read of a record as Lambda delivers it
    (Powertools' data class; images deserialized)."""
    stream = record.dynamodb
    if stream is None or record.event_name is None or stream.sequence_number is None or not record.event_id:
        raise PoisonRecord("incomplete stream record")
    return {
        "event_name": record.event_name.name,
        "event_id": record.event_id,
        "sequence_number": stream.sequence_number,
        "keys_image": stream.keys,
        "old_image": stream.old_image,
        "new_image": stream.new_image,
    }


def creation_seconds(value: object) -> float | None:
    """A record's ``ApproximateCreationDateTime`` as Lambda delivers it (epoch
    seconds, a number; the documentation also shows it as a string), ``None``
    for anything else or outside years 1970-9999."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 < seconds < 253_402_300_800 else None  # before year 10000


def own_client(service: str) -> Any:
    """A client with the function's execution-role credentials (not a tenant's),
    and no invocation deadline (:mod:`support_tickets.data.deadline` says why).

    The clients of one set of credentials share a session: each new session loads
    botocore's endpoint, partition and service data again, about 170 M instructions
    of a cold start each (``bench/cold.py``). Sessions are keyed by the credentials
    the environment holds, as Lambda hands them to the function: the in-process
    tests run several functions, each with its own role's, in one interpreter."""
    from support_tickets.data.session import BOTO_CONFIG

    session = _own_session(
        os.environ.get("AWS_ACCESS_KEY_ID"),
        os.environ.get("AWS_SECRET_ACCESS_KEY"),
        os.environ.get("AWS_SESSION_TOKEN"),
    )
    return session.client(
        service,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        endpoint_url=os.environ.get("AWS_ENDPOINT_OVERRIDE") or None,
        config=BOTO_CONFIG,
    )


@lru_cache(maxsize=8)  # one entry in Lambda; a few in a test process
def _own_session(access_key_id: str | None, secret_access_key: str | None, session_token: str | None) -> Any:
    import boto3

    if access_key_id is None:  # the SDK's chain finds them
        return boto3.session.Session()
    return boto3.session.Session(
        aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key, aws_session_token=session_token
    )


@cache
def failure_queue_client() -> Any:
    return own_client("sqs")


def poison_message(
    *, reason: str | None, event_id: str, sequence_number: str, tenant_id: str | None, function_name: str
) -> str:
    """What a function sends to its failure queue for a poison record: where to
    find it in the stream, never the item's content."""
    return json.dumps(
        {
            "reason": reason,
            "eventID": event_id,
            "sequenceNumber": sequence_number,
            "tenantId": tenant_id,
            "function": function_name,
        }
    )


def report_poison(
    logger: Logger,
    metrics: Metrics,
    *,
    reason: str,
    event_id: str,
    sequence_number: str,
    tenant_id: str | None,
    default_function: str,
) -> None:
    """Log, count and queue a poison record (then the caller treats it as done)."""
    security = "tenant" in reason
    logger.warning(
        "security: poison stream record" if security else "poison stream record",
        extra={"reason": reason, "event_id": event_id, "tenant_id": tenant_id},
    )
    metrics.add_metric(name="PoisonRecord", unit=MetricUnit.Count, value=1)
    failure_queue_client().send_message(
        QueueUrl=os.environ["FAILURE_QUEUE_URL"],
        MessageBody=poison_message(
            reason=reason,
            event_id=event_id,
            sequence_number=sequence_number,
            tenant_id=tenant_id,
            function_name=os.environ.get("AWS_LAMBDA_FUNCTION_NAME", default_function),
        ),
    )
