"""The sample receiver of docs/integrators.md (examples/webhook_receiver.py),
run in-process on 127.0.0.1, with bodies signed here by hand as the Standard
Webhooks spec says (HMAC-SHA256 over ``<id>.<timestamp>.<body>`` with the
base64-decoded key after ``whsec_``), not by the library the receiver verifies
with: it takes a good signature, and a request where one of two signatures
(a rotation) is good; it answers 401 to a bad, a stale or a missing
signature; it handles a redelivered ``webhook-id`` once."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import queue
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from examples.webhook_receiver import Receiver

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
EVENT = {
    "id": "evt_01JD3K",
    "type": "ticket.created",
    "timestamp": "2026-11-21T10:00:00.000Z",
    "tenant_id": "acme",
    "data": {"ticket_id": "01JD3", "title": "Printer on fire", "status": "OPEN", "version": 1},
}


def signature(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


class Running:
    def __init__(self, server: Receiver, handled: queue.Queue[dict[str, Any]]) -> None:
        self.server = server
        self.handled = handled

    def post(self, body: bytes, headers: dict[str, str]) -> int:
        url = f"http://127.0.0.1:{self.server.server_port}/webhooks"
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)


@pytest.fixture
def receiver() -> Iterator[Running]:
    handled: queue.Queue[dict[str, Any]] = queue.Queue()
    server = Receiver(("127.0.0.1", 0), [SECRET], handled.put)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield Running(server, handled)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def signed(
    event: dict[str, Any], *signers: str, timestamp: int | None = None, webhook_id: str | None = None
) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(event, separators=(",", ":")).encode()
    moment = int(time.time()) if timestamp is None else timestamp
    message_id = webhook_id or str(event["id"])
    return body, {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(moment),
        "webhook-signature": " ".join(signature(secret, message_id, moment, body) for secret in signers),
    }


def test_a_good_signature_is_accepted_and_the_event_handled(receiver: Running) -> None:
    assert receiver.post(*signed(EVENT, SECRET)) == 204
    assert receiver.handled.get(timeout=5) == EVENT


def test_one_good_signature_of_two_is_enough(receiver: Running) -> None:
    # During a rotation the sender signs with the new and the old secret; the receiver knows one of them.
    event = {**EVENT, "id": "evt_rotation"}
    assert receiver.post(*signed(event, OTHER_SECRET, SECRET)) == 204
    assert receiver.handled.get(timeout=5)["id"] == "evt_rotation"


def test_a_receiver_moving_to_a_new_secret_accepts_either() -> None:
    handled: queue.Queue[dict[str, Any]] = queue.Queue()
    server = Receiver(("127.0.0.1", 0), [OTHER_SECRET, SECRET], handled.put)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        running = Running(server, handled)
        assert running.post(*signed({**EVENT, "id": "evt_old"}, SECRET)) == 204
        assert running.post(*signed({**EVENT, "id": "evt_new"}, OTHER_SECRET)) == 204
        assert {handled.get(timeout=5)["id"], handled.get(timeout=5)["id"]} == {"evt_old", "evt_new"}
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_wrong_secret_is_401(receiver: Running) -> None:
    assert receiver.post(*signed(EVENT, OTHER_SECRET)) == 401
    assert receiver.handled.empty()


def test_an_altered_body_is_401(receiver: Running) -> None:
    body, headers = signed(EVENT, SECRET)
    assert receiver.post(body.replace(b"Printer on fire", b"Printer is fine"), headers) == 401


def test_a_signature_for_another_id_is_401(receiver: Running) -> None:
    body, headers = signed(EVENT, SECRET)
    assert receiver.post(body, {**headers, "webhook-id": "evt_other"}) == 401


@pytest.mark.parametrize("skew_s", [-6 * 60, 6 * 60])
def test_a_timestamp_over_five_minutes_off_is_401(receiver: Running, skew_s: int) -> None:
    # Correctly signed, but replayed (or from the future): the tolerance is 5 minutes.
    assert receiver.post(*signed(EVENT, SECRET, timestamp=int(time.time()) + skew_s)) == 401
    assert receiver.handled.empty()


def test_a_timestamp_within_five_minutes_is_accepted(receiver: Running) -> None:
    assert receiver.post(*signed(EVENT, SECRET, timestamp=int(time.time()) - 4 * 60)) == 204


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_401(receiver: Running, missing: str) -> None:
    body, headers = signed(EVENT, SECRET)
    del headers[missing]
    assert receiver.post(body, headers) == 401


def test_a_malformed_signature_header_is_401(receiver: Running) -> None:
    body, headers = signed(EVENT, SECRET)
    assert receiver.post(body, {**headers, "webhook-signature": "garbage"}) == 401


def test_a_redelivery_is_acknowledged_and_handled_once(receiver: Running) -> None:
    event = {**EVENT, "id": "evt_twice"}
    assert receiver.post(*signed(event, SECRET)) == 204
    assert receiver.post(*signed(event, SECRET)) == 204
    later = {**EVENT, "id": "evt_after"}
    assert receiver.post(*signed(later, SECRET)) == 204
    # The worker handles in arrival order: the redelivery would sit between the two.
    assert [receiver.handled.get(timeout=5)["id"], receiver.handled.get(timeout=5)["id"]] == ["evt_twice", "evt_after"]
