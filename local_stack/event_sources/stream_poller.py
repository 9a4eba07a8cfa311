"""The DynamoDB stream event source of a stream function, as Lambda runs it.

A thread reads the table's stream from ``TRIM_HORIZON`` through the
emulator's DynamoDB Streams API (with the function role's credentials, so
the guard checks the role's ``ReadTheStream`` grant), drops the records the
template's ``FilterCriteria`` rejects, and invokes the function with batches of
up to ``BatchSize`` records of one shard, in order, waiting up to
``MaximumBatchingWindowInSeconds`` for a batch to fill. A shard moves on only
once its batch is done or given up. Failures follow Lambda's documented rules
for a stream source:

- **Partial batch response** (``ReportBatchItemFailures``,
  https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html):
  ``{"batchItemFailures": [{"itemIdentifier": <sequence number>}]}`` makes
  the record with the lowest reported sequence number the checkpoint: the
  records before it are done, and the batch is retried from it (with
  ``BisectBatchOnFunctionError`` too, the batch is "bisected at the returned
  sequence number" and only the remaining records are retried: no halving).
  An empty or null list, or an empty response, is a success; an
  ``itemIdentifier`` that is empty, null or not a record of the batch fails
  the whole batch (retried, not bisected: the invocation did not fail).
  Without ``ReportBatchItemFailures`` any response is a success.
- **Function error** (the handler raised, timed out, or its environment
  died): with ``BisectBatchOnFunctionError`` a batch of more than one record
  is split in two and each half retried on its own, the first half first
  (whatever the ``ReportBatchItemFailures`` setting); a single record is
  retried as it is.
- **Retries** (https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html):
  every retry of a batch after a reported failure or a function error counts
  towards ``MaximumRetryAttempts``; "splitting a batch does not consume the
  retry quota". A split neither counts nor resets the count: each half
  starts with the retries its batch had used (so no record is retried more
  than ``MaximumRetryAttempts`` times, splits aside). ``-1`` (retry until the
  record expires) is :data:`UNBOUNDED_RETRIES` here.
- **Give up**: once a batch has used its retries and fails again, its
  remaining records are discarded and the shard moves on. With an
  on-failure destination (``DestinationConfig.OnFailure``: the template's
  SQS queue), Lambda sends an *invocation record* there, JSON metadata about
  the discarded batch (``requestContext`` with ``condition``
  ``RetryAttemptsExhausted`` and ``approximateInvokeCount``,
  ``responseContext``, ``DDBStreamBatchInfo`` with the shard, the first and
  last sequence numbers and the batch size), never the records themselves:
  a reader finds them in the stream by those sequence numbers (same page,
  "Configuring destinations for failed invocations").
  ``MaximumRecordAgeInSeconds`` is not modelled (locally no record gets old).
- Parameters as SAM deploys them:
  https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-params.html.

The redeliveries this makes (the same records again from the first reported
failure; the halves of a failed batch; a record given up) are among the ones
``support_tickets.streams.aggregation`` is exact under.

:meth:`StreamPoller.wait_drained` blocks until every record written before the
call has been delivered (or given up): what tests and benchmarks wait on. A
poller told of every write to its table (``told_of_every_write``: the local
stack's, whose emulator tells it) that is waiting for one since a cycle that
left nothing to do, and was told of none since, has nothing to read: it
answers at once, where another reads its stream once more first.

An idle stream costs a local stack three emulator requests a cycle per
poller (each through the guard), a tenth of a core at four cycles a second.
Where something tells the poller about writes (:meth:`StreamPoller.notify`,
which the local stack calls for every DynamoDB write its emulator answers),
it waits ``idle_interval_s`` between cycles while nothing was written and
nothing is pending, and reads at once when a write arrives.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from local_stack.event_sources.polling_thread import PollingThread
from local_stack.event_sources.stream_sources import StreamSource, lambda_record

log = logging.getLogger("local_stack.poller")

Invoke = Callable[[dict[str, Any]], Any]
OnFailure = Callable[[dict[str, Any]], None]

# Lambda polls a stream shard about four times a second.
POLL_INTERVAL_S = 0.25
# MaximumRetryAttempts -1 means "until the record expires"; locally, this many.
UNBOUNDED_RETRIES = 100


class StreamPoller(PollingThread):
    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        source: StreamSource,
        *,
        invoke: Invoke,
        on_failure: OnFailure | None = None,
        function_arn: str = "",
        idle_interval_s: float = POLL_INTERVAL_S,
        told_of_every_write: bool = False,
    ) -> None:
        super().__init__("stream-poller", log)
        self._streams = streams
        self._stream_arn = stream_arn
        self._source = source
        self._invoke = invoke
        self._on_failure = on_failure
        self._function_arn = function_arn
        self._idle_interval_s = idle_interval_s
        self._positions: dict[str, str | None] = {}
        self._pending: list[dict[str, Any]] = []
        self._shard_of_pending: list[str] = []
        self._first_pending_at = 0.0
        self._writes = 0  # notify() calls so far
        self._waiting_for_writes = False
        self._told_of_every_write = told_of_every_write
        self._writes_read = 0  # _writes as the last cycle began
        self.delivered = 0
        self.given_up = 0

    # ------------------------------------------------------------ lifecycle
    @property
    def stream_arn(self) -> str:
        return self._stream_arn

    def notify(self) -> None:
        """The table was written: a poller waiting for writes reads the stream now."""
        with self._state:
            self._writes += 1
            waiting = self._waiting_for_writes
        if waiting:
            self._wake.set()

    def wait_drained(self, timeout: float = 30.0) -> bool:
        with self._state:
            # Told of no write since the idle cycle began: none came after its read.
            if self._told_of_every_write and self._waiting_for_writes and self._writes == self._writes_read:
                return True
        return super().wait_drained(timeout)

    # ------------------------------------------------------------ the loop
    def _run(self) -> None:
        while not self._stop.is_set():
            with self._state:
                self._cycle_started += 1
                cycle = self._cycle_started
                writes = self._writes
                self._waiting_for_writes = False
            try:
                idle = self._cycle()
            except Exception as exc:  # the emulator went away, a denial...: log, keep polling
                self._log_once(f"stream poll failed: {exc!r}")
                idle = False
            with self._state:
                if idle:
                    self._last_idle_cycle = cycle
                    self._state.notify_all()
                # Nothing pending and nothing written since this cycle began: the next
                # write (notify) or drain wakes the poller before the idle interval ends.
                self._waiting_for_writes = idle and self._writes == writes
                self._writes_read = writes
                interval = self._idle_interval_s if self._waiting_for_writes else POLL_INTERVAL_S
            self._wake.wait(interval)
            self._wake.clear()

    def _cycle(self) -> bool:
        """Read what is new, deliver full batches (all of them when flushing).
        True when nothing read is left undelivered."""
        for shard_id, record in self._read_new():
            if not self._pending:
                self._first_pending_at = time.monotonic()
            self._pending.append(record)
            self._shard_of_pending.append(shard_id)
        while self._pending and not self._stop.is_set():
            with self._state:
                flushing = self._flush_requests > 0
            window_open = time.monotonic() - self._first_pending_at < self._source.batching_window_s
            if len(self._pending) < self._source.batch_size and window_open and not flushing:
                return False
            # A batch holds records of one shard, in order.
            shard_id = self._shard_of_pending[0]
            size = 0
            while size < min(self._source.batch_size, len(self._pending)) and self._shard_of_pending[size] == shard_id:
                size += 1
            batch = self._pending[:size]
            self._pending, self._shard_of_pending = self._pending[size:], self._shard_of_pending[size:]
            self._first_pending_at = time.monotonic()
            self._deliver(batch, shard_id)
        return not self._pending

    def _read_new(self) -> list[tuple[str, dict[str, Any]]]:
        records: list[tuple[str, dict[str, Any]]] = []
        shards = self._streams.describe_stream(StreamArn=self._stream_arn)["StreamDescription"]["Shards"]
        for shard in shards:
            shard_id = shard["ShardId"]
            position = self._positions.get(shard_id)
            # A fresh iterator each cycle: moto replaces a table's stream shard
            # when it rolls back a failed transaction, orphaning old iterators.
            kwargs: dict[str, Any] = {"StreamArn": self._stream_arn, "ShardId": shard_id}
            if position is None:
                kwargs["ShardIteratorType"] = "TRIM_HORIZON"
            else:
                kwargs.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=position)
            iterator = self._streams.get_shard_iterator(**kwargs)["ShardIterator"]
            while iterator:
                page = self._streams.get_records(ShardIterator=iterator, Limit=1000)
                if not page["Records"]:
                    break
                for raw in page["Records"]:
                    self._positions[shard_id] = raw["dynamodb"]["SequenceNumber"]
                    record = lambda_record(raw, self._stream_arn)
                    if self._source.matches(record):
                        records.append((shard_id, record))
                iterator = page.get("NextShardIterator")
        return records

    # ------------------------------------------------------------ delivery
    def _deliver(self, batch: list[dict[str, Any]], shard_id: str, retries: int = 0) -> None:
        """Deliver ``batch`` until done or given up; ``retries``: those its
        records already used (a bisected half inherits its batch's)."""
        limit = self._source.maximum_retry_attempts
        limit = UNBOUNDED_RETRIES if limit < 0 else limit
        remaining = batch
        while remaining:
            failed_from, error = self._invoke_once(remaining)
            if failed_from is None:
                self.delivered += len(remaining)
                return
            if error is not None and self._source.bisect_on_error and len(remaining) > 1:
                # Splitting does not consume the retry quota (nor reset it).
                half = len(remaining) // 2
                self._deliver(remaining[:half], shard_id, retries)
                self._deliver(remaining[half:], shard_id, retries)
                return
            self.delivered += failed_from
            remaining = remaining[failed_from:]
            if retries >= limit:
                self._give_up(remaining, shard_id, retries + 1, error)
                return
            retries += 1

    def _invoke_once(self, batch: list[dict[str, Any]]) -> tuple[int | None, str | None]:
        """``(None, None)`` on success, else (index to retry from, function error)."""
        try:
            response = self._invoke({"Records": batch})
        except Exception as exc:
            self._log_once(f"{self._source.function} failed: {exc!r}")
            return 0, f"{type(exc).__name__}: {exc}"
        if not self._source.report_batch_item_failures:
            return None, None
        failures = response.get("batchItemFailures") if isinstance(response, Mapping) else None
        if not failures:
            return None, None
        sequence = [record["dynamodb"]["SequenceNumber"] for record in batch]
        indexes = []
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, Mapping) else None
            if not identifier or identifier not in sequence:
                return 0, None  # an invalid identifier fails the whole batch
            indexes.append(sequence.index(identifier))
        return min(indexes), None

    def _give_up(self, records: list[dict[str, Any]], shard_id: str, attempts: int, error: str | None) -> None:
        self.given_up += len(records)
        first, last = records[0], records[-1]
        log.error(
            "%s: giving up on %d record(s) %s..%s after %d attempt(s); sent to the on-failure destination",
            self._source.function,
            len(records),
            first["dynamodb"]["SequenceNumber"],
            last["dynamodb"]["SequenceNumber"],
            attempts,
        )
        if self._on_failure is None:
            return
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self._on_failure(
            {
                "requestContext": {
                    "requestId": str(uuid.uuid4()),
                    "functionArn": self._function_arn,
                    "condition": "RetryAttemptsExhausted",
                    "approximateInvokeCount": attempts,
                },
                "responseContext": {
                    "statusCode": 200,
                    "executedVersion": "$LATEST",
                    "functionError": "Unhandled" if error else "",
                },
                "version": "1.0",
                "timestamp": now,
                "DDBStreamBatchInfo": {
                    "shardId": shard_id,
                    "startSequenceNumber": first["dynamodb"]["SequenceNumber"],
                    "endSequenceNumber": last["dynamodb"]["SequenceNumber"],
                    "approximateArrivalOfFirstRecord": _iso(first["dynamodb"].get("ApproximateCreationDateTime")),
                    "approximateArrivalOfLastRecord": _iso(last["dynamodb"].get("ApproximateCreationDateTime")),
                    "batchSize": len(records),
                    "streamArn": self._stream_arn,
                },
            }
        )


def _iso(value: Any) -> str:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return ""


def failure_message(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"))
