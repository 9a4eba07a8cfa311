"""support_tickets.api.validation: what a route declares is what it checks.

The request bodies' JSON Schemas are checked by our small checker on the hot
path; here an independent implementation (the ``jsonschema`` package,
Draft 2020-12) judges the same values, and the two must agree on every one.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from support_tickets.api.parameters import PAGE, RESOLVER, STATUS
from support_tickets.api.validation import (
    Parameter,
    RouteInput,
    UnsupportedSchema,
    check_schema,
    errors,
    read_input,
)
from support_tickets.core.errors import MAX_DETAILS, MAX_FIELD_CHARS, InvalidJson, ValidationFailed
from support_tickets.core.keys import TicketStatus
from support_tickets.core.models import (
    AddCommentRequest,
    BatchStatusRequest,
    CreateTicketRequest,
    UpdateTicketRequest,
)
from tests.conftest import INT_ODDITIES, NOT_ASCII_NUMBERS

BODIES = (CreateTicketRequest, UpdateTicketRequest, AddCommentRequest, BatchStatusRequest)


@pytest.mark.parametrize("body", BODIES, ids=lambda body: body.__name__)
def test_each_body_schema_is_valid_json_schema_and_fully_enforced(body: Any) -> None:
    Draft202012Validator.check_schema(body.SCHEMA)
    check_schema(body.SCHEMA)


@pytest.mark.parametrize("body", [b for b in BODIES if dataclasses.is_dataclass(b)], ids=lambda body: body.__name__)
def test_each_body_class_has_exactly_its_schema_fields(body: Any) -> None:
    fields = {field.name: field for field in dataclasses.fields(body)}
    assert set(fields) == set(body.SCHEMA["properties"])
    required = {name for name, field in fields.items() if field.default is dataclasses.MISSING}
    assert required == set(body.SCHEMA["required"])
    for name, field in fields.items():
        if field.default is not dataclasses.MISSING:
            assert body.SCHEMA["properties"][name]["default"] == field.default


@pytest.mark.parametrize(
    ("schema", "complaint"),
    [
        ({"type": "string", "format": "email"}, "unsupported keyword"),
        ({"type": "number"}, "type must be"),
        ({"type": "string", "pattern": "[a-z]+"}, "anchored"),
        ({"type": "object", "properties": {}, "additionalProperties": True}, "closed"),
        ({"type": "object", "properties": {"x": {"type": "string", "oneOf": []}}}, "schema.x"),
    ],
)
def test_a_keyword_that_would_only_be_documented_is_refused(schema: dict[str, Any], complaint: str) -> None:
    with pytest.raises(UnsupportedSchema, match=complaint):
        check_schema(schema)


# ---------------------------------------------------------------- agreement with jsonschema
# Characters that matter to the declared patterns (and some that never pass them); no
# newline: Python's `$` accepts one before the end, which is why ours matches whole values.
TEXT = st.text(alphabet="aZ09._@- #/éx", max_size=8) | st.sampled_from(
    ["", "OPEN", "IN_PROGRESS", "CLOSED", "open", "x" * 201, "y" * 10_001, "a b"]
)
SCALARS = st.none() | st.booleans() | st.integers(-3, 300) | st.floats(allow_nan=False, width=32) | TEXT
KEYS = st.sampled_from(["title", "description", "resolver", "status", "body", "ticket_ids", "version", "x"])
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=12
)
ID_LISTS = st.lists(st.sampled_from(["a", "b", "t-1", "a b", "", "0" * 65]), max_size=4) | st.lists(
    st.just("t"), min_size=99, max_size=102
)


def body_values(body: Any) -> st.SearchStrategy[Any]:
    """Mostly objects of the body's own fields, with valid and invalid values."""
    fields = {
        name: (ID_LISTS | JSON) if name == "ticket_ids" else (TEXT | SCALARS | JSON)
        for name in body.SCHEMA["properties"]
    }
    own = st.fixed_dictionaries({}, optional={**fields, "x": JSON})
    return own | JSON


@pytest.mark.parametrize("body", BODIES, ids=lambda body: body.__name__)
@given(data=st.data())
def test_our_checker_and_jsonschema_agree_on_every_body(body: Any, data: st.DataObject) -> None:
    value = data.draw(body_values(body))
    independent = Draft202012Validator(body.SCHEMA).is_valid(value)
    ours = errors(body.SCHEMA, value, "body")
    assert (not ours) == independent, (value, ours)


def test_a_trailing_newline_never_passes_a_pattern() -> None:
    # Python's re.search would accept "johnd\n" for ^...$; JSON Schema (ECMA 262) does not.
    assert errors(CreateTicketRequest.SCHEMA, {"title": "x", "resolver": "johnd\n"}, "body") == [
        {"field": "resolver", "message": f"String should match pattern '{RESOLVER.schema['pattern']}'"}
    ]


@pytest.mark.parametrize("raw", ['{"title": "\\ud800"}', '{"title": "t", "resolver": "\\ude00\\ud83d"}'])
def test_a_lone_surrogate_is_not_text(raw: str) -> None:
    # Valid JSON, and jsonschema would take it as a string; no UTF-8 can hold it.
    field = "title" if "ud800" in raw else "resolver"
    assert errors(CreateTicketRequest.SCHEMA, json.loads(raw), "body") == [
        {"field": field, "message": "Input should be text (it has a lone surrogate)"}
    ]


# ---------------------------------------------------------------- a request against its route
def event(
    body: str | None = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    base64_encoded: bool = False,
) -> dict[str, Any]:
    return {
        "body": body,
        "isBase64Encoded": base64_encoded,
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {name: [value] for name, value in (query or {}).items()} or None,
        "headers": headers or {},
    }


def failures(declared: RouteInput, request: dict[str, Any]) -> list[dict[str, str]]:
    with pytest.raises(ValidationFailed) as raised:
        read_input(declared, request)
    details: list[dict[str, str]] = raised.value.details
    return details


LISTING = RouteInput(query=(STATUS, RESOLVER, *PAGE))


def test_absent_parameters_take_their_defaults() -> None:
    checked = read_input(LISTING, event())
    assert checked.query == {"status": "OPEN", "resolver": None, "limit": 25, "cursor": None}


def test_a_limit_is_read_as_a_whole_number() -> None:
    assert read_input(LISTING, event(query={"limit": "7"})).query["limit"] == 7
    for text in ("0", "101", "ten", "7.0", " 7", "99999999999999999999"):
        assert [detail["field"] for detail in failures(LISTING, event(query={"limit": text}))] == ["limit"], text


@pytest.mark.parametrize("text", [*NOT_ASCII_NUMBERS, *INT_ODDITIES])
def test_a_number_is_ascii_digits_only(text: str) -> None:
    # int() reads every one of these as a number; a client that sends them sent no number.
    assert [detail["field"] for detail in failures(LISTING, event(query={"limit": text}))] == ["limit"]


@pytest.mark.parametrize("text", NOT_ASCII_NUMBERS)
def test_a_pattern_digit_is_an_ascii_digit(text: str) -> None:
    # JSON Schema patterns are ECMA-262 regular expressions, where \d is [0-9].
    declared = RouteInput(query=(Parameter("n", {"type": "string", "pattern": r"^\d+$"}),))
    assert read_input(declared, event(query={"n": "3"})).query == {"n": "3"}
    assert [detail["field"] for detail in failures(declared, event(query={"n": text}))] == ["n"]


def test_every_failing_parameter_is_named_at_once() -> None:
    found = failures(LISTING, event(query={"status": "open", "resolver": "a b", "tenant_id": "10"}))
    assert [detail["field"] for detail in found] == ["tenant_id", "status", "resolver"]
    assert found[0]["message"] == "unknown query parameter"


def test_a_parameter_sent_only_as_a_multi_value_is_still_unknown() -> None:
    request = event()
    request["multiValueQueryStringParameters"] = {"tenant": ["1", "10"]}
    assert failures(LISTING, request) == [{"field": "tenant", "message": "unknown query parameter"}]


def test_headers_are_read_whatever_their_case() -> None:
    declared = RouteInput(headers=(Parameter("If-Match"),))
    assert read_input(declared, event(headers={"if-match": '"3"'})).headers == {"If-Match": '"3"'}
    assert read_input(declared, event()).headers == {"If-Match": None}


def test_a_checked_body_is_its_class_with_its_defaults() -> None:
    declared = RouteInput(body=CreateTicketRequest)
    checked = read_input(declared, event(body='{"title": "Printer"}'))
    assert checked.body == CreateTicketRequest(title="Printer", description="", resolver=None)
    encoded = base64.b64encode(json.dumps({"title": "Écran"}).encode()).decode()
    assert read_input(declared, event(body=encoded, base64_encoded=True)).body.title == "Écran"


def test_a_batch_status_is_a_ticket_status() -> None:
    checked = read_input(RouteInput(body=BatchStatusRequest), event(body='{"ticket_ids": ["a"], "status": "CLOSED"}'))
    assert checked.body.status is TicketStatus.CLOSED


def test_an_update_names_only_what_it_changes() -> None:
    checked = read_input(RouteInput(body=UpdateTicketRequest), event(body='{"resolver": null, "status": "OPEN"}'))
    assert checked.body.changes() == {"resolver": None, "status": TicketStatus.OPEN}
    assert failures(RouteInput(body=UpdateTicketRequest), event(body="{}")) == [
        {"field": "body", "message": "at least one of title, description, status, resolver is required"}
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (None, [{"field": "body", "message": "Field required"}]),
        ("[]", [{"field": "body", "message": "Input should be an object"}]),
        (
            '{"title": 5, "x": 1}',
            [
                {"field": "title", "message": "Input should be a string"},
                {"field": "x", "message": "Extra inputs are not permitted"},
            ],
        ),
    ],
)
def test_a_bad_body_names_each_failing_field(body: str | None, expected: list[dict[str, str]]) -> None:
    assert failures(RouteInput(body=CreateTicketRequest), event(body=body)) == expected


@pytest.mark.parametrize("body", ['{"title": ', "[" * 100_000, "1" * 5000, "\ud800"])
def test_unreadable_json_is_invalid_json(body: str) -> None:
    with pytest.raises(InvalidJson):
        read_input(RouteInput(body=CreateTicketRequest), event(body=body))


def test_a_body_that_is_not_base64_when_it_says_so_is_invalid_json() -> None:
    with pytest.raises(InvalidJson):
        read_input(RouteInput(body=CreateTicketRequest), event(body="%%%", base64_encoded=True))


def test_a_route_without_a_body_ignores_none_and_accepts_no_query() -> None:
    assert read_input(RouteInput(), event()).body is None
    assert failures(RouteInput(), event(query={"limit": "5"})) == [
        {"field": "limit", "message": "unknown query parameter"}
    ]


def test_a_400_names_at_most_ten_bounded_problems_and_says_how_many_it_found() -> None:
    body = json.dumps({"ticket_ids": [0] * 30_000, "status": "DONE", "\U0001f600" * 1000: 0})
    with pytest.raises(ValidationFailed) as raised:
        read_input(RouteInput(body=BatchStatusRequest), event(body=body))
    error = raised.value.body()["error"]
    assert len(error["details"]) == MAX_DETAILS
    assert "30003 problems" in error["message"]
    assert all(set(detail) == {"field", "message"} for detail in error["details"])
    # Each bounded as JSON writes it: a long name comes back cut, never whole.
    long_name = failures(RouteInput(body=BatchStatusRequest), event(body=json.dumps({"\U0001f600" * 1000: 0})))[-1]
    assert len(json.dumps(long_name["field"])) - 2 <= MAX_FIELD_CHARS
    assert long_name["field"].endswith("...")
    assert len(json.dumps(raised.value.body())) < 3 * 1024
