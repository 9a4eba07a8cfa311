"""The one way into a tenant's data for every domain operation, refused for a suspended tenant.

It is the caller's tenant's view of the table.

Its own module so that each route's operations (tickets, webhooks) load only
their own repositories on a cold start.
"""

from __future__ import annotations

from support_tickets.core.errors import TenantMoving, TenantSuspended
from support_tickets.core.identity import Caller
from support_tickets.core.settings import get_settings
from support_tickets.data.placement import data_table, marks_writes, served_here, writes_paused
from support_tickets.data.session import tenant_clients
from support_tickets.data.table import MoveFence, TenantTable
from support_tickets.data.tenant_registry import TenantStatus, tenant_configs


def table_for(caller: Caller) -> TenantTable:
    """The caller's tenant's view of its table, every repository works through
    it, with the credentials the authorizer obtained for the caller's own token
    (never for a tenant id); a suspended tenant gets no further (its data stays
    as it is).

    The tenant record (in the pool table, cached) names the table: the pool's,
    or the tenant's own; while a move switches tables, the view refuses writes
    (503 ``TENANT_MOVING``) and reads go on (support_tickets.data.placement);
    while it copies them, every write is fenced by the record
    (:class:`~support_tickets.data.table.MoveFence`). A tenant arriving from
    another cell, or moved out to one, is refused here altogether (503
    ``TENANT_MOVING``, reads included: this cell's copy is incomplete, or no
    longer the tenant's)."""
    pool_table = get_settings().table_name
    clients = tenant_clients().for_caller(caller)
    record = tenant_configs().get(TenantTable(caller.tenant_id, pool_table, clients))
    if not served_here(record):
        raise TenantMoving(TenantMoving.cell_message)
    if record.status is TenantStatus.SUSPENDED:
        raise TenantSuspended()
    return TenantTable(
        caller.tenant_id,
        data_table(record, pool_table),
        clients,
        writes_paused=writes_paused(record),
        marks_writes=marks_writes(record),
        fence=MoveFence.of(record, pool_table),
    )
