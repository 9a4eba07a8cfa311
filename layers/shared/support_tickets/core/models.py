"""Request and response models (they also generate docs/openapi.json) and the
stored item shapes of the single-table model."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from support_tickets.core import keys
from support_tickets.core.audit import AuditEvent, AuditEventType, AuditField, FieldChange
from support_tickets.core.keys import TicketStatus

# The audit event's shapes are pydantic-free (the stream's audit writer builds
# them on its cold start); AuditPage and the OpenAPI document use them as they are.
__all__ = ["AuditEvent", "AuditEventType", "AuditField", "FieldChange"]

Title = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Description = Annotated[str, StringConstraints(max_length=10_000)]
Resolver = Annotated[str, StringConstraints(pattern=keys.RESOLVER_PATTERN)]
CommentBody = Annotated[str, StringConstraints(min_length=1, max_length=10_000)]
TicketId = Annotated[str, StringConstraints(pattern=keys.TICKET_ID_PATTERN)]

MAX_BATCH_TICKETS = 100


# Every function imports this module, and each uses only a few of its models:
# defer_build makes pydantic build a model's validator and serializer on first
# use, so a cold start pays only for the models its route touches.
_DEFERRED = ConfigDict(defer_build=True)


class _Request(BaseModel):
    # Unknown fields are a 400, not silently dropped.
    model_config = ConfigDict(extra="forbid", **_DEFERRED)


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid", **_DEFERRED)


# ---------------------------------------------------------------- requests
class CreateTicketRequest(_Request):
    title: Title
    description: Description = ""
    resolver: Resolver | None = None


class UpdateTicketRequest(_Request):
    """Only the fields present change; ``resolver: null`` unassigns."""

    title: Title = Field(default=None)  # type: ignore[assignment]
    description: Description = Field(default=None)  # type: ignore[assignment]
    status: TicketStatus = Field(default=None)  # type: ignore[assignment]
    resolver: Resolver | None = None

    @model_validator(mode="after")
    def _something_to_change(self) -> Self:
        if not self.model_fields_set:
            raise ValueError("at least one of title, description, status, resolver is required")
        return self

    def changes(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.model_fields_set}


class AddCommentRequest(_Request):
    body: CommentBody


class BatchStatusRequest(_Request):
    ticket_ids: list[TicketId] = Field(min_length=1, max_length=MAX_BATCH_TICKETS)
    status: TicketStatus

    @field_validator("ticket_ids")
    @classmethod
    def _distinct(cls, ticket_ids: list[str]) -> list[str]:
        if len(set(ticket_ids)) != len(ticket_ids):
            raise ValueError("ticket_ids must be distinct")
        return ticket_ids


# ---------------------------------------------------------------- responses
class TicketListItem(_Response):
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


class Ticket(TicketListItem):
    description: str


class Comment(_Response):
    comment_id: str
    author: str
    body: str
    created_at: str


class TicketPage(_Response):
    items: list[TicketListItem]
    next_cursor: str | None


class TicketWithComments(_Response):
    ticket: Ticket
    comments: list[Comment]
    next_cursor: str | None


class BatchStatusResponse(_Response):
    updated: list[str]
    status: TicketStatus


class AggregatesResponse(_Response):
    counts: dict[TicketStatus, int]
    total: int


class AuditPage(_Response):
    events: list[AuditEvent]
    next_cursor: str | None


class ErrorDetail(_Response):
    code: str
    message: str
    details: Any = None


class ErrorResponse(_Response):
    error: ErrorDetail


# ---------------------------------------------------------------- stored items
class TicketItem(BaseModel):
    """A ticket summary as stored: the status lives only in ``tenant_status``."""

    model_config = ConfigDict(extra="ignore", **_DEFERRED)

    pk: str
    sk: str
    tenant_status: str
    resolver: str
    ticket_id: str
    title: str
    description: str = ""
    created_by: str
    created_at: str
    updated_at: str
    version: int
    # Who made the last change (the stream's images name the actor of each
    # change: support_tickets.streams.audit_events); absent on items written before it existed.
    updated_by: str | None = None

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


class CommentItem(BaseModel):
    model_config = ConfigDict(extra="ignore", **_DEFERRED)

    pk: str
    sk: str
    comment_id: str
    author: str
    body: str
    created_at: str

    def comment(self) -> Comment:
        return Comment(comment_id=self.comment_id, author=self.author, body=self.body, created_at=self.created_at)
