"""A keep-alive front for the emulator, so a container holds the sockets it would hold in AWS.

The emulator answers through werkzeug's development server, which closes every
connection after its response (``Connection: close``: it cannot drain a
request stream safely between requests). AWS's endpoints keep HTTP/1.1
connections open, and botocore keeps them in each client's pool: that is
where a warm container's open file descriptors go. This proxy keeps the
client's connections open (HTTP/1.1, ``Content-Length`` on every answer) and
forwards each request as received, headers included (``Host`` too, so the
SigV4 signature still verifies), to the emulator. It runs in a process of its
own: the sockets counted are the container's alone.
"""

from __future__ import annotations

import http.client
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length"})


def _handler(upstream: str) -> type[BaseHTTPRequestHandler]:
    target = urlsplit(upstream)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=30)
            try:
                connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in HOP_BY_HOP:
                        connection.putheader(name, value)
                connection.putheader("Content-Length", str(len(body)))
                connection.endheaders(body)
                response = connection.getresponse()
                answer = response.read()
                self.send_response(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() not in HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            finally:
                connection.close()

        do_GET = do_POST = do_PUT = do_DELETE = _forward  # noqa: N815 - http.server's handler names

    return Forward


@contextmanager
def keepalive_front(upstream: str) -> Iterator[str]:
    """A keep-alive proxy to ``upstream`` in a process of its own, for the block: its URL."""
    process = subprocess.Popen(  # noqa: S603 - this interpreter, this module
        [sys.executable, "-m", "bench.keepalive", upstream], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(sys.argv[1]))
    server.daemon_threads = True
    sys.stdout.write(f"{server.server_port}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
