"""Where moto's DynamoDB differs from DynamoDB in ways this project observes.

A cancelled ``TransactWriteItems`` must leave no trace. moto applies the
transaction's items one by one, appending their stream records, and on
cancellation swaps a deep copy of the whole table back in. That copy carries
its own stream shard, so the records of the cancelled writes stay visible to
every shard iterator opened before (they point at the old shard object), and
the next records reuse their sequence numbers. An aggregator reading that
stream counts a status change that never happened and misses the next one.

:func:`apply` keeps moto's rollback of the items but puts the original stream
shard back under the restored table, without the cancelled records. It is
idempotent and applied by the emulator and by the tests' moto fixtures.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from moto.dynamodb.models import DynamoDBBackend

_applied = False
# moto's backends are not thread-safe; the emulator serializes requests with it.
MOTO_LOCK = threading.RLock()


def apply() -> None:
    global _applied  # noqa: PLW0603 - patch once per process
    if _applied:
        return
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
    _applied = True
