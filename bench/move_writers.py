"""Clients writing to a tenant while it moves (``python -m bench --move-only
--move-writers N``), and the check that the move kept every write they were
told was made.

Each writer sends :data:`WRITER_RATE` writes a second through the local
stack's HTTP API (127.0.0.1 only), on a schedule that does not wait for the
answers (independent users: a refused write does not hold the next one back):
a ``PATCH /tickets/{id}`` of an existing ticket (a new title), then a
``POST /tickets`` (with an ``Idempotency-Key``), in turn. A write answered 503
``TENANT_MOVING`` is sent again after its ``Retry-After``, as a client does,
for :data:`GIVE_UP_SECONDS` at most; any other answer ends it. After the move,
:func:`verify` reads what the tenant's new table holds for each acknowledged
(2xx) write: a ticket holds the title and version of the last write
acknowledged for it, and no two writes acknowledged for one ticket got the
same version (one of them was lost: the other was made over the item without
it). Anything else is a lost write.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

WRITER_RATE: Final = 5.0  # writes a second per writer (the review's writer)
GIVE_UP_SECONDS: Final = 120.0  # a write refused for this long is given up
MAX_SECONDS: Final = 3600.0  # no writer sends after this long
REQUEST_TIMEOUT_S: Final = 30.0
THREADS_PER_WRITER: Final = 24  # writes in flight at once (each a thread)
MOVING: Final = "503 TENANT_MOVING"


@dataclass(frozen=True)
class Answer:
    status: int
    code: str  # the error's code, "" for a success
    retry_after: float | None
    body: Any


Send = Callable[[str, str, dict[str, Any], dict[str, str]], Answer]


@dataclass
class Write:
    """One logical write and what became of it (every attempt's answer)."""

    number: int
    method: str  # PATCH or POST
    title: str
    ticket_id: str | None = None  # PATCH: the ticket written; POST: the one made, once acknowledged
    answers: list[str] = field(default_factory=list)
    sent_at: float | None = None
    first_refused_at: float | None = None  # the first 503 TENANT_MOVING
    acknowledged_at: float | None = None
    version: int | None = None  # the version the acknowledgement named

    @property
    def acknowledged(self) -> bool:
        return self.acknowledged_at is not None

    @property
    def waited(self) -> float | None:
        """From its first 503 TENANT_MOVING to its success (None: never refused, or never acknowledged)."""
        if self.first_refused_at is None or self.acknowledged_at is None:
            return None
        return self.acknowledged_at - self.first_refused_at


def local_sender(api_url: str, token: str) -> Send:
    """Requests to the local stack's API with ``token`` (loopback only)."""
    if urllib.parse.urlsplit(api_url).hostname != "127.0.0.1":
        raise ValueError(f"the move's writers send to 127.0.0.1 only, not {api_url}")

    def send(method: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> Answer:
        request = urllib.request.Request(  # noqa: S310 - the local stack's API on loopback
            f"{api_url}{path}",
            data=json.dumps(body).encode(),
            method=method,
            headers={"authorization": f"Bearer {token}", "content-type": "application/json", **headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:  # noqa: S310
                return Answer(int(response.status), "", None, json.loads(response.read() or b"null"))
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                parsed = json.loads(raw or b"null")
            except ValueError:
                parsed = raw.decode(errors="replace")
            code = parsed.get("error", {}).get("code", "") if isinstance(parsed, dict) else ""
            retry_after = error.headers.get("Retry-After")
            return Answer(error.code, str(code), float(retry_after) if retry_after else None, parsed)

    return send


@dataclass
class Writers:
    """``writers`` clients at :data:`WRITER_RATE` each, from :meth:`start` to :meth:`stop`."""

    send: Send
    ticket_ids: Sequence[str]
    writers: int = 1
    rate: float = WRITER_RATE
    give_up_seconds: float = GIVE_UP_SECONDS
    max_seconds: float = MAX_SECONDS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    writes: list[Write] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _dispatcher: threading.Thread | None = None
    _pool: ThreadPoolExecutor | None = None
    _started: float = 0.0

    def start(self) -> None:
        if self.writers <= 0:
            return
        self._pool = ThreadPoolExecutor(self.writers * THREADS_PER_WRITER, thread_name_prefix="move-writer")
        self._started = self.clock()
        self._dispatcher = threading.Thread(target=self._dispatch, name="move-writers", daemon=True)
        self._dispatcher.start()

    def stop(self) -> None:
        """No new write; those under way end (acknowledged, refused for good, or given up)."""
        self._stop.set()
        if self._dispatcher is not None:
            self._dispatcher.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def acknowledged(self) -> int:
        return sum(write.acknowledged for write in list(self.writes))

    def _dispatch(self) -> None:
        assert self._pool is not None
        interval = 1.0 / (self.rate * self.writers)
        for number in range(int(self.max_seconds / interval)):
            due = self._started + number * interval
            if self._stop.wait(max(0.0, due - self.clock())):
                return
            write = self._next(number)
            self.writes.append(write)
            self._pool.submit(self.one, write)

    def _next(self, number: int) -> Write:
        title = f"Written during the move {number}"
        if number % 2 == 0:
            return Write(number, "PATCH", title, ticket_id=self.ticket_ids[(number // 2) % len(self.ticket_ids)])
        return Write(number, "POST", title)

    def one(self, write: Write) -> None:
        """Send ``write`` until it is answered for good (a 503 TENANT_MOVING: again after Retry-After)."""
        key = uuid.uuid4().hex
        write.sent_at = self.clock()
        while True:
            if write.method == "PATCH":
                answer = self._send("PATCH", f"/tickets/{write.ticket_id}", {"title": write.title}, {})
            else:
                answer = self._send("POST", "/tickets", {"title": write.title}, {"Idempotency-Key": key})
            now = self.clock()
            if 200 <= answer.status < 300:
                write.answers.append(str(answer.status))
                write.acknowledged_at = now
                body = answer.body if isinstance(answer.body, dict) else {}
                write.version = int(body.get("version", 0)) or None
                if write.method == "POST":
                    write.ticket_id = str(body.get("ticket_id", "")) or None
                return
            label = f"{answer.status} {answer.code}".strip()
            write.answers.append(label)
            if label != MOVING:
                return
            if write.first_refused_at is None:
                write.first_refused_at = now
            if now - write.first_refused_at >= self.give_up_seconds:
                write.answers.append("gave up")
                return
            self.sleep(answer.retry_after if answer.retry_after is not None else 1.0)

    def _send(self, method: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> Answer:
        try:
            return self.send(method, path, body, headers)
        except OSError as error:  # a timeout, a refused connection: an answer of its own
            return Answer(0, type(error).__name__, None, str(error))


Stored = dict[str, tuple[str, int]]  # ticket id -> (title, version) in the new table


def verify(writes: Sequence[Write], stored: Stored) -> list[str]:
    """Each acknowledged write that the new table does not hold, one line each (empty: none lost)."""
    lost: list[str] = []
    by_ticket: dict[str, list[Write]] = {}
    for write in writes:
        if not write.acknowledged:
            continue
        if write.ticket_id is None:
            lost.append(f"write {write.number} ({write.method}) acknowledged without a ticket id")
            continue
        by_ticket.setdefault(write.ticket_id, []).append(write)
    for ticket_id, acknowledged in sorted(by_ticket.items()):
        versions = Counter(write.version for write in acknowledged)
        for write in acknowledged:
            if versions[write.version] > 1:
                lost.append(
                    f"write {write.number} ({write.method} {ticket_id}): version {write.version} acknowledged "
                    f"{versions[write.version]} times"
                )
        last = max(acknowledged, key=lambda write: (write.version or 0, write.acknowledged_at or 0.0))
        held = stored.get(ticket_id)
        if held is None:
            lost.extend(f"write {write.number} ({write.method} {ticket_id}): no such ticket" for write in acknowledged)
        elif held != (last.title, last.version):
            lost.append(
                f"write {last.number} ({last.method} {ticket_id}): the table holds {held[0]!r} version {held[1]}, "
                f"not {last.title!r} version {last.version}"
            )
    return lost


def report(writes: Sequence[Write], lost: Sequence[str], *, seconds: float) -> dict[str, Any]:
    """The figures of the writers' run (``seconds``: how long they wrote)."""
    answers: Counter[str] = Counter(answer for write in writes for answer in write.answers)
    waits = [wait for write in writes if (wait := write.waited) is not None]
    refused = [write for write in writes if write.first_refused_at is not None]
    refused_span = None
    if refused:
        ends = [write.acknowledged_at for write in refused if write.acknowledged_at is not None]
        starts = [write.first_refused_at for write in refused if write.first_refused_at is not None]
        if ends:
            refused_span = round(max(ends) - min(starts), 1)
    return {
        "writes": len(writes),
        "writes_per_second": round(len(writes) / seconds, 1) if seconds > 0 else None,
        "acknowledged": sum(write.acknowledged for write in writes),
        "refused_then_acknowledged": len(waits),
        "answers": dict(sorted(answers.items())),
        "moving_answers": answers.get(MOVING, 0),
        "other_answers": {
            label: count
            for label, count in sorted(answers.items())
            if label != MOVING and not label.startswith("2") and label != "gave up"
        },
        "gave_up": answers.get("gave up", 0),
        "longest_wait_seconds": round(max(waits), 1) if waits else None,
        "refused_span_seconds": refused_span,
        "lost": len(lost),
        "lost_examples": list(lost[:10]),
    }


def chunks(values: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
