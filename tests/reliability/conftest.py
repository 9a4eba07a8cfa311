"""Fixtures for the reliability tests: faults injected on the wire,
hostile input, fuzzing and load.

The in-process fixtures (``api``, ``user``, ``admin``, ``snapshot``) are
imported from tests/functional, not copied; the local stack (``stack``) is
the session's, shared with tests/e2e (the tests use tenants of their own).

:class:`WireFaults` answers chosen AWS requests with an AWS error *on the
wire*, before moto sees them (a ``before-send`` handler that runs ahead of
moto's). Unlike patching ``_make_api_call``, every botocore layer above the
HTTP request still runs: retries with backoff, error parsing, signing. It also
records every request the token exchange's and the functions' clients send (service, operation,
botocore's attempt number, the access key that signed it) and the access keys
the identity pool issued, so a test can prove which credentials reached DynamoDB.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import botocore.handlers
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from moto.core.models import botocore_stubber

from tests.functional.conftest import admin, api, snapshot, user

__all__ = ["Sent", "WireFaults", "admin", "api", "snapshot", "user"]

_CREDENTIAL = re.compile(r"Credential=([^/]+)/")
_ATTEMPT = re.compile(r"attempt=(\d+)")


@dataclass(frozen=True)
class Sent:
    """One HTTP request a client sent (each retry is one)."""

    service: str
    operation: str
    attempt: int
    access_key: str


@dataclass
class _Rule:
    service: str
    operations: frozenset[str] | None
    code: str
    status: int
    times: int
    skip: int
    extra: dict[str, Any]
    land: bool = False  # the request reaches AWS (and is applied); only its answer is an error


class _Raw:
    """The raw stream botocore reads a response body from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


def _header(request: AWSPreparedRequest, name: str) -> str:
    value = request.headers.get(name, b"")
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class WireFaults:
    sent: list[Sent] = field(default_factory=list)
    issued_keys: list[str] = field(default_factory=list)
    _rules: list[_Rule] = field(default_factory=list)

    def fail(
        self,
        service: str,
        code: str,
        *,
        operations: set[str] | None = None,
        times: int = 1_000_000,
        skip: int = 0,
        status: int = 400,
        **extra: Any,
    ) -> None:
        """After letting ``skip`` through, the next ``times`` requests of
        ``service`` (only ``operations`` if given) get the error ``code`` with
        HTTP ``status``; ``extra`` goes into a JSON error body (e.g.
        ``CancellationReasons``)."""
        rule = _Rule(service, frozenset(operations) if operations else None, code, status, times, skip, extra)
        self._rules.append(rule)

    def lose_answer(self, service: str, *, operations: set[str], times: int = 1) -> None:
        """The next ``times`` requests reach moto and are applied, but their answer
        is lost: the client gets a 500 InternalServerError instead (DynamoDB's "the
        request may have succeeded"), which botocore retries."""
        rule = _Rule(service, frozenset(operations), "InternalServerError", 500, times, 0, {}, land=True)
        self._rules.append(rule)

    def heal(self) -> None:
        self._rules.clear()

    def of(self, service: str, operation: str | None = None) -> list[Sent]:
        return [s for s in self.sent if s.service == service and operation in (None, s.operation)]

    def forget(self) -> None:
        self.sent.clear()

    # ------------------------------------------------------------ botocore events
    def before_send(
        self, request: AWSPreparedRequest, event_name: str, forward: Any = None, **_: Any
    ) -> AWSResponse | None:
        service, operation = event_name.split(".", 2)[1:]
        credential = _CREDENTIAL.search(_header(request, "Authorization"))
        attempt = _ATTEMPT.search(_header(request, "amz-sdk-request"))
        self.sent.append(
            Sent(service, operation, int(attempt.group(1)) if attempt else 0, credential.group(1) if credential else "")
        )
        for rule in self._rules:
            if rule.times > 0 and rule.service == service and (rule.operations is None or operation in rule.operations):
                if rule.skip > 0:
                    rule.skip -= 1
                    continue
                rule.times -= 1
                if rule.land:
                    forward()
                return self._error(request, service, rule)
        return None

    def after_credentials(self, parsed: dict[str, Any], **_: Any) -> None:
        credentials = parsed.get("Credentials") or {}
        if "AccessKeyId" in credentials:
            self.issued_keys.append(credentials["AccessKeyId"])

    @staticmethod
    def _error(request: AWSPreparedRequest, service: str, rule: _Rule) -> AWSResponse:
        if service == "dynamodb":  # DynamoDB's JSON 1.0 protocol
            document = {"__type": f"com.amazonaws.dynamodb.v20120810#{rule.code}", "message": "injected"}
            body = json.dumps({**document, **rule.extra}).encode()
            headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "injected"}
        else:  # Cognito's JSON 1.1 protocol
            body = json.dumps({"__type": rule.code, "message": "injected", **rule.extra}).encode()
            headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": "injected"}
        return AWSResponse(request.url, rule.status, headers, _Raw(body))  # type: ignore[arg-type]


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> WireFaults:
    """Faults on the wire for every botocore session created during the test
    (the token exchange's Cognito client and the functions' DynamoDB client), ahead of moto."""
    # boto3's default session (the tests' admin client, the aggregator) is made
    # before the patch, so it never carries this test's handlers.
    boto3._get_default_session()
    faults = WireFaults()

    def before_send(**kwargs: Any) -> AWSResponse | None:
        # botocore emits before-send to every handler and takes the first
        # response: moto's must not even run for a request that "failed".
        return faults.before_send(**kwargs, forward=lambda: botocore_stubber(**kwargs)) or botocore_stubber(**kwargs)

    handlers = [
        ("before-send", before_send) if spec == ("before-send", botocore_stubber) else spec
        for spec in botocore.handlers.BUILTIN_HANDLERS
    ]
    assert ("before-send", before_send) in handlers, "moto's stubber is not registered"
    monkeypatch.setattr(
        botocore.handlers,
        "BUILTIN_HANDLERS",
        [*handlers, ("after-call.cognito-identity.GetCredentialsForIdentity", faults.after_credentials)],
    )
    return faults


@pytest.fixture
def backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays botocore's standard retry mode computes before each retry,
    with the jitter pinned at its maximum (so the exponential steps show); the
    test does not actually sleep them."""
    from botocore.retries.standard import ExponentialBackoff

    delays: list[float] = []
    original = ExponentialBackoff.delay_amount

    def recorded(self: ExponentialBackoff, context: Any) -> float:
        self._random = lambda: 1.0  # type: ignore[attr-defined]
        delays.append(original(self, context))
        return 0.0

    monkeypatch.setattr(ExponentialBackoff, "delay_amount", recorded)
    return delays


# ---------------------------------------------------------------- figures for the run's summary
_REPORT: list[str] = []


def report(line: str) -> None:
    """A figure (throughput, request counts) printed at the end of the run, never asserted."""
    _REPORT.append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _REPORT:
        terminalreporter.section("reliability figures (measured, not asserted)")
        for line in _REPORT:
            terminalreporter.write_line(line)
