"""One webhook POST, to a pinned address, within one deadline (docs/webhooks.md, "URLs").

:func:`pinned_post` connects to the address :func:`support_tickets.webhooks.urls.check_webhook_url`
resolved (never a second DNS lookup), verifies TLS against the URL's host name
(SNI and the certificate's names, with the system's trust store), sends the
request and reads the status line and headers, and **all of it** must finish
within ``timeout`` seconds of the call. Nothing of the body is read.

Why not ``urllib3`` (which it replaced): its timeout bounds the connect and
each read, not their sum, so a receiver that trickles its status line a byte at
a time holds an attempt for as long as it likes (up to the function's own
timeout). Here every socket operation is given what is left of the deadline:
the connect, the TLS handshake (CPython bounds a whole handshake by the
socket's timeout), each chunk sent, and each read of the response's head; a
read that would start past the deadline raises :class:`DeliveryTimeout` (a
``TimeoutError``). The protocol itself is the standard library's
(``http.client`` writes the request, validating the header names and values,
and parses the status line and headers, with its limits), ``ssl`` the TLS.

Errors are ``OSError`` (a refused or reset connection, a timeout, a TLS failure
such as a certificate for another name: ``ssl.SSLCertVerificationError``) or
``http.client.HTTPException`` (an answer that is not HTTP); the caller treats
both as a failed attempt.
"""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from functools import cache
from typing import Final
from urllib.parse import urlsplit

from support_tickets.webhooks.urls import CheckedUrl

# What is read of a response: its status line and headers, at most this much.
MAX_RESPONSE_HEAD_BYTES: Final = 64 * 1024
# The request is written in pieces of this size, each with what is left of the deadline.
SEND_CHUNK_BYTES: Final = 16 * 1024
USER_AGENT: Final = "support-tickets-webhooks/1"


class DeliveryTimeout(TimeoutError):
    """The attempt's deadline passed before the receiver's status line and headers arrived."""


class ResponseHeadTooLarge(http.client.HTTPException):
    """More than :data:`MAX_RESPONSE_HEAD_BYTES` without the end of the headers."""


@cache
def system_tls_context() -> ssl.SSLContext:
    """The deployed trust: the system's CA store, certificates required, host names checked."""
    return ssl.create_default_context()


def _remaining(deadline: float, clock: Callable[[], float]) -> float:
    left = deadline - clock()
    if left <= 0:
        raise DeliveryTimeout("the webhook receiver did not answer in time")
    return left


class _HeadReader(io.RawIOBase):
    """The response's bytes, each read given what is left of the deadline, at most
    :data:`MAX_RESPONSE_HEAD_BYTES` in all."""

    def __init__(self, sock: socket.socket, deadline: float, clock: Callable[[], float]) -> None:
        self._sock, self._deadline, self._clock, self._read = sock, deadline, clock, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._read >= MAX_RESPONSE_HEAD_BYTES:
            raise ResponseHeadTooLarge(f"no end of the headers within {MAX_RESPONSE_HEAD_BYTES} bytes")
        self._sock.settimeout(_remaining(self._deadline, self._clock))
        wanted = min(len(buffer), MAX_RESPONSE_HEAD_BYTES - self._read)
        try:
            count = self._sock.recv_into(buffer, wanted)
        except TimeoutError as exc:
            raise DeliveryTimeout("the webhook receiver did not answer in time") from exc
        self._read += count
        return count


class _HeadSource:
    """What ``http.client.HTTPResponse`` reads from: the deadline-bound reader."""

    def __init__(self, reader: _HeadReader) -> None:
        self._reader = reader

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(self._reader)


class _Exchange(http.client.HTTPConnection):
    """``http.client``'s request writing over a socket already connected (and
    wrapped in TLS), every chunk sent within the deadline."""

    def __init__(self, sock: socket.socket, host: str, port: int, deadline: float, clock: Callable[[], float]):
        super().__init__(host, port)
        self.sock = sock
        self._deadline, self._clock = deadline, clock

    def connect(self) -> None:  # pragma: no cover - the socket is given; never reconnect elsewhere
        raise http.client.NotConnected("pinned exchanges never reconnect")

    def send(self, data: object) -> None:
        if not isinstance(data, bytes | bytearray):
            raise TypeError("the webhook request is bytes")
        view = memoryview(data)
        for start in range(0, len(view), SEND_CHUNK_BYTES):
            self.sock.settimeout(_remaining(self._deadline, self._clock))
            try:
                self.sock.sendall(view[start : start + SEND_CHUNK_BYTES])
            except TimeoutError as exc:
                raise DeliveryTimeout("the webhook receiver did not take the request in time") from exc


def pinned_post(
    checked: CheckedUrl,
    headers: Mapping[str, str],
    body: bytes,
    timeout: float,
    *,
    tls_context: ssl.SSLContext | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """POST ``body`` to the address ``checked`` resolved to; the response's status.
    ``timeout`` bounds the whole attempt: connect, TLS, sending, and the status
    line and headers; no redirect is followed, nothing retried, the body not read.

    ``tls_context`` is for tests only (a test CA for a receiver on 127.0.0.1):
    the delivery function never passes one, and no setting turns it on; the
    default is :func:`system_tls_context`, which requires a certificate valid
    for the URL's host name."""
    deadline = clock() + timeout
    parts = urlsplit(checked.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = checked.host if parts.port is None else f"{checked.host}:{checked.port}"
    try:
        raw = socket.create_connection((checked.addresses[0], checked.port), timeout=_remaining(deadline, clock))
    except TimeoutError as exc:
        raise DeliveryTimeout("the webhook receiver did not accept the connection in time") from exc
    sock: socket.socket = raw
    try:
        if parts.scheme.lower() == "https":
            context = tls_context if tls_context is not None else system_tls_context()
            raw.settimeout(_remaining(deadline, clock))
            try:
                # The handshake happens here: SNI and the certificate checked against the URL's host.
                sock = context.wrap_socket(raw, server_hostname=checked.host)
            except TimeoutError as exc:
                raise DeliveryTimeout("the webhook receiver's TLS handshake did not finish in time") from exc
        # (http://, only 127.0.0.1:<port>, passes the check only in the local stack.)
        exchange = _Exchange(sock, checked.host, checked.port, deadline, clock)
        exchange.request("POST", target, body=body, headers={**headers, "Host": host_header, "User-Agent": USER_AGENT})
        response = http.client.HTTPResponse(
            _HeadSource(_HeadReader(sock, deadline, clock)),  # type: ignore[arg-type]
            method="POST",
        )
        try:
            response.begin()
            return int(response.status)
        finally:
            response.close()
    finally:
        sock.close()
        raw.close()
