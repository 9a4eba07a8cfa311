"""A sample receiver of this stack's webhooks (docs/integrators.md).

    pip install standardwebhooks==1.1.0
    python examples/webhook_receiver.py --port 8080 --secret whsec_...

It verifies every POST as Standard Webhooks specifies (the ``standardwebhooks``
package: HMAC-SHA256 over ``<webhook-id>.<webhook-timestamp>.<body>``, a
timestamp within 5 minutes), answers 401 to anything that does not verify,
answers 204 at once to what does, and hands the event to a worker thread
(here: it prints it as one JSON line). An event whose ``webhook-id`` it has
already taken is acknowledged and not handled twice: deliveries are at least
once. ``--secret`` may be given twice while you move to a rotated secret:
a request verifies if any of your secrets signed it.

Standard library and ``standardwebhooks`` only; Python 3.10 or later.
"""

from __future__ import annotations

import argparse
import binascii
import json
import queue
import signal
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import EmptyWebhookSecretError, Webhook, WebhookVerificationError

# This stack's bodies are small (a ticket is at most ~11 KB); refuse anything far larger unread.
MAX_BODY_BYTES = 1 << 20
# How many webhook-ids to remember for deduplication (a real receiver keeps them in its database).
REMEMBERED_IDS = 10_000

Event = dict[str, Any]


class Unverified(Exception):
    """The request is not a webhook signed with one of our secrets."""


class Verifier:
    """Standard Webhooks verification with one or more secrets (``whsec_...``)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        if not secrets:
            raise ValueError("at least one secret")
        for secret in secrets:
            if not secret.startswith("whsec_"):
                raise ValueError("a secret starts with whsec_ (as POST /webhooks returned it)")
        try:
            self._webhooks = [Webhook(secret) for secret in secrets]
        except (EmptyWebhookSecretError, binascii.Error) as exc:
            raise ValueError(f"not a base64 key after whsec_: {exc}") from None

    def verify(self, body: bytes, headers: dict[str, str]) -> Event:
        """The event, if a secret of ours signed it within the last 5 minutes."""
        for webhook in self._webhooks:
            try:
                event = webhook.verify(body, headers)
            except WebhookVerificationError:
                continue
            except (ValueError, binascii.Error) as exc:  # a malformed signature header or body
                raise Unverified(f"malformed webhook: {exc}") from None
            if not isinstance(event, dict):
                raise Unverified("the body is not a JSON object")
            return event
        raise Unverified("no valid signature (wrong secret, altered body, or a timestamp over 5 minutes off)")


class SeenIds:
    """The most recent webhook-ids taken (thread-safe): a redelivery is acknowledged, not redone."""

    def __init__(self, size: int = REMEMBERED_IDS) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def add(self, webhook_id: str) -> bool:
        """True if the id is new."""
        with self._lock:
            if webhook_id in self._ids:
                self._ids.move_to_end(webhook_id)
                return False
            self._ids[webhook_id] = None
            if len(self._ids) > self._size:
                self._ids.popitem(last=False)
            return True


class Receiver(ThreadingHTTPServer):
    """The HTTP server: verifies, acknowledges, queues; a worker handles the events in order of arrival."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], secrets: Sequence[str], handle: Callable[[Event], None]) -> None:
        super().__init__(address, _Handler)
        self.verifier = Verifier(secrets)
        self.seen = SeenIds()
        self.work: queue.Queue[Event | None] = queue.Queue()
        self._handle = handle
        self._worker = threading.Thread(target=self._work, name="webhook-worker", daemon=True)
        self._worker.start()

    def _work(self) -> None:
        while (event := self.work.get()) is not None:
            try:
                self._handle(event)
            except Exception as exc:  # a failing handler must not stop the worker
                print(f"handling {event.get('id')} failed: {exc!r}", file=sys.stderr, flush=True)

    def server_close(self) -> None:
        super().server_close()
        self.work.put(None)
        self._worker.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    server: Receiver
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._answer(411, {"error": "Content-Length required"})
            return
        if length < 0 or length > MAX_BODY_BYTES:
            self._answer(413, {"error": "body too large"})
            self.close_connection = True
            return
        body = self.rfile.read(length)
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            event = self.server.verifier.verify(body, headers)
        except Unverified as exc:
            self._answer(401, {"error": str(exc)})
            return
        # Verified: acknowledge now, work later (the sender gives up on an answer after 10 s).
        if self.server.seen.add(headers["webhook-id"]):
            self.server.work.put(event)
        self._answer(204, None)

    def _answer(self, status: int, payload: Any) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def print_event(event: Event) -> None:
    print(json.dumps(event, ensure_ascii=False), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument(
        "--secret",
        action="append",
        required=True,
        help="the webhook's secret (whsec_...); twice while you move to a rotated one",
    )
    args = parser.parse_args(argv)
    try:
        Verifier(args.secret)
    except ValueError as exc:
        parser.error(f"bad --secret: {exc}")
    server = Receiver((args.host, args.port), args.secret, print_event)
    # Stop cleanly on `kill` as on Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening on http://{args.host}:{server.server_port}/", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
