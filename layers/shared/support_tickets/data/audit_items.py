"""Audit events as the table stores them: times, and an event to and from its item.

Shared by the writer (:mod:`support_tickets.streams.audit_writer`) and the
readers (:mod:`support_tickets.data.audit_repository`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from support_tickets.core import keys
from support_tickets.core.models import AuditEvent
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
            "sk": keys.audit_sk(event.at, sequence_number, event.event_id),
            **event.model_dump(mode="json"),
            "expiration": expiration,
        }
    )


def event_from_item(item: Mapping[str, Any]) -> AuditEvent:
    """A stored event (deserialized) as the API shows it."""
    return AuditEvent.model_validate({name: item.get(name) for name in AuditEvent.model_fields})
