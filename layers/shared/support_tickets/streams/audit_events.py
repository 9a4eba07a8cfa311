"""The audit trail: every change to a ticket, whoever made it, from the table's stream.

The audit writer (``functions/audit_trail``) receives, through its
FilterCriteria, the INSERT, MODIFY and REMOVE records of ticket summaries and
the INSERT records of comments, and turns each record into at most one
:class:`~support_tickets.core.audit.AuditEvent`:

- a summary INSERT is ``created``; a REMOVE is ``deleted``; a MODIFY is
  ``updated`` when title, status or resolver differ (old and new values) or
  the description changed (noted, never copied), and nothing otherwise: a
  reshard move (only ``tenant_status``'s shard suffix changes,
  :func:`support_tickets.core.keys.status_from_tenant_status` strips it) and the
  delete's ``deleted_by`` mark record nothing;
- a comment INSERT is ``comment_added`` (the comment id, never its body).

Who: the layer writes the acting user with every change (``created_by`` /
``updated_by`` on summaries, ``author`` on comments, ``deleted_by`` just before
a delete), so the record's images name the actor. A change that did not bump
``version`` was not made by the API (an operator's direct write): its actor is
``null`` rather than the previous change's user.

When: the time the layer wrote with the change (``created_at``,
``updated_at``, ``deleted_at``), in milliseconds; if it is missing, or more than
:data:`MAX_CLOCK_SKEW_SECONDS` away from the stream's own
``ApproximateCreationDateTime`` (a migration that copied old timestamps), the
stream's time. Retention counts from the stream's time.

**Exactly once** without bookkeeping: an event is keyed by its stream record
(``<time>#<sequence number>#<event id>``, all taken from the record itself,
so every redelivery computes the same key) and written with ``attribute_not_exists``:
a redelivered record finds its items and writes nothing. Records are
independent of each other, so any redelivery shape (the same batch again, a
suffix, bisected halves, shards interleaving) ends with each event written
once. Each event is stored twice (the ticket's history, the tenant's trail of
the day: :mod:`support_tickets.core.keys`); a record that failed between the two
puts is retried and completes the second.

Records of items an offboarding erases (marked ``erasing``) record nothing:
the FilterCriteria keep them away, and should one arrive anyway it is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from support_tickets.core import keys
from support_tickets.core.audit import AuditEvent, AuditEventType, FieldChange
from support_tickets.core.digits import is_digits
from support_tickets.data.audit_items import epoch_of, iso_time
from support_tickets.streams.records import PoisonRecord, creation_seconds, record_fields

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

MAX_CLOCK_SKEW_SECONDS: Final = 15 * 60
MAX_ACTOR_LENGTH: Final = 256
TRACKED_FIELDS: Final = ("title", "status", "resolver")
_TIME = re.compile(rf"^{keys.AUDIT_TIME_PATTERN}$")
_EVENT_ID = re.compile(rf"^{keys.EVENT_ID_PATTERN}$")


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """What one stream record means for the trail: an event, nothing, or poison."""

    event_id: str
    sequence_number: str
    tenant_id: str | None
    event: AuditEvent | None = None
    recorded_at: float | None = None
    poison: str | None = None


@dataclass(frozen=True, slots=True)
class _TicketState:
    """A summary image, reduced to what the trail compares."""

    title: str
    status: str
    resolver: str | None
    description: str
    version: int | None
    created_by: str | None
    created_at: str | None
    updated_by: str | None
    updated_at: str | None
    deleted_by: str | None
    deleted_at: str | None

    def tracked(self, field: str) -> str | None:
        value: str | None = getattr(self, field)
        return value


def _text(value: object, limit: int = MAX_ACTOR_LENGTH) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


def _state(image: Mapping[str, Any] | None, tenant_id: str) -> _TicketState | None:
    if not image:
        return None
    tenant_status = image.get("tenant_status")
    if not isinstance(tenant_status, str) or not tenant_status.startswith(keys.tenant_prefix(tenant_id)):
        raise PoisonRecord("ticket summary whose tenant_status is not of its own tenant")
    try:
        status = keys.status_from_tenant_status(tenant_status).value
    except ValueError as exc:
        raise PoisonRecord(f"unknown status in {tenant_status[:100]!r}") from exc
    title, resolver = image.get("title"), image.get("resolver")
    if not isinstance(title, str) or not isinstance(resolver, str):
        raise PoisonRecord("ticket summary without title or resolver")
    version = image.get("version")
    description = image.get("description")
    return _TicketState(
        title=title,
        status=status,
        resolver=keys.resolver_from_key(resolver),
        description=description if isinstance(description, str) else "",
        version=int(version) if isinstance(version, int | Decimal) else None,
        created_by=_text(image.get("created_by")),
        created_at=_text(image.get("created_at")),
        updated_by=_text(image.get("updated_by")),
        updated_at=_text(image.get("updated_at")),
        deleted_by=_text(image.get("deleted_by")),
        deleted_at=_text(image.get("deleted_at")),
    )


def _when(written: str | None, recorded_at: float | None) -> str:
    """The change's time: what the layer wrote, unless it is missing or far from the stream's."""
    if (
        written is not None
        and _TIME.fullmatch(written)
        and (recorded_at is None or abs(epoch_of(written) - recorded_at) <= MAX_CLOCK_SKEW_SECONDS)
    ):
        return written
    if recorded_at is None:
        raise PoisonRecord("a change with no time")
    return iso_time(recorded_at)


def _changes(old: _TicketState | None, new: _TicketState | None) -> list[FieldChange]:
    changes = []
    for name in TRACKED_FIELDS:
        before = old.tracked(name) if old else None
        after = new.tracked(name) if new else None
        if before != after:
            changes.append(FieldChange(field=name, old=before, new=after))
    return changes


def _summary_event(
    *,
    event_name: str,
    event_id: str,
    ticket_id: str,
    recorded_at: float | None,
    old: _TicketState | None,
    new: _TicketState | None,
) -> AuditEvent | None:
    if (event_name != "INSERT" and old is None) or (event_name != "REMOVE" and new is None):
        raise PoisonRecord("the stream must carry NEW_AND_OLD_IMAGES")
    changes = _changes(old, new)
    description_changed = (old.description if old else "") != (new.description if new else "")
    kind: AuditEventType
    if event_name == "INSERT" and new is not None:
        kind, actor, written, version = "created", new.updated_by or new.created_by, new.created_at, new.version
    elif event_name == "REMOVE" and old is not None:
        kind, actor, written, version = "deleted", old.deleted_by, old.deleted_at, old.version
    elif old is not None and new is not None:
        if not changes and not description_changed:
            return None  # a reshard move, the delete's mark, a write that changed nothing shown
        by_the_api = new.version is not None and new.version != old.version
        kind, version = "updated", new.version
        actor, written = (new.updated_by, new.updated_at) if by_the_api else (None, None)
    else:  # pragma: no cover - excluded by the image checks above
        raise PoisonRecord("images do not match the event")
    return AuditEvent(
        event_id=event_id,
        ticket_id=ticket_id,
        type=kind,
        actor=actor,
        at=_when(written, recorded_at),
        version=version,
        changes=changes,
        description_changed=description_changed,
        comment_id=None,
    )


def _comment_event(
    event_id: str, ticket_id: str, recorded_at: float | None, new: Mapping[str, Any] | None
) -> AuditEvent:
    comment_id = (new or {}).get("comment_id")
    if not new or not isinstance(comment_id, str) or not comment_id:
        raise PoisonRecord("comment without its id (the stream must carry NEW_AND_OLD_IMAGES)")
    return AuditEvent(
        event_id=event_id,
        ticket_id=ticket_id,
        type="comment_added",
        actor=_text(new.get("author")),
        at=_when(_text(new.get("created_at")), recorded_at),
        version=None,
        changes=[],
        description_changed=False,
        comment_id=comment_id[:128],
    )


def audit_record(
    *,
    event_name: str,
    event_id: str,
    sequence_number: str,
    recorded_at: float | None,
    keys_image: Mapping[str, Any],
    old_image: Mapping[str, Any] | None,
    new_image: Mapping[str, Any] | None,
) -> AuditRecord:
    """One stream record as an audit event (or nothing, or poison)."""
    pk, sk = keys_image.get("pk"), keys_image.get("sk")
    tenant_id: str | None = None
    try:
        if not isinstance(pk, str) or not isinstance(sk, str):
            raise PoisonRecord("not a ticket item")
        try:
            tenant_id = keys.tenant_of_key(pk)
        except ValueError as exc:
            raise PoisonRecord("a key without a valid tenant") from exc
        ticket_prefix = keys.tenant_prefix(tenant_id) + "TICKET#"
        ticket_id = pk[len(ticket_prefix) :] if pk.startswith(ticket_prefix) else ""
        if not keys.is_valid_ticket_id(ticket_id):
            raise PoisonRecord("not a ticket item")
        if not _EVENT_ID.fullmatch(event_id):
            raise PoisonRecord("invalid event id")
        if not is_digits(sequence_number) or len(sequence_number) > keys.SEQUENCE_DIGITS:
            raise PoisonRecord("invalid sequence number")
        if event_name not in {"INSERT", "MODIFY", "REMOVE"}:
            raise PoisonRecord(f"unknown event {event_name[:20]!r}")
        if any(image and image.get(keys.ERASING_ATTRIBUTE) for image in (old_image, new_image)):
            return AuditRecord(event_id, sequence_number, tenant_id, recorded_at=recorded_at)  # being erased
        event: AuditEvent | None
        if sk == keys.SUMMARY_SK:
            old = _state(old_image, tenant_id) if event_name != "INSERT" else None
            new = _state(new_image, tenant_id) if event_name != "REMOVE" else None
            event = _summary_event(
                event_name=event_name,
                event_id=event_id,
                ticket_id=ticket_id,
                recorded_at=recorded_at,
                old=old,
                new=new,
            )
        elif sk.startswith(keys.COMMENT_SK_PREFIX):
            # Comments are never edited; their removal comes with a deleted ticket.
            event = _comment_event(event_id, ticket_id, recorded_at, new_image) if event_name == "INSERT" else None
        else:
            raise PoisonRecord("not a ticket summary or comment")
    except PoisonRecord as exc:
        return AuditRecord(event_id, sequence_number, tenant_id, recorded_at=recorded_at, poison=str(exc))
    return AuditRecord(event_id, sequence_number, tenant_id, event=event, recorded_at=recorded_at)


def audit_record_from_stream(record: DynamoDBRecord) -> AuditRecord:
    """:func:`audit_record` for a record as Lambda delivers it (Powertools' data class)."""
    stream = record.dynamodb
    recorded_at = creation_seconds(stream.get("ApproximateCreationDateTime") if stream is not None else None)
    return audit_record(**record_fields(record), recorded_at=recorded_at)
