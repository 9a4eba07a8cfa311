"""The sample events in ``events/``: the documented shapes of what each function receives.

One file per function at least, named ``<function directory>[_<variant>].json``
(``create_ticket.json`` is for ``functions/create_ticket``, that is
``CreateTicketFunction``). REST events are built by ``stack_model.events.rest_event``,
shaped as API Gateway sends them behind the API's Lambda authorizer (its context
under ``requestContext.authorizer``: strings, ``"groups": "[\"admin\"]"`` for
an admin), with a placeholder where the ``Authorization`` header holds the
caller's ID token; the stream event is a DynamoDB Streams batch
(NEW_AND_OLD_IMAGES) of ticket-summary records as Lambda delivers them.
Everything is fixed (ids, times), so regenerating gives the same files.

A REST event does nothing without a real token: the function exchanges the
header's token for its tenant's credentials (``support_tickets.data.session``).
:func:`write_local` writes the same events with fresh tokens of the local
user pool's users (``make dev`` does, into ``.local/events/``; ``make events``
refreshes them), for ``sam local invoke <Function> -e .local/events/<file>``.

    python -m ops.sample_events            (rewrites events/*.json)
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops.routes import ApiRoute, api_routes
from ops.users import UserPool, ensure_user, id_token
from stack_model.events import SAMPLE_CLIENT_ID, authorizer_context, rest_event, with_token
from stack_model.template import PROJECT_ROOT
from support_tickets.core.identity import TenantCredentials

EVENTS_DIR = PROJECT_ROOT / "events"
TENANT = "acme"
TICKET_ID = "01JD3Z8W1X4K6M9P2R5T7V0BQE"
OTHER_TICKET_IDS = ("01JD3Z9A2B3C4D5E6F7G8H9J0K", "01JD3ZA5N6P7Q8R9S0T1V2W3X4")
# The webhook the {webhook_id} routes' sample events name.
WEBHOOK_ID = "wh_01JD3ZB7C8D9E0F1G2H3J4K5M6"
REQUEST_TIME = "21/Nov/2026:10:00:00 +0000"
REQUEST_EPOCH_MS = 1795255200000
TABLE_STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/SupportTicket/stream/2026-11-21T09:00:00.000"
TICKET_PATH = "/tickets/{ticket_id}"
API_ID = "a1b2c3d4e5"
API_HOST = f"{API_ID}.execute-api.us-east-1.amazonaws.com"


@dataclass(frozen=True)
class SampleUser:
    username: str
    admin: bool = False

    @property
    def sub(self) -> str:
        digits = "".join(f"{ord(char):03d}" for char in self.username)[:12].ljust(12, "0")
        return f"0c1b5f3a-7d2e-4a8b-9c6d-{digits}"

    def claims(self) -> dict[str, Any]:
        """The payload of the user's Cognito ID token."""
        claims: dict[str, Any] = {
            "sub": self.sub,
            "email_verified": True,
            "iss": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE",
            "cognito:username": self.username,
            "origin_jti": "5b0e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b",
            "aud": SAMPLE_CLIENT_ID,
            "event_id": "6c1d2e3f-4a5b-4c6d-9e8f-0a1b2c3d4e5f",
            "token_use": "id",
            "auth_time": 1795254900,
            "custom:tenant_id": TENANT,
            "exp": 1795258800,
            "iat": 1795255200,
            "jti": "7d2e3f4a-5b6c-4d7e-8f9a-0b1c2d3e4f5a",
            "email": f"{self.username}@acme.example",
        }
        if self.admin:
            claims["cognito:groups"] = ["admin"]
        return claims


# The demo users `make dev` creates in tenant acme.
MEMBER = SampleUser("alice")
ADMIN = SampleUser("ada", admin=True)
PLACEHOLDER_TOKEN = "<Cognito ID token>"  # noqa: S105 - a placeholder, not a secret
# What the authorizer passes: AWS's documented example keys, never real ones.
PLACEHOLDER_CREDENTIALS = TenantCredentials(
    access_key_id="ASIAIOSFODNN7EXAMPLE",
    secret_access_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",  # noqa: S106 - AWS's documented example
    session_token="<session token of TenantAccessRole from the identity pool>",  # noqa: S106 - a placeholder
    expires_at=1795003600,
)


def _rest(
    name: str,
    method: str,
    resource: str,
    user: SampleUser,
    *,
    ticket_id: str | None = None,
    path_parameters: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
) -> dict[str, Any]:
    event = rest_event(
        method,
        resource,
        path_parameters=dict(path_parameters) if path_parameters else {"ticket_id": ticket_id} if ticket_id else None,
        query=query,
        headers={
            "Host": API_HOST,
            "Authorization": f"Bearer {PLACEHOLDER_TOKEN}",
            "User-Agent": "curl/8.5.0",
            "X-Forwarded-For": "203.0.113.10",
            "X-Forwarded-Port": "443",
            "X-Forwarded-Proto": "https",
            **(headers or {}),
        },
        body=json.dumps(body) if body is not None else None,
        authorizer={
            **authorizer_context(user.claims(), credentials=PLACEHOLDER_CREDENTIALS),
            "integrationLatency": 212,
        },
        request_id=f"c6af9ac6-7b61-11e6-9a41-{sum(map(ord, name)):012d}",
    )
    context = event["requestContext"]
    context.update(
        requestTime=REQUEST_TIME,
        requestTimeEpoch=REQUEST_EPOCH_MS,
        resourceId="k7h9j2",
        apiId=API_ID,
        domainName=API_HOST,
        domainPrefix=API_ID,
    )
    context["identity"]["sourceIp"] = "203.0.113.10"
    return event


def route_stem(route: ApiRoute) -> str:
    """The sample event file of a route: its function's directory, ``_admin`` when an admin calls it."""
    return route.function_dir + ("_admin" if route.needs.admin else "")


def route_event(route: ApiRoute) -> dict[str, Any]:
    """The route's sample request (ops/routes.py), by its user."""
    return _rest(
        route_stem(route),
        route.method,
        route.path,
        ADMIN if route.needs.admin else MEMBER,
        ticket_id=TICKET_ID if route.takes_ticket else None,
        path_parameters=route.path_parameters(
            f"{WEBHOOK_ID}/{sample_delivery_id()}" if route.takes_delivery else WEBHOOK_ID
        )
        if route.takes_webhook
        else None,
        query=route.needs.query or None,
        headers=route.needs.headers or None,
        body=route.body(TICKET_ID),
    )


def rest_events() -> dict[str, dict[str, Any]]:
    """One event per route of the route table, then the documented examples:
    richer requests than the table's minimal ones, and variants."""
    ticket = {"title": "Printer on fire", "description": "Third floor, next to the kitchen.", "resolver": "johnd"}
    examples = {
        "create_ticket": _rest("create_ticket", "POST", "/tickets", MEMBER, body=ticket),
        "create_ticket_idempotent": _rest(
            "create_ticket_idempotent",
            "POST",
            "/tickets",
            MEMBER,
            headers={"Idempotency-Key": "8e03978e-40d5-43e8-bc93-6894a57f9324"},
            body=ticket,
        ),
        "list_tickets_by_resolver": _rest(
            "list_tickets_by_resolver", "GET", "/tickets", MEMBER, query={"status": "OPEN", "resolver": "johnd"}
        ),
        "update_ticket": _rest(
            "update_ticket",
            "PATCH",
            TICKET_PATH,
            MEMBER,
            ticket_id=TICKET_ID,
            headers={"If-Match": "1"},
            body={"status": "IN_PROGRESS", "resolver": "johnd"},
        ),
        "update_ticket_unassign": _rest(
            "update_ticket_unassign", "PATCH", TICKET_PATH, MEMBER, ticket_id=TICKET_ID, body={"resolver": None}
        ),
        "add_comment": _rest(
            "add_comment",
            "POST",
            TICKET_PATH + "/comments",
            MEMBER,
            ticket_id=TICKET_ID,
            body={"body": "Have you tried turning it off and on again?"},
        ),
        "batch_update_status": _rest(
            "batch_update_status",
            "POST",
            "/tickets/status",
            MEMBER,
            body={"ticket_ids": [TICKET_ID, *OTHER_TICKET_IDS], "status": "CLOSED"},
        ),
        "delete_ticket_non_admin": _rest("delete_ticket_non_admin", "DELETE", TICKET_PATH, MEMBER, ticket_id=TICKET_ID),
        "get_audit_trail_admin": _rest(
            "get_audit_trail_admin",
            "GET",
            "/audit",
            ADMIN,
            query={"from": "2026-11-20T00:00:00Z", "to": "2026-11-21T10:00:00Z", "limit": "50"},
        ),
    }
    return {**{route_stem(route): route_event(route) for route in api_routes()}, **examples}


# ---------------------------------------------------------------- stream
def _summary_image(
    ticket_id: str, status: str, version: int, resolver: str = "johnd", updated_by: str = "alice"
) -> dict[str, Any]:
    """A ticket summary as stored (see support_tickets.core.models.TicketItem), in DynamoDB JSON."""
    prefix = f"TENANT#{TENANT}|"
    return {
        "pk": {"S": f"{prefix}TICKET#{ticket_id}"},
        "sk": {"S": "SUMMARY"},
        "tenant_status": {"S": f"{prefix}{status}"},
        "resolver": {"S": resolver},
        "ticket_id": {"S": ticket_id},
        "title": {"S": "Printer on fire"},
        "description": {"S": "Third floor, next to the kitchen."},
        "created_by": {"S": "alice"},
        "created_at": {"S": "2026-11-21T10:00:00.000Z"},
        "updated_at": {"S": f"2026-11-21T10:0{version - 1}:00.000Z"},
        "version": {"N": str(version)},
        "updated_by": {"S": updated_by},
    }


def _stream_record(
    sequence: int, event_name: str, old: dict[str, Any] | None, new: dict[str, Any] | None
) -> dict[str, Any]:
    image = new if new is not None else old
    if image is None:
        raise ValueError("a stream record has at least one image")
    stream: dict[str, Any] = {
        "ApproximateCreationDateTime": 1795255200 + sequence,
        "Keys": {"pk": image["pk"], "sk": image["sk"]},
        "SequenceNumber": f"{4_000_000_000_000_000_000 + sequence}",
        "SizeBytes": len(json.dumps(old or {})) + len(json.dumps(new or {})),
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new is not None:
        stream["NewImage"] = new
    if old is not None:
        stream["OldImage"] = old
    return {
        "eventID": f"{sequence:032x}",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": stream,
        "eventSourceARN": TABLE_STREAM_ARN,
    }


def stream_event() -> dict[str, Any]:
    """A created ticket, a status change (OPEN → IN_PROGRESS) and a deleted ticket."""
    new_id, moved_id, deleted_id = TICKET_ID, *OTHER_TICKET_IDS
    return {
        "Records": [
            _stream_record(1, "INSERT", None, _summary_image(new_id, "OPEN", 1)),
            _stream_record(
                2, "MODIFY", _summary_image(moved_id, "OPEN", 1), _summary_image(moved_id, "IN_PROGRESS", 2)
            ),
            _stream_record(3, "REMOVE", _summary_image(deleted_id, "CLOSED", 3), None),
        ]
    }


def authorizer_event() -> dict[str, Any]:
    """What API Gateway sends the API's TOKEN authorizer (a cache miss)."""
    return {
        "type": "TOKEN",
        "authorizationToken": f"Bearer {PLACEHOLDER_TOKEN}",
        "methodArn": f"arn:aws:execute-api:us-east-1:123456789012:{API_ID}/v1/GET/tickets",
    }


def audit_stream_event() -> dict[str, Any]:
    """What the audit writer's FilterCriteria let through: a created ticket, a
    status change, a comment added, and a ticket deleted by an admin (the
    summary's last image names its deleter)."""
    new_id, moved_id, deleted_id = TICKET_ID, *OTHER_TICKET_IDS
    comment = {
        "pk": {"S": f"TENANT#{TENANT}|TICKET#{moved_id}"},
        "sk": {"S": "COMMENT#2026-11-21T10:02:00.000Z#01JD3ZC0MMENT0000000000000"},
        "comment_id": {"S": "01JD3ZC0MMENT0000000000000"},
        "author": {"S": "alice"},
        "body": {"S": "Have you tried turning it off and on again?"},
        "created_at": {"S": "2026-11-21T10:02:00.000Z"},
    }
    deleted = {
        **_summary_image(deleted_id, "CLOSED", 3),
        "deleted_by": {"S": ADMIN.username},
        "deleted_at": {"S": "2026-11-21T10:03:00.000Z"},
    }
    return {
        "Records": [
            _stream_record(1, "INSERT", None, _summary_image(new_id, "OPEN", 1)),
            _stream_record(
                2,
                "MODIFY",
                _summary_image(moved_id, "OPEN", 1),
                _summary_image(moved_id, "IN_PROGRESS", 2, updated_by="bob"),
            ),
            _stream_record(3, "INSERT", None, comment),
            _stream_record(4, "REMOVE", deleted, None),
        ]
    }


def metering_event() -> dict[str, Any]:
    """What a CloudWatch Logs subscription delivers the metering function: two
    requests' "request handled" lines of one execution environment (base64 of
    gzip; a fixed gzip time, so the file is the same on every run)."""
    lines = [
        ("GET", "/tickets", 1.5, 0.0, 2, 12.413, "36ad1f7e-0d4a-4a59-9d0b-5b0e2f7d6a01"),
        ("POST", "/tickets", 0.0, 3.0, 2, 31.207, "36ad1f7e-0d4a-4a59-9d0b-5b0e2f7d6a02"),
    ]
    events = [
        {
            "id": f"3893948373958{n:02d}00000000000000000000000000000000000000000000",
            "timestamp": 1763719200000 + n * 1000,
            "message": json.dumps(
                {
                    "level": "INFO",
                    "location": "handle:244",
                    "message": "request handled",
                    "timestamp": f"2026-11-21 10:00:0{n},000+0000",
                    "service": "support-tickets",
                    "tenant_id": TENANT,
                    "user": "alice",
                    "method": method,
                    "resource": resource,
                    "status": 200 if method == "GET" else 201,
                    "function_request_id": request_id,
                    "usage": {
                        "route": f"{method} {resource}",
                        "request_id": request_id,
                        "read_units": read,
                        "write_units": write,
                        "dynamodb_calls": calls,
                        "duration_ms": duration,
                        "memory_mb": 512,
                    },
                },
                separators=(",", ":"),
            ),
        }
        for n, (method, resource, read, write, calls, duration, request_id) in enumerate(lines)
    ]
    body = {
        "messageType": "DATA_MESSAGE",
        "owner": "123456789012",
        "logGroup": "/aws/lambda/support-tickets/ListTicketsFunction",
        "logStream": "2026/11/21/ListTicketsFunction[$LATEST]0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "subscriptionFilters": ["support-tickets-ListTicketsFunctionUsage"],
        "logEvents": events,
    }
    data = gzip.compress(json.dumps(body).encode(), mtime=0)
    return {"awslogs": {"data": base64.b64encode(data).decode()}}


SAMPLE_EVENT_ID = "c4ca4238a0b923820dcc509a6f75849b"
SAMPLE_EVENT_AT = "2026-11-21T10:00:00.000Z"


def sample_delivery_id(webhook_id: str = WEBHOOK_ID) -> str:
    from support_tickets.webhooks.events import delivery_id

    return delivery_id(SAMPLE_EVENT_AT, SAMPLE_EVENT_ID, webhook_id)


def delivery_item(tenant_id: str, webhook_id: str) -> dict[str, Any]:
    """A delivery record (DynamoDB JSON) of a ticket.created event to ``webhook_id``,
    FAILED after one 500: what the redeliver route's tests and sample event act on."""
    from support_tickets.core import keys
    from support_tickets.data.table import to_item
    from support_tickets.webhooks.events import event_body

    delivery = sample_delivery_id(webhook_id)
    event = {
        "id": SAMPLE_EVENT_ID,
        "type": "ticket.created",
        "timestamp": SAMPLE_EVENT_AT,
        "tenant_id": tenant_id,
        "data": {"ticket_id": TICKET_ID, "title": "Printer on fire"},
    }
    return {
        **keys.delivery_key(tenant_id, webhook_id, delivery),
        **to_item(
            {
                "delivery_id": delivery,
                "webhook_id": webhook_id,
                "event_id": SAMPLE_EVENT_ID,
                "type": "ticket.created",
                "ticket_id": TICKET_ID,
                "event": event_body(event),
                "status": "FAILED",
                "attempts": 1,
                "last_status_code": 500,
                "next_attempt_at": None,
                "created_at": SAMPLE_EVENT_AT,
                "last_attempt_at": SAMPLE_EVENT_AT,
                "expiration": 1797847200,
            }
        ),
    }


def webhook_delivery_event() -> dict[str, Any]:
    """What Lambda's SQS event source hands the delivery function: one event
    (a created ticket) for one webhook, as the audit-trail function queued it."""
    from support_tickets.webhooks.events import delivery_id, delivery_message, event_body, message_group

    at = SAMPLE_EVENT_AT
    event_id = SAMPLE_EVENT_ID
    ticket = _summary_image(TICKET_ID, "OPEN", 1)
    data = {
        "ticket_id": TICKET_ID,
        "title": ticket["title"]["S"],
        "status": "OPEN",
        "resolver": "johnd",
        "created_by": ticket["created_by"]["S"],
        "created_at": ticket["created_at"]["S"],
        "updated_at": ticket["updated_at"]["S"],
        "version": 1,
        "description": ticket["description"]["S"],
    }
    event = {"id": event_id, "type": "ticket.created", "timestamp": at, "tenant_id": TENANT, "data": data}
    delivery = delivery_id(at, event_id, WEBHOOK_ID)
    body = delivery_message(
        tenant_id=TENANT, webhook_id=WEBHOOK_ID, delivery=delivery, ticket_id=TICKET_ID, body=event_body(event)
    )
    return {
        "Records": [
            {
                "messageId": "2e1424d4-f796-459a-8184-9c92662be6da",
                "receiptHandle": "AQEBzWwaftRI0KuVm4tP+/7q1rGgNqicHq...",
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": str(REQUEST_EPOCH_MS),
                    "SequenceNumber": "18849496460467696128",
                    "MessageGroupId": message_group(TENANT, TICKET_ID, WEBHOOK_ID),
                    "SenderId": "AROAEXAMPLE:AuditTrailFunction",
                    "MessageDeduplicationId": delivery,
                    "ApproximateFirstReceiveTimestamp": str(REQUEST_EPOCH_MS + 50),
                },
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:support-tickets-WebhookEventsQueue.fifo",
                "awsRegion": "us-east-1",
            }
        ]
    }


def sample_events() -> dict[str, dict[str, Any]]:
    """File stem → event."""
    return {
        **rest_events(),
        "authorizer": authorizer_event(),
        "aggregate_counts_stream": stream_event(),
        "audit_trail_stream": audit_stream_event(),
        "metering_logs": metering_event(),
        "deliver_webhook_sqs": webhook_delivery_event(),
    }


def render(event: Mapping[str, Any]) -> str:
    return json.dumps(event, indent=2) + "\n"


def write(directory: Path = EVENTS_DIR, events: Mapping[str, Mapping[str, Any]] | None = None) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for stem, event in (sample_events() if events is None else events).items():
        path = directory / f"{stem}.json"
        path.write_text(render(event), encoding="utf-8")
        paths.append(path)
    return paths


def with_fresh_tokens(
    token_for: Callable[[str, bool], str], credentials_for: Callable[[str], TenantCredentials]
) -> dict[str, dict[str, Any]]:
    """The sample events, each REST event with a token of its user
    (``token_for(username, admin)``), that token's claims and the tenant
    credentials the authorizer gets for it (``credentials_for(token)``), as API
    Gateway passes them; the stream event as it is."""
    events = sample_events()
    for stem, event in events.items():
        if event.get("type") == "TOKEN":
            events[stem] = {**event, "authorizationToken": f"Bearer {token_for(MEMBER.username, False)}"}
            continue
        context = (event.get("requestContext") or {}).get("authorizer")
        if context:
            admin = "admin" in json.loads(context.get("groups", "[]"))
            token = token_for(context["username"], admin)
            events[stem] = with_token(event, token, credentials_for(token))
    return events


def write_local(
    directory: Path,
    pool: UserPool,
    credentials_for: Callable[[str], TenantCredentials],
    stream_arn: str | None = None,
) -> list[Path]:
    """The sample events with fresh ID tokens of the local pool's users (created
    in tenant acme if needed) and the local identity pool's credentials for them,
    the stream events naming ``stream_arn`` (the running stack's table's stream):
    what ``sam local invoke`` runs against ``make dev``."""

    def token_for(username: str, admin: bool) -> str:
        ensure_user(pool, username, TENANT, admin=admin)
        return id_token(pool, username)

    events = with_fresh_tokens(token_for, credentials_for)
    return write(directory, events if stream_arn is None else from_stream(events, stream_arn))


def from_stream(events: Mapping[str, Mapping[str, Any]], stream_arn: str) -> dict[str, dict[str, Any]]:
    """``events`` with every stream record's ``eventSourceARN`` set to ``stream_arn``: the
    stream functions take a record's table from it, and a table that is neither the
    function's pool table (its ``TABLE_NAME``) nor a tenant's own is poison, so the
    sample files' ``SupportTicket`` would be poison to a stack whose table has another
    name."""
    moved: dict[str, dict[str, Any]] = {}
    for stem, event in events.items():
        records = event.get("Records")
        if isinstance(records, list) and all(record.get("eventSource") == "aws:dynamodb" for record in records):
            moved[stem] = {**event, "Records": [{**record, "eventSourceARN": stream_arn} for record in records]}
        else:
            moved[stem] = dict(event)
    return moved


if __name__ == "__main__":
    for written in write():
        print(written.relative_to(PROJECT_ROOT))
