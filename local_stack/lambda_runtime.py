"""Run Lambda handlers in-process, as the Lambda runtime would: a Lambda
context object and the function's environment for the time of an invocation
(the functions themselves, and how a handler is loaded, are
:mod:`stack_model.functions`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class LambdaContext:
    """The attributes Powertools and our code read from the Lambda context."""

    function_name: str
    memory_limit_in_mb: int = 512
    timeout_s: int = 10
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"

    def __post_init__(self) -> None:
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"
        self._deadline_ms = _now_ms() + self.timeout_s * 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - _now_ms())


def _now_ms() -> int:
    import time

    return int(time.monotonic() * 1000)


@contextmanager
def environment(variables: Mapping[str, str]) -> Iterator[None]:
    """Set a function's environment for the duration of an invocation."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
