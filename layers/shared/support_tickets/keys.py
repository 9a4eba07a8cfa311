"""Every key of the single-table model, built in one place.

All partition keys (table and GSI1) start with ``TENANT#<tenant>|``. The ``|``
terminates the tenant id, so the IAM pattern ``TENANT#1|*`` can never match
tenant ``10``'s ``TENANT#10|...`` keys. Tenant ids are validated before they
reach a key (see :func:`validate_tenant_id`), so no delimiter or IAM wildcard
can be smuggled in through one.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final

TENANT_ID_PATTERN: Final = r"^[a-z0-9-]{1,63}$"
TICKET_ID_PATTERN: Final = r"^[0-9A-Za-z_-]{1,64}$"
RESOLVER_PATTERN: Final = r"^[A-Za-z0-9._@-]{1,128}$"

_TENANT_ID = re.compile(TENANT_ID_PATTERN)
_TICKET_ID = re.compile(TICKET_ID_PATTERN)

SUMMARY_SK: Final = "SUMMARY"
COMMENT_SK_PREFIX: Final = "COMMENT#"
GSI1_NAME: Final = "GSI1"
# GSI1's sort key must exist for a ticket to appear in status lists, so an
# unassigned ticket stores this value; "#" can't occur in a user name.
UNASSIGNED_RESOLVER: Final = "#UNASSIGNED"


class TicketStatus(StrEnum):
    OPEN = "OPEN"
    IN_PROGRESS = "IN_PROGRESS"
    CLOSED = "CLOSED"


class InvalidTenantId(ValueError):
    """A tenant id that must never reach a key or a session tag."""


def validate_tenant_id(tenant_id: object) -> str:
    if not isinstance(tenant_id, str) or not _TENANT_ID.fullmatch(tenant_id):
        raise InvalidTenantId("tenant id must be 1-63 lowercase letters, digits or '-'")
    return tenant_id


def is_valid_ticket_id(ticket_id: str) -> bool:
    return bool(_TICKET_ID.fullmatch(ticket_id))


def tenant_prefix(tenant_id: str) -> str:
    return f"TENANT#{validate_tenant_id(tenant_id)}|"


def ticket_pk(tenant_id: str, ticket_id: str) -> str:
    if not is_valid_ticket_id(ticket_id):
        raise ValueError("invalid ticket id")
    return f"{tenant_prefix(tenant_id)}TICKET#{ticket_id}"


def ticket_key(tenant_id: str, ticket_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": ticket_pk(tenant_id, ticket_id)}, "sk": {"S": SUMMARY_SK}}


def comment_sk(created_at: str, comment_id: str) -> str:
    return f"{COMMENT_SK_PREFIX}{created_at}#{comment_id}"


def tenant_status(tenant_id: str, status: TicketStatus | str) -> str:
    return f"{tenant_prefix(tenant_id)}{TicketStatus(status).value}"


def status_from_tenant_status(value: str) -> TicketStatus:
    return TicketStatus(value.rsplit("|", 1)[1])


def resolver_key(resolver: str | None) -> str:
    return UNASSIGNED_RESOLVER if resolver is None else resolver


def resolver_from_key(value: str) -> str | None:
    return None if value == UNASSIGNED_RESOLVER else value


def aggregate_pk(tenant_id: str) -> str:
    return f"{tenant_prefix(tenant_id)}AGGREGATE"


def idempotency_pk(tenant_id: str) -> str:
    return f"{tenant_prefix(tenant_id)}IDEMPOTENCY"


def tenant_of_key(pk: str) -> str:
    """The tenant id a partition key belongs to (inverse of :func:`tenant_prefix`)."""
    if not pk.startswith("TENANT#") or "|" not in pk:
        raise ValueError("not a tenant key")
    return validate_tenant_id(pk[len("TENANT#") : pk.index("|")])
