"""The SQS event sources of `template.yaml`'s functions, as Lambda runs them.

For every event source mapping of a function on a queue of the template
(``Events: <name>: Type: SQS``), :class:`SqsPoller` reads the queue in the
embedded emulator with the function's execution role (Lambda polls with it:
``sqs:ReceiveMessage``, ``DeleteMessage``, ``GetQueueAttributes``) and invokes
the function, in its own execution environments like every local function,
with Lambda's SQS event (:func:`lambda_record`). What it does is what AWS
documents for the SQS event source ("Using Lambda with Amazon SQS",
"Handling errors for an SQS event source"):

- **Success** (the function returns, with no ``batchItemFailures``): the
  batch's messages are deleted.
- **Partial batch response** (``FunctionResponseTypes:
  [ReportBatchItemFailures]``): every message but those named by
  ``{"batchItemFailures": [{"itemIdentifier": <messageId>}]}`` is deleted; the
  named ones stay in flight and come back when their visibility timeout ends.
  An empty or null ``itemIdentifier``, one that is not a message of the batch,
  or a ``batchItemFailures`` that is not a list of objects fails the whole
  batch; an empty or null list (or no response) is a success. Lambda deletes
  what is not named **also on a FIFO queue**: AWS tells the function to stop
  at a group's first failure and name it and every later message of that group
  (Powertools' ``SqsFifoPartialProcessor`` does); a function that names the
  failed message only has the group's later messages deleted, out of order.
  The poller does as Lambda does, and logs a warning when it happens (a bug of
  the function that would lose ordering in AWS too).
- **Function error** (it raised, timed out, or its environment crashed):
  nothing is deleted; the whole batch comes back after the visibility timeout.
- **Visibility**: messages are received with the queue's ``VisibilityTimeout``;
  a function that calls ``ChangeMessageVisibility`` on a message it then
  reports as failed (or on a batch it fails) sees that timeout respected: the
  poller never touches a message it does not delete.
- **Dead-letter queue**: the queue's ``RedrivePolicy`` as moto implements it:
  a message received ``maxReceiveCount`` times moves to the dead-letter queue
  at the next receive instead of being delivered (as in SQS).
- **FIFO**: as Lambda reads a FIFO queue ("Configuring scaling behavior for
  SQS event source mappings",
  https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html):
  "each batch may contain messages from more than one message group, but the
  order of the messages is maintained", and the concurrent invocations are
  capped "either at the number of message group IDs or the maximum
  concurrency setting, whichever is lower". A batch is what one
  ``ReceiveMessage`` returns (up to ``BatchSize``): SQS returns as many
  messages of a group as it can and messages of other groups, each group in
  order, and no message of a group while one of its messages is in flight
  (moto included), so a group never has two batches in flight. A function
  hanging on one group's message holds its whole batch (the other groups' in
  it included) until it returns, and one of the source's invocations. A
  standard queue's batch holds up to ``BatchSize`` messages, collected for up
  to ``MaximumBatchingWindowInSeconds``.
- **Concurrency**: ``ScalingConfig.MaximumConcurrency`` bounds the source's
  concurrent invocations; locally, so does the stack's
  ``queue_concurrency`` (each invocation is a process; ``make dev`` keeps a
  few), whichever is lower. The benchmark runs the source at the template's
  ``MaximumConcurrency`` (``python -m local_stack serve --queue-concurrency``).
- **Filtering**: ``FilterCriteria`` patterns are matched against the record
  (``body`` parsed when it is JSON, as Lambda does); a message no pattern
  matches is deleted without an invocation.

**Waiting, not sleeping**: :meth:`SqsPoller.wait_drained` returns once every
message that was receivable before the call has been handed to the function
and every invocation has ended (messages left in flight after a failure are
not waited for: they come back when their visibility ends).
:func:`advance_queue_clock` moves moto's SQS clock forward (visibility
timeouts, delays, retention), so a test sees a message come back after a
12-hour ``ChangeMessageVisibility`` at once.

An idle source costs one ``ReceiveMessage`` (through the guard) every
``idle_interval_s``; the emulator also wakes the pollers on every send and
visibility change (:meth:`SqsPoller.notify`). A template without SQS event
sources starts no poller.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from moto.events.models import EventPattern

from local_stack.event_sources.polling_thread import PollingThread
from stack_model.template import resources

log = logging.getLogger("local_stack.sqs_poller")

Invoke = Callable[[dict[str, Any]], Any]

# SQS returns at most 10 messages per ReceiveMessage; Lambda's FIFO batches are at most 10.
RECEIVE_LIMIT = 10
# Lambda's defaults for an SQS event source mapping.
DEFAULT_BATCH_SIZE = 10
# When nothing is in flight and nothing was sent, how often a source still looks
# (visibility timeouts end without anyone telling the poller).
IDLE_POLL_INTERVAL_S = 1.0


@dataclass(frozen=True)
class SqsSource:
    """One event source mapping of a function on a queue."""

    name: str  # the mapping's logical id (<Function><Event>)
    function: str
    # The queue as the template names it (e.g. {"Fn::GetAtt": ["Queue", "Arn"]}).
    queue: Any
    batch_size: int = DEFAULT_BATCH_SIZE
    batching_window_s: int = 0
    report_batch_item_failures: bool = False
    maximum_concurrency: int | None = None
    enabled: bool = True
    patterns: tuple[str, ...] = ()

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether Lambda would invoke the function with this record."""
        if not self.patterns:
            return True
        subject = dict(record)
        with contextlib.suppress(TypeError, ValueError):
            subject["body"] = json.loads(record["body"])
        return any(
            EventPattern(raw, json.loads(raw)).matches_event(subject)  # type: ignore[arg-type]
            for raw in self.patterns
        )


def _is_queue_arn(value: Any) -> bool:
    if not (isinstance(value, Mapping) and set(value) == {"Fn::GetAtt"}):
        return False
    target = value["Fn::GetAtt"]
    logical_id, _, attribute = (".".join(target) if isinstance(target, list) else str(target)).partition(".")
    return attribute == "Arn" and logical_id in resources("AWS::SQS::Queue")


def sqs_source(name: str, props: Mapping[str, Any]) -> SqsSource:
    """A translated ``AWS::Lambda::EventSourceMapping``'s properties, as Lambda reads them."""
    function = props["FunctionName"]
    filters = props.get("FilterCriteria", {}).get("Filters", [])
    concurrency = props.get("ScalingConfig", {}).get("MaximumConcurrency")
    return SqsSource(
        name=name,
        function=str(function["Ref"] if isinstance(function, Mapping) else function),
        queue=props["EventSourceArn"],
        batch_size=int(props.get("BatchSize", DEFAULT_BATCH_SIZE)),
        batching_window_s=int(props.get("MaximumBatchingWindowInSeconds", 0)),
        report_batch_item_failures="ReportBatchItemFailures" in props.get("FunctionResponseTypes", []),
        maximum_concurrency=int(concurrency) if concurrency is not None else None,
        enabled=bool(props.get("Enabled", True)),
        patterns=tuple(str(item["Pattern"]) for item in filters),
    )


def sqs_sources() -> list[SqsSource]:
    """Every SQS event source of the template's functions (none: an empty list)."""
    return [
        sqs_source(name, resource["Properties"])
        for name, resource in resources("AWS::Lambda::EventSourceMapping").items()
        if _is_queue_arn(resource["Properties"].get("EventSourceArn"))
    ]


# ---------------------------------------------------------------- the event
def lambda_record(message: Mapping[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """A ``ReceiveMessage`` message (boto3's shape) as Lambda's SQS event holds it."""
    attributes = dict(message.get("Attributes", {}))
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": {
            name: _message_attribute(value) for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody") or hashlib.md5(message["Body"].encode()).hexdigest(),  # noqa: S324 - SQS's checksum
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def _message_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    # Lambda's JSON: camelCase, binary values base64-encoded, the list fields always present.
    converted: dict[str, Any] = {
        "stringListValues": list(value.get("StringListValues", [])),
        "binaryListValues": [base64.b64encode(item).decode() for item in value.get("BinaryListValues", [])],
        "dataType": value["DataType"],
    }
    if "StringValue" in value:
        converted["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        converted["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
    return converted


# ---------------------------------------------------------------- moto's clock
class _QueueClock:
    """An offset added to the clock moto's SQS models read (``unix_time`` and
    ``unix_time_millis`` as ``moto.sqs.models`` imported them): what is
    sent, received and made invisible keeps its own timestamps, and moving the
    clock forward ends visibility timeouts, delays and retention at once."""

    def __init__(self) -> None:
        self.offset_s = 0.0
        self._lock = threading.Lock()
        self._installed = False

    def install(self) -> None:
        with self._lock:
            if self._installed:
                return
            from moto.sqs import models

            # The names moto.sqs.models imported (not re-exported: reached through its namespace).
            namespace = vars(models)
            original_s, original_ms = namespace["unix_time"], namespace["unix_time_millis"]

            def unix_time(dt: Any = None) -> float:
                return float(original_s(dt)) + (0.0 if dt is not None else self.offset_s)

            def unix_time_millis(dt: Any = None) -> float:
                return float(original_ms(dt)) + (0.0 if dt is not None else self.offset_s * 1000.0)

            namespace["unix_time"] = unix_time
            namespace["unix_time_millis"] = unix_time_millis
            self._installed = True


QUEUE_CLOCK = _QueueClock()


def advance_queue_clock(seconds: float) -> float:
    """Move moto's SQS clock forward (in this process); the total offset."""
    if seconds < 0:
        raise ValueError("the queue clock only moves forward")
    QUEUE_CLOCK.install()
    QUEUE_CLOCK.offset_s += seconds
    return QUEUE_CLOCK.offset_s


# ---------------------------------------------------------------- the poller
class InvalidEventSource(ValueError):
    """Lambda would refuse to create this event source mapping."""


class SqsPoller(PollingThread):
    """One SQS event source: a receiving thread and up to ``concurrency``
    concurrent invocations."""

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        queue_arn: str,
        source: SqsSource,
        *,
        invoke: Invoke,
        region: str = "us-east-1",
        concurrency: int = 1,
        idle_interval_s: float = IDLE_POLL_INTERVAL_S,
    ) -> None:
        if concurrency < 1:
            raise ValueError("an SQS event source needs a concurrency of at least 1")
        super().__init__(f"sqs-poller-{source.name}", log)
        QUEUE_CLOCK.install()
        self._sqs = sqs
        self._queue_url = queue_url
        self._queue_arn = queue_arn
        self._source = source
        self._invoke = invoke
        self._region = region
        self._fifo = queue_arn.endswith(".fifo")
        self.concurrency = min(concurrency, source.maximum_concurrency or concurrency)
        self._idle_interval_s = idle_interval_s
        self._workers = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix=f"sqs-{source.name}")
        self._running = 0  # invocations under way
        self._held: list[dict[str, Any]] = []  # a standard queue's batch, filling
        self._held_since = 0.0
        self.invocations = 0
        self.deleted = 0
        self.failed_invocations = 0

    @property
    def source(self) -> SqsSource:
        return self._source

    # ------------------------------------------------------------ lifecycle
    def validate(self, function_timeout_s: float) -> None:
        """What Lambda checks when the event source mapping is created: the
        function's role may read the queue's attributes, and the queue's
        visibility timeout is not shorter than the function's timeout
        (``InvalidParameterValueException``: a message would come back while
        its invocation still runs)."""
        attributes = self._sqs.get_queue_attributes(QueueUrl=self._queue_url, AttributeNames=["VisibilityTimeout"])
        visibility = int(attributes["Attributes"]["VisibilityTimeout"])
        if visibility < function_timeout_s:
            raise InvalidEventSource(
                f"{self._source.name}: Queue visibility timeout: {visibility} seconds is less than "
                f"Function timeout: {function_timeout_s:g} seconds"
            )

    def stop(self) -> None:
        super().stop()
        # Invocations under way end with their environments (the runtime stops them).
        self._workers.shutdown(wait=False, cancel_futures=True)

    def notify(self) -> None:
        """A message was sent or made visible: look now."""
        self._wake.set()

    # ------------------------------------------------------------ receiving
    def _run(self) -> None:
        while not self._stop.is_set():
            # Cleared before the cycle looks: a wake-up during the cycle is never lost.
            self._wake.clear()
            with self._state:
                self._cycle_started += 1
                cycle = self._cycle_started
                running_before = self._running
                flushing = self._flush_requests > 0
            try:
                received = self._cycle(flushing)
            except Exception as exc:  # the emulator went away, a denial...: log, keep polling
                self._log_once(f"{self._source.name}: receive failed: {exc!r}")
                received = -1
            with self._state:
                if received == 0 and running_before == 0 and self._running == 0 and not self._held:
                    self._last_idle_cycle = cycle
                    self._state.notify_all()
                busy = self._running >= self.concurrency
            if received > 0 and not busy:
                continue  # more may be waiting
            self._wake.wait(self._idle_interval_s)

    def _cycle(self, flushing: bool) -> int:
        """Receive what the free invocation slots can take and dispatch it; the
        number of messages received (0: nothing was receivable)."""
        with self._state:
            free = self.concurrency - self._running
        if free <= 0:
            return 0
        # A FIFO receive is one batch (its groups mixed, each in order), at most BatchSize.
        wanted = min(RECEIVE_LIMIT, self._source.batch_size - (0 if self._fifo else len(self._held)))
        answer = self._sqs.receive_message(
            QueueUrl=self._queue_url,
            MaxNumberOfMessages=max(1, wanted),
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
            WaitTimeSeconds=0,
        )
        messages: list[dict[str, Any]] = answer.get("Messages", [])
        records = [lambda_record(message, self._queue_arn, self._region) for message in messages]
        records = self._filtered(records)
        if self._fifo:
            self._dispatch(records)
            return len(messages)
        if records and not self._held:
            self._held_since = time.monotonic()
        self._held.extend(records)
        full = len(self._held) >= self._source.batch_size
        window_over = time.monotonic() - self._held_since >= self._source.batching_window_s
        if self._held and (full or window_over or flushing):
            batch, self._held = self._held, []
            self._dispatch(batch)
        return len(messages)

    def _filtered(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = [record for record in records if self._source.matches(record)]
        dropped = [record for record in records if record not in kept]
        if dropped:
            # Lambda deletes a message that no filter matches.
            self._delete(dropped)
        return kept

    def _dispatch(self, batch: list[dict[str, Any]]) -> None:
        if not batch:
            return
        with self._state:
            self._running += 1
        try:
            self._workers.submit(self._process, batch)
        except RuntimeError:  # shut down: the messages come back after their visibility timeout
            with self._state:
                self._running -= 1

    # ------------------------------------------------------------ one invocation
    def _process(self, batch: list[dict[str, Any]]) -> None:
        try:
            with self._state:
                self.invocations += 1
            failed = self._invoke_once(batch)
            done = [record for record in batch if record["messageId"] not in failed]
            if done:
                self._delete(done)
        except Exception as exc:
            self._log_once(f"{self._source.name}: {exc!r}")
        finally:
            with self._state:
                self._running -= 1
                self._state.notify_all()
            self._wake.set()

    def _invoke_once(self, batch: list[dict[str, Any]]) -> set[str]:
        """The message ids to leave in the queue (all of them after a function error)."""
        everything = {record["messageId"] for record in batch}
        try:
            response = self._invoke({"Records": batch})
        except Exception as exc:
            with self._state:
                self.failed_invocations += 1
            self._log_once(f"{self._source.function} failed: {exc!r}")
            return everything
        if not self._source.report_batch_item_failures or not isinstance(response, Mapping):
            return set()
        failures = response.get("batchItemFailures")
        if failures is None or failures == []:
            return set()
        if not isinstance(failures, list):
            return everything
        failed: set[str] = set()
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, Mapping) else None
            if not isinstance(identifier, str) or identifier not in everything:
                return everything  # Lambda: an invalid identifier fails the whole batch
            failed.add(identifier)
        if self._fifo:
            self._warn_out_of_order(batch, failed)
        return failed

    def _warn_out_of_order(self, batch: list[dict[str, Any]], failed: set[str]) -> None:
        failed_groups: set[str] = set()
        for record in batch:
            group = record["attributes"].get("MessageGroupId", "")
            if record["messageId"] in failed:
                failed_groups.add(group)
            elif group in failed_groups:
                log.warning(
                    "%s: message %s of group %s follows a failed one but was not reported: Lambda deletes it "
                    "(out of order); a FIFO function must report every message after a group's first failure",
                    self._source.function,
                    record["messageId"],
                    group,
                )

    def _delete(self, records: list[dict[str, Any]]) -> None:
        for start in range(0, len(records), RECEIVE_LIMIT):
            chunk = records[start : start + RECEIVE_LIMIT]
            answer = self._sqs.delete_message_batch(
                QueueUrl=self._queue_url,
                Entries=[{"Id": str(n), "ReceiptHandle": record["receiptHandle"]} for n, record in enumerate(chunk)],
            )
            with self._state:
                self.deleted += len(answer.get("Successful", []))
            for error in answer.get("Failed", []):
                self._log_once(f"{self._source.name}: delete failed: {error.get('Code')} {error.get('Message')}")
