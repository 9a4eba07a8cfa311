"""Finishing a ticket's delete from its tombstone's stream records (the audit-trail function).

``DELETE /tickets/{id}`` deletes the summary and puts the ticket's tombstone
(``TENANT#<t>|TICKET#<id>``, ``DELETING``) in one transaction, then deletes
the comments for a few seconds at most and the tombstone last
(:meth:`~support_tickets.data.ticket_repository.TicketRepository.delete_ticket`).
Whatever it leaves (a killed or timed-out function, a throttled partition, a
ticket with thousands of comments) is finished here: the tombstone's INSERT,
and the MODIFY of each further pass, reach the audit-trail function
(FilterCriteria in template.yaml), which deletes what is left of the ticket
and then the tombstone (:func:`~support_tickets.data.ticket_repository.finish_deleted_ticket`),
with its own role: a keys-only Query, DeleteItem and the pass counter's
UpdateItem under ``TENANT#*|TICKET#*``, nothing else of a ticket. A pass
stops at :data:`PASS_SECONDS` and touches the tombstone, whose MODIFY record
starts the next pass: a ticket of any size is finished, one bounded pass at
a time. A pass that fails (throttling, an outage) is the record's failure:
Lambda retries it (``MaximumRetryAttempts``), then the on-failure queue's
alarm calls an operator, and a new ``DELETE`` of the ticket finishes it too.

The records are the tenant's own change only in the table of its placement
(:mod:`support_tickets.streams.routing`): a move's copy of a tombstone is
skipped (the mover syncs the new table with the old), and while a move copies
the tenant, the deletes mark the ticket first (``TenantTable.marks_writes``),
as the request's did. No audit event, count or webhook comes of a tombstone:
the summary's REMOVE was the ``deleted`` event, once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from support_tickets.core import keys
from support_tickets.data.table import OwnClient, TenantTable
from support_tickets.streams.records import PoisonRecord
from support_tickets.streams.routing import RecordRoute, StreamRouter

# One pass over a tombstoned ticket: well inside the function's 60 s with the
# rest of its batch; the next pass is another record.
PASS_SECONDS: Final = 20.0
# What a pass leaves of the invocation's time for the rest of its batch.
INVOCATION_MARGIN_SECONDS: Final = 10.0


def is_tombstone_record(keys_image: Mapping[str, Any]) -> bool:
    """Whether a record's keys are a ticket's tombstone's."""
    return keys_image.get("sk") == keys.DELETING_SK


def tombstone_owner(keys_image: Mapping[str, Any]) -> tuple[str, str]:
    """The tenant and the ticket id a tombstone record names; poison for any other key."""
    pk = str(keys_image.get("pk", ""))
    try:
        tenant_id = keys.tenant_of_key(pk)
    except ValueError as exc:
        raise PoisonRecord("a tombstone of no tenant's ticket") from exc
    ticket_id = keys.ticket_id_of_suffix(keys.own_suffix(tenant_id, pk) or "")
    if ticket_id is None:
        raise PoisonRecord("a tombstone of no tenant's ticket")
    return tenant_id, ticket_id


def finish_pass(
    tenant_id: str, ticket_id: str, route: RecordRoute, router: StreamRouter, *, client: Any, seconds_left: float
) -> bool:
    """One pass over the tombstoned ticket in the record's table; True when it is finished."""
    # Here, not at module level: the ticket repository (its models, its listing) is a
    # tenth of the audit-trail function's import, and only a tombstone's records need it.
    from support_tickets.data.ticket_repository import finish_deleted_ticket

    budget = min(PASS_SECONDS, seconds_left - INVOCATION_MARGIN_SECONDS)
    marks = router.marks_writes(tenant_id, route.source)
    table = TenantTable(tenant_id, route.source, OwnClient(client), marks_writes=marks)
    return finish_deleted_ticket(table, ticket_id, deadline=time.monotonic() + max(budget, 0.0))
