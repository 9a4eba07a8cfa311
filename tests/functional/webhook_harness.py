"""What the webhook delivery tests share: a receiver on 127.0.0.1 (stdlib
``http.server`` in a thread), the webhook queue read as Lambda's SQS event
source hands it to the function, and a deliverer over moto with the test's
clock, jitter and timeout."""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from support_tickets.core import keys
from support_tickets.webhooks.delivery import Deliverer, SecretOpener, Sender
from support_tickets.webhooks.events import DISABLED
from support_tickets.webhooks.urls import CheckedUrl
from tests.conftest import REGION, WEBHOOK_DEAD_LETTER_QUEUE_URL, WEBHOOK_QUEUE_URL, all_items, webhook_key_arn

QUEUE_ARN = f"arn:aws:sqs:{REGION}:123456789012:webhook-events.fifo"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: str
    at: float

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


@dataclass
class Receiver:
    """An endpoint that answers ``status`` (``location`` for a redirect) or, with
    ``hang`` set, holds every request until it is released; with ``tls`` (a
    server context) it speaks HTTPS."""

    status: int = 200
    location: str | None = None
    hang: bool = False
    tls: ssl.SSLContext | None = None
    received: list[Received] = field(default_factory=list)
    answered: int = 0  # requests answered so far (a held one is received, not answered)
    released: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode()
                receiver.received.append(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
                )
                if receiver.hang:
                    receiver.released.wait(10)
                self.send_response(receiver.status)
                if receiver.location:
                    self.send_header("location", receiver.location)
                self.send_header("content-length", "0")
                self.end_headers()
                receiver.answered += 1

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.released.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@contextmanager
def receivers(count: int = 1, **options: Any) -> Iterator[list[Receiver]]:
    started = [Receiver(**options).start() for _ in range(count)]
    try:
        yield started
    finally:
        for receiver in started:
            receiver.stop()


def disable_webhook(dynamodb: Any, table_name: str, tenant_id: str, webhook_id: str) -> None:
    """What a delivery answered 410 does to a webhook (or an operator): DISABLED."""
    dynamodb.update_item(
        TableName=table_name,
        Key=keys.webhook_key(tenant_id, webhook_id),
        UpdateExpression="SET #s = :d",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":d": {"S": DISABLED}},
    )


def stored_deliveries(dynamodb: Any, table_name: str, tenant_id: str, webhook_id: str) -> list[dict[str, Any]]:
    """A webhook's delivery records as stored, each attribute's value unwrapped."""
    pk = keys.webhook_deliveries_pk(tenant_id, webhook_id)
    return [
        {name: next(iter(value.values())) for name, value in item.items()}
        for item in all_items(dynamodb, table_name)
        if item["pk"]["S"] == pk
    ]


def lambda_sqs_record(message: Mapping[str, Any]) -> dict[str, Any]:
    """A received message as Lambda's SQS event source puts it in the event."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": REGION,
    }


def receive(queue_url: str = WEBHOOK_QUEUE_URL, visibility: int = 30) -> list[dict[str, Any]]:
    """Every message that can be received now (up to 10 per call), as Lambda records."""
    sqs = boto3.client("sqs", region_name=REGION)
    records: list[dict[str, Any]] = []
    while True:
        response = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageSystemAttributeNames=["All"],
            VisibilityTimeout=visibility,
        )
        batch = response.get("Messages", [])
        if not batch:
            return records
        records.extend(lambda_sqs_record(message) for message in batch)


class RecordingSqs:
    """The function's SQS client, recording visibility changes and dead-letter sends."""

    def __init__(self) -> None:
        self.client = boto3.client("sqs", region_name=REGION)
        self.visibility: list[int] = []
        self.dead_letters: list[dict[str, Any]] = []

    def change_message_visibility(self, **kwargs: Any) -> Any:
        self.visibility.append(kwargs["VisibilityTimeout"])
        return self.client.change_message_visibility(**kwargs)

    def send_message(self, **kwargs: Any) -> Any:
        if kwargs["QueueUrl"] == WEBHOOK_DEAD_LETTER_QUEUE_URL:
            self.dead_letters.append(kwargs)
        return self.client.send_message(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def deliverer(
    table_name: str,
    *,
    sqs: Any | None = None,
    timeout: float = 2.0,
    clock: Callable[[], float] = time.time,
    resolve: Callable[[str, int], list[str]] | None = None,
    **options: Any,
) -> Deliverer:
    """The delivery function's deliverer over moto (local http receivers allowed); ``post``
    among ``options`` is its sender's, the others the deliverer's."""
    extra: dict[str, Any] = {"resolve": resolve} if resolve is not None else {}
    if "post" in options:
        extra["post"] = options.pop("post")
    return Deliverer(
        table_name=table_name,
        dynamodb=boto3.client("dynamodb", region_name=REGION),
        sender=Sender(
            SecretOpener(boto3.client("kms", region_name=REGION), webhook_key_arn()),
            allow_local_http=True,
            timeout=timeout,
            **extra,
        ),
        sqs=sqs if sqs is not None else RecordingSqs(),
        queue_url=WEBHOOK_QUEUE_URL,
        dead_letter_queue_url=WEBHOOK_DEAD_LETTER_QUEUE_URL,
        clock=clock,
        uniform=lambda: 0.5,
        **options,
    )


def process(deliverer: Deliverer, records: list[dict[str, Any]]) -> list[str]:
    """What Lambda's SQS event source does with one batch: invoke, then delete
    the messages not reported as failures (a FIFO group stays locked until then)."""
    failed = deliverer.process_batch(records)
    sqs = boto3.client("sqs", region_name=REGION)
    for record in records:
        if record["messageId"] not in failed:
            sqs.delete_message(QueueUrl=WEBHOOK_QUEUE_URL, ReceiptHandle=record["receiptHandle"])
    return failed


# ---------------------------------------------------------------- a receiver that trickles
# A complete response head (47 bytes).
HEAD = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"


@dataclass
class Trickler:
    """Reads a request, then sends ``answer`` ``chunk`` bytes every ``interval`` s, then holds the line."""

    answer: bytes
    interval: float = 0.02
    chunk: int = 1
    requests: list[bytes] = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)
    listener: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))

    @property
    def checked(self) -> CheckedUrl:
        port = int(self.listener.getsockname()[1])
        return CheckedUrl(f"http://127.0.0.1:{port}/hook", "127.0.0.1", port, ("127.0.0.1",))

    def serve(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                received = b""
                while b"\r\n\r\n" not in received:
                    received += connection.recv(65536)
                self.requests.append(received)
                try:
                    for start in range(0, len(self.answer), self.chunk):
                        connection.sendall(self.answer[start : start + self.chunk])
                        if self.stopped.wait(self.interval):
                            return
                    self.stopped.wait(5)
                except OSError:
                    continue  # the client gave up: the point of the test


@contextmanager
def trickling(answer: bytes, **options: float) -> Iterator[Trickler]:
    trickler = Trickler(answer, **options)  # type: ignore[arg-type]
    thread = threading.Thread(target=trickler.serve, daemon=True)
    thread.start()
    try:
        yield trickler
    finally:
        trickler.stopped.set()
        trickler.listener.close()
        thread.join(2)


# ---------------------------------------------------------------- a test CA for HTTPS receivers
@dataclass(frozen=True)
class Pki:
    """A test CA and certificates it signed, made here (nothing on disk but for ``ssl``'s loaders)."""

    ca_pem: bytes
    ca_key: ec.EllipticCurvePrivateKey
    ca_name: x509.Name

    @classmethod
    def make(cls, name: str = "Webhook test CA") -> Pki:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(certificate.public_bytes(serialization.Encoding.PEM), key, subject)

    def client_context(self) -> ssl.SSLContext:
        """What a test passes as ``tls_context``: the test CA as the only trust, host names checked."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    def server_context(self, tmp_path: object, host: str, seen: list[str | None]) -> ssl.SSLContext:
        """A receiver's context with a certificate for ``host``; records the SNI it is sent."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
            .issuer_name(self.ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()), critical=False)
            .sign(self.ca_key, hashes.SHA256())
        )
        directory = tmp_path if isinstance(tmp_path, str) else str(tmp_path)
        cert_file, key_file = f"{directory}/{host}.crt", f"{directory}/{host}.key"
        with open(cert_file, "wb") as out:
            out.write(certificate.public_bytes(serialization.Encoding.PEM))
        with open(key_file, "wb") as out:
            out.write(
                key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                )
            )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)

        def sni(_: ssl.SSLObject, name: str | None, __: ssl.SSLContext) -> None:
            seen.append(name)

        context.sni_callback = sni
        return context
