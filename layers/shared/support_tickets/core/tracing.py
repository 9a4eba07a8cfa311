"""The functions' Powertools Tracer, without the X-Ray SDK where nothing is traced.

Powertools' ``Tracer()`` imports ``aws_xray_sdk.core`` even when tracing is
disabled, and that import builds the SDK's global recorder, whose sampler
creates two botocore X-Ray clients (loading the X-Ray service model): measured
here as the single largest import of a handler's cold start, for a recorder
that a disabled tracer never uses. Where tracing is off (outside Lambda, under
``sam local``, or ``POWERTOOLS_TRACE_DISABLED``, the same rules as Powertools'),
the tracer gets :class:`DisabledProvider` instead and the SDK is never
imported. Deployed with ``Tracing: Active`` nothing changes: it is Powertools'
own X-Ray tracer, and the SDK's import is the price of the subsegments.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Generator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from aws_lambda_powertools import Tracer
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

_FALSE = {"", "0", "false", "no", "off", "n", "f"}


def tracing_enabled() -> bool:
    """Powertools' rule: on in Lambda, off under ``sam local`` or Chalice, off
    when ``POWERTOOLS_TRACE_DISABLED`` is true."""
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() not in _FALSE:
        return False
    if os.environ.get("AWS_SAM_LOCAL") or os.environ.get("AWS_CHALICE_CLI_MODE"):
        return False
    return bool(os.environ.get("LAMBDA_TASK_ROOT"))


class _DisabledSegment(BaseSegment):
    def close(self, end_time: int | None = None) -> None:
        return

    def add_subsegment(self, subsegment: Any) -> None:
        return

    def remove_subsegment(self, subsegment: Any) -> None:
        return

    def put_annotation(self, key: str, value: Any) -> None:
        return

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        return


class DisabledProvider(BaseProvider):
    """A tracing provider that records nothing (what a disabled X-Ray recorder does)."""

    @contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Generator[BaseSegment]:
        yield _DisabledSegment()

    @asynccontextmanager
    async def in_subsegment_async(self, name: str | None = None, **kwargs: Any) -> AsyncGenerator[BaseSegment]:
        yield _DisabledSegment()

    def put_annotation(self, key: str, value: Any) -> None:
        return

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return

    def patch(self, modules: Sequence[str]) -> None:
        return

    def patch_all(self) -> None:
        return


def make_tracer() -> Tracer:
    if tracing_enabled():
        return Tracer()
    return Tracer(disabled=True, auto_patch=False, provider=DisabledProvider())
