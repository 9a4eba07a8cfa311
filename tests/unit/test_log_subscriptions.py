"""The local CloudWatch Logs subscriptions (local_stack.event_sources.log_subscriptions):
the template's filters and nothing else, the pattern as CloudWatch Logs
evaluates it, batches per log stream, the ``awslogs`` payload the metering
function reads, Lambda's asynchronous retries, and the drain tests use."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from local_stack.event_sources.log_subscriptions import (
    ASYNC_RETRIES,
    JsonFilter,
    LogDelivery,
    Subscription,
    UnsupportedPattern,
    subscriptions_from_template,
)
from stack_model.api import integrations
from support_tickets.usage.metering import decode_payload, read_delivery

HANDLED = json.dumps(
    {
        "level": "INFO",
        "message": "request handled",
        "tenant_id": "1",
        "usage": {
            "route": "GET /tickets",
            "request_id": "r-1",
            "read_units": 1.5,
            "write_units": 0.0,
            "dynamodb_calls": 2,
            "duration_ms": 12.41,
            "memory_mb": 512,
        },
    }
)
OTHER = '{"level":"INFO","message":"something else","tenant_id":"1"}'


def api_functions() -> set[str]:
    return {route.function for route in integrations()}


def test_every_api_and_invocation_usage_function_is_subscribed_as_the_template_says() -> None:
    subscriptions = subscriptions_from_template()
    patterns = {s.source: s.pattern for s in subscriptions}
    invocation_lines = {"AuthorizerFunction", "AggregateCountsFunction", "AuditTrailFunction", "DeliverWebhookFunction"}
    assert set(patterns) == api_functions() | invocation_lines
    assert {s.destination for s in subscriptions} == {"MeteringFunction"}
    usage = json.dumps({"level": "INFO", "message": "usage", "tenant_id": "1", "usage": {}})
    for function in invocation_lines:  # one "usage" line per verified token, or per tenant and invocation
        assert patterns.pop(function).matches(usage), function
    for function, pattern in patterns.items():  # the API functions' "request handled" lines
        assert pattern.matches(HANDLED), function
        assert not pattern.matches(OTHER), function
    assert "GetUsageFunction" in patterns


def test_the_pattern_matches_as_cloudwatch_logs_does() -> None:
    handled = JsonFilter.parse('{ $.message = "request handled" }')
    assert handled.matches(HANDLED)
    assert not handled.matches(OTHER)
    assert not handled.matches("request handled")  # not JSON
    assert not handled.matches('{"message": "request handled later"}')  # exact, not a substring
    assert not handled.matches('{"message": {"text": "request handled"}}')
    either = JsonFilter.parse('{ $.message = "request handled" || $.message = "usage" }')
    assert either.matches('{"message": "usage"}')
    nested = JsonFilter.parse("{ $.usage.records = 3 }")
    assert nested.matches('{"usage": {"records": 3}}')


@pytest.mark.parametrize(
    "pattern", ["{ $.status > 499 }", '"request handled"', '{ $.message = "request*" }', '{ $.a = "x" && $.b = "y" }']
)
def test_a_pattern_not_evaluated_here_stops_the_stack(pattern: str) -> None:
    with pytest.raises(UnsupportedPattern):
        JsonFilter.parse(pattern)


class Recorder:
    def __init__(self, failures: int = 0) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.failures = failures
        self.lock = threading.Lock()

    def __call__(self, destination: str, event: dict[str, Any]) -> None:
        with self.lock:
            if self.failures:
                self.failures -= 1
                raise RuntimeError("the function failed")
            self.events.append((destination, event))


def delivery(recorder: Recorder, **options: Any) -> LogDelivery:
    subscription = Subscription(
        "CreateTicketFunction", "MeteringFunction", "MeteringFunction-CreateTicketUsage", JsonFilter.parse(
            '{ $.message = "request handled" }'
        )
    )  # fmt: skip
    made = LogDelivery([subscription], recorder, **options)
    made.start()
    return made


def test_matching_lines_are_delivered_per_log_stream_as_awslogs_events() -> None:
    recorder = Recorder()
    logs = delivery(recorder, batch_delay_s=60)
    group = "/aws/lambda/CreateTicketFunction"
    logs.line("CreateTicketFunction", group, "s1", HANDLED)
    logs.line("CreateTicketFunction", group, "s1", OTHER)
    logs.line("CreateTicketFunction", group, "s2", HANDLED)
    logs.line("ListTicketsFunction", "/aws/lambda/ListTicketsFunction", "s3", HANDLED)  # not subscribed here
    assert logs.drain(5)
    logs.stop()
    assert [destination for destination, _ in recorder.events] == ["MeteringFunction"] * 2
    payloads = sorted((decode_payload(event) for _, event in recorder.events), key=lambda p: p["logStream"])
    assert [(p["logGroup"], p["logStream"], len(p["logEvents"])) for p in payloads] == [
        (group, "s1", 1),
        (group, "s2", 1),
    ]
    first = payloads[0]
    assert first["messageType"] == "DATA_MESSAGE"
    assert first["subscriptionFilters"] == ["MeteringFunction-CreateTicketUsage"]
    assert first["owner"].isdigit()
    assert json.loads(first["logEvents"][0]["message"])["message"] == "request handled"
    # what the metering function reads of it
    read = read_delivery(recorder.events[0][1])
    assert (read.events, read.malformed, [line.tenant_id for line in read.lines]) == (1, (), ["1"])
    ids = [p["logEvents"][0]["id"] for p in payloads]
    assert len(set(ids)) == 2


def test_a_full_batch_goes_at_once_and_a_partial_one_after_its_delay() -> None:
    recorder = Recorder()
    logs = delivery(recorder, batch_lines=3, batch_delay_s=0.05)
    for _ in range(4):
        logs.line("CreateTicketFunction", "g", "s", HANDLED)
    assert logs.drain(5)
    logs.stop()
    sizes = [len(decode_payload(event)["logEvents"]) for _, event in recorder.events]
    assert sum(sizes) == 4
    assert max(sizes) <= 3
    assert logs.delivered_lines == 4


def test_a_failed_invocation_is_retried_as_lambda_retries_an_async_event() -> None:
    recorder = Recorder(failures=ASYNC_RETRIES)
    logs = delivery(recorder, batch_delay_s=60)
    logs.line("CreateTicketFunction", "g", "s", HANDLED)
    assert logs.drain(5)
    assert len(recorder.events) == 1
    assert logs.given_up == 0
    recorder.failures = ASYNC_RETRIES + 1
    logs.line("CreateTicketFunction", "g", "s", HANDLED)
    assert logs.drain(5)
    logs.stop()
    assert len(recorder.events) == 1
    assert logs.given_up == 1
