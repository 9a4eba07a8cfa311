"""What the webhook delivery tests share: a receiver on 127.0.0.1 (stdlib
``http.server`` in a thread), the webhook queue read as Lambda's SQS event
source hands it to the function, and a deliverer over moto with the test's
clock, jitter and timeout."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3

from support_tickets.streams.webhook_delivery import Deliverer, SecretOpener
from tests.conftest import REGION, WEBHOOK_DEAD_LETTER_QUEUE_URL, WEBHOOK_QUEUE_URL, webhook_key_arn

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
    ``hang`` set, holds every request until it is released."""

    status: int = 200
    location: str | None = None
    hang: bool = False
    received: list[Received] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

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

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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
    """The delivery function's deliverer over moto (local http receivers allowed)."""
    extra: dict[str, Any] = {"resolve": resolve} if resolve is not None else {}
    return Deliverer(
        table_name=table_name,
        dynamodb=boto3.client("dynamodb", region_name=REGION),
        secrets=SecretOpener(boto3.client("kms", region_name=REGION), webhook_key_arn()),
        sqs=sqs if sqs is not None else RecordingSqs(),
        queue_url=WEBHOOK_QUEUE_URL,
        dead_letter_queue_url=WEBHOOK_DEAD_LETTER_QUEUE_URL,
        allow_local_http=True,
        timeout=timeout,
        clock=clock,
        uniform=lambda: 0.5,
        **extra,
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
