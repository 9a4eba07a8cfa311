"""Shared code of every function: the only place that talks to AWS for handlers.

Modules, from the outside in:

- ``api``: the Powertools REST resolver every handler uses, with one table of
  exception handlers that maps domain errors to API.md's error bodies.
- ``identity``: who is calling (tenant, user, admin) from the authorizer claims.
- ``session``: tenant-scoped DynamoDB clients (AssumeRole + ``TenantId`` tag),
  cached per tenant in the warm container.
- ``repository``: every access pattern of the single-table model.
- ``keys``: the one module that formats ``TENANT#<t>|...`` keys.
"""
