"""The stream poller's Lambda semantics, on a fake stream (no emulator):
FilterCriteria, batch size, retry from the first failed record, bisect on a
function error, give up after MaximumRetryAttempts to the on-failure
destination, and wait_drained."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from local_stack.event_sources.stream_poller import StreamPoller
from local_stack.event_sources.stream_sources import StreamSource, stream_source

STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/SupportTicket/stream/label"


class FakeStreams:
    """The three DynamoDB Streams calls the poller makes, over a list of records."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reads = 0

    def add(self, pk: str, sk: str = "SUMMARY", event: str = "INSERT") -> str:
        with self.lock:
            sequence = str(100 + len(self.records))
            self.records.append(
                {
                    "eventID": sequence,
                    "eventName": event,
                    "eventSource": "aws:dynamodb",
                    "dynamodb": {"Keys": {"pk": {"S": pk}, "sk": {"S": sk}}, "SequenceNumber": sequence},
                }
            )
            return sequence

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        self.reads += 1  # each cycle begins here
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-1"}]}}

    def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
        if kwargs["ShardIteratorType"] == "TRIM_HORIZON":
            return {"ShardIterator": "0"}
        return {"ShardIterator": str(int(kwargs["SequenceNumber"]) - 100 + 1)}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803
        start = int(ShardIterator)
        with self.lock:
            page = self.records[start : start + Limit]
        return {"Records": page, "NextShardIterator": str(start + len(page))}


def source(**changes: Any) -> StreamSource:
    # The template's own filter and settings, without the batching window.
    return replace(stream_source(), **{"batching_window_s": 0, **changes})


class Aggregator:
    """Records every invocation; fails as told."""

    def __init__(self, fail: Any = None) -> None:
        self.batches: list[list[str]] = []
        self.fail = fail

    def __call__(self, event: dict[str, Any]) -> Any:
        batch = [record["dynamodb"]["SequenceNumber"] for record in event["Records"]]
        assert all(record["eventSourceARN"] == STREAM_ARN for record in event["Records"])
        self.batches.append(batch)
        return self.fail(batch) if self.fail else {"batchItemFailures": []}


def run(streams: FakeStreams, aggregator: Aggregator, src: StreamSource) -> tuple[StreamPoller, list[dict[str, Any]]]:
    failures: list[dict[str, Any]] = []
    poller = StreamPoller(streams, STREAM_ARN, src, invoke=aggregator, on_failure=failures.append)
    poller.start()
    try:
        assert poller.wait_drained(timeout=30)
    finally:
        poller.stop()
    return poller, failures


def test_only_ticket_summaries_in_batches_of_batch_size() -> None:
    streams = FakeStreams()
    wanted = [streams.add(f"TENANT#t|TICKET#{n}") for n in range(5)]
    streams.add("TENANT#t|TICKET#0", sk="COMMENT#x")
    streams.add("TENANT#t|AGGREGATE", sk="OPEN", event="MODIFY")
    wanted.append(streams.add("TENANT#t|TICKET#9", event="REMOVE"))
    aggregator = Aggregator()
    poller, failures = run(streams, aggregator, source(batch_size=2))
    assert [seq for batch in aggregator.batches for seq in batch] == wanted
    assert all(len(batch) <= 2 for batch in aggregator.batches)
    assert poller.delivered == len(wanted)
    assert failures == []


def test_batch_item_failures_retry_from_the_first_failed_record() -> None:
    streams = FakeStreams()
    seqs = [streams.add(f"TENANT#t|TICKET#{n}") for n in range(4)]
    calls = {"n": 0}

    def fail_third_once(batch: list[str]) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 1:
            return {"batchItemFailures": [{"itemIdentifier": seqs[3]}, {"itemIdentifier": seqs[2]}]}
        return {"batchItemFailures": []}

    aggregator = Aggregator(fail_third_once)
    poller, failures = run(streams, aggregator, source())
    assert aggregator.batches == [seqs, seqs[2:]]
    assert poller.delivered == 4
    assert failures == []


def test_an_unknown_item_identifier_fails_the_whole_batch() -> None:
    streams = FakeStreams()
    seqs = [streams.add(f"TENANT#t|TICKET#{n}") for n in range(2)]
    answers = iter([{"batchItemFailures": [{"itemIdentifier": "nope"}]}, {}])
    aggregator = Aggregator(lambda batch: next(answers))
    run(streams, aggregator, source())
    assert aggregator.batches == [seqs, seqs]


def test_a_function_error_bisects_the_batch() -> None:
    streams = FakeStreams()
    seqs = [streams.add(f"TENANT#t|TICKET#{n}") for n in range(4)]
    poison = seqs[1]

    def explode_on_poison(batch: list[str]) -> dict[str, Any]:
        if poison in batch:
            raise RuntimeError("boom")
        return {}

    aggregator = Aggregator(explode_on_poison)
    poller, failures = run(streams, aggregator, source(maximum_retry_attempts=2))
    # [0,1,2,3] fails -> [0,1] fails -> [0] ok, [1] fails 1 + 2 retries -> given up; [2,3] ok
    assert aggregator.batches == [seqs, seqs[:2], seqs[:1], [poison], [poison], [poison], seqs[2:]]
    assert poller.given_up == 1
    (failure,) = failures
    info = failure["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == (poison, poison, 1)
    assert info["streamArn"] == STREAM_ARN
    assert failure["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert failure["requestContext"]["approximateInvokeCount"] == 3


def test_retries_are_bounded_by_maximum_retry_attempts() -> None:
    streams = FakeStreams()
    seqs = [streams.add(f"TENANT#t|TICKET#{n}") for n in range(2)]
    aggregator = Aggregator(lambda batch: {"batchItemFailures": [{"itemIdentifier": batch[0]}]})
    poller, failures = run(streams, aggregator, source(maximum_retry_attempts=3))
    assert aggregator.batches == [seqs] * 4
    assert poller.given_up == 2
    assert len(failures) == 1


def test_a_stub_that_always_raises_does_not_stop_the_poller() -> None:
    streams = FakeStreams()
    for n in range(3):
        streams.add(f"TENANT#t|TICKET#{n}")

    def not_implemented(batch: list[str]) -> Any:
        raise NotImplementedError

    poller, failures = run(streams, Aggregator(not_implemented), source(maximum_retry_attempts=1))
    assert poller.given_up == 3
    assert sum(f["DDBStreamBatchInfo"]["batchSize"] for f in failures) == 3


def test_wait_drained_sees_records_written_before_it() -> None:
    streams = FakeStreams()
    aggregator = Aggregator()
    poller = StreamPoller(streams, STREAM_ARN, source(batching_window_s=60), invoke=aggregator)
    poller.start()
    try:
        assert poller.wait_drained(timeout=30)
        late = streams.add("TENANT#t|TICKET#late")
        # The 60 s batching window would hold this record; a drain flushes it.
        assert poller.wait_drained(timeout=30)
        assert aggregator.batches[-1] == [late]
    finally:
        poller.stop()


def test_a_poller_told_of_every_write_drains_at_once_until_it_is_told_of_one() -> None:
    streams = FakeStreams()
    first = streams.add("TENANT#t|TICKET#1")
    aggregator = Aggregator()
    # No idle cycle of its own during the test: only a write or a drain makes it read.
    poller = StreamPoller(
        streams, STREAM_ARN, source(), invoke=aggregator, idle_interval_s=60, told_of_every_write=True
    )
    poller.start()
    try:
        assert poller.wait_drained(timeout=30)
        assert aggregator.batches == [[first]]
        reads = streams.reads
        # Nothing written since its last cycle found nothing left: it answers without reading.
        assert poller.wait_drained(timeout=30)
        assert streams.reads == reads
        late = streams.add("TENANT#t|TICKET#2")
        poller.notify()  # what the emulator does before it answers the write
        assert poller.wait_drained(timeout=30)
        assert aggregator.batches[-1] == [late]
        assert streams.reads > reads
    finally:
        poller.stop()


@pytest.mark.parametrize("report", [True, False])
def test_without_report_batch_item_failures_a_response_is_success(report: bool) -> None:
    streams = FakeStreams()
    streams.add("TENANT#t|TICKET#1")
    aggregator = Aggregator(lambda batch: {"batchItemFailures": [{"itemIdentifier": batch[0]}]})
    poller, _ = run(streams, aggregator, source(report_batch_item_failures=report, maximum_retry_attempts=0))
    assert (poller.given_up, poller.delivered) == ((1, 0) if report else (0, 1))


def test_a_reported_failure_with_bisect_on_retries_the_rest_without_halving_it() -> None:
    # AWS: with both settings, a partial batch response "bisects" the batch at the returned
    # sequence number and retries only the remaining records (no halving: nothing raised)
    streams = FakeStreams()
    seqs = [streams.add(f"TENANT#t|TICKET#{n}") for n in range(6)]
    answers = iter([{"batchItemFailures": [{"itemIdentifier": seqs[1]}]}, {}])
    aggregator = Aggregator(lambda batch: next(answers))
    poller, failures = run(streams, aggregator, source())
    assert source().bisect_on_error
    assert aggregator.batches == [seqs, seqs[1:]]
    assert (poller.delivered, failures) == (6, [])


def test_a_split_neither_consumes_nor_resets_the_retry_quota() -> None:
    # Given a record that fails its batch: reported once, then the function raises on it
    streams = FakeStreams()
    seqs = [streams.add(f"TENANT#t|TICKET#{n}") for n in range(4)]
    calls = {"n": 0}

    def bad_first_record(batch: list[str]) -> dict[str, Any]:
        calls["n"] += 1
        if seqs[0] not in batch:
            return {}
        if calls["n"] == 1:
            return {"batchItemFailures": [{"itemIdentifier": seqs[0]}]}
        raise RuntimeError("boom")

    aggregator = Aggregator(bad_first_record)
    poller, failures = run(streams, aggregator, source(maximum_retry_attempts=2))
    # Then: the report is retry 1; the error splits (no retry) down to the record, whose
    # halves inherited the retry used: one more retry (2 = MaximumRetryAttempts), then given up
    assert aggregator.batches == [seqs, seqs, seqs[:2], seqs[:1], seqs[:1], seqs[1:2], seqs[2:]]
    (failure,) = failures
    assert failure["requestContext"]["approximateInvokeCount"] == 3
    assert failure["DDBStreamBatchInfo"]["startSequenceNumber"] == seqs[0]
    assert (poller.given_up, poller.delivered) == (1, 3)


def test_the_on_failure_destination_gets_an_invocation_record_not_the_records() -> None:
    streams = FakeStreams()
    seqs = [streams.add(f"TENANT#secret-tenant|TICKET#{n}") for n in range(3)]
    aggregator = Aggregator(lambda batch: {"batchItemFailures": [{"itemIdentifier": batch[0]}]})
    _, failures = run(streams, aggregator, source(maximum_retry_attempts=0))
    (failure,) = failures
    assert set(failure) == {"requestContext", "responseContext", "version", "timestamp", "DDBStreamBatchInfo"}
    info = failure["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"], info["batchSize"]) == (seqs[0], seqs[-1], 3)
    # metadata only: the records' keys and images never leave the stream
    assert "secret-tenant" not in str(failure)
    assert failure["responseContext"]["functionError"] == ""
