"""local_stack.moto_fixes: every in-process moto request is atomic.

moto's backends have no locks of their own. The stream poller (a thread) and
the code under test (the main thread) both call the in-process moto, and a
``TransactWriteItems`` deep-copying the tables while the other thread wrote one
raised "dictionary changed size during iteration" (issue 16). These tests hold
a request inside moto and show that no other request can start meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto.dynamodb.models import DynamoDBBackend

from local_stack.moto_fixes import MOTO_LOCK
from tests.conftest import REGION

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

WAIT_S = 30  # a generous bound for a thread to reach a point; never a sleep


class HeldInsideMoto:
    """Makes the next ``GetItem`` that moto serves stop inside the backend until released."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()

    def get_item(self, original: Any, backend: DynamoDBBackend, *args: Any, **kwargs: Any) -> Any:
        self.inside.set()
        assert self.release.wait(WAIT_S), "the test never released the request"
        return original(backend, *args, **kwargs)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldInsideMoto]:
    holder = HeldInsideMoto()
    original = DynamoDBBackend.get_item

    def get_item(backend: DynamoDBBackend, *args: Any, **kwargs: Any) -> Any:
        return holder.get_item(original, backend, *args, **kwargs)

    monkeypatch.setattr(DynamoDBBackend, "get_item", get_item)
    yield holder
    holder.release.set()


def test_no_request_can_start_while_another_thread_is_inside_moto(
    dynamodb: DynamoDBClient, table_name: str, held: HeldInsideMoto
) -> None:
    # Given a thread whose GetItem is being served by the in-process moto
    errors: list[BaseException] = []

    def read() -> None:
        try:
            boto3.client("dynamodb", region_name=REGION).get_item(
                TableName=table_name, Key={"pk": {"S": "TENANT#a|X"}, "sk": {"S": "SUMMARY"}}
            )
        except BaseException as exc:  # pragma: no cover - reported by the assertion below
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    assert held.inside.wait(WAIT_S)

    # When this thread wants moto meanwhile, then it has to wait for the lock
    assert MOTO_LOCK.acquire(blocking=False) is False

    # And once the request is done, moto is free again
    held.release.set()
    reader.join(WAIT_S)
    assert not reader.is_alive()
    assert errors == []
    assert MOTO_LOCK.acquire(blocking=False) is True
    MOTO_LOCK.release()
