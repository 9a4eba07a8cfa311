"""One in-process WSGI call: what the local stack's middlewares (the IAM
guard, the capacity meter) do to hand a request on to the app behind them."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

Environ = dict[str, Any]
WsgiApp = Callable[[Environ, Callable[..., Any]], Iterable[bytes]]


def call(app: WsgiApp, environ: Environ, body: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    """``app``'s answer to ``environ`` with ``body`` (already read from the
    client): its status, headers and whole body."""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    captured: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        captured["status"], captured["headers"] = status, headers
        return lambda _data: None

    chunks = app(environ, start_response)
    try:
        data = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return str(captured["status"]), list(captured["headers"]), data
