"""The pool table, where every tenant's record and usage ledger stay, whatever its placement.

A dedicated tenant's data lives in a table of its own
(:mod:`support_tickets.data.placement`), but its tenant record (the router
that names that table) and its usage ledger (the metering function's
counters) stay in the pool table: the code that reads them asks for the
tenant's view of the pool table here, never of the table its data is in.
"""

from __future__ import annotations

from support_tickets.core.settings import get_settings
from support_tickets.data.table import TenantTable


def pool_view(table: TenantTable) -> TenantTable:
    """``table``'s tenant's view of the pool table, with the same credentials (for
    its record and its ledger, which tenant credentials only read)."""
    return TenantTable(table.tenant_id, get_settings().table_name, table.clients)
