"""The local stack's SQS event source (local_stack.event_sources.sqs_poller) has Lambda's
semantics, on queues in moto: the event's shape, delete on success, partial
batch responses (FIFO included), a function error returning the whole batch,
the queue's redrive policy, a function's ChangeMessageVisibility respected,
per-group order with one batch of a group in flight, and groups in parallel
with one hanging (in execution environments of their own, as every local
function runs). Nothing sleeps: tests wait on drains and events, and move
moto's SQS clock forward instead of waiting for visibility timeouts."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest

from local_stack.event_sources.sqs_poller import (
    InvalidEventSource,
    SqsPoller,
    SqsSource,
    advance_queue_clock,
    sqs_source,
    sqs_sources,
)
from local_stack.event_sources.stream_sources import stream_functions
from local_stack.stack import FunctionRuntime, lambda_environment
from stack_model.functions import FunctionSpec
from stack_model.template import REGION

pytestmark = pytest.mark.shared_aws

VISIBILITY_S = 30
Handler = Callable[[dict[str, Any]], Any]


@pytest.fixture
def sqs(aws: None) -> Any:
    return boto3.client("sqs", region_name=REGION)


_names = iter(range(1_000_000))


def make_queue(sqs: Any, *, fifo: bool = True, max_receive_count: int | None = None) -> tuple[str, str]:
    name = f"events{next(_names)}"
    attributes = {"VisibilityTimeout": str(VISIBILITY_S)}
    if fifo:
        name += ".fifo"
        attributes["FifoQueue"] = "true"
    if max_receive_count is not None:
        dlq = sqs.create_queue(QueueName=f"dlq-{name}", Attributes={"FifoQueue": "true"} if fifo else {})
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq["QueueUrl"], AttributeNames=["QueueArn"])["Attributes"]
        attributes["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": dlq_arn["QueueArn"], "maxReceiveCount": max_receive_count}
        )
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def send(sqs: Any, url: str, body: str, group: str = "g", **extra: Any) -> str:
    kwargs: dict[str, Any] = {"QueueUrl": url, "MessageBody": body, **extra}
    if url.endswith(".fifo"):
        kwargs.update(MessageGroupId=group, MessageDeduplicationId=body)
    message_id: str = sqs.send_message(**kwargs)["MessageId"]
    return message_id


def counts(sqs: Any, url: str) -> tuple[int, int]:
    """(visible, in flight) messages of a queue."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


class Function:
    """Records each batch's bodies; answers as ``answer`` says (or raises)."""

    def __init__(self, answer: Callable[[list[dict[str, Any]]], Any] | None = None) -> None:
        self.batches: list[list[str]] = []
        self.events: list[dict[str, Any]] = []
        self.answer = answer
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> Any:
        with self.lock:
            self.events.append(copy.deepcopy(event))
            self.batches.append([record["body"] for record in event["Records"]])
        return self.answer(event["Records"]) if self.answer else None

    @property
    def bodies(self) -> list[str]:
        return [body for batch in self.batches for body in batch]


def source(**changes: Any) -> SqsSource:
    return replace(
        SqsSource(name="TestQueueEvent", function="TestFunction", queue=None, report_batch_item_failures=True),
        **changes,
    )


@pytest.fixture
def poll(sqs: Any) -> Iterator[Callable[..., SqsPoller]]:
    started: list[SqsPoller] = []

    def start(url: str, arn: str, function: Handler, src: SqsSource | None = None, concurrency: int = 4) -> SqsPoller:
        poller = SqsPoller(sqs, url, arn, src or source(), invoke=function, concurrency=concurrency)
        poller.start()
        started.append(poller)
        return poller

    yield start
    for poller in started:
        poller.stop()


def later(poller: SqsPoller, seconds: float) -> None:
    """Let ``seconds`` pass on the queues' clock, then wait for what comes back."""
    advance_queue_clock(seconds)
    assert poller.wait_drained(timeout=10)


# ---------------------------------------------------------------- the template's sources
FRAGMENT: dict[str, Any] = {
    "Transform": "AWS::Serverless-2016-10-31",
    "Resources": {
        "Events": {"Type": "AWS::SQS::Queue", "Properties": {"FifoQueue": True, "VisibilityTimeout": 60}},
        "Deliver": {
            "Type": "AWS::Serverless::Function",
            "Properties": {
                "CodeUri": "s3://code/deliver",
                "Handler": "app.lambda_handler",
                "Runtime": "python3.13",
                "Events": {
                    "Queue": {
                        "Type": "SQS",
                        "Properties": {
                            "Queue": {"Fn::GetAtt": ["Events", "Arn"]},
                            "BatchSize": 5,
                            "FunctionResponseTypes": ["ReportBatchItemFailures"],
                            "ScalingConfig": {"MaximumConcurrency": 3},
                        },
                    }
                },
            },
        },
    },
}


def test_a_template_fragments_sqs_event_as_sam_translates_it() -> None:
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    translator = Translator({}, Parser(), boto_session=boto3.session.Session(region_name=REGION))
    translated = translator.translate(copy.deepcopy(FRAGMENT), {}, get_managed_policy_map=dict)
    ((name, mapping),) = [
        (logical_id, resource)
        for logical_id, resource in translated["Resources"].items()
        if resource["Type"] == "AWS::Lambda::EventSourceMapping"
    ]
    assert sqs_source(name, mapping["Properties"]) == SqsSource(
        name="DeliverQueue",
        function="Deliver",
        queue={"Fn::GetAtt": ["Events", "Arn"]},
        batch_size=5,
        batching_window_s=0,
        report_batch_item_failures=True,
        maximum_concurrency=3,
    )


def test_the_templates_sqs_sources_are_on_its_queues_not_its_stream() -> None:
    # On a template without SQS events this is empty, and the stack starts no poller.
    for found in sqs_sources():
        assert found.function not in stream_functions() or found.queue is not None
        assert "Fn::GetAtt" in found.queue


def test_lambda_refuses_a_queue_whose_visibility_is_shorter_than_the_functions_timeout(sqs: Any) -> None:
    url, arn = make_queue(sqs)
    poller = SqsPoller(sqs, url, arn, source(), invoke=Function())
    poller.validate(VISIBILITY_S)
    with pytest.raises(InvalidEventSource, match="Queue visibility timeout: 30 seconds is less than Function timeout"):
        poller.validate(VISIBILITY_S + 1)


# ---------------------------------------------------------------- the event, success
def test_records_have_lambdas_shape_and_a_success_deletes_the_batch(sqs: Any, poll: Callable[..., SqsPoller]) -> None:
    url, arn = make_queue(sqs)
    message_id = send(
        sqs,
        url,
        '{"id": "evt_1"}',
        group="t1#42",
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "x"}},
    )
    function = Function()
    poller = poll(url, arn, function)
    assert poller.wait_drained(timeout=10)
    ((record,),) = [event["Records"] for event in function.events]
    assert set(record) == {
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfBody",
        "md5OfMessageAttributes",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
    }
    assert record["messageId"] == message_id
    assert record["body"] == '{"id": "evt_1"}'
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == arn
    assert record["awsRegion"] == REGION
    assert record["md5OfBody"] == hashlib.md5(b'{"id": "evt_1"}').hexdigest()  # noqa: S324 - SQS's checksum
    assert record["messageAttributes"]["kind"] == {
        "stringValue": "x",
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "String",
    }
    attributes = record["attributes"]
    assert attributes["ApproximateReceiveCount"] == "1"
    assert attributes["MessageGroupId"] == "t1#42"
    assert attributes["MessageDeduplicationId"] == '{"id": "evt_1"}'
    assert {"SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp", "SequenceNumber"} <= set(attributes)
    assert counts(sqs, url) == (0, 0)
    assert poller.deleted == 1


def test_a_standard_queue_batches_up_to_batch_size(sqs: Any, poll: Callable[..., SqsPoller]) -> None:
    url, arn = make_queue(sqs, fifo=False)
    for n in range(7):
        send(sqs, url, f"m{n}")
    function = Function()
    poller = poll(url, arn, function, source(batch_size=3, batching_window_s=60), concurrency=1)
    assert poller.wait_drained(timeout=10)
    assert sorted(function.bodies) == [f"m{n}" for n in range(7)]
    assert all(len(batch) <= 3 for batch in function.batches)
    assert counts(sqs, url) == (0, 0)


# ---------------------------------------------------------------- FIFO order and groups
def test_a_group_is_delivered_in_order_never_in_two_batches_at_once(sqs: Any, poll: Callable[..., SqsPoller]) -> None:
    url, arn = make_queue(sqs)
    sent = {group: [f"{group}-{n}" for n in range(12)] for group in ("a", "b", "c")}
    for n in range(12):
        for group, bodies in sent.items():
            send(sqs, url, bodies[n], group=group)
    in_flight: dict[str, int] = {}
    overlaps: list[str] = []
    lock = threading.Lock()

    def one_batch_of_a_group_at_a_time(records: list[dict[str, Any]]) -> None:
        groups = {record["attributes"]["MessageGroupId"] for record in records}
        with lock:
            for group in groups:
                in_flight[group] = in_flight.get(group, 0) + 1
                if in_flight[group] > 1:
                    overlaps.append(group)
        with lock:
            for group in groups:
                in_flight[group] -= 1

    function = Function(one_batch_of_a_group_at_a_time)
    poller = poll(url, arn, function)
    assert poller.wait_drained(timeout=10)
    for group, bodies in sent.items():
        assert [body for body in function.bodies if body.startswith(f"{group}-")] == bodies
    assert overlaps == []
    assert counts(sqs, url) == (0, 0)


def test_a_fifo_batch_mixes_groups_each_in_order_as_lambdas_does(sqs: Any, poll: Callable[..., SqsPoller]) -> None:
    """services-sqs-scaling.html: "each batch may contain messages from more than one
    message group, but the order of the messages is maintained"."""
    url, arn = make_queue(sqs)
    for n in range(3):
        for group in ("a", "b"):
            send(sqs, url, f"{group}{n}", group=group)
    send(sqs, url, "c0", group="c")
    function = Function()
    poller = poll(url, arn, function, source(batch_size=5))
    assert poller.wait_drained(timeout=10)
    first, *rest = function.batches
    assert len(first) == 5
    assert len({body[0] for body in first}) > 1  # several groups in one batch
    for group in "abc":
        assert [body for body in function.bodies if body[0] == group] == sorted(
            body for body in function.bodies if body[0] == group
        )
    assert sorted(function.bodies) == ["a0", "a1", "a2", "b0", "b1", "b2", "c0"]
    assert sum(len(batch) for batch in rest) == 2


def test_a_groups_batches_keep_to_batch_size(sqs: Any, poll: Callable[..., SqsPoller]) -> None:
    url, arn = make_queue(sqs)
    for n in range(5):
        send(sqs, url, f"m{n}")
    function = Function()
    poller = poll(url, arn, function, source(batch_size=2))
    assert poller.wait_drained(timeout=10)
    assert function.batches == [["m0", "m1"], ["m2", "m3"], ["m4"]]


def test_a_hanging_group_never_delays_another(sqs: Any, poll: Callable[..., SqsPoller]) -> None:
    url, arn = make_queue(sqs)
    send(sqs, url, "slow-1", group="slow")
    hanging, release, other_done = threading.Event(), threading.Event(), threading.Event()

    def hang_on_slow(records: list[dict[str, Any]]) -> None:
        if records[0]["attributes"]["MessageGroupId"] == "slow":
            hanging.set()
            assert release.wait(timeout=30)
        elif records[-1]["body"] == "fast-3":
            other_done.set()

    function = Function(hang_on_slow)
    poller = poll(url, arn, function, concurrency=2)
    assert hanging.wait(timeout=10)
    send(sqs, url, "slow-2", group="slow")
    for n in range(4):
        send(sqs, url, f"fast-{n}", group="fast")
    poller.notify()  # what the stack's emulator does after a send
    try:
        assert other_done.wait(timeout=10), "the fast group waited for the hanging one"
        assert "slow-2" not in function.bodies  # its group is still in flight
    finally:
        release.set()
    assert poller.wait_drained(timeout=10)
    assert [body for body in function.bodies if body.startswith("slow")] == ["slow-1", "slow-2"]


def test_groups_run_in_their_own_execution_environments(sqs: Any, tmp_path: Path) -> None:
    """The same with the function in processes, as the stack runs it: the
    stack gives an SQS-triggered function as many environments as its source's
    concurrency."""
    spec = FunctionSpec(
        logical_id="SqsTestFunction",
        code_uri=Path(__file__).with_name("sqs_handler"),
        handler="app.lambda_handler",
        environment={},
        memory_mb=128,
        timeout_s=20,
    )
    credentials = {"AWS_ACCESS_KEY_ID": "AKIATEST", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t"}
    runtime = FunctionRuntime(
        {spec.logical_id: spec},
        {spec.logical_id: lambda_environment(spec, "http://127.0.0.1:9", credentials, "test")},
        limits={spec.logical_id: 2},
    )
    url, arn = make_queue(sqs)
    fast_done = threading.Event()

    def invoke(event: dict[str, Any]) -> Any:
        result = runtime.invoke(spec, event)
        if event["Records"][0]["attributes"]["MessageGroupId"] == "fast":
            fast_done.set()
        return result

    poller = SqsPoller(sqs, url, arn, source(), invoke=invoke, concurrency=2)
    send(sqs, url, "hang", group="slow")
    poller.start()
    try:
        assert poller.wait_drained(timeout=0.5) is False  # the hanging batch is under way
        send(sqs, url, "hello", group="fast")  # (sent together, they would share its batch)
        poller.notify()
        assert fast_done.wait(timeout=20), "the fast group waited for the hanging environment"
        assert len(runtime.pids()[spec.logical_id]) == 2
    finally:
        poller.stop()
        runtime.stop()


# ---------------------------------------------------------------- failures
def test_a_partial_batch_response_keeps_only_the_reported_messages(sqs: Any, poll: Callable[..., SqsPoller]) -> None:
    url, arn = make_queue(sqs)
    for n in range(4):
        send(sqs, url, f"m{n}")
    attempts: dict[str, int] = {}

    def fail_from_m2_once(records: list[dict[str, Any]]) -> dict[str, Any]:
        failed = []
        for record in records:
            attempts[record["body"]] = attempts.get(record["body"], 0) + 1
            if record["body"] >= "m2" and attempts[record["body"]] == 1:
                failed.append({"itemIdentifier": record["messageId"]})
        return {"batchItemFailures": failed}

    function = Function(fail_from_m2_once)
    poller = poll(url, arn, function)
    assert poller.wait_drained(timeout=10)
    assert function.batches == [["m0", "m1", "m2", "m3"]]
    assert counts(sqs, url) == (0, 2)  # m2, m3 in flight until their visibility timeout ends
    later(poller, VISIBILITY_S - 5)
    assert len(function.batches) == 1
    later(poller, 10)
    assert function.batches[1:] == [["m2", "m3"]]
    assert [record["attributes"]["ApproximateReceiveCount"] for record in function.events[1]["Records"]] == ["2", "2"]
    assert counts(sqs, url) == (0, 0)


def test_fifo_lambda_deletes_an_unreported_later_message_and_says_so(
    sqs: Any, poll: Callable[..., SqsPoller], caplog: pytest.LogCaptureFixture
) -> None:
    """AWS deletes what the response does not name, FIFO or not: a function
    must name a group's failed message and every later one."""
    url, arn = make_queue(sqs)
    for n in range(3):
        send(sqs, url, f"m{n}")
    function = Function(lambda records: {"batchItemFailures": [{"itemIdentifier": records[1]["messageId"]}]})
    with caplog.at_level(logging.WARNING, logger="local_stack.sqs_poller"):
        poller = poll(url, arn, function)
        assert poller.wait_drained(timeout=10)
    assert counts(sqs, url) == (0, 1)
    assert "follows a failed one but was not reported" in caplog.text


@pytest.mark.parametrize(
    "answer",
    [
        {"batchItemFailures": [{"itemIdentifier": ""}]},
        {"batchItemFailures": [{"itemIdentifier": None}]},
        {"batchItemFailures": [{"itemIdentifier": "not-in-the-batch"}]},
        {"batchItemFailures": [{"messageId": "wrong key"}]},
        {"batchItemFailures": "m0"},
    ],
)
def test_an_invalid_partial_response_fails_the_whole_batch(
    sqs: Any, poll: Callable[..., SqsPoller], answer: dict[str, Any]
) -> None:
    url, arn = make_queue(sqs)
    send(sqs, url, "m0")
    send(sqs, url, "m1")
    poller = poll(url, arn, Function(lambda records: answer))
    assert poller.wait_drained(timeout=10)
    assert counts(sqs, url) == (0, 2)


@pytest.mark.parametrize("answer", [None, {}, {"batchItemFailures": []}, {"batchItemFailures": None}])
def test_an_empty_partial_response_is_a_success(
    sqs: Any, poll: Callable[..., SqsPoller], answer: dict[str, Any] | None
) -> None:
    url, arn = make_queue(sqs)
    send(sqs, url, "m0")
    poller = poll(url, arn, Function(lambda records: answer))
    assert poller.wait_drained(timeout=10)
    assert counts(sqs, url) == (0, 0)


def test_without_report_batch_item_failures_a_response_is_a_success(sqs: Any, poll: Callable[..., SqsPoller]) -> None:
    url, arn = make_queue(sqs)
    send(sqs, url, "m0")
    function = Function(lambda records: {"batchItemFailures": [{"itemIdentifier": records[0]["messageId"]}]})
    poller = poll(url, arn, function, source(report_batch_item_failures=False))
    assert poller.wait_drained(timeout=10)
    assert counts(sqs, url) == (0, 0)


def test_a_function_error_returns_the_batch_and_redrive_moves_it_to_the_dlq(
    sqs: Any, poll: Callable[..., SqsPoller]
) -> None:
    url, arn = make_queue(sqs, max_receive_count=3)
    send(sqs, url, "poison")
    send(sqs, url, "after")

    def explode(records: list[dict[str, Any]]) -> None:
        raise RuntimeError("boom")

    function = Function(explode)
    poller = poll(url, arn, function)
    assert poller.wait_drained(timeout=10)
    for _ in range(3):
        later(poller, VISIBILITY_S + 1)
    # Received three times (maxReceiveCount), then moved at the fourth receive.
    assert function.batches == [["poison", "after"]] * 3
    assert [record["attributes"]["ApproximateReceiveCount"] for record in function.events[2]["Records"]] == ["3", "3"]
    assert poller.failed_invocations == 3
    assert counts(sqs, url) == (0, 0)
    dlq = sqs.get_queue_url(QueueName=f"dlq-{url.rsplit('/', 1)[1]}")["QueueUrl"]
    assert counts(sqs, dlq) == (2, 0)


def test_a_functions_change_message_visibility_is_respected(sqs: Any, poll: Callable[..., SqsPoller]) -> None:
    url, arn = make_queue(sqs)
    send(sqs, url, "retry-me")
    backoff_s = 3600

    def retry_later(records: list[dict[str, Any]]) -> dict[str, Any]:
        (record,) = records
        if record["attributes"]["ApproximateReceiveCount"] != "1":
            return {"batchItemFailures": []}
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=backoff_s)
        return {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}

    function = Function(retry_later)
    poller = poll(url, arn, function)
    assert poller.wait_drained(timeout=10)
    later(poller, VISIBILITY_S + 1)  # the queue's own timeout is not what counts any more
    assert len(function.batches) == 1
    later(poller, backoff_s)
    assert len(function.batches) == 2
    assert counts(sqs, url) == (0, 0)


def test_filter_criteria_drop_messages_no_pattern_matches(sqs: Any, poll: Callable[..., SqsPoller]) -> None:
    url, arn = make_queue(sqs)
    send(sqs, url, json.dumps({"type": "ticket.created"}))
    send(sqs, url, json.dumps({"type": "other"}))
    function = Function()
    poller = poll(url, arn, function, source(patterns=('{"body": {"type": ["ticket.created"]}}',)))
    assert poller.wait_drained(timeout=10)
    assert function.bodies == [json.dumps({"type": "ticket.created"})]
    assert counts(sqs, url) == (0, 0)
