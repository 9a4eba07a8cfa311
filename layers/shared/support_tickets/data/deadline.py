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
botocore events: an attempt whose worst case (connect + read timeouts) would
end past the deadline is not sent (``before-send``: the call raises
:class:`DeadlineExceeded`), and no retry is made when even one sent at once
could not end in time (``needs-retry``: the call raises what ended the last
attempt). Both are botocore errors, which
:meth:`~support_tickets.data.table.TenantTable.call` answers 503 ``UNAVAILABLE``
with ``Retry-After``. With time left nothing changes: botocore's own retries
and backoff decide, and an attempt under way is never cut. A retry's backoff
(at most 2 s with 3 attempts, and up to 5 s more if the service asks for it
with ``x-amz-retry-after``) is no longer than an attempt's worst case, so the
sleep before a retry that ``before-send`` then refuses ends by the deadline.

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
# botocore keys a handler's unique id alone, whatever its event: one id per event.
_UNIQUE_ID: Final = "support-tickets-invocation-deadline-{event}"

# Monotonic seconds by which the current invocation's calls must have ended; None: no deadline.
_deadline: float | None = None


class DeadlineExceeded(BotoCoreError):
    """An attempt not sent: it could not end before the invocation's deadline."""

    fmt = "No attempt can end before the invocation's deadline: {left:.3f} s left, an attempt may take {attempt:.3f} s."


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
    """Refuse ``client``'s attempts and retries that could not end before the deadline."""
    config = client.meta.config
    attempt_seconds = float(config.connect_timeout) + float(config.read_timeout)
    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(
        f"before-send.{service}",
        partial(_refuse_late_attempt, attempt_seconds),
        unique_id=_UNIQUE_ID.format(event="before-send"),
    )
    # Ahead of botocore's retry handler (registered on the same event when the client was
    # made): the endpoint acts on the first answer that is not None.
    client.meta.events.register_first(
        f"needs-retry.{service}",
        partial(_refuse_late_retry, attempt_seconds),
        unique_id=_UNIQUE_ID.format(event="needs-retry"),
    )


def _refuse_late_attempt(attempt_seconds: float, **_: Any) -> None:
    left = seconds_left()
    if left is not None and left < attempt_seconds:
        raise DeadlineExceeded(left=left, attempt=attempt_seconds)


def _refuse_late_retry(attempt_seconds: float, caught_exception: Exception | None = None, **_: Any) -> bool | None:
    """``False`` (no retry: the call raises what ended the last attempt) when no
    attempt could end in time, even sent at once; ``None``: botocore's retry
    handler decides."""
    if isinstance(caught_exception, DeadlineExceeded):
        return False
    left = seconds_left()
    if left is not None and left < attempt_seconds:
        return False
    return None
