"""Where moto differs from AWS in ways this project observes.

moto's backends are plain Python objects without locks: two requests served
at once can corrupt each other (``TransactWriteItems`` deep-copies every
table while another thread appends to one: "dictionary changed size during
iteration"). AWS serves each request atomically, so the fix is to make every
moto request atomic: the emulator's server holds :data:`MOTO_LOCK` around each
request, and :func:`apply` makes moto's in-process dispatcher (``mock_aws``,
used by the tests beside threads such as the stream poller) take the same lock.
Code between requests (handlers, the poller, the aggregator) still runs
concurrently.

moto's user pools sign with a key from moto's package and ignore their own
settings: :mod:`local_stack.cognito` fixes both. moto's identity pools issue
fixed credentials for any identity, unchecked: :mod:`local_stack.identity_pool`
answers instead.

A cancelled ``TransactWriteItems`` must leave no trace. moto applies the
transaction's items one by one, appending their stream records, and on
cancellation swaps a deep copy of the whole table back in. That copy carries
its own stream shard, so the records of the cancelled writes stay visible to
every shard iterator opened before (they point at the old shard object), and
the next records reuse their sequence numbers. An aggregator reading that
stream counts a status change that never happened and misses the next one.

:func:`apply` keeps moto's rollback of the items but puts the original stream
shard back under the restored table, without the cancelled records.

:func:`apply` is idempotent and applied by the emulator and by the tests' moto
fixtures.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from moto.core.botocore_stubber import BotocoreStubber
from moto.dynamodb.models import DynamoDBBackend

from local_stack import cognito, identity_pool

_applied = False
# moto's backends are not thread-safe: every request, in-process or through the
# emulator's server, holds it while moto serves it.
MOTO_LOCK = threading.RLock()


def apply() -> None:
    global _applied  # noqa: PLW0603 - patch once per process
    if _applied:
        return
    _serialize_in_process_requests()
    _rollback_cancelled_transactions_from_the_stream()
    cognito.install()
    identity_pool.install()
    _applied = True


def _serialize_in_process_requests() -> None:
    """``mock_aws`` serves a request in the calling thread; hold :data:`MOTO_LOCK`
    meanwhile, as the emulator's server does for its requests."""
    original = BotocoreStubber.process_request

    @functools.wraps(original)
    def process_request(self: BotocoreStubber, request: Any) -> Any:
        with MOTO_LOCK:
            return original(self, request)

    BotocoreStubber.process_request = process_request  # type: ignore[method-assign]


def _rollback_cancelled_transactions_from_the_stream() -> None:
    original = DynamoDBBackend.transact_write_items

    @functools.wraps(original)
    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        tables = dict(self.tables)
        shards = {
            name: (table.stream_shard, len(table.stream_shard.items))
            for name, table in tables.items()
            if table.stream_shard
        }
        try:
            original(self, transact_items)
        except Exception:
            for name, (shard, length) in shards.items():
                restored = self.tables.get(name)
                if restored is not None and restored is not tables[name]:
                    del shard.items[length:]
                    shard.table = restored
                    restored.stream_shard = shard
            raise

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
