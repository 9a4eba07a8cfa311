"""bench.webhooks' neighbour load (:class:`bench.webhooks.EventLoad`), in process against
moto's SQS (no local stack): tenant A's events go out at its tier's rate for a burst, then
one at a time only when its endpoint holds fewer attempts than its bound. The load the
benchmark first had sent at the tier's rate for the whole block, whose deferred backlog
outgrew what the local stack serves on this machine (bench/webhooks.py's HANG_NOTE)."""

from __future__ import annotations

import json
import threading
from typing import Any, cast

import boto3
from moto import mock_aws

from bench.stackproc import StackProcess
from bench.webhooks import WEBHOOK_QUEUE, EventLoad
from local_stack.local_values import queue_name
from stack_model.template import resources
from tests.conftest import REGION

WAIT_S = 30  # a bound for the load's thread to get somewhere; never a sleep


class SqsOperator:
    """The one thing :class:`EventLoad` asks of a :class:`StackProcess`: its SQS client."""

    def __init__(self, sqs: Any) -> None:
        self.sqs = sqs

    def operator(self, service: str) -> Any:
        assert service == "sqs"
        return self.sqs


class TopUps:
    """Says an event is wanted ``wanted`` times, then never; counts how often it was asked."""

    def __init__(self, wanted: int) -> None:
        self.wanted, self.asked = wanted, 0
        self.changed = threading.Condition()

    def __call__(self) -> bool:
        with self.changed:
            self.asked += 1
            self.changed.notify_all()
            return self.asked <= self.wanted

    def wait_asked(self, times: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.asked >= times, WAIT_S)


def _bodies(sqs: Any, url: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while answer := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        found += [json.loads(message["Body"]) for message in answer]
    return found


@mock_aws
def test_a_neighbours_events_come_at_its_rate_for_the_burst_then_only_when_its_bound_is_not_held() -> None:
    # Given the webhook queue, named as the local stack names the template's (SQS alone: no table)
    sqs = boto3.client("sqs", region_name=REGION)
    props = resources("AWS::SQS::Queue")[WEBHOOK_QUEUE]["Properties"]
    url = sqs.create_queue(QueueName=queue_name(WEBHOOK_QUEUE, props), Attributes={"FifoQueue": "true"})["QueueUrl"]
    top_ups = TopUps(wanted=2)
    load = EventLoad(cast(StackProcess, SqsOperator(sqs)), "1", "w1", 5, burst_s=3, top_up=top_ups, interval_s=0.01)
    # When tenant 1's load runs its burst of 3 "seconds", then is asked for top-ups 10 times
    load.start()
    assert load.burst_over.wait(WAIT_S)
    assert top_ups.wait_asked(10)
    achieved = load.stop()
    # Then 5 a second for the burst, then the 2 events wanted, and nothing more
    assert load.burst["sent"] == 15
    assert (achieved["sent"], achieved["topped_up"]) == (17, 2)
    events = _bodies(sqs, url)
    assert len(events) == 17
    assert {event["tenant_id"] for event in events} == {"1"}
    assert len({event["ticket_id"] for event in events}) == 17  # a group (ticket) per event
