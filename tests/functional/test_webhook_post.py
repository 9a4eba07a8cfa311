"""One webhook POST (:mod:`support_tickets.webhooks.post`) against real
receivers on 127.0.0.1: the timeout bounds the whole attempt, however slowly a
receiver trickles its answer; nothing of the body is read; and over HTTPS the
pinned address is dialled while the certificate is checked against the URL's
host name (SNI sent), with a test CA passed explicitly (never the default)."""

from __future__ import annotations

import ipaddress
import ssl
import time

import pytest

from support_tickets.webhooks.post import (
    MAX_RESPONSE_HEAD_BYTES,
    DeliveryTimeout,
    ResponseHeadTooLarge,
    pinned_post,
)
from support_tickets.webhooks.urls import CheckedUrl
from tests.functional.webhook_harness import HEAD, Pki, receivers, trickling


def timed_post(checked: CheckedUrl, timeout: float) -> tuple[int | BaseException, float]:
    started = time.monotonic()
    try:
        outcome: int | BaseException = pinned_post(checked, {"webhook-id": "msg_1"}, b"{}", timeout)
    except Exception as exc:
        outcome = exc
    return outcome, time.monotonic() - started


# ---------------------------------------------------------------- the deadline
def test_a_receiver_that_trickles_its_status_line_is_cut_off_at_the_deadline() -> None:
    # 47 bytes, one every 20 ms: ~0.9 s for the whole head, each byte well within any per-read timeout
    with trickling(HEAD) as slow:
        outcome, took = timed_post(slow.checked, 0.25)
    assert isinstance(outcome, DeliveryTimeout)
    assert isinstance(outcome, OSError)  # what the deliverer takes for a failed attempt
    # A per-read timeout would have read the whole head (each byte comes well within it) and
    # answered 204: the timeout itself shows the deadline held. No upper bound on the time
    # taken: speed is the benchmark's, and a loaded machine stretches any wall-clock bound.
    assert took >= 0.25
    assert len(slow.requests) == 1


def test_the_same_trickle_within_the_deadline_is_an_answer() -> None:
    # What made the attempt above fail is the deadline, not the answer.
    with trickling(HEAD, chunk=8) as slow:
        outcome, took = timed_post(slow.checked, 3.0)
    assert outcome == 204
    assert took >= 0.1


def test_the_body_is_never_waited_for() -> None:
    # Status and headers at once, then a promised megabyte that never comes
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"
    with trickling(answer, chunk=len(answer)) as stalling:
        outcome, _ = timed_post(stalling.checked, 3.0)
    # Waiting for the body would have run into the 3 s deadline: a DeliveryTimeout, not 200.
    assert outcome == 200


def test_endless_headers_are_refused_at_the_cap() -> None:
    header = b"x-filler: " + b"a" * 1000 + b"\r\n"
    answer = b"HTTP/1.1 200 OK\r\n" + header * (2 * MAX_RESPONSE_HEAD_BYTES // len(header))
    with trickling(answer, chunk=len(answer), interval=0.0) as flooding:
        outcome, _ = timed_post(flooding.checked, 3.0)
    assert isinstance(outcome, ResponseHeadTooLarge)  # not a DeliveryTimeout: refused at the cap


# ---------------------------------------------------------------- HTTPS
@pytest.fixture(scope="module")
def pki() -> Pki:
    return Pki.make()


def https(host: str, port: int) -> CheckedUrl:
    """A URL naming ``host`` whose check resolved it to 127.0.0.1 (the pinned address)."""
    return CheckedUrl(f"https://{host}:{port}/hook?x=1", host, port, ("127.0.0.1",))


def test_https_dials_the_pinned_address_and_checks_the_certificate_against_the_urls_host(
    pki: Pki, tmp_path: object
) -> None:
    seen: list[str | None] = []
    with receivers(tls=pki.server_context(tmp_path, "hooks.example.test", seen)) as (receiver,):
        checked = https("hooks.example.test", receiver.port)  # a name that resolves nowhere: only the pin is used
        status = pinned_post(checked, {"webhook-id": "msg_1"}, b'{"a":1}', 3.0, tls_context=pki.client_context())
        assert status == 200
        (received,) = receiver.received
    assert seen == ["hooks.example.test"]  # SNI: the URL's host, not the address
    assert received.headers["host"] == f"hooks.example.test:{receiver.port}"
    assert (received.path, received.body) == ("/hook?x=1", '{"a":1}')


def test_a_certificate_for_another_name_is_a_failed_attempt(pki: Pki, tmp_path: object) -> None:
    seen: list[str | None] = []
    with receivers(tls=pki.server_context(tmp_path, "other.example.test", seen)) as (receiver,):
        checked = https("hooks.example.test", receiver.port)
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
            pinned_post(checked, {"webhook-id": "msg_1"}, b"{}", 3.0, tls_context=pki.client_context())
        assert receiver.received == []


def test_a_certificate_of_a_ca_not_trusted_is_a_failed_attempt(pki: Pki, tmp_path: object) -> None:
    seen: list[str | None] = []
    with receivers(tls=pki.server_context(tmp_path, "hooks.example.test", seen)) as (receiver,):
        checked = https("hooks.example.test", receiver.port)
        # Another CA's trust, and the default (the system's store, what the function uses): neither knows the test CA
        with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
            pinned_post(checked, {}, b"{}", 3.0, tls_context=Pki.make("Another CA").client_context())
        with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
            pinned_post(checked, {}, b"{}", 3.0)
        assert receiver.received == []


def test_an_ip_url_is_checked_against_the_certificates_addresses(pki: Pki, tmp_path: object) -> None:
    # https://<public address>/: the certificate must name that address; a name is not enough.
    seen: list[str | None] = []
    with receivers(tls=pki.server_context(tmp_path, "hooks.example.test", seen)) as (receiver,):
        checked = CheckedUrl(f"https://93.184.215.14:{receiver.port}/", "93.184.215.14", receiver.port, ("127.0.0.1",))
        with pytest.raises(ssl.SSLCertVerificationError):
            pinned_post(checked, {}, b"{}", 3.0, tls_context=pki.client_context())
    assert ipaddress.ip_address("93.184.215.14").is_global
