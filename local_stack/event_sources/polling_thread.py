"""What the local stack's event sources (the stream's and the queues') share: a
thread that runs the source's cycles until stopped, wakes early when told, and
lets a caller wait until a cycle that began after its call found nothing left
to do (a drain, what tests and benchmarks wait on instead of sleeping).

A source counts the cycles it begins (``_cycle_started``) and records the last
one that ended idle (``_last_idle_cycle``, with ``_state`` notified); while a
caller waits, ``_flush_requests`` is positive and the source delivers what it
holds without waiting for its batch to fill."""

from __future__ import annotations

import logging
import threading
import time


class PollingThread:
    def __init__(self, thread_name: str, log: logging.Logger) -> None:
        self._thread_name = thread_name
        self._log = log
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._state = threading.Condition()
        self._cycle_started = 0
        self._last_idle_cycle = 0
        self._flush_requests = 0
        self._thread: threading.Thread | None = None
        self._errors_seen: set[str] = set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._thread = None

    def wait_drained(self, timeout: float = 30.0) -> bool:
        """True once a cycle that began after this call ended with nothing left
        to do; False after ``timeout`` seconds, or once stopped."""
        deadline = time.monotonic() + timeout
        with self._state:
            target = self._cycle_started + 1
            self._flush_requests += 1
        self._wake.set()
        try:
            with self._state:
                while self._last_idle_cycle < target:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._stop.is_set():
                        return False
                    self._state.wait(min(remaining, 0.5))
                return True
        finally:
            with self._state:
                self._flush_requests -= 1

    def _run(self) -> None:
        raise NotImplementedError

    def _log_once(self, message: str) -> None:
        """A warning the first time, debug after: a poll that keeps failing doesn't flood the log."""
        if message in self._errors_seen:
            self._log.debug("%s", message)
            return
        self._errors_seen.add(message)
        self._log.warning("%s", message)
