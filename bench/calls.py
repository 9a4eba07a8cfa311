"""Count the AWS API calls a request makes, with botocore's event hooks.

:class:`CallRecorder` registers ``before-call`` (once per API call, whatever
the retries), ``before-send`` (once per HTTP attempt) and ``after-call`` on
every botocore session created while it is installed: boto3 sessions get
theirs from ``botocore.session.get_session``, which it wraps, so the tenant
session's clients, the naive design's per-request clients and the
aggregator's client are all seen without touching production code.

Requests are measured one at a time. A call from a thread that is not inside
:meth:`CallRecorder.request` (the worker threads a handler starts: the
tenant trail's and a sharded list's parallel queries) counts toward the
request in flight.

With a :class:`~stack_model.capacity.CapacityMeter` attached, each DynamoDB call
is also sized (the items it reads and writes, looked up as the operator
before and after the call) to compute the capacity units DynamoDB would bill.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
import botocore.session

if TYPE_CHECKING:
    from stack_model.capacity import CapacityMeter


@dataclass
class Tally:
    """What one request did."""

    calls: Counter[str] = field(default_factory=Counter)  # "sts.AssumeRole" -> n
    attempts: int = 0  # HTTP requests sent, retries included
    rru: float = 0.0
    wru: float = 0.0

    def service(self, name: str) -> int:
        return sum(count for call, count in self.calls.items() if call.startswith(f"{name}."))

    @property
    def total(self) -> int:
        return sum(self.calls.values())


_UNSET: Any = object()


class CallRecorder:
    def __init__(self) -> None:
        self._local = threading.local()
        self._in_flight: Tally | None = None  # for the request's worker threads
        self._lock = threading.Lock()
        self._sessions: list[botocore.session.Session] = []
        self._original: Callable[..., botocore.session.Session] | None = None
        self.meter: CapacityMeter | None = None

    # ------------------------------------------------------------ install
    def install(self) -> None:
        original = self._original = botocore.session.get_session

        def get_session(env_vars: Any = None) -> botocore.session.Session:
            session = original(env_vars)
            self._hook(session)
            return session

        botocore.session.get_session = get_session
        if boto3.DEFAULT_SESSION is not None:
            self._hook(boto3.DEFAULT_SESSION._session)

    def uninstall(self) -> None:
        if self._original is not None:
            botocore.session.get_session = self._original
            self._original = None
        for session in self._sessions:
            session.unregister("before-parameter-build", unique_id="bench-before-build")
            session.unregister("before-call", unique_id="bench-before-call")
            session.unregister("before-send", unique_id="bench-before-send")
            session.unregister("after-call", unique_id="bench-after-call")
        self._sessions.clear()

    def _hook(self, session: botocore.session.Session) -> None:
        session.register("before-parameter-build", self._before_build, unique_id="bench-before-build")
        session.register("before-call", self._before_call, unique_id="bench-before-call")
        session.register("before-send", self._before_send, unique_id="bench-before-send")
        session.register("after-call", self._after_call, unique_id="bench-after-call")
        self._sessions.append(session)

    # ------------------------------------------------------------ recording
    @contextmanager
    def request(self) -> Iterator[Tally]:
        """Record the calls made inside the block, in this thread and in the
        threads it starts."""
        tally = Tally()
        self._local.tally = self._in_flight = tally
        try:
            yield tally
        finally:
            self._local.tally = self._in_flight = None

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """Calls made inside (the meter's own look-ups) are not recorded."""
        previous = getattr(self._local, "tally", _UNSET)
        self._local.tally = None
        try:
            yield
        finally:
            self._local.tally = previous

    def _current(self) -> Tally | None:
        mine = getattr(self._local, "tally", _UNSET)
        return self._in_flight if mine is _UNSET else mine

    # botocore calls handlers with keyword arguments only.
    def _before_build(self, **kwargs: Any) -> None:
        tally = self._current()
        event_name = str(kwargs.get("event_name", ""))
        if tally is None or self.meter is None or not event_name.startswith("before-parameter-build.dynamodb."):
            return
        with self.suspended():
            self.meter.before(kwargs["model"].name, kwargs["params"])

    def _before_call(self, **kwargs: Any) -> None:
        tally = self._current()
        if tally is None:
            return
        event_name = str(kwargs.get("event_name", ""))
        service = event_name.split(".")[1] if event_name.count(".") >= 2 else "?"
        with self._lock:
            tally.calls[f"{service}.{kwargs['model'].name}"] += 1

    def _before_send(self, **kwargs: Any) -> None:
        tally = self._current()
        if tally is not None:
            with self._lock:
                tally.attempts += 1

    def _after_call(self, **kwargs: Any) -> None:
        tally = self._current()
        event_name = str(kwargs.get("event_name", ""))
        if tally is None or self.meter is None or not event_name.startswith("after-call.dynamodb."):
            return
        with self.suspended():
            rru, wru = self.meter.after(kwargs["model"].name, kwargs["parsed"])
        with self._lock:
            tally.rru += rru
            tally.wru += wru


@contextmanager
def recording(recorder: CallRecorder | None = None) -> Iterator[CallRecorder]:
    recorder = recorder or CallRecorder()
    recorder.install()
    try:
        yield recorder
    finally:
        recorder.uninstall()
