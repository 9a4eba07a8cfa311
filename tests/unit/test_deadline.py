"""The invocation's deadline on the functions' one client: an attempt reads no
longer than the time left, one or a retry that would get too little is never
sent; with time left botocore's retries are as they were. Nothing leaves the process: a fake wire answers each attempt
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

# The functions' client config's connect timeout.
CONNECT_S = 2.0


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
        self.read_timeouts: list[float | None] = []  # each attempt's, as the deadline set it (None: the client's)
        self._clock = clock
        self._seconds = seconds
        self._failing = failing
        # The generic event: after the deadline's own handler, as botocore's transport is.
        clients.client().meta.events.register("before-send", self._send)  # type: ignore[arg-type]

    def _send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        self.sent += 1
        self.read_timeouts.append(getattr(request, "context", {}).get("read_timeout"))
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


def test_an_attempt_is_given_the_read_time_left_and_is_not_sent_with_too_little(clock: Clock) -> None:
    clients = TenantClients(get_settings())
    wire = Wire(clients, clock, seconds=0.01, failing=False)
    least = CONNECT_S + deadline.MIN_READ_SECONDS
    with deadline.within(Invocation(60)):
        get_item(clients)  # plenty: the client's own read timeout
        clock.now += 60 - deadline.RESERVE_SECONDS - 4
        get_item(clients)  # 4 s left, less than its worst case (7 s): sent, reading 2 s at most
        left = deadline.seconds_left()
        assert left is not None
        clock.now += left - least + 0.1  # a little less than the least an attempt is sent with
        with pytest.raises(Unavailable) as refused:
            get_item(clients)
    assert isinstance(refused.value.__cause__, deadline.DeadlineExceeded)
    assert wire.sent == 2
    assert wire.read_timeouts[0] is None
    assert wire.read_timeouts[1] == pytest.approx(4 - 0.01 - CONNECT_S)


@pytest.mark.parametrize(
    ("seconds_left", "attempts"),
    [
        (5 + CONNECT_S + deadline.MIN_READ_SECONDS - 0.1, 1),  # the first attempt took 5 s: no retry gets 0.5 s
        (5 + 5 + CONNECT_S + deadline.MIN_READ_SECONDS - 0.1, 2),
        (60, 3),  # plenty: botocore's three attempts, as without a deadline
    ],
)
def test_a_retry_is_made_only_if_it_would_get_its_least_read_time(
    clock: Clock, seconds_left: float, attempts: int
) -> None:
    clients = TenantClients(get_settings())
    wire = Wire(clients, clock, seconds=5, failing=True)
    with deadline.within(Invocation(seconds_left + deadline.RESERVE_SECONDS)), pytest.raises(Unavailable) as failed:
        get_item(clients)
    # What ended the last attempt: DynamoDB's own error, never a retry made too late
    assert isinstance(failed.value.__cause__, ClientError)
    assert wire.sent == attempts
