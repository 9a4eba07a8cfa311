"""Shared code of every function: the only place that talks to AWS for handlers.

Modules, from the outside in:

- ``api``: the Powertools REST resolver every handler uses, with one table of
  exception handlers that maps domain errors to API.md's error bodies.
- ``identity``: who is calling (tenant, user, admin) from the authorizer claims.
- ``session``: tenant-scoped DynamoDB clients: the caller's own ID token
  exchanged with the Cognito identity pool for credentials tagged with its
  tenant, cached per token in the warm container.
- ``tickets``: the domain: what each route does, for a caller.
- ``table``: a tenant's view of the table, the one call path to DynamoDB and
  its error mapping; every repository below works through it.
- ``ticket_repository`` (tickets, GSI1 lists over the tenant's shards with
  ``listing``), ``comment_repository``, ``aggregate_repository``: one module
  per entity.
- ``tenant_registry``: the tenant record (shard count, tier, status), read
  with a short per-container cache.
- ``aggregation``: the stream aggregator's exactly-once counting.
- ``audit`` (stream records into audit events, written once) and
  ``audit_repository`` (a ticket's history, the tenant's trail).
- ``stream``: what the stream functions share (their own clients, poison).
- ``keys``: the one module that formats ``TENANT#<t>|...`` keys.
"""
