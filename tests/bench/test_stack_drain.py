"""The benchmark's stream drain waits until the local stack says it drained, asking again
while it answers "not yet" (each of its answers comes within its own cap), and raises when
it never does: a bench figure measured while the stream functions still work is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import stackproc
from bench.stackproc import StackProcess


def stack_answering(monkeypatch: pytest.MonkeyPatch, answers: list[bool]) -> tuple[StackProcess, list[str]]:
    asked: list[str] = []

    def control_call(state: Any, path: str, *, timeout: float) -> dict[str, Any]:
        asked.append(path)
        return {"drained": answers.pop(0) if answers else False}

    monkeypatch.setattr(stackproc, "control_call", control_call)
    return StackProcess(process=None, state_dir=Path(), state={}), asked  # type: ignore[arg-type]


def test_a_drain_asks_again_until_the_stack_has_drained(monkeypatch: pytest.MonkeyPatch) -> None:
    stack, asked = stack_answering(monkeypatch, [False, False, True])
    stack.drain(timeout=3600)
    assert len(asked) == 3
    assert asked[0] == f"stream/drain?timeout={stackproc.DRAIN_CALL_S:g}"


def test_a_drain_that_never_ends_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    stack, asked = stack_answering(monkeypatch, [])
    with pytest.raises(RuntimeError, match=r"had not caught up after 0\.01 s"):
        stack.drain(timeout=0.01)
    assert asked  # asked until the time was up (the stack answers "not yet" only after waiting)
    assert set(asked) == {"stream/drain?timeout=1"}  # never less than a second a call
