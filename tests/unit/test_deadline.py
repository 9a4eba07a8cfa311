"""The invocation's deadline on the functions' one client: an attempt, or a retry,
that could not end before it is never sent; with time left botocore's retries
are as they were. Nothing leaves the process: a fake wire answers each attempt
after moving a fake clock on by as long as the attempt "took"."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError
from botocore.retries.standard import ExponentialBackoff

from support_tickets.core.errors import Unavailable
from support_tickets.core.settings import get_settings
from support_tickets.data import deadline
from support_tickets.data.session import TenantClients
from support_tickets.data.table import TenantTable
from tests.unit.test_session import caller_with, tenant_credentials

# An attempt's worst case with the functions' client config (connect 2 s + read 5 s).
ATTEMPT_S = 7.0


@dataclass
class Clock:
    now: float = 1000.0

    def monotonic(self) -> float:
        return self.now


@dataclass
class Invocation:
    """A Lambda context with this many seconds left."""

    seconds: float

    def get_remaining_time_in_millis(self) -> int:
        return int(self.seconds * 1000)


class _Answer:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self) -> Iterator[bytes]:
        yield self._body


class Wire:
    """Answers every attempt (a server error, or an empty GetItem), ``seconds`` after it was sent."""

    def __init__(self, clients: TenantClients, clock: Clock, *, seconds: float, failing: bool) -> None:
        self.sent = 0
        self._clock = clock
        self._seconds = seconds
        self._failing = failing
        # The generic event: after the deadline's own handler, as botocore's transport is.
        clients.client().meta.events.register("before-send", self._send)  # type: ignore[arg-type]

    def _send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        self.sent += 1
        self._clock.now += self._seconds
        if self._failing:
            body = b'{"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "x"}'
            return AWSResponse(request.url, 500, HTTPHeaders(), _Answer(body))
        return AWSResponse(request.url, 200, HTTPHeaders(), _Answer(b"{}"))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(deadline, "time", clock)
    # botocore retries at once: its jitter sleeps for real, and this clock would not see it.
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)
    return clock


def table(clients: TenantClients) -> TenantTable:
    return TenantTable("acme", "SupportTicket", clients.for_caller(caller_with(tenant_credentials())))


def get_item(clients: TenantClients) -> Any:
    return table(clients).call("get_item", TableName="SupportTicket", Key={"pk": {"S": "TENANT#acme|X"}})


def test_outside_an_invocation_there_is_no_deadline(clock: Clock) -> None:
    clients = TenantClients(get_settings())
    wire = Wire(clients, clock, seconds=60, failing=False)
    assert deadline.seconds_left() is None
    get_item(clients)
    get_item(clients)
    assert wire.sent == 2


def test_the_deadline_is_the_remaining_time_less_the_reserve_and_ends_with_the_invocation(clock: Clock) -> None:
    with deadline.within(Invocation(10)):
        assert deadline.seconds_left() == 10 - deadline.RESERVE_SECONDS
        clock.now += 4
        assert deadline.seconds_left() == 6 - deadline.RESERVE_SECONDS
    assert deadline.seconds_left() is None
    with pytest.raises(RuntimeError):
        _failing_invocation()
    assert deadline.seconds_left() is None


def _failing_invocation() -> None:
    with deadline.within(Invocation(10)):
        raise RuntimeError


def test_an_attempt_that_could_not_end_in_time_is_not_sent(clock: Clock) -> None:
    clients = TenantClients(get_settings())
    wire = Wire(clients, clock, seconds=0.01, failing=False)
    with deadline.within(Invocation(ATTEMPT_S + deadline.RESERVE_SECONDS + 0.5)):
        get_item(clients)  # time for one
        clock.now += 0.6
        with pytest.raises(Unavailable) as refused:
            get_item(clients)
    assert isinstance(refused.value.__cause__, deadline.DeadlineExceeded)
    assert wire.sent == 1


@pytest.mark.parametrize(
    ("seconds_left", "attempts"),
    [
        (ATTEMPT_S + 0.5, 1),  # the first attempt took 5 s: 2.5 s left, no retry could end in time
        (5 + ATTEMPT_S + 0.5, 2),
        (60, 3),  # plenty: botocore's three attempts, as without a deadline
    ],
)
def test_a_retry_is_made_only_if_it_could_end_in_time(clock: Clock, seconds_left: float, attempts: int) -> None:
    clients = TenantClients(get_settings())
    wire = Wire(clients, clock, seconds=5, failing=True)
    with deadline.within(Invocation(seconds_left + deadline.RESERVE_SECONDS)), pytest.raises(Unavailable) as failed:
        get_item(clients)
    # What ended the last attempt: DynamoDB's own error, never a retry made too late
    assert isinstance(failed.value.__cause__, ClientError)
    assert wire.sent == attempts
