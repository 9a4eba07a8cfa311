"""The cold-start benchmark (bench/cold.py) covers every function of the
template: each one's first request is read from what invokes it there, so a new
function is measured, or fails the benchmark, without anyone adding it to a list.
No timing here: the figures are the benchmark's (bench/results.md)."""

from __future__ import annotations

import dataclasses

import pytest

from bench.cold import API, AUTHORIZES, LOGS, QUEUE, STREAM, first_request
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
