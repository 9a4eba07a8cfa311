"""Shared code of every function: the only place that talks to AWS for handlers.

Folders, from the outside in (imports only go down this list; a test holds it,
``tests/unit/test_import_direction.py``):

- ``api``: the Powertools REST resolver every handler uses, with one table of
  exception handlers that maps domain errors to API.md's error bodies.
- ``domain`` (the REST functions), ``auth`` (the Lambda TOKEN authorizer) and
  ``streams`` (the aggregator and the audit writer): what each function does.
  None of the three imports another.
- ``data``: a tenant's view of the table (``table``, the one call path to
  DynamoDB and its error mapping), credentials bound to the caller's token
  (``session``), one repository per entity, the tenant record
  (``tenant_registry``), scatter-gather lists and opaque cursors.
- ``core``: what everything shares: errors, the one module that formats
  ``TENANT#<t>|...`` keys, models, settings, the caller's identity, ids, clock,
  tracing.
"""
