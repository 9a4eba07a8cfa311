"""Benchmarks: what tenant isolation costs at run time, against the naive design.

``make bench`` (``python -m bench``) starts the local stack (``python -m
local_stack serve`` in its own process: moto behind the IAM guard, on
loopback), then measures, side by side in the same run:

1. the warm request path of every route, ours (tenant credentials and client
   cached per tenant) against the naive design of the public samples
   (AssumeRole and a new boto3 client on every request), by invoking the real
   handlers in this process with API Gateway REST events; AWS API calls are
   counted with botocore event hooks (:mod:`bench.calls`), DynamoDB capacity
   units computed from item sizes (:mod:`stack_model.capacity`);
2. cold starts: a fresh interpreter importing each function from the ``sam
   build`` output and serving its first request, against a floor handler that
   imports only boto3 and does one GetItem (:mod:`bench.cold`);
3. the stream aggregator on a 1,000-record batch over 10 tenants, against one
   ADD per count change (:mod:`bench.aggregation`);
4. cost per million requests from those measurements (:mod:`bench.cost`).

It writes ``bench/results.json`` and ``bench/results.md`` and prints the
table. The naive baselines live here only, never in production code.
"""
