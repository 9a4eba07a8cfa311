"""The API's request and response shapes, and the table's item shapes.

The API's shapes also generate docs/openapi.json.

No pydantic here: every API function imports this module on its cold start,
and pydantic's import alone would cost it more than a fifth of the floor
(bench/results.md, "Where an API function's import goes"). So:

- a request body is declared once, as the JSON Schema in its class's
  ``SCHEMA``: :mod:`support_tickets.api.validation` checks bodies against it and
  the OpenAPI document shows it as it is; the dataclass is the typed view the
  domain receives once a body passed (tests/unit/test_models.py holds the two
  to the same fields);
- responses are frozen dataclasses: Powertools' encoder serializes them, and
  the OpenAPI generator (pydantic, at build time only) reads their fields,
  docstrings and ``__pydantic_config__`` as it reads a model's;
- stored items are dataclasses read with :meth:`TicketItem.from_row`, which
  refuses a row that is not a well-formed ticket summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, Final, NotRequired, TypedDict

from support_tickets.core import keys
from support_tickets.core.audit import FORBID_EXTRA, AuditEvent, AuditEventType, AuditField, FieldChange
from support_tickets.core.keys import TicketStatus

# The audit event's shapes are plain TypedDicts (the stream's audit writer builds
# them on its cold start); AuditPage and the OpenAPI document use them as they are.
__all__ = ["AuditEvent", "AuditEventType", "AuditField", "FieldChange"]

MAX_BATCH_TICKETS = 100

JsonSchema = Mapping[str, Any]

STATUS_SCHEMA: Final[JsonSchema] = {"type": "string", "enum": [status.value for status in TicketStatus]}
_TITLE: Final[JsonSchema] = {"type": "string", "minLength": 1, "maxLength": 200}
_DESCRIPTION: Final[JsonSchema] = {"type": "string", "maxLength": 10_000}
_RESOLVER: Final[JsonSchema] = {"type": ["string", "null"], "pattern": keys.RESOLVER_PATTERN}


# ---------------------------------------------------------------- requests
@dataclass(frozen=True)
class CreateTicketRequest:
    SCHEMA: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {
            "title": _TITLE,
            "description": {**_DESCRIPTION, "default": ""},
            "resolver": {**_RESOLVER, "default": None},
        },
        "required": ["title"],
        "additionalProperties": False,
    }

    title: str
    description: str = ""
    resolver: str | None = None


class UpdateTicketRequest:
    """Only the fields present change; ``resolver: null`` unassigns."""

    SCHEMA: ClassVar[JsonSchema] = {
        "type": "object",
        "description": "Only the fields present change; `resolver: null` unassigns.",
        "properties": {"title": _TITLE, "description": _DESCRIPTION, "status": STATUS_SCHEMA, "resolver": _RESOLVER},
        "minProperties": 1,
        "additionalProperties": False,
    }

    __slots__ = ("_changes",)

    def __init__(self, **changes: Any) -> None:
        if changes.get("status") is not None:
            changes["status"] = TicketStatus(changes["status"])
        self._changes = changes

    def changes(self) -> dict[str, Any]:
        return dict(self._changes)


@dataclass(frozen=True)
class AddCommentRequest:
    SCHEMA: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {"body": {"type": "string", "minLength": 1, "maxLength": 10_000}},
        "required": ["body"],
        "additionalProperties": False,
    }

    body: str


@dataclass(frozen=True)
class BatchStatusRequest:
    SCHEMA: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {
            "ticket_ids": {
                "type": "array",
                "items": {"type": "string", "pattern": keys.TICKET_ID_PATTERN},
                "minItems": 1,
                "maxItems": MAX_BATCH_TICKETS,
                "uniqueItems": True,
            },
            "status": STATUS_SCHEMA,
        },
        "required": ["ticket_ids", "status"],
        "additionalProperties": False,
    }

    ticket_ids: list[str]
    status: TicketStatus

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", TicketStatus(self.status))  # the checked body gives its value


WEBHOOK_EVENT_TYPES: Final = ("ticket.created", "ticket.updated", "ticket.deleted", "comment.added")
MAX_WEBHOOK_URL_LENGTH: Final = 2048


@dataclass(frozen=True)
class CreateWebhookRequest:
    """The URL's rules beyond its length are the domain's (400 ``INVALID_WEBHOOK_URL``)."""

    SCHEMA: ClassVar[JsonSchema] = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "minLength": 1, "maxLength": MAX_WEBHOOK_URL_LENGTH},
            "events": {
                "type": "array",
                "items": {"type": "string", "enum": list(WEBHOOK_EVENT_TYPES)},
                "minItems": 1,
                "maxItems": len(WEBHOOK_EVENT_TYPES),
                "uniqueItems": True,
            },
            "description": {"type": "string", "maxLength": 500, "default": ""},
        },
        "required": ["url", "events"],
        "additionalProperties": False,
    }

    url: str
    events: list[str]
    description: str = ""


# ---------------------------------------------------------------- responses
@dataclass(frozen=True)
class TicketListItem:
    """A row of a status list: the ticket without its description (GSI1 projects
    only what list views show)."""

    ticket_id: str
    title: str
    status: TicketStatus
    resolver: str | None
    created_by: str
    created_at: str
    updated_at: str
    version: int


@dataclass(frozen=True)
class Ticket(TicketListItem):
    description: str


@dataclass(frozen=True)
class Comment:
    comment_id: str
    author: str
    body: str
    created_at: str


@dataclass(frozen=True)
class TicketPage:
    items: list[TicketListItem]
    next_cursor: str | None


@dataclass(frozen=True)
class TicketWithComments:
    ticket: Ticket
    comments: list[Comment]
    next_cursor: str | None


@dataclass(frozen=True)
class BatchStatusResponse:
    updated: list[str]
    status: TicketStatus


@dataclass(frozen=True)
class AggregatesResponse:
    counts: dict[TicketStatus, int]
    total: int


@dataclass(frozen=True)
class AuditPage:
    events: list[AuditEvent]
    next_cursor: str | None


@dataclass(frozen=True)
class Webhook:
    """A registered endpoint; its secret is never part of it."""

    webhook_id: str
    url: str
    events: list[str]
    description: str
    status: str
    created_at: str


@dataclass(frozen=True)
class CreatedWebhook(Webhook):
    """The webhook as created, with its signing secret: the only time it is shown."""

    secret: str


@dataclass(frozen=True)
class WebhookPage:
    items: list[Webhook]


@dataclass(frozen=True)
class RotatedSecret:
    """A webhook's new secret (shown once); the previous one signs until ``previous_secret_expires_at``."""

    webhook_id: str
    secret: str
    previous_secret_expires_at: str


# The usage object (API.md): TypedDicts (pydantic reads them as models), two of
# them in the functional form since a key of theirs ("lambda") is a Python keyword.
class UsageUnits(TypedDict):
    """DynamoDB read and write request units (index units included)."""

    read_units: float
    write_units: float


class UsageLambda(TypedDict):
    """Lambda invocations and GB-seconds (memory size x handler duration)."""

    invocations: int
    gb_seconds: float


class UsageWebhooks(TypedDict):
    """Webhook deliveries that ended (delivered or failed) and the attempts made, retries included."""

    deliveries: int
    attempts: int


UsageCost = TypedDict(
    "UsageCost",
    {
        "api_gateway": float,
        "lambda": float,
        "dynamodb": float,
        "webhooks": float,
        "dedicated": NotRequired[float],
        "total": float,
    },
)
UsageCost.__doc__ = (
    "Estimated cost in USD at documented list prices (support_tickets.usage.prices); `webhooks`: the "
    "delivery function's Lambda cost and its SQS and KMS requests (its DynamoDB units are in `dynamodb`); "
    "`dedicated`, for a tenant placed in a table of its own: the day's share of its own key (docs/usage.md)."
)
UsageResponse = TypedDict(
    "UsageResponse",
    {
        "tenant_id": str,
        "day": str,
        "requests": dict[str, int],
        "requests_total": int,
        "dynamodb": UsageUnits,
        "lambda": UsageLambda,
        "webhooks": UsageWebhooks,
        "cost_usd": UsageCost,
        "final": bool,
    },
)
UsageResponse.__doc__ = (
    "What the tenant consumed and cost on one UTC day; `requests` per `<METHOD> <route path>`. "
    "`final`: the day's figures no longer change."
)
for _usage_shape in (UsageUnits, UsageLambda, UsageWebhooks, UsageCost, UsageResponse):
    setattr(_usage_shape, "__pydantic_config__", FORBID_EXTRA)  # noqa: B010 - a class attribute mypy does not know


@dataclass(frozen=True)
class Delivery:
    """One event's delivery to one webhook: ``PENDING`` while attempts go on
    (``next_attempt_at`` says when the next one is due), then ``DELIVERED`` or ``FAILED``.
    ``failure_reason``: why the queue refused the event for good (what SQS answered), on a
    delivery ``FAILED`` without an attempt; ``null`` otherwise, and again once an attempt is made."""

    delivery_id: str
    event_id: str
    type: str
    status: str
    attempts: int
    last_status_code: int | None
    next_attempt_at: str | None
    created_at: str
    failure_reason: str | None = None


@dataclass(frozen=True)
class DeliveryPage:
    items: list[Delivery]
    next_cursor: str | None


@dataclass(frozen=True)
class ErrorDetail:
    code: str
    message: str
    details: Any = None


@dataclass(frozen=True)
class ErrorResponse:
    error: ErrorDetail


_RESPONSES: tuple[type, ...] = (
    TicketListItem,
    Ticket,
    Comment,
    TicketPage,
    TicketWithComments,
    BatchStatusResponse,
    AggregatesResponse,
    AuditPage,
    Webhook,
    CreatedWebhook,
    WebhookPage,
    RotatedSecret,
    Delivery,
    DeliveryPage,
    ErrorDetail,
    ErrorResponse,
)
for _response in _RESPONSES:
    setattr(_response, "__pydantic_config__", FORBID_EXTRA)  # noqa: B010 - a class attribute mypy does not know


# ---------------------------------------------------------------- stored items
class MalformedItem(ValueError):
    """A stored row that is not the item it should be (a missing or mistyped attribute)."""


def _text(row: Mapping[str, Any], name: str, default: str | None = None) -> str:
    value = row.get(name, default)
    if not isinstance(value, str):
        raise MalformedItem(f"{name}: expected a string")
    return value


def _optional_text(row: Mapping[str, Any], name: str) -> str | None:
    value = row.get(name)
    if value is not None and not isinstance(value, str):
        raise MalformedItem(f"{name}: expected a string or nothing")
    return value


def _whole_number(row: Mapping[str, Any], name: str) -> int:
    # boto3 reads numbers as Decimal; a bool is not a number here.
    value = row.get(name)
    if isinstance(value, bool) or value is None:
        raise MalformedItem(f"{name}: expected a whole number")
    try:
        number = int(value)
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise MalformedItem(f"{name}: expected a whole number") from exc
    if number != value:
        raise MalformedItem(f"{name}: expected a whole number")
    return number


@dataclass(frozen=True)
class TicketItem:
    """A ticket summary as stored: the status lives only in ``tenant_status``."""

    pk: str
    sk: str
    tenant_status: str
    resolver: str
    ticket_id: str
    title: str
    created_by: str
    created_at: str
    updated_at: str
    version: int
    description: str = ""
    # Who made the last change (the stream's images name the actor of each
    # change: support_tickets.streams.audit_events); absent on items written before it existed.
    updated_by: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TicketItem:
        """The summary a row (plain values, as ``from_item`` gives them) holds;
        other attributes are ignored, a missing or mistyped one is :class:`MalformedItem`."""
        status_key = _text(row, "tenant_status")
        try:
            keys.status_from_tenant_status(status_key)
        except (IndexError, ValueError) as exc:
            raise MalformedItem("tenant_status: not a status key") from exc
        return cls(
            pk=_text(row, "pk"),
            sk=_text(row, "sk"),
            tenant_status=status_key,
            resolver=_text(row, "resolver"),
            ticket_id=_text(row, "ticket_id"),
            title=_text(row, "title"),
            description=_text(row, "description", ""),
            created_by=_text(row, "created_by"),
            created_at=_text(row, "created_at"),
            updated_at=_text(row, "updated_at"),
            version=_whole_number(row, "version"),
            updated_by=_optional_text(row, "updated_by"),
        )

    def stored(self) -> dict[str, Any]:
        """The attributes to write, in declaration order."""
        return asdict(self)

    @property
    def status(self) -> TicketStatus:
        return keys.status_from_tenant_status(self.tenant_status)

    def list_item(self) -> TicketListItem:
        return TicketListItem(**self._api_fields())

    def ticket(self) -> Ticket:
        return Ticket(description=self.description, **self._api_fields())

    def _api_fields(self) -> dict[str, Any]:
        return {
            "ticket_id": self.ticket_id,
            "title": self.title,
            "status": self.status,
            "resolver": keys.resolver_from_key(self.resolver),
            "created_by": self.created_by,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "version": self.version,
        }


@dataclass(frozen=True)
class CommentItem:
    pk: str
    sk: str
    comment_id: str
    author: str
    body: str
    created_at: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CommentItem:
        return cls(**{field.name: _text(row, field.name) for field in fields(cls)})

    def stored(self) -> dict[str, Any]:
        return asdict(self)

    def comment(self) -> Comment:
        return Comment(comment_id=self.comment_id, author=self.author, body=self.body, created_at=self.created_at)
