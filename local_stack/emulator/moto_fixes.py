"""Where moto differs from AWS in ways this project observes, and the fixes.

Each fix is a :class:`Fix`: the few moto 5.2.5 methods it replaces, written so
that it could be offered upstream, with its own test in
``tests/functional/test_moto_fixes.py`` that shows the bug in plain moto
(:meth:`Fix.removed`) and its absence with the fix. None is fixed by a newer
moto: 5.2.5 is the latest release, and getmoto/moto's main branch still has
each of these code paths as 5.2.5 does.

- :data:`ATOMIC_REQUESTS`. moto's backends are plain Python objects without
  locks: two requests served at once can corrupt each other
  (``TransactWriteItems`` deep-copying every table while another thread
  appends to one: "dictionary changed size during iteration"). AWS serves each
  request atomically, so every moto request is: the emulator's server holds
  :data:`MOTO_LOCK` around each request, and this fix makes moto's in-process
  dispatcher (``mock_aws``, used by the tests beside threads such as the
  stream poller) take the same lock. Code between requests (handlers, the
  poller, the aggregator) still runs concurrently.
- :data:`TRANSACTIONS_UNDO_WHAT_THEY_WROTE`. moto deep-copies every table a
  ``TransactWriteItems`` names, to swap the copies back in if it is
  cancelled: each transaction costs time proportional to the whole table
  (365 ms for a comment and 2.3 s for a 10-ticket status change once the
  benchmark's table held a few thousand items, against 12 ms for a PATCH),
  and a cancelled one left its records in the stream for iterators opened
  before it (the copy had its own copy of the stream shard) while the next
  records reused their sequence numbers. :func:`transact_write_items` is
  moto's method with one change: before each operation it snapshots only the
  item that operation targets (as it was, or "absent"; a copy only where moto
  changes the stored item in place) and the length of its table's stream; on
  cancellation it puts those items back, newest first, and drops the stream
  records the transaction appended. Tables and other items are never copied.
- :data:`TRANSACTIONS_HONOUR_THEIR_CLIENT_REQUEST_TOKEN`. moto ignores a
  ``TransactWriteItems``' ``ClientRequestToken``: an SDK retry of a
  transaction whose first attempt landed (a read timeout) is applied twice.
  DynamoDB applies it once: "multiple identical calls using the same client
  request token produce the same result on the server", for 10 minutes after
  the first completed, and a call with the same token but other parameters
  fails with ``IdempotentParameterMismatchException`` (the API reference's
  ``ClientRequestToken``). botocore fills the token in itself
  (``idempotencyToken``) and keeps it across its retries; the move fence
  (``support_tickets.data.table``) relies on it.
- :data:`QUERIES_READ_THEIR_PARTITION`. moto's ``Table.query`` collects its
  candidates from ``all_items()``, which sorts every item of the table, and
  keeps those of the queried partition: every ``GET /tickets/{id}`` and every
  ``GET /tickets`` (a GSI1 query: 851 ms p50 with 10,000 tickets, against 37
  ms for a GetItem) paid for the whole table. A base-table query now gets its
  partition's items (``table.items[hash_key]``); a global secondary index
  query gets its index partition's, from :class:`_IndexPartitions`: each
  index's items by partition-key value, built on the index's first query and
  kept current by every write moto makes (``Table.put_item`` and
  ``delete_item``, which batches, transactions and PartiQL use too,
  ``update_item``, which changes an item in place, and a cancelled
  transaction's undo). Upstream, ``Table.query`` would read these instead of
  ``all_items()``; here the method is too long to copy, so ``all_items`` is
  shadowed on the table for the duration of the call, which
  :data:`MOTO_LOCK` makes safe. A local secondary index query is unchanged
  (this project has none).
- :data:`KMS_KEYS_MAKE_THEIR_PRIVATE_KEY_ON_FIRST_USE`. moto generates an
  RSA-2048 private key for every KMS key it creates, symmetric ones included
  (``moto.kms.utils.generate_private_key``'s fallback), though only the
  asymmetric operations (Sign, Verify, GetPublicKey) ever read it: about 55 ms
  of CPU for each ``CreateKey``, and the tests' moto fixture creates the
  webhook secrets key for every test that uses it (over a minute of CPU per
  ``make test``). The key is now generated when an asymmetric operation first
  uses it, with the same spec, so those operations answer as before.
- :data:`SQS_RECEIVES_AS_SQS_DOES`. Two of moto's SQS differences that the
  local SQS event source (:mod:`local_stack.event_sources.sqs_poller`) would pass on to a
  function. (1) A FIFO ``ReceiveMessage`` walks the queue in order and frees
  an in-flight message whose visibility timeout has ended only when it reaches
  it: an earlier message of a group whose visibility ended was skipped while a
  later one of the same group still counted as in flight, and then the later
  one was delivered first (``m3`` before ``m2`` after both failed): out of
  order, which SQS never does. Every message whose visibility has ended is now
  freed before the walk. (2) ``ChangeMessageVisibility`` refused any value
  that ended more than 12 hours after the message was *sent*; SQS's limit is
  12 hours of total visibility since it was last *received* (a message
  retried for a day can still be given a new timeout on each receive). The
  last receive is now remembered and the limit counted from it.
- :data:`SQS_COUNTS_BYTES_AND_REFUSES_WHAT_SQS_REFUSES`. moto measures a
  message and a ``SendMessageBatch`` in characters of the body (an emoji is one,
  where SQS counts its 4 UTF-8 bytes), leaves the message attributes out, and
  accepts any character. SQS counts UTF-8 bytes of the body plus each message
  attribute's name, type and value, refuses a message over the queue's
  ``MaximumMessageSize`` and a batch whose messages add up to more than
  1,048,576 bytes (``BatchRequestTooLong``), and refuses a message holding a
  character outside ``#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
  #x10000-#x10FFFF`` (``InvalidMessageContents``; in a batch, that entry is
  reported ``Failed``, sender's fault, and the others are sent), as the API
  reference's SendMessage and SendMessageBatch pages say
  (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html,
  and the message quotas,
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html).
  Both sends now count and check as SQS does.
- :data:`SQS_REQUESTS_COST_THE_SAME_WITH_A_BACKLOG`. moto works out a queue's
  three approximate counts (visible, in flight, delayed: a walk over every
  message, reading the clock for each, twice for the visible ones) whenever
  anything reads one attribute, and it reads them three times for each FIFO
  ``SendMessage`` (``ContentBasedDeduplication``) and three times for each
  message a ``ReceiveMessage`` returns (its retention check reads
  ``MessageRetentionPeriod`` through the queue's attributes); the walk that
  finds the visible messages and the receive's freeing of expired in-flight
  ones read the clock per message too. SQS's cost of a send or a receive does
  not grow with the messages in the queue; moto's did: with 1,000 messages in a
  FIFO queue (the local stack's queue clock installed) the three counts took
  30 ms, so each message sent or received cost ~90 ms. A tenant's webhook
  backlog of deferred messages (each in flight, back every 2 to 60 s) slowed
  every send and receive until the local stack's one emulator process served
  ~10 messages a second, and other tenants' messages waited minutes behind it
  (the webhook benchmark's hang block). A walk now reads the clock once (a
  message is visible, in flight or delayed exactly as moto decides it, against
  that one reading: the three counts take 0.5 ms), and the retention check
  reads the queue's retention period alone.
- :data:`ATTRIBUTE_VALUES_SERIALIZE_AS_THEY_ARE`. moto 5.2.5 builds every
  JSON response by walking the operation's output shape, and for each member of
  each structure it asks every alias provider where the value is (six per
  member). A DynamoDB ``AttributeValue`` is a structure of ten members (``S``,
  ``N``, ``B`` ... ``BOOL``) of which an item's value uses one: a Query of 100
  small items (5 attributes) made 60,000 such look-ups, 60 % of the request's
  CPU (about 80 ms here; the webhook benchmark's retry slots spent most of the
  emulator's time in it). An ``AttributeValue`` whose one member is a string,
  number, boolean, null, string or number set, map or list of such values is
  now written as it is, as moto's walk writes it (numbers and strings as
  strings); binary values (``B``, ``BS``, base64-encoded) and anything else
  still take moto's walk. The bytes of every answer are the same.
- :data:`TAGS_ARE_ONE_PER_KEY`. moto's DynamoDB ``TagResource`` appends every
  tag it is given, so a key already on the table ends up twice (``TenantId=10``
  then ``TenantId=1``: both listed by ``ListTagsOfResource``). DynamoDB keeps one
  tag per key and overwrites its value ("Each DynamoDB table can have only one
  tag with the same key. If you try to add an existing tag (same key), the
  existing tag value is updated to the new value", and "Tag keys and values are
  case sensitive": DynamoDB Developer Guide, "Tagging restrictions in
  DynamoDB"). :func:`tag_resource` does that: a key already there (exactly,
  case included) takes the new value in its place; a new key is appended.
  (Read in 5.2.5's ``DynamoDBBackend.tag_resource``; moto's main branch was not
  checked for this one.)
- :data:`API_KEYS_TAKE_TAGS`. moto's API Gateway ``TagResource``, ``GetTags``
  and ``UntagResource`` read every ARN as a stage's
  (``.../restapis/<id>/stages/<name>``): an API key's
  (``arn:<partition>:apigateway:<region>::/apikeys/<id>``) is refused
  ``NotFoundException`` ("Invalid Rest API Id specified"). API Gateway tags API
  keys ("Tagging your API Gateway resources" lists ``ApiKey``; ``TagResource``
  "adds or updates a tag", one value per key) and ``GetApiKey(s)`` describe a
  key with them; ``make offboard`` tags a tenant's tombstone key
  (:mod:`ops.api_keys`). An API key's ARN is now served on the key's own tags
  (the ones ``CreateApiKey`` set and ``GetApiKey(s)`` return): added or
  updated, listed, removed; an unknown key is moto's ``NotFoundException``.
  Any other ARN takes moto's way. (A disabled key, ``UpdateApiKey``
  ``/enabled``, needs no fix: moto keeps and describes ``enabled`` as API
  Gateway does, and the local gateway refuses such a key:
  :mod:`local_stack.usage`.)
- :data:`ACTIONS_FOUND_WITHOUT_LISTING_THE_CLASS`. To find the method of a
  request's action, moto 5.2.5's ``BaseResponse.call_action`` lists every
  function of the service's response class (``method_names_from_class``:
  ``inspect.getmembers``, which sorts all of the class's attributes) on every
  request: 5 % of an empty Query in process (0.05 of 1.05 ms), paid by every
  request of the tests, the local stack and the bench. The list depends on the class
  alone, and moto never adds a method to a response class after import (nor
  does this module: its patches replace methods, never add a name), so it is
  now made once per class.
- :data:`MOTO_MODULES_LISTED_ONCE`. To find whether a request's ``Host``
  names a service, moto 5.2.5's server (``DomainDispatcherApplication``, the
  emulator's) asks ``list_of_moto_modules()``, which lists moto's package
  directory and checks each of its ~250 entries with ``os.path.isdir``: 1.7 ms
  of every request to the emulator (the look-up of the service its signature
  names, ``dynamodb.us-east-1.amazonaws.com``, which is no module's name: the
  whole list is read), more than moto then spends serving a GetItem, and under
  the dispatcher's lock. The directory is moto's installed package, which does
  not change while the process runs: it is now listed once, in the same order.
- :data:`REQUESTS_BUILT_WITHOUT_THE_TEST_BUILDER`. moto 5.2.5 turns each
  in-process request (``mock_aws``: botocore's prepared request) into a werkzeug
  request with ``Request.from_values``, werkzeug's test ``EnvironBuilder``: it
  re-derives the endpoint's host, port and scheme and the path's WSGI form from the
  URL (IRI to URI, unquoting: the same answer for every request to an endpoint and
  path), copies the headers into ``Headers`` twice and pops and sets
  ``Content-Length`` on the way: 85 µs of a 0.96 ms in-process GetItem, 9 %. The
  URL's part is now the builder's own answer, kept per endpoint and path (at most
  512), and the rest of the environ is written as the builder writes it (the same
  keys, values and order: a body's length, the content type, each header as
  ``HTTP_*``, repeated ones joined). A request the builder would build otherwise (a
  body that is neither bytes nor text, a header holding a newline, which it refuses,
  an empty form) still takes it. The emulator's server is unchanged: its requests
  come with an environ.

moto's user pools sign with a key from moto's package and ignore their own
settings: :mod:`local_stack.cognito.user_pool` fixes both. moto's identity pools issue
fixed credentials for any identity, unchecked: :mod:`local_stack.cognito.identity_pool`
answers instead.

:func:`apply` is idempotent and applied by the emulator and by the tests' moto
fixtures.
"""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import json
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from io import BytesIO
from types import ModuleType
from typing import Any
from urllib.parse import unquote, urlparse

from botocore.httpchecksum import AwsChunkedWrapper
from moto import backends as moto_backends
from moto.apigateway import urls as apigateway_urls
from moto.apigateway.responses import APIGatewayResponse
from moto.core import responses as moto_responses
from moto.core.botocore_stubber import BotocoreStubber
from moto.core.request import (
    PRESERVED_HEADER_NAMES_ENVIRON_KEY,
    environ_key_for_header,
    should_preserve_original_header_name,
)
from moto.core.request import Request as MotoRequest
from moto.core.responses import ActionResult
from moto.core.serialize import BaseJSONSerializer
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    DynamodbException,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import GlobalSecondaryIndex, Table
from moto.dynamodb.responses import DynamoHandler
from moto.kms import models as kms_models
from moto.sqs import models as sqs_models
from moto.sqs.exceptions import BatchRequestTooLong, InvalidParameterValue, ReceiptHandleIsInvalid, SQSException
from moto.sqs.models import SQSBackend
from werkzeug.test import EnvironBuilder

from local_stack.cognito import identity_pool
from local_stack.cognito import user_pool as cognito

# moto's backends are not thread-safe: every request, in-process or through the
# emulator's server, holds it while moto serves it.
MOTO_LOCK = threading.RLock()


@dataclass
class Patch:
    """One method (or a module's function) of moto replaced by ``wrap(moto's)``."""

    owner: type | ModuleType
    name: str
    wrap: Callable[[Any], Any]
    original: Any = None
    replacement: Any = None

    def install(self) -> None:
        self.original = self.owner.__dict__[self.name]
        self.replacement = self.wrap(self.original)
        setattr(self.owner, self.name, self.replacement)


@dataclass
class Fix:
    description: str
    patches: Sequence[Patch]
    # Forgets what the fix kept while moto ran without it (writes it did not see).
    reset: Callable[[], None] = lambda: None
    installed: bool = field(default=False, init=False)

    def install(self) -> None:
        if not self.installed:
            for patch in self.patches:
                patch.install()
            self.installed = True

    @contextmanager
    def removed(self) -> Iterator[None]:
        """Plain moto meanwhile: for the tests that show what the fix fixes."""
        assert self.installed, "the fix is not installed"
        for patch in self.patches:
            setattr(patch.owner, patch.name, patch.original)
        try:
            yield
        finally:
            for patch in self.patches:
                setattr(patch.owner, patch.name, patch.replacement)
            self.reset()


def apply() -> None:
    for fix in FIXES:
        fix.install()
    cognito.install()
    identity_pool.install()


# ---------------------------------------------------------------- atomic requests
def _serialized(original: Callable[..., Any]) -> Callable[..., Any]:
    """``mock_aws`` serves a request in the calling thread; hold :data:`MOTO_LOCK`
    meanwhile, as the emulator's server does for its requests."""

    @functools.wraps(original)
    def process_request(self: BotocoreStubber, request: Any) -> Any:
        with MOTO_LOCK:
            return original(self, request)

    return process_request


# ---------------------------------------------------------------- queries read their partition
_INDEX_NAME_POSITION = 7  # Table.query(hash_key, ..., projection_expressions, index_name, ...)
Primary = tuple[DynamoType, DynamoType | None]


def _all_items_order(item: Item) -> Any:
    """The order of moto's ``Table.all_items()``, which query relies on for ties."""
    return (item.hash_key, item.range_key) if item.range_key else item.hash_key


def _partition_items(table: Table, hash_key: DynamoType) -> list[Item]:
    """``Table.all_items()`` of one partition, in the same order."""
    stored = table.items.get(hash_key)
    if stored is None:
        return []
    if table.range_key_attr is None:
        return [stored]  # type: ignore[list-item]
    return sorted(stored.values(), key=_all_items_order)


class _IndexPartitions:
    """A global secondary index's items by the values of its partition-key
    attributes; an item without all of them is not in the index."""

    def __init__(self, table: Table, index: GlobalSecondaryIndex) -> None:
        self.attributes = [key["AttributeName"] for key in index.schema if key["KeyType"] == "HASH"]
        self.partitions: dict[tuple[DynamoType, ...], dict[Primary, Item]] = {}
        self.partition_of: dict[Primary, tuple[DynamoType, ...]] = {}
        for item in table.all_items():
            self.put((item.hash_key, item.range_key), item)

    def put(self, primary: Primary, item: Item | None) -> None:
        """The item now stored under ``primary`` (``None``: none is)."""
        before = self.partition_of.pop(primary, None)
        if before is not None:
            members = self.partitions[before]
            del members[primary]
            if not members:
                del self.partitions[before]
        values = tuple(item.attrs.get(name) for name in self.attributes) if item is not None else ()
        if item is None or any(value is None for value in values):
            return
        partition: tuple[DynamoType, ...] = values  # type: ignore[assignment]
        self.partitions.setdefault(partition, {})[primary] = item
        self.partition_of[primary] = partition

    def items(self, partition: tuple[DynamoType, ...]) -> list[Item]:
        return sorted(self.partitions.get(partition, {}).values(), key=_all_items_order)


# Built on an index's first query, then kept current; per table object, so a
# table replaced (restored from a backup, recreated) starts without any.
_INDEXES: weakref.WeakKeyDictionary[Table, dict[str, _IndexPartitions]] = weakref.WeakKeyDictionary()


def _index_items(
    table: Table, index_name: str, conditions: Sequence[tuple[str, DynamoType]] | None
) -> list[Item] | None:
    """The candidates of a query on a global secondary index: its partition's
    items, or ``None`` for a query this can't narrow (moto then reads the table)."""
    index = next((gsi for gsi in table.global_indexes or [] if gsi.name == index_name), None)
    if index is None:
        return None
    indexes = _INDEXES.setdefault(table, {})
    if index_name not in indexes:
        indexes[index_name] = _IndexPartitions(table, index)
    partitions = indexes[index_name]
    wanted = dict(conditions or [])
    if set(wanted) != set(partitions.attributes):
        return None
    return partitions.items(tuple(wanted[name] for name in partitions.attributes))


def _reindex(table: Table, hash_key: DynamoType, range_key: DynamoType | None) -> None:
    """Tell the table's built indexes what is stored under this key now."""
    indexes = _INDEXES.get(table)
    if not indexes:
        return
    stored: Any = table.items.get(hash_key)
    if stored is not None and table.range_key_attr is not None:
        stored = stored.get(range_key)
    for partitions in indexes.values():
        partitions.put((hash_key, range_key), stored)


def _query(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def query(self: Table, hash_key: DynamoType | None, *args: Any, **kwargs: Any) -> Any:
        index_name = args[_INDEX_NAME_POSITION - 1] if len(args) >= _INDEX_NAME_POSITION else kwargs.get("index_name")
        if index_name:
            candidates = _index_items(self, index_name, kwargs.get("hash_key_conditions"))
        else:
            candidates = None if hash_key is None else _partition_items(self, hash_key)
        if candidates is None:
            return original(self, hash_key, *args, **kwargs)
        self.all_items = lambda: candidates  # type: ignore[method-assign]
        try:
            return original(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    return query


def _indexed_put(original: Callable[..., Item]) -> Callable[..., Item]:
    @functools.wraps(original)
    def put_item(self: Table, *args: Any, **kwargs: Any) -> Item:
        item = original(self, *args, **kwargs)
        _reindex(self, item.hash_key, item.range_key)
        return item

    return put_item


def _indexed_delete(original: Callable[..., Item | None]) -> Callable[..., Item | None]:
    @functools.wraps(original)
    def delete_item(self: Table, hash_key: DynamoType, range_key: DynamoType | None = None) -> Item | None:
        try:
            return original(self, hash_key, range_key)
        finally:
            _reindex(self, hash_key, range_key)

    return delete_item


def _indexed_update(original: Callable[..., Item]) -> Callable[..., Item]:
    """``update_item`` changes the stored item in place (or creates it)."""

    @functools.wraps(original)
    def update_item(self: DynamoDBBackend, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Item:
        try:
            return original(self, table_name, key, *args, **kwargs)
        finally:
            table = self.tables.get(table_name)
            if table is not None and isinstance(key, dict) and table.hash_key_attr in key:
                range_key = key.get(table.range_key_attr) if table.range_key_attr is not None else None
                _reindex(table, DynamoType(key[table.hash_key_attr]), DynamoType(range_key) if range_key else None)

    return update_item


class _Snapshot:
    """The items a transaction is about to write, as they were before, and the
    length of each of their tables' streams: enough to undo the transaction."""

    def __init__(self) -> None:
        # (table, hash key, range key, the item before or None, whether its hash key had items)
        self._items: list[tuple[Table, DynamoType, DynamoType | None, Item | None, bool]] = []
        self._seen: set[tuple[int, DynamoType, DynamoType | None]] = set()
        self._streams: dict[int, tuple[Table, int]] = {}

    def remember(self, table: Table, key: dict[str, Any], *, changed_in_place: bool) -> None:
        hash_key = DynamoType(key[table.hash_key_attr])
        range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
        if (id(table), hash_key, range_key) in self._seen:
            return
        self._seen.add((id(table), hash_key, range_key))
        had_hash_key = hash_key in table.items
        before = table.get_item(hash_key, range_key) if had_hash_key else None
        # update_item changes the stored Item in place: keep a copy of it. Put and
        # Delete replace or remove the object and never change it: keep the object.
        kept = copy.deepcopy(before) if changed_in_place else before
        self._items.append((table, hash_key, range_key, kept, had_hash_key))
        if table.stream_shard is not None and id(table) not in self._streams:
            self._streams[id(table)] = (table, len(table.stream_shard.items))

    def restore(self) -> None:
        for table, hash_key, range_key, before, had_hash_key in reversed(self._items):
            self._put_back(table, hash_key, range_key, before, had_hash_key)
            _reindex(table, hash_key, range_key)
        for table, length in self._streams.values():
            if table.stream_shard is not None:
                del table.stream_shard.items[length:]

    @staticmethod
    def _put_back(
        table: Table, hash_key: DynamoType, range_key: DynamoType | None, before: Item | None, had_hash_key: bool
    ) -> None:
        if range_key is None:
            if before is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = before  # type: ignore[assignment]
            return
        if before is not None:
            table.items[hash_key][range_key] = before
            return
        collection = table.items.get(hash_key)
        if collection is not None:
            collection.pop(range_key, None)
            if not collection and not had_hash_key:
                del table.items[hash_key]


class IdempotentParameterMismatch(DynamodbException):
    def __init__(self) -> None:
        super().__init__(
            "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
            message="The request uses the same client token as a previous, but non-identical request.",
        )


# DynamoDB honours a transaction's client token this long after the first call completed.
CLIENT_TOKEN_SECONDS = 600.0
# (account, region, token) -> (digest of the request's items, when it completed): the transactions that landed.
_COMPLETED_TRANSACTIONS: dict[tuple[str, str, str], tuple[str, float]] = {}


def _token_honoured(original: Callable[[DynamoHandler], Any]) -> Callable[[DynamoHandler], Any]:
    @functools.wraps(original)
    def transact_write_items(self: DynamoHandler) -> Any:
        token = self.body.get("ClientRequestToken")
        if token is None:
            return original(self)
        digest = hashlib.sha256(json.dumps(self.body["TransactItems"], sort_keys=True).encode()).hexdigest()
        key = (self.current_account, self.region, str(token))
        now = time.monotonic()
        for stale in [k for k, (_, at) in _COMPLETED_TRANSACTIONS.items() if now - at >= CLIENT_TOKEN_SECONDS]:
            del _COMPLETED_TRANSACTIONS[stale]
        completed = _COMPLETED_TRANSACTIONS.get(key)
        if completed is not None:
            if completed[0] != digest:
                raise IdempotentParameterMismatch()
            return ActionResult({"ConsumedCapacity": [], "ItemCollectionMetrics": {}})
        result = original(self)
        _COMPLETED_TRANSACTIONS[key] = (digest, now)
        return result

    return transact_write_items


Reason = tuple[str | None, str | None, dict[str, Any] | None]  # (code, message, item): a cancellation reason


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """moto 5.2.5's ``DynamoDBBackend.transact_write_items``, rolling back with a
    :class:`_Snapshot` of the items written instead of deep copies of the tables."""
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    snapshot = _Snapshot()
    targets: set[tuple[str, str]] = set()
    reasons: list[Reason] = []
    for item in transact_items:
        if len(list(item.keys())) > 1:
            raise TransactWriteSingleOpException
        try:
            reasons.append(_apply(self, item, snapshot, targets))
        except (MultipleTransactionsException, MockValidationException):
            snapshot.restore()
            raise
    if any(code is not None for code, _, _ in reasons):
        snapshot.restore()
        raise TransactionCanceledException(reasons)


def _apply(
    backend: DynamoDBBackend, item: dict[str, Any], snapshot: _Snapshot, targets: set[tuple[str, str]]
) -> Reason:
    """One operation of a transaction: applied, or the reason it cancels the transaction."""
    original_item: dict[str, Any] | None = None
    try:
        op_type, op = next(iter(item.items()))
        if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
            raise ValueError("Unsupported transaction operation")
        table_name = op["TableName"]
        table = backend.get_table(table_name)
        key = _key(table, op_type, op)
        target = (str(table_name), str(dict(sorted(key.items()))))
        if target in targets:
            raise MultipleTransactionsException()
        targets.add(target)
        condition = {
            "condition_expression": op.get("ConditionExpression"),
            "expression_attribute_names": op.get("ExpressionAttributeNames"),
            "expression_attribute_values": op.get("ExpressionAttributeValues"),
        }
        current = backend.get_item(table_name, key)
        checked = condition["condition_expression"] is not None
        if checked and not get_filter_expression(*condition.values()).expr(current):
            if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                original_item = current.to_json()["Attributes"]
            raise ConditionalCheckFailed(item=original_item)
        if op_type != "ConditionCheck":
            snapshot.remember(table, key, changed_in_place=op_type == "Update")
        if op_type == "Put":
            backend.put_item(table_name, op["Item"], **condition)
        elif op_type == "Delete":
            backend.delete_item(table_name, key, **condition)
        elif op_type == "Update":
            backend.update_item(table_name, key, update_expression=op["UpdateExpression"], **condition)
    except (MultipleTransactionsException, MockValidationException):
        raise
    except ConditionalCheckFailed as exc:
        return ("ConditionalCheckFailed", str(exc.message), original_item)
    except Exception as exc:  # moto reports any other failure as the operation's cancellation reason
        return (type(exc).__name__, str(exc), original_item)
    return (None, None, None)


def _key(table: Table, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    attrs = op["Item"]
    key = {table.hash_key_attr: attrs[table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = attrs[table.range_key_attr]
    return key


# ---------------------------------------------------------------- one tag per key
def tag_resource(self: DynamoDBBackend, arn: str, tags: dict[str, str]) -> None:
    """moto's ``TagResource``, each key kept once: an existing key's value is
    replaced where it stands, a new key appended."""
    for table in self.tables.values():
        if table.table_arn == arn:
            kept = [{"Key": tag["Key"], "Value": tags.get(tag["Key"], tag["Value"])} for tag in table.tags]
            present = {tag["Key"] for tag in kept}
            table.tags = kept + [{"Key": key, "Value": value} for key, value in tags.items() if key not in present]


# ---------------------------------------------------------------- API keys take tags
_API_KEY_ARN = re.compile(r"arn:[^:]+:apigateway:[^:]*::/apikeys/(?P<key>[^/]+)")
# The emulator's server sees the ARN's "/" decoded (boto3 sends %2F), as moto routes a stage's.
_API_KEY_TAGS_PATH = r"{0}/tags/arn:(?P<partition>[^/]+):apigateway:(?P<region_name>[^/]+)::/apikeys/(?P<key>[^/]+)$"


def _with_api_key_tags_path(original: dict[str, Any]) -> dict[str, Any]:
    return {**original, _API_KEY_TAGS_PATH: APIGatewayResponse.dispatch}


def _tagged_api_key(response: APIGatewayResponse) -> Any:
    """The API key the request's ARN names (moto's ``NotFoundException`` for
    an unknown one), or ``None`` for another resource's ARN."""
    arn = unquote(response.path.split("/tags/", 1)[1])
    match = _API_KEY_ARN.fullmatch(arn)
    return response.backend.get_api_key(match["key"]) if match else None


Answer = Callable[[APIGatewayResponse], str]


def _on_api_keys(answer: Callable[[APIGatewayResponse, Any], str]) -> Callable[[Answer], Answer]:
    """A tags request answered by ``answer(response, key)`` when it names an API key, by moto otherwise."""

    def wrap(original: Answer) -> Answer:
        @functools.wraps(original)
        def tags_request(self: APIGatewayResponse) -> str:
            key = _tagged_api_key(self)
            return original(self) if key is None else answer(self, key)

        return tags_request

    return wrap


def _tag_api_key(response: APIGatewayResponse, key: Any) -> str:
    key.tags = {**(key.tags or {}), **(response._get_param("tags") or {})}
    return "{}"


def _api_key_tags(response: APIGatewayResponse, key: Any) -> str:
    return json.dumps({"tags": key.tags or {}})


def _untag_api_key(response: APIGatewayResponse, key: Any) -> str:
    removed = set(response.querystring.get("tagKeys") or ())
    key.tags = {name: value for name, value in (key.tags or {}).items() if name not in removed}
    return "{}"


# ---------------------------------------------------------------- the fixes
# ---------------------------------------------------------------- KMS private keys on first use
class _PrivateKeyOnFirstUse:
    """Stands for moto's private key of a KMS key until something reads it."""

    def __init__(self, generate: Callable[[str], Any], key_spec: str) -> None:
        self._generate = generate
        self._key_spec = key_spec
        self._key: Any = None

    @property
    def generated(self) -> bool:
        return self._key is not None

    def __getattr__(self, name: str) -> Any:
        # Only what the key lacks arrives here; dunder lookups (copy, pickle) must not generate.
        if name.startswith("__") or name in ("_generate", "_key_spec", "_key"):
            raise AttributeError(name)
        if self._key is None:
            self._key = self._generate(self._key_spec)
        return getattr(self._key, name)


def _private_key_on_first_use(original: Callable[[str], Any]) -> Callable[[str], Any]:
    @functools.wraps(original)
    def generate_private_key(key_spec: str) -> Any:
        return _PrivateKeyOnFirstUse(original, key_spec)

    return generate_private_key


# ---------------------------------------------------------------- SQS receives as SQS does
# SQS's limit on a message's total visibility timeout since it was received.
MAXIMUM_VISIBILITY_S = 43200


def _expired_first(original: Callable[..., Any]) -> Callable[..., Any]:
    """Free every in-flight message whose visibility has ended before moto
    walks the queue (its FIFO group lock then sees only what is in flight)."""

    @functools.wraps(original)
    def receive_message(self: SQSBackend, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        queue = self.get_queue(queue_name)
        pending = queue.pending_messages
        now = _sqs_now_ms()
        for message in [message for message in pending if now > message.visible_at]:
            pending.discard(message)
        return original(self, queue_name, *args, **kwargs)

    return receive_message


def _sqs_now_ms() -> float:
    """moto's SQS clock, as its models read it (the local queue clock's offset included)."""
    return float(vars(sqs_models)["unix_time_millis"]())


def _remember_receive(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def mark_received(self: sqs_models.Message, visibility_timeout: int | None = None) -> None:
        self.last_received_at = _sqs_now_ms()  # type: ignore[attr-defined]
        original(self, visibility_timeout)

    return mark_received


def change_message_visibility(self: SQSBackend, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
    """moto's method, the 12 hours counted from the message's last receive."""
    queue = self.get_queue(queue_name)
    for message in queue._messages:
        if message.had_receipt_handle(receipt_handle):
            now = _sqs_now_ms()
            received_at = float(getattr(message, "last_received_at", None) or message.sent_timestamp or now)
            if now + int(visibility_timeout) * 1000 - received_at > MAXIMUM_VISIBILITY_S * 1000:
                raise InvalidParameterValue(
                    f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                    f"VisibilityTimeout for the message is beyond the limit [{MAXIMUM_VISIBILITY_S} seconds]"
                )
            message.change_visibility(visibility_timeout)
            if message.visible and message in queue.pending_messages:
                queue.pending_messages.remove(message)
            return
    raise ReceiptHandleIsInvalid


# ---------------------------------------------------------------- SQS counts bytes
# SendMessageBatch: the sum of its messages' sizes (and each message's own maximum,
# the queue's MaximumMessageSize, at most this).
MAXIMUM_BATCH_BYTES = 1_048_576
# What SQS refuses in a message (the complement of the allowed set).
REFUSED_CHARACTERS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class InvalidMessageContents(SQSException):
    def __init__(self, character: str) -> None:
        super().__init__(
            "InvalidMessageContents",
            f"Invalid binary character '#x{ord(character):X}' was found in the message body, the set of allowed "
            "characters is #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
        )


def message_bytes(body: str, attributes: dict[str, Any] | None) -> int:
    """A message's size as SQS counts it: the body's UTF-8 bytes and each attribute's
    name, data type and value."""
    size = len(body.encode("utf-8", "surrogatepass"))
    for name, attribute in (attributes or {}).items():
        size += len(name.encode()) + len(str(attribute.get("DataType", "")).encode())
        if attribute.get("StringValue") is not None:
            size += len(str(attribute["StringValue"]).encode("utf-8", "surrogatepass"))
        binary = attribute.get("BinaryValue")
        if isinstance(binary, bytes):
            size += len(binary)
        elif isinstance(binary, str):
            size += len(base64.b64decode(binary))
    return size


def _refused_character(body: str) -> str | None:
    found = REFUSED_CHARACTERS.search(body)
    return found.group() if found else None


def _counted_send(original: Callable[..., Any]) -> Callable[..., Any]:
    """SendMessage: the size in bytes against the queue's maximum, the characters checked."""

    @functools.wraps(original)
    def send_message(self: SQSBackend, queue_name: str, message_body: str, *args: Any, **kwargs: Any) -> Any:
        attributes = kwargs.get("message_attributes") if "message_attributes" in kwargs else (args[0] if args else None)
        maximum = int(vars(self.get_queue(queue_name))["maximum_message_size"])
        if message_bytes(message_body, attributes) > maximum:
            raise InvalidParameterValue(
                f"One or more parameters are invalid. Reason: Message must be shorter than {maximum} bytes."
            )
        refused = _refused_character(message_body)
        if refused is not None:
            raise InvalidMessageContents(refused)
        return original(self, queue_name, message_body, *args, **kwargs)

    return send_message


def _counted_batch(original: Callable[..., Any]) -> Callable[..., Any]:
    """SendMessageBatch: the batch's bytes against 1 MiB and each message's against the
    queue's maximum (the request refused, as moto does for characters); an entry with a
    refused character is reported failed and the others sent."""

    @functools.wraps(original)
    def send_message_batch(
        self: SQSBackend, queue_name: str, entries: dict[str, dict[str, Any]]
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        sizes = [message_bytes(entry["MessageBody"], entry.get("MessageAttributes")) for entry in entries.values()]
        if sum(sizes) > MAXIMUM_BATCH_BYTES:
            raise BatchRequestTooLong(sum(sizes))
        maximum = int(vars(self.get_queue(queue_name))["maximum_message_size"])
        if any(size > maximum for size in sizes):
            raise InvalidParameterValue(
                f"One or more parameters are invalid. Reason: Message must be shorter than {maximum} bytes."
            )
        refused: list[dict[str, Any]] = []
        accepted: dict[str, dict[str, Any]] = {}
        for key, entry in entries.items():
            character = _refused_character(entry["MessageBody"])
            if character is None:
                accepted[key] = entry
                continue
            error = InvalidMessageContents(character)
            refused.append({"Id": entry["Id"], "SenderFault": True, "Code": error.code, "Message": error.message})
        sent, failed = original(self, queue_name, accepted)
        return sent, [*refused, *failed]

    return send_message_batch


# ---------------------------------------------------------------- SQS requests cost the same with a backlog
# moto's Message.visible is "now > visible_at" and Message.delayed "now < delayed_until", each
# reading the clock; each walk below decides them for every message against one reading.
def _visible_messages(_original: Any) -> property:
    def messages(self: sqs_models.Queue) -> list[sqs_models.Message]:
        now = _sqs_now_ms()
        return [message for message in self._messages if now > message.visible_at and not now < message.delayed_until]

    return property(messages)


def _count_in_flight(_original: Any) -> property:
    def approximate_number_of_messages_not_visible(self: sqs_models.Queue) -> int:
        now = _sqs_now_ms()
        return sum(1 for message in self._messages if not now > message.visible_at)

    return property(approximate_number_of_messages_not_visible)


def _count_delayed(_original: Any) -> property:
    def approximate_number_of_messages_delayed(self: sqs_models.Queue) -> int:
        now = _sqs_now_ms()
        return sum(1 for message in self._messages if now < message.delayed_until)

    return property(approximate_number_of_messages_delayed)


def is_message_valid_based_on_retention_period(self: SQSBackend, queue_name: str, message: sqs_models.Message) -> bool:
    """moto's check (kept while ``sent + MessageRetentionPeriod`` is later than now), reading
    the queue's retention period alone rather than every attribute of the queue."""
    retention_period = int(self.get_queue(queue_name).message_retention_period)  # type: ignore[attr-defined]
    now_s = float(vars(sqs_models)["unix_time"]())
    return retention_period + float(message.sent_timestamp or 0) / 1000 > now_s


# AttributeValue members written as they are (moto's walk writes these the same way); B and BS
# (base64) and anything unexpected take the walk.
_PLAIN_STRINGS = frozenset({"S", "N"})
_PLAIN_SETS = frozenset({"SS", "NS"})
_PLAIN_FLAGS = frozenset({"BOOL", "NULL"})


def _plain_attribute_value(value: Any) -> Any:
    """``value`` (an AttributeValue as moto holds it) as moto's JSON walk would write it,
    or ``None`` when the walk should write it (binary values, anything else)."""
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ((kind, inner),) = value.items()
    if kind == "M" and isinstance(inner, dict):
        members = {name: _plain_attribute_value(member) for name, member in inner.items()}
        plain_members = all(isinstance(name, str) and member is not None for name, member in members.items())
        return {"M": members} if plain_members else None
    if kind == "L" and isinstance(inner, list):
        elements = [_plain_attribute_value(member) for member in inner]
        return {"L": elements} if all(element is not None for element in elements) else None
    plain = (
        (kind in _PLAIN_STRINGS and isinstance(inner, str))
        or (kind in _PLAIN_FLAGS and isinstance(inner, bool))
        or (kind in _PLAIN_SETS and isinstance(inner, list) and all(isinstance(member, str) for member in inner))
    )
    return {kind: list(inner) if kind in _PLAIN_SETS else inner} if plain else None  # never moto's own dict


def _attribute_values_as_they_are(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def serialize_structure(self: BaseJSONSerializer, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and shape.name == "AttributeValue":
            plain = _plain_attribute_value(value)
            if plain is not None:
                self._default_serialize(serialized, plain, shape, key)
                return
        original(self, serialized, value, shape, key)

    return serialize_structure


# ---------------------------------------------------------------- moto's modules listed once
def _listed_once(original: Callable[[], Iterable[str]]) -> Callable[[], Iterable[str]]:
    @functools.cache
    def list_of_moto_modules() -> tuple[str, ...]:
        return tuple(original())

    return list_of_moto_modules


# ---------------------------------------------------------------- in-process requests built without werkzeug's builder
# What werkzeug's EnvironBuilder derives from a request's URL alone, in the order it writes it.
_URL_KEYS = ("SCRIPT_NAME", "PATH_INFO")
_URI_KEYS = ("SERVER_NAME", "SERVER_PORT", "HTTP_HOST", "SERVER_PROTOCOL", "wsgi.version", "wsgi.url_scheme")
_BUILDER_FLAGS = ("wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once")
# An empty body with these content types makes the builder encode its (empty) form instead.
_FORM_TYPES = frozenset({"multipart/form-data", "application/x-www-form-urlencoded"})


@functools.lru_cache(maxsize=512)
def _url_environ(base_url: str, path: str) -> dict[str, Any]:
    """The environ keys werkzeug's builder derives from the endpoint and the path,
    as it derives them (built by it, once per endpoint and path)."""
    environ = EnvironBuilder(path=path, base_url=base_url).get_environ()
    return {key: environ[key] for key in (*_URL_KEYS, "REQUEST_URI", *_URI_KEYS, *_BUILDER_FLAGS)}


def _built_environ(
    method: str, url: str, headers: Any, body: bytes | str | None
) -> tuple[dict[str, Any], dict[str, str]] | None:
    """The environ ``EnvironBuilder.get_environ`` builds for moto's ``Request.from_primitives``
    (the same keys, values and order) and the header names moto preserves; or ``None`` for a
    request it builds otherwise (a body that is not bytes or text, a header that is not text
    or holds a newline, a form's content type with no body): those take werkzeug's builder."""
    if body is None:
        body = b""
    if isinstance(body, str):
        body = body.encode()
    if not isinstance(body, bytes):
        return None
    items: list[tuple[str, str]] = []
    for key, value in headers.items():
        text = value.decode("utf-8") if isinstance(value, bytes) else value
        if not isinstance(key, str) or not isinstance(text, str) or "\n" in text or "\r" in text:
            return None
        if key.lower() != "transfer-encoding":
            items.append((key, text))
    content_type = next((value for key, value in items if key.lower() == "content-type"), None)
    if not body and content_type is not None and content_type.partition(";")[0].strip() in _FORM_TYPES:
        return None
    parsed = urlparse(url)
    derived = _url_environ(f"{parsed.scheme}://{parsed.netloc}", parsed.path)
    environ: dict[str, Any] = {"REQUEST_METHOD": method}
    environ.update((key, derived[key]) for key in _URL_KEYS)
    environ["QUERY_STRING"] = parsed.query.encode().decode("latin1")
    environ["REQUEST_URI"] = environ["RAW_URI"] = derived["REQUEST_URI"]
    environ.update((key, derived[key]) for key in _URI_KEYS)
    environ["wsgi.input"] = BytesIO(body)
    environ["wsgi.errors"] = sys.stderr
    environ.update((key, derived[key]) for key in _BUILDER_FLAGS)
    if content_type is not None:
        environ["CONTENT_TYPE"] = content_type
    if body:
        environ["CONTENT_LENGTH"] = str(len(body))
    combined: dict[str, list[str]] = {}
    for key, value in items:
        if key.lower() not in ("content-type", "content-length"):
            combined.setdefault(f"HTTP_{key.upper().replace('-', '_')}", []).append(value)
    environ.update((key, ", ".join(values)) for key, values in combined.items())
    preserved = {environ_key_for_header(key): key for key, _ in items if should_preserve_original_header_name(key)}
    return environ, preserved


def _built_directly(original: Any) -> classmethod[Any, ..., Any]:
    build = original.__func__

    def from_primitives(cls: type[MotoRequest], method: str, url: str, headers: Any, body: Any = None) -> MotoRequest:
        if isinstance(body, AwsChunkedWrapper):
            body = body.read()  # as moto reads it
        built = _built_environ(method, url, headers, body)
        if built is None:
            return build(cls, method, url, headers, body)  # type: ignore[no-any-return]
        environ, preserved = built
        request = cls(environ)
        # moto's additions to what the builder built, as moto makes them.
        request.environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = preserved
        request.environ.setdefault("CONTENT_LENGTH", "0")
        return request

    return classmethod(functools.wraps(build)(from_primitives))


ATOMIC_REQUESTS = Fix(
    "every in-process request is served atomically", [Patch(BotocoreStubber, "process_request", _serialized)]
)
TRANSACTIONS_UNDO_WHAT_THEY_WROTE = Fix(
    "a transaction snapshots the items it writes, not its tables",
    [Patch(DynamoDBBackend, "transact_write_items", lambda _original: transact_write_items)],
)
TRANSACTIONS_HONOUR_THEIR_CLIENT_REQUEST_TOKEN = Fix(
    "a transaction's client token makes its retries for 10 minutes apply it once",
    [Patch(DynamoHandler, "transact_write_items", _token_honoured)],
    reset=_COMPLETED_TRANSACTIONS.clear,
)
QUERIES_READ_THEIR_PARTITION = Fix(
    "a query reads its partition of the table or of the global secondary index only",
    [
        Patch(Table, "query", _query),
        Patch(Table, "put_item", _indexed_put),
        Patch(Table, "delete_item", _indexed_delete),
        Patch(DynamoDBBackend, "update_item", _indexed_update),
    ],
    reset=_INDEXES.clear,
)
KMS_KEYS_MAKE_THEIR_PRIVATE_KEY_ON_FIRST_USE = Fix(
    "a KMS key generates its private key when an asymmetric operation first needs it",
    [Patch(kms_models, "generate_private_key", _private_key_on_first_use)],
)
SQS_RECEIVES_AS_SQS_DOES = Fix(
    "a FIFO receive frees expired in-flight messages first; 12 h of visibility count from the last receive",
    [
        Patch(SQSBackend, "receive_message", _expired_first),
        Patch(sqs_models.Message, "mark_received", _remember_receive),
        Patch(SQSBackend, "change_message_visibility", lambda _original: change_message_visibility),
    ],
)
SQS_COUNTS_BYTES_AND_REFUSES_WHAT_SQS_REFUSES = Fix(
    "SQS messages and batches are measured in UTF-8 bytes with their attributes; refused characters are refused",
    [
        Patch(SQSBackend, "send_message", _counted_send),
        Patch(SQSBackend, "send_message_batch", _counted_batch),
    ],
)
SQS_REQUESTS_COST_THE_SAME_WITH_A_BACKLOG = Fix(
    "an SQS send or receive reads the clock once per walk of the queue, and a retention check no counts",
    [
        Patch(sqs_models.Queue, "messages", _visible_messages),
        Patch(sqs_models.Queue, "approximate_number_of_messages_not_visible", _count_in_flight),
        Patch(sqs_models.Queue, "approximate_number_of_messages_delayed", _count_delayed),
        Patch(
            SQSBackend,
            "is_message_valid_based_on_retention_period",
            lambda _original: is_message_valid_based_on_retention_period,
        ),
    ],
)
ATTRIBUTE_VALUES_SERIALIZE_AS_THEY_ARE = Fix(
    "a DynamoDB AttributeValue of plain strings, numbers, flags, sets, maps and lists is written as it is",
    [Patch(BaseJSONSerializer, "_serialize_type_structure", _attribute_values_as_they_are)],
)
TAGS_ARE_ONE_PER_KEY = Fix(
    "a DynamoDB TagResource overwrites the value of a key the table already has",
    [Patch(DynamoDBBackend, "tag_resource", lambda _original: tag_resource)],
)
API_KEYS_TAKE_TAGS = Fix(
    "API Gateway's TagResource, GetTags and UntagResource serve an API key's ARN on the key's tags",
    [
        Patch(APIGatewayResponse, "tag_resource", _on_api_keys(_tag_api_key)),
        Patch(APIGatewayResponse, "get_tags", _on_api_keys(_api_key_tags)),
        Patch(APIGatewayResponse, "untag_resource", _on_api_keys(_untag_api_key)),
        Patch(apigateway_urls, "url_paths", _with_api_key_tags_path),
    ],
)
ACTIONS_FOUND_WITHOUT_LISTING_THE_CLASS = Fix(
    "a response class's method names are listed once, not on every request",
    [Patch(moto_responses, "method_names_from_class", functools.cache)],
)
MOTO_MODULES_LISTED_ONCE = Fix(
    "moto's server lists its package's service modules once, not on every request",
    [Patch(moto_backends, "list_of_moto_modules", _listed_once)],
)
REQUESTS_BUILT_WITHOUT_THE_TEST_BUILDER = Fix(
    "an in-process request's WSGI environ is built directly, as werkzeug's EnvironBuilder builds it",
    [Patch(MotoRequest, "from_primitives", _built_directly)],
)
FIXES = (
    ATOMIC_REQUESTS,
    TRANSACTIONS_UNDO_WHAT_THEY_WROTE,
    TRANSACTIONS_HONOUR_THEIR_CLIENT_REQUEST_TOKEN,
    QUERIES_READ_THEIR_PARTITION,
    KMS_KEYS_MAKE_THEIR_PRIVATE_KEY_ON_FIRST_USE,
    SQS_RECEIVES_AS_SQS_DOES,
    SQS_COUNTS_BYTES_AND_REFUSES_WHAT_SQS_REFUSES,
    SQS_REQUESTS_COST_THE_SAME_WITH_A_BACKLOG,
    ATTRIBUTE_VALUES_SERIALIZE_AS_THEY_ARE,
    TAGS_ARE_ONE_PER_KEY,
    API_KEYS_TAKE_TAGS,
    ACTIONS_FOUND_WITHOUT_LISTING_THE_CLASS,
    MOTO_MODULES_LISTED_ONCE,
    REQUESTS_BUILT_WITHOUT_THE_TEST_BUILDER,
)
