"""The cold-start benchmark (bench/cold.py) covers every function of the
template: each one's first request is read from what invokes it there, so a new
function is measured, or fails the benchmark, without anyone adding it to a list.
No timing here: the figures are the benchmark's (bench/results.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench.cold import (
    API,
    AUTHORIZES,
    CALLGRIND_SLOWDOWN,
    LOGS,
    QUEUE,
    REMAINING_MS,
    STREAM,
    VALGRIND,
    _spawn,
    first_request,
)
from stack_model.functions import function_specs


def test_every_function_of_the_template_has_a_cold_start_first_request() -> None:
    # Given the template's functions, when the bench picks each one's first request,
    kinds = {name: first_request(spec) for name, spec in function_specs().items()}
    # then every function has one, each way a function is invoked is among them,
    assert set(kinds.values()) == {API, AUTHORIZES, STREAM, QUEUE, LOGS}
    # and each follows the template: a route's function is an API function, the rest by their events.
    assert kinds["AuthorizerFunction"] == AUTHORIZES
    assert kinds["DeliverWebhookFunction"] == QUEUE
    assert kinds["MeteringFunction"] == LOGS
    assert {name for name, kind in kinds.items() if kind == STREAM} == {"AggregateCountsFunction", "AuditTrailFunction"}
    assert all(kind == API for name, kind in kinds.items() if function_specs()[name].routes)


def test_a_function_invoked_in_a_way_the_bench_does_not_know_fails_it() -> None:
    # Given a function the template would invoke from a schedule (no scenario in the bench),
    spec = function_specs()["MeteringFunction"]
    scheduled = dataclasses.replace(spec, logical_id="NightlyFunction", events={"Nightly": {"Type": "Schedule"}})
    # then the bench refuses it rather than leave it out of the table.
    with pytest.raises(ValueError, match="NightlyFunction"):
        first_request(scheduled)


REPORTS_ITS_TIME_LEFT = """
def handler(event, context):
    # 200 only when the context reports the time left the test expects
    return {"statusCode": 200 if context.get_remaining_time_in_millis() == event["expected"] else 500}
"""


@pytest.mark.parametrize(
    "callgrind",
    [
        False,
        pytest.param(
            True,
            marks=pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed"),
        ),
    ],
)
def test_the_first_request_has_an_api_functions_time_left_and_fifty_times_that_under_callgrind(
    tmp_path: Path, callgrind: bool
) -> None:
    # A cold start counted under callgrind runs some 50 times slower: the invocation's deadline
    # would refuse the first request's calls if its context reported the real 10 s.
    code = tmp_path / "code"
    code.mkdir()
    (code / "app.py").write_text(REPORTS_ITS_TIME_LEFT)
    expected = REMAINING_MS * (CALLGRIND_SLOWDOWN if callgrind else 1)
    result = _spawn(
        tmp_path,
        "ProbeFunction",
        code_dir=code,
        layers=[],
        handler="app.handler",
        memory=128,
        event={"expected": expected},
        env={},
        callgrind=callgrind,
    )
    assert result["status"] == 200
