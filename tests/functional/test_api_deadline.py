"""A DynamoDB that accepts connections and never answers: the route answers 503
``UNAVAILABLE`` before the invocation's deadline (support_tickets.data.deadline),
never Lambda's timeout (API Gateway's 502), and a timed-out attempt is still
retried while a retry can end in time.

The function's client talks to a local socket that reads each request and never
replies, with small timeouts (0.2 s to connect, 0.4 s to read) and a small
Lambda timeout, so that each test takes about a second."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from botocore.config import Config
from botocore.retries.standard import ExponentialBackoff

from support_tickets.core.ids import new_id
from support_tickets.core.settings import get_settings
from support_tickets.data.deadline import RESERVE_SECONDS
from support_tickets.data.session import TENANT_CLIENT_CONFIG, TenantClients
from support_tickets.domain import tenancy
from tests.functional.api_harness import Api, User, assert_error

CONNECT_TIMEOUT_S = 0.2
READ_TIMEOUT_S = 0.4
# An attempt's worst case, as the deadline counts it.
ATTEMPT_S = CONNECT_TIMEOUT_S + READ_TIMEOUT_S
TICKET_ID = new_id()


class SilentEndpoint:
    """A listening socket that reads every request sent to it and never answers."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._requests = 0
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    @property
    def requests(self) -> int:
        """How many requests arrived whole (their headers read)."""
        with self._lock:
            return self._requests

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._hold, args=(connection,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _hold(self, connection: socket.socket) -> None:
        connection.settimeout(0.05)
        received = b""
        counted = False
        with connection:
            while not self._stopped.is_set():
                try:
                    chunk = connection.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    return  # the client gave up on it
                received += chunk
                if not counted and b"\r\n\r\n" in received:
                    counted = True
                    with self._lock:
                        self._requests += 1

    def close(self) -> None:
        self._stopped.set()
        for thread in self._threads:
            thread.join(timeout=1)
        self._listener.close()


@pytest.fixture
def silent_dynamodb(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[SilentEndpoint]:
    """The API functions' DynamoDB client (the container's, as built for a request) sends to a silent endpoint."""
    endpoint = SilentEndpoint()
    clients = TenantClients(
        replace(get_settings(), endpoint_url=endpoint.url),
        config=TENANT_CLIENT_CONFIG.merge(Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S)),
    )
    monkeypatch.setattr(tenancy, "tenant_clients", lambda: clients)
    try:
        yield endpoint
    finally:
        endpoint.close()


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore retries at once: its jitter (up to 1 s before the first retry) would
    make the attempts' times a draw; without it they are known to the tenth of a second."""
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)


def test_a_dynamodb_that_never_answers_is_503_before_the_deadline(
    api: Api, user: User, silent_dynamodb: SilentEndpoint, log_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    # Given a function whose deadline leaves time for one attempt, not for a retry after it
    timeout_s = RESERVE_SECONDS + ATTEMPT_S + 0.2
    # When a request reaches it
    response = api.call("get", user, ticket_id=TICKET_ID, timeout_s=timeout_s)
    # Then the one attempt timed out and the route answered the documented 503, with time to spare
    assert silent_dynamodb.requests == 1
    assert_error(response, 503, "UNAVAILABLE")
    assert response.header("Retry-After") == "1"
    assert response.remaining_ms is not None
    assert response.remaining_ms >= RESERVE_SECONDS * 1000
    # And the request's outcome line was written (a function Lambda kills writes none)
    outcomes = [line for line in log_lines() if line.get("message") == "request handled"]
    assert [line["status"] for line in outcomes] == [503]


@pytest.mark.usefixtures("no_backoff")
@pytest.mark.parametrize(
    ("timeout_s", "attempts"),
    [
        # Time for the retry of the first attempt's timeout, not for a third attempt.
        pytest.param(RESERVE_SECONDS + READ_TIMEOUT_S + ATTEMPT_S + 0.25, 2, id="time-for-one-retry"),
        # Plenty: botocore's three attempts, as without a deadline.
        pytest.param(RESERVE_SECONDS + 3 * ATTEMPT_S + 0.5, 3, id="plenty-of-time"),
    ],
)
def test_a_timed_out_attempt_is_retried_while_a_retry_can_end_in_time(
    api: Api, user: User, silent_dynamodb: SilentEndpoint, timeout_s: float, attempts: int
) -> None:
    # When a request reaches a function with that much time
    response = api.call("get", user, ticket_id=TICKET_ID, timeout_s=timeout_s)
    # Then every attempt that could end before the deadline was made, none that could not
    assert silent_dynamodb.requests == attempts
    assert_error(response, 503, "UNAVAILABLE")
    assert response.remaining_ms is not None
    assert response.remaining_ms >= RESERVE_SECONDS * 1000
