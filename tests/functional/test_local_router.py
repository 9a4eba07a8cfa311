"""The router of ``make dev CELLS=<n>`` (router/local_router.cjs, started as
local_stack.cells starts it) in front of two stand-in cells: for every request it
runs the control plane's CloudFront function (router/edge_router.js, unchanged) on
the store's file as ops.cell_routes writes it, and proxies the request to the cell
the function chose, or to the default cell when it chose none; what the cell answers
comes back as it was. A store change is the next request's. One Node process for the
module (a fraction of a second)."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from local_stack.cells import api_domain, router_listen, start_router
from ops.cell_routes import publish_cell_origin
from ops.cells import Placement, Routes
from ops.local_routes import FileKeyValueStore
from support_tickets.core.identity import TENANT_CLAIM

STAGE = "v1"


class EchoCell(http.server.BaseHTTPRequestHandler):
    """A cell's stand-in: answers what it received (and the status and headers asked for)."""

    protocol_version = "HTTP/1.1"

    def answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        received = {
            "cell": self.server.cell_id,  # type: ignore[attr-defined]
            "method": self.command,
            "path": self.path,
            "headers": {name.lower(): self.headers.get_all(name) for name in self.headers},
            "body": body,
        }
        payload = json.dumps(received).encode()
        self.send_response(int(self.headers.get("X-Answer-Status", "200")))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if self.headers.get("X-Answer-Status") == "503":
            self.send_header("Retry-After", "2")
        self.send_header("Set-Cookie", "a=1")
        self.send_header("Set-Cookie", "b=2")
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self.answer()

    def do_PATCH(self) -> None:
        self.answer()

    def log_message(self, format: str, *args: Any) -> None:
        return


@dataclass
class Router:
    url: str
    routes: Routes
    cells: dict[str, str]

    def request(
        self, path: str, tenant: str | None = None, *, method: str = "GET", body: bytes | None = None, **headers: str
    ) -> tuple[int, dict[str, list[str]], Any]:
        sent = dict(headers)
        if tenant is not None:
            sent["Authorization"] = f"Bearer {token(tenant)}"
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=sent)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
                status, answer_headers, payload = answer.status, answer.headers, answer.read()
        except urllib.error.HTTPError as refused:
            status, answer_headers, payload = refused.code, refused.headers, refused.read()
        names = {name.lower() for name in answer_headers}
        return status, {name: answer_headers.get_all(name) for name in names}, json.loads(payload)


def token(tenant: str) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'kid': 'k'})}.{part({TENANT_CLAIM: tenant, 'token_use': 'id'})}.c2lnbmF0dXJl"


def serve_cell(cell_id: str) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoCell)
    server.cell_id = cell_id  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Router]:
    servers = {cell_id: serve_cell(cell_id) for cell_id in ("cell-a", "cell-b")}
    urls = {cell_id: f"http://127.0.0.1:{server.server_port}" for cell_id, server in servers.items()}
    store = FileKeyValueStore(tmp_path_factory.mktemp("router") / "router-store.json")
    routes = Routes(store, store.arn)
    for cell_id in (*urls, "cell-c"):  # cell-c: named in the store, not one of the local cells
        publish_cell_origin(store, store.arn, cell_id, api_domain(cell_id), STAGE)
    bound = socket.socket()
    bound.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{bound.getsockname()[1]}"
    origins = {f"{api_domain(cell_id)}/{STAGE}": cell_url for cell_id, cell_url in urls.items()}
    process = start_router(bound, store.path, origins, default=urls["cell-a"])
    try:
        # Bound but not listening yet: a client is refused, never kept waiting
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(url, timeout=2)
        router_listen(process)
        yield Router(url, routes, urls)
    finally:
        assert process.stdin is not None
        process.stdin.close()  # its supervisor gone: it exits
        assert process.wait(timeout=10) == 0
        bound.close()
        for server in servers.values():
            server.shutdown()
            server.server_close()


def place(router: Router, tenant: str, cell_id: str, epoch: int) -> None:
    router.routes.publish(Placement(tenant, cell_id, epoch))


@pytest.mark.parametrize(("one", "ten"), [("cell-a", "cell-b"), ("cell-b", "cell-a")])
def test_each_tenant_reaches_its_cell_and_any_other_request_the_default_cell(
    router: Router, one: str, ten: str, request: pytest.FixtureRequest
) -> None:
    # Given tenants 1 and 10 (one id a prefix of the other) in different cells
    base = request.node.callspec.id.replace("-", "")
    first, second = f"{base}1", f"{base}10"
    place(router, first, one, 1)
    place(router, second, ten, 1)
    # Then each reaches its own cell, whatever the path
    assert router.request("/tickets", first)[2]["cell"] == one
    assert router.request("/tickets/x/comments", second)[2]["cell"] == ten
    # And a tenant the store places nowhere, or no token at all, reaches the default cell
    for tenant in (f"{base}100", None):
        assert router.request("/tickets", tenant)[2]["cell"] == "cell-a"
    assert router.request("/tickets", Authorization="Basic YWxpY2U6c2VjcmV0")[2]["cell"] == "cell-a"


def test_a_store_change_is_the_next_requests(router: Router) -> None:
    place(router, "mover", "cell-b", 1)
    assert router.request("/tickets", "mover")[2]["cell"] == "cell-b"
    place(router, "mover", "cell-a", 2)
    assert router.request("/tickets", "mover")[2]["cell"] == "cell-a"
    place(router, "mover", "cell-b", 1)  # an older epoch: never written, the route stays
    assert router.request("/tickets", "mover")[2]["cell"] == "cell-a"


def test_the_request_goes_on_as_it_came_and_the_answer_comes_back_as_the_cell_gave_it(router: Router) -> None:
    place(router, "echo", "cell-b", 1)
    body = json.dumps({"title": "Printer on fire", "text": "é"}).encode()
    status, headers, received = router.request(
        "/tickets/t1?limit=5&status=OPEN&status=CLOSED",
        "echo",
        method="PATCH",
        body=body,
        **{"Content-Type": "application/json", "Idempotency-Key": "k-1", "X-Answer-Status": "503"},
    )
    assert (received["cell"], received["method"], received["path"]) == (
        "cell-b",
        "PATCH",
        "/tickets/t1?limit=5&status=OPEN&status=CLOSED",
    )
    assert received["body"] == body.decode()
    sent = received["headers"]
    assert sent["authorization"] == [f"Bearer {token('echo')}"]
    assert (sent["idempotency-key"], sent["content-type"]) == (["k-1"], ["application/json"])
    # Host is the origin's (CloudFront forwards every viewer header but Host)
    assert sent["host"] == [router.cells["cell-b"].removeprefix("http://")]
    # the cell's status, headers (repeated ones too) and body, as it gave them
    assert status == 503
    assert headers["retry-after"] == ["2"]
    assert headers["set-cookie"] == ["a=1", "b=2"]


def test_an_origin_that_is_no_local_cell_is_a_502_never_another_cell(router: Router) -> None:
    place(router, "stray", "cell-c", 1)
    status, _, body = router.request("/tickets", "stray")
    assert status == 502
    assert "cell" not in body
