"""Audit events as the table stores them: times, and an event to and from its item.

Shared by the writer (:mod:`support_tickets.streams.audit_writer`) and the
readers (:mod:`support_tickets.data.audit_repository`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final, cast, get_args

from support_tickets.core import keys
from support_tickets.core.audit import AuditEvent, AuditEventType, AuditField, FieldChange
from support_tickets.data.table import to_item


def iso_time(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch_of(at: str) -> float:
    return datetime.fromisoformat(at).timestamp()


def stored_item(event: AuditEvent, sequence_number: str, pk: str, expiration: int) -> dict[str, Any]:
    """An event as stored under ``pk`` (DynamoDB JSON)."""
    return to_item(
        {
            "pk": pk,
            "sk": keys.audit_sk(event["at"], sequence_number, event["event_id"]),
            **event,
            "expiration": expiration,
        }
    )


def event_from_item(item: Mapping[str, Any]) -> AuditEvent:
    """A stored event (deserialized) as the API shows it; an item that is not
    one (no audit writer wrote it) raises :class:`InvalidAuditItem`."""
    kind, version, changes = item.get("type"), item.get("version"), item.get("changes") or []
    if kind not in _TYPES or not isinstance(changes, list):
        raise InvalidAuditItem(f"not an audit event: type {kind!r}")
    return AuditEvent(
        event_id=_text(item.get("event_id")),
        ticket_id=_text(item.get("ticket_id")),
        type=cast("AuditEventType", kind),  # one of _TYPES, checked above
        actor=_text_or_none(item.get("actor")),
        at=_text(item.get("at")),
        version=None if version is None else _integer(version),
        changes=[_change(change) for change in changes],
        description_changed=item.get("description_changed") is True,
        comment_id=_text_or_none(item.get("comment_id")),
    )


def _change(change: object) -> FieldChange:
    if not isinstance(change, Mapping) or change.get("field") not in _FIELDS:
        raise InvalidAuditItem("not a field change")
    return FieldChange(
        field=change["field"], old=_text_or_none(change.get("old")), new=_text_or_none(change.get("new"))
    )


_TYPES: Final[frozenset[Any]] = frozenset(get_args(AuditEventType))
_FIELDS: Final[frozenset[Any]] = frozenset(get_args(AuditField))


class InvalidAuditItem(ValueError):
    """A stored audit item that is not an event (never written by the audit writer)."""


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidAuditItem("a text attribute is missing")
    return value


def _text_or_none(value: object) -> str | None:
    return None if value is None else _text(value)


def _integer(value: object) -> int:
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InvalidAuditItem("version is not an integer")
