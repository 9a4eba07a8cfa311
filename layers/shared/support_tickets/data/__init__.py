"""Data access: a tenant's view of the table, credentials bound to the caller's token, one repository per entity."""
