"""CloudWatch Logs subscription filters, locally: the template's
``CloudWatchLogs`` events, fed by the functions' own log lines.

Deployed, a function's log lines go to its log group, and a subscription
filter on that group sends the lines matching its pattern to a function
(the metering function, docs/usage.md), in batches per log stream, as an
asynchronous invocation whose event is ``{"awslogs": {"data": base64(gzip(
{"messageType": "DATA_MESSAGE", "owner", "logGroup", "logStream",
"subscriptionFilters", "logEvents": [{"id", "timestamp", "message"}]}))}}``.

Here each execution environment's stdout is piped (local_stack.lambda_.environments):
every line still reaches the stack's output, and each is handed to
:meth:`LogDelivery.line` with the function, log group and log stream it
came from. What is subscribed, and with which pattern, is read from the
template (:func:`subscriptions_from_template`): the subscribing function's
``CloudWatchLogs`` events name a log group, the functions whose
``LoggingConfig`` names that log group are the sources. A pattern this module
cannot evaluate stops the stack at its start, rather than matching
differently from CloudWatch Logs.

Batches are per (function, log stream), as CloudWatch Logs delivers them: a
batch goes once it holds :data:`BATCH_LINES` lines or its oldest line waited
:data:`BATCH_DELAY_S`. A failed invocation is retried twice (Lambda's
asynchronous retries), then given up with a warning (deployed, it would go to
the function's failure queue). :meth:`LogDelivery.drain` delivers everything
pending now and waits for it: tests call it (``/_local/logs/drain``) instead
of sleeping.
"""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from stack_model.template import translated

log = logging.getLogger("local_stack.log_subscriptions")

# CloudWatch Logs batches a subscription's events for a few seconds or up to
# about 1 MB; locally: a second, or a hundred lines, whichever comes first.
BATCH_LINES: Final = 100
BATCH_DELAY_S: Final = 1.0
ASYNC_RETRIES: Final = 2
LOCAL_ACCOUNT: Final = "123456789012"

# One term of a JSON filter pattern: $.a.b = "value" (or = value).
_TERM = re.compile(r'^\$((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*=\s*(?:"([^"*]*)"|([A-Za-z0-9_.-]+))$')


class UnsupportedPattern(ValueError):
    """A filter pattern the local subscription does not evaluate."""


@dataclass(frozen=True)
class JsonFilter:
    """A CloudWatch Logs JSON filter pattern of equality terms joined by ``||``:
    ``{ $.message = "request handled" }`` or ``{ $.a = "x" || $.b = "y" }``.
    A line matches if it is a JSON object and one term holds (exact string
    equality, as CloudWatch Logs compares a quoted value)."""

    pattern: str
    terms: tuple[tuple[tuple[str, ...], str], ...]

    @classmethod
    def parse(cls, pattern: str) -> JsonFilter:
        body = pattern.strip()
        if not (body.startswith("{") and body.endswith("}")):
            raise UnsupportedPattern(f"not a JSON filter pattern: {pattern!r}")
        terms = []
        for text in body[1:-1].split("||"):
            match = _TERM.fullmatch(text.strip())
            if match is None:
                raise UnsupportedPattern(f"a term the local subscription does not evaluate: {text.strip()!r}")
            path = tuple(match.group(1).lstrip(".").split("."))
            terms.append((path, match.group(2) if match.group(2) is not None else match.group(3)))
        return cls(pattern, tuple(terms))

    def matches(self, line: str) -> bool:
        if not line.startswith("{"):
            return False
        try:
            value = json.loads(line)
        except ValueError:
            return False
        return any(_at(value, path) == expected for path, expected in self.terms)


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value if isinstance(value, str) else None if isinstance(value, (dict, list)) else str(value)


@dataclass(frozen=True)
class Subscription:
    """One subscription filter: ``source`` function's log group to ``destination``."""

    source: str
    destination: str
    filter_name: str
    pattern: JsonFilter


def subscriptions_from_template(resources: Mapping[str, Any] | None = None) -> list[Subscription]:
    """Every subscription filter of the template as SAM deploys it (a function's
    ``CloudWatchLogs`` event becomes an ``AWS::Logs::SubscriptionFilter``), once
    for each function writing the filtered log group (its ``LoggingConfig``,
    ``Globals`` merged): several functions may share a log group."""
    resources = resources if resources is not None else translated()["Resources"]
    writers: dict[str, list[str]] = {}
    for logical_id, resource in resources.items():
        group = resource.get("Properties", {}).get("LoggingConfig", {}).get("LogGroup")
        if resource.get("Type") == "AWS::Lambda::Function" and isinstance(group, dict) and "Ref" in group:
            writers.setdefault(group["Ref"], []).append(logical_id)
    found: list[Subscription] = []
    for name, resource in resources.items():
        if resource.get("Type") != "AWS::Logs::SubscriptionFilter":
            continue
        properties = resource["Properties"]
        group = properties["LogGroupName"]
        group_id = group.get("Ref") if isinstance(group, dict) else None
        destination = properties["DestinationArn"].get("Fn::GetAtt", [None])[0]
        if group_id not in writers or destination is None:
            raise UnsupportedPattern(f"{name}: a log group no function of the stack writes, or no function of it")
        pattern = JsonFilter.parse(properties["FilterPattern"])
        found.extend(Subscription(source, destination, name, pattern) for source in writers[group_id])
    return found


def awslogs_event(
    log_group: str, log_stream: str, filters: list[str], events: list[dict[str, Any]], owner: str = LOCAL_ACCOUNT
) -> dict[str, Any]:
    """The event CloudWatch Logs invokes a subscribed function with."""
    payload = {
        "messageType": "DATA_MESSAGE",
        "owner": owner,
        "logGroup": log_group,
        "logStream": log_stream,
        "subscriptionFilters": filters,
        "logEvents": events,
    }
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(payload).encode())).decode()}}


@dataclass
class _Batch:
    destination: str
    log_group: str
    log_stream: str
    filters: list[str]
    started: float
    events: list[dict[str, Any]] = field(default_factory=list)


class LogDelivery:
    """The stack's subscription filters: matching lines, batched, delivered."""

    def __init__(
        self,
        subscriptions: list[Subscription],
        invoke: Callable[[str, dict[str, Any]], Any],
        *,
        batch_lines: int = BATCH_LINES,
        batch_delay_s: float = BATCH_DELAY_S,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._by_source: dict[str, list[Subscription]] = {}
        for subscription in subscriptions:
            self._by_source.setdefault(subscription.source, []).append(subscription)
        self._invoke = invoke
        self._batch_lines = batch_lines
        self._batch_delay_s = batch_delay_s
        self._clock = clock
        self._wall_clock = wall_clock
        self._ids = itertools.count()
        self._pending: dict[tuple[str, str, str], _Batch] = {}
        self._in_flight = 0
        self._flush_all = False
        self._stopped = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self.delivered_lines = 0
        self.deliveries = 0
        self.given_up = 0

    def subscribed(self, function: str) -> bool:
        return function in self._by_source

    def line(self, function: str, log_group: str, log_stream: str, text: str) -> None:
        """A log line of ``function``'s environment writing ``log_stream``."""
        subscriptions = self._by_source.get(function)
        if not subscriptions:
            return
        for subscription in subscriptions:
            if not subscription.pattern.matches(text):
                continue
            timestamp = int(self._wall_clock() * 1000)
            with self._changed:
                key = (subscription.destination, log_group, log_stream)
                batch = self._pending.get(key)
                if batch is None:
                    batch = self._pending[key] = _Batch(
                        subscription.destination, log_group, log_stream, [subscription.filter_name], self._clock()
                    )
                # CloudWatch Logs' event ids are unique decimal strings (56 digits).
                event_id = f"{timestamp:020d}{next(self._ids):036d}"
                batch.events.append({"id": event_id, "timestamp": timestamp, "message": text})
                self._changed.notify_all()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="log-subscriptions", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def drain(self, timeout: float = 30.0) -> bool:
        """Deliver every pending line now; True once none is pending or in flight."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._flush_all = True
            self._changed.notify_all()
            while self._pending or self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopped:
                    return False
                self._changed.wait(remaining)
            self._flush_all = False
            return True

    def _ready(self) -> list[_Batch]:
        now = self._clock()
        ready = [
            key
            for key, batch in self._pending.items()
            if self._flush_all or len(batch.events) >= self._batch_lines or now - batch.started >= self._batch_delay_s
        ]
        return [self._pending.pop(key) for key in ready]

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._stopped and not (ready := self._ready()):
                    oldest = min((batch.started for batch in self._pending.values()), default=None)
                    wait = None if oldest is None else max(0.01, oldest + self._batch_delay_s - self._clock())
                    self._changed.wait(wait)
                if self._stopped:
                    return
                self._in_flight += len(ready)
            for batch in ready:
                try:
                    self._deliver(batch)
                finally:
                    with self._changed:
                        self._in_flight -= 1
                        self._changed.notify_all()

    def _deliver(self, batch: _Batch) -> None:
        for chunk_start in range(0, len(batch.events), self._batch_lines):
            events = batch.events[chunk_start : chunk_start + self._batch_lines]
            event = awslogs_event(batch.log_group, batch.log_stream, batch.filters, events)
            for attempt in range(1 + ASYNC_RETRIES):
                try:
                    self._invoke(batch.destination, event)
                except Exception as exc:  # any failure of the invocation: Lambda retries it
                    log.warning(
                        "%s: delivery of %d lines of %s failed (attempt %d): %s",
                        batch.destination,
                        len(events),
                        batch.log_group,
                        attempt + 1,
                        exc,
                    )
                    continue
                with self._changed:
                    self.deliveries += 1
                    self.delivered_lines += len(events)
                break
            else:
                with self._changed:
                    self.given_up += len(events)
