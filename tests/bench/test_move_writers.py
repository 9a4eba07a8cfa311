"""The move bench's writers: a refused write is sent again after its Retry-After
and its wait is measured; an acknowledged write the new table does not hold is
reported lost (no stack: the answers and the table are stand-ins)."""

from __future__ import annotations

from typing import Any

from bench.move_writers import MOVING, Answer, Write, Writers, report, verify


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def writers(answers: list[Answer], clock: Clock) -> tuple[Writers, list[tuple[str, str, dict[str, Any]]]]:
    sent: list[tuple[str, str, dict[str, Any]]] = []

    def send(method: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> Answer:
        sent.append((method, path, headers))
        clock.now += 0.1
        return answers.pop(0)

    return Writers(send, ["T1", "T2"], clock=clock, sleep=clock.sleep), sent


def moving() -> Answer:
    return Answer(503, "TENANT_MOVING", 2.0, {"error": {"code": "TENANT_MOVING"}})


def test_a_refused_write_is_sent_again_after_retry_after_until_acknowledged() -> None:
    clock = Clock()
    client, sent = writers([moving(), moving(), Answer(201, "", None, {"ticket_id": "N1", "version": 1})], clock)
    write = Write(1, "POST", "new")
    client.one(write)
    assert clock.slept == [2.0, 2.0]
    assert [method for method, _, _ in sent] == ["POST"] * 3
    assert len({headers["Idempotency-Key"] for _, _, headers in sent}) == 1  # the same write each time
    assert write.answers == [MOVING, MOVING, "201"]
    assert write.ticket_id == "N1"
    assert write.waited is not None
    assert round(write.waited, 1) == 4.2  # first 503 at 100.1, success at 104.3


def test_an_acknowledged_write_the_table_lacks_is_lost() -> None:
    kept = Write(0, "PATCH", "a", ticket_id="T1", acknowledged_at=1.0, version=2, answers=["200"])
    missing = Write(1, "POST", "b", ticket_id="N1", acknowledged_at=2.0, version=1, answers=["201"])
    overwritten = Write(2, "PATCH", "c", ticket_id="T2", acknowledged_at=3.0, version=2, answers=["200"])
    refused = Write(3, "PATCH", "d", ticket_id="T2", answers=["400 VALIDATION_ERROR"])
    writes = [kept, missing, overwritten, refused]
    lost = verify(writes, {"T1": ("a", 2), "T2": ("old", 2)})
    assert lost == [
        "write 1 (POST N1): no such ticket",
        "write 2 (PATCH T2): the table holds 'old' version 2, not 'c' version 2",
    ]
    figures = report(writes, lost, seconds=2.0)
    assert figures["lost"] == 2
    assert figures["acknowledged"] == 3
    assert figures["other_answers"] == {"400 VALIDATION_ERROR": 1}
    assert verify(writes[:1], {"T1": ("a", 2)}) == []


def test_two_writes_acknowledged_with_one_version_mean_one_was_lost() -> None:
    # The later write was made over the ticket without the earlier one: both answered version 2.
    first = Write(0, "PATCH", "a", ticket_id="T1", acknowledged_at=1.0, version=2, answers=["200"])
    second = Write(2, "PATCH", "b", ticket_id="T1", acknowledged_at=5.0, version=2, answers=["200"])
    lost = verify([first, second], {"T1": ("b", 2)})
    assert lost == [
        "write 0 (PATCH T1): version 2 acknowledged 2 times",
        "write 2 (PATCH T1): version 2 acknowledged 2 times",
    ]
