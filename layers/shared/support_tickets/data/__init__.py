"""Data access: a tenant's view of its table, one repository per entity."""
