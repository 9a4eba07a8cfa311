"""An audit event as the API shows it: plain ``TypedDict`` shapes, no pydantic.

The audit writer (a stream function) builds these on every record, so they cost
it nothing to import; the API's ``AuditPage`` (:mod:`support_tickets.core.models`)
and the OpenAPI document use them as they are: pydantic reads a TypedDict's
fields, docstring and ``__pydantic_config__`` exactly as it reads a model's, so
the schema is the one a ``BaseModel`` with ``extra="forbid"`` gives.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypedDict

AuditEventType = Literal["created", "updated", "comment_added", "deleted"]
AuditField = Literal["title", "status", "resolver"]


class FieldChange(TypedDict):
    """A tracked field before and after the change (``null``: absent, or unassigned)."""

    field: AuditField
    old: str | None
    new: str | None


class AuditEvent(TypedDict):
    """One change to a ticket, as the stream recorded it.

    ``actor`` is the user that made the change (``null`` when it was made
    outside the API without naming one, e.g. a direct write that did not bump
    ``version``). ``changes`` lists title, status and resolver where they
    differ (``created``: from nothing, ``deleted``: to nothing); the description
    is never copied, ``description_changed`` says whether it changed."""

    event_id: str
    ticket_id: str
    type: AuditEventType
    actor: str | None
    at: str
    version: int | None
    changes: list[FieldChange]
    description_changed: bool
    comment_id: str | None


# What pydantic reads to close a shape's schema (``additionalProperties: false``):
# a response never has a key its class does not declare. core.models closes its
# response dataclasses with it too.
FORBID_EXTRA: Final[dict[str, Any]] = {"extra": "forbid"}
FieldChange.__pydantic_config__ = FORBID_EXTRA  # type: ignore[attr-defined]
AuditEvent.__pydantic_config__ = FORBID_EXTRA  # type: ignore[attr-defined]
