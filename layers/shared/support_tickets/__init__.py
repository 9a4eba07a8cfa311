"""Shared code of every function: the only place that talks to AWS for handlers.

Layers, from the outside in (imports only go down this list, or stay within a
layer; a test holds it, ``tests/unit/test_import_direction.py``):

- ``api``: the Powertools REST resolver every handler uses, with one table of
  exception handlers that maps domain errors to API.md's error bodies.
- domain (the REST functions' operations), auth (the Lambda TOKEN authorizer)
  and consumers (the functions fed by a stream, a queue or log subscriptions):
  what each function does. None of the three imports another.
- data: a tenant's view of the table (``data.table``, the one call path to
  DynamoDB and its error mapping), credentials bound to the caller's token
  (``data.session``), one repository per entity, the tenant record
  (``data.tenant_registry``), scatter-gather lists and opaque cursors.
- core: what everything shares: errors, the one module that formats
  ``TENANT#<t>|...`` keys, models, settings, the caller's identity, ids, clock,
  tracing.

Folders. Most are one layer each: ``api``, ``domain``, ``auth``, ``streams``
(the consumers of the table's stream: counts, audit trail, deletions),
``data``, ``core``. Two features span the layers and are a folder each, their
modules from pure functions to the consumer that runs them (each module's
layer: ``tests/layers.py``):

- ``usage``: the meter every DynamoDB call adds to, the functions' usage
  lines, the metering function (the CloudWatch Logs consumer), the day's
  counters, prices and the usage report;
- ``webhooks``: events and their queue messages, URLs, the POST, the admins'
  repository and the delivery side's records, parking, the API operations,
  the fan-out (on the table's stream) and the delivery function (the webhook
  queue's consumer). It may use ``usage``; ``usage`` knows no webhook code.
"""
