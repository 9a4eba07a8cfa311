"""The API invocation's deadline.

A dependency that hangs answers 503 ``UNAVAILABLE`` before Lambda's timeout.

An API function's clients (:class:`~support_tickets.data.session.TenantClients`:
DynamoDB, and KMS for the webhook routes) give an attempt up to
``connect_timeout`` + ``read_timeout`` (7 s with ``BOTO_CONFIG``) and make up to
3 attempts with backoff. Against a DynamoDB that accepts connections and never
answers, one call would outlast the function's 10 s: Lambda would kill the
invocation, API Gateway would answer 502, and the request's outcome line would
never be written.

So every request runs :func:`within` its invocation's deadline (the resolver
sets it from the Lambda context), and :func:`watch` hooks each tenant client's
botocore events: each attempt is given no more read time than is left before
the deadline after its connect timeout (``before-send`` sets the attempt's
``read_timeout``, which botocore's transport honours per request), an attempt
that would get less than :data:`MIN_READ_SECONDS` is not sent (the call raises
:class:`DeadlineExceeded`), and no retry is made when one sent at once would
not get it either (``needs-retry``: the call raises what ended the last
attempt). Both are botocore errors, which
:meth:`~support_tickets.data.table.TenantTable.call` answers 503 ``UNAVAILABLE``
with ``Retry-After``. So a request is refused only in its last seconds
(``connect_timeout`` + :data:`MIN_READ_SECONDS` before the deadline), never
because a call's worst case would not fit: DynamoDB answers in milliseconds.
With time left nothing changes: botocore's own retries and backoff decide. A
retry's backoff (at most 2 s with 3 attempts, and up to 5 s more if the service
asks for it with ``x-amz-retry-after``) is no longer than an attempt's worst
case, so the sleep before a retry that ``before-send`` then refuses ends by the
deadline.

One deadline per execution environment, not per thread: Lambda runs one
invocation at a time in it, and the queries a request makes in parallel
(a thread pool) must see it, which a ``ContextVar`` would not give them.
Outside :func:`within` (the operator's tools, a test calling the domain) there
is no deadline.

The stream and queue functions (the aggregator, the audit writer, webhook
delivery, metering) have none: their clients are their own role's
(:func:`support_tickets.streams.records.own_client`), not watched, and a call
that hangs past their timeout (30 to 60 s) fails the whole batch, which the
event source delivers again and their journals apply exactly once. A deadline
would only turn that retry into a partial batch answer, and there is no client
waiting for a 503.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Final, Protocol

from botocore.exceptions import BotoCoreError

# What an invocation keeps to answer once a call is refused: map the error, write
# the outcome line, flush Powertools' metrics and return through the runtime (a few
# milliseconds warm). A second leaves room for a loaded or throttled CPU, and it
# stays small beside the functions' 10 s.
RESERVE_SECONDS: Final = 1.0
# The least read time an attempt is sent with (or its configured read timeout, if less):
# DynamoDB and KMS answer in milliseconds, so an attempt this short still has a good chance.
MIN_READ_SECONDS: Final = 0.5
# botocore keys a handler's unique id alone, whatever its event: one id per event.
_UNIQUE_ID: Final = "support-tickets-invocation-deadline-{event}"

# Monotonic seconds by which the current invocation's calls must have ended; None: no deadline.
_deadline: float | None = None


class DeadlineExceeded(BotoCoreError):
    """An attempt not sent: too little time left before the invocation's deadline."""

    fmt = "Too little time left before the invocation's deadline: {left:.3f} s, an attempt needs {attempt:.3f} s."


class RemainingTime(Protocol):
    """What :func:`within` reads of the Lambda context."""

    def get_remaining_time_in_millis(self) -> int: ...


@contextmanager
def within(context: RemainingTime) -> Iterator[None]:
    """The invocation's calls, bound by its deadline: Lambda's remaining time less :data:`RESERVE_SECONDS`."""
    global _deadline  # noqa: PLW0603 - one per execution environment (the module's docstring)
    _deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - RESERVE_SECONDS
    try:
        yield
    finally:
        _deadline = None


def seconds_left() -> float | None:
    """Seconds until the invocation's deadline (negative once past it); ``None`` outside :func:`within`."""
    deadline = _deadline
    return None if deadline is None else deadline - time.monotonic()


def watch(client: Any) -> None:
    """Bound ``client``'s attempts by the deadline; refuse those and the retries that would be too short."""
    config = client.meta.config
    connect, read = float(config.connect_timeout), float(config.read_timeout)
    shortest = min(read, MIN_READ_SECONDS)
    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(
        f"before-send.{service}",
        partial(_bound_attempt, connect, read, shortest),
        unique_id=_UNIQUE_ID.format(event="before-send"),
    )
    # Ahead of botocore's retry handler (registered on the same event when the client was
    # made): the endpoint acts on the first answer that is not None.
    client.meta.events.register_first(
        f"needs-retry.{service}",
        partial(_refuse_late_retry, connect + shortest),
        unique_id=_UNIQUE_ID.format(event="needs-retry"),
    )


def _bound_attempt(connect: float, read: float, shortest: float, request: Any = None, **_: Any) -> None:
    """The attempt's read timeout cut to what is left after its connect timeout
    (botocore's transport reads ``read_timeout`` from the request's context, which
    is the call's: each attempt sets it again); too little left, not sent."""
    left = seconds_left()
    if left is None:
        return
    bounded = min(read, left - connect)
    if bounded < shortest:
        raise DeadlineExceeded(left=left, attempt=connect + shortest)
    if request is not None and bounded < read:
        request.context["read_timeout"] = bounded


def _refuse_late_retry(least_seconds: float, caught_exception: Exception | None = None, **_: Any) -> bool | None:
    """``False`` (no retry: the call raises what ended the last attempt) when a
    retry sent at once would not get its least time; ``None``: botocore's retry
    handler decides."""
    if isinstance(caught_exception, DeadlineExceeded):
        return False
    left = seconds_left()
    if left is not None and left < least_seconds:
        return False
    return None
