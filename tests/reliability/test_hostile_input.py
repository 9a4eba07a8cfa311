"""Hostile input, table-driven over every route, through the real handlers
over moto: each request gets its documented 4xx and error body (or, for odd
but valid text, a faithful round trip), never a 5xx, and a rejected request
leaves the whole table exactly as it was.

One moto table serves the module (cases are isolated by tenant, and every
case compares a full dump of the table before and after), because the table
has ~200 rows. The tenants are a prefix pair (``<t>`` and ``<t>0``), so the
"tenant 1 vs tenant 10" confusion is in every foreign-id and cursor case.
Cases already covered route by route elsewhere (tests/functional) are not
repeated here beyond what the table needs to be complete per input class.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from ops.routes import by_name, route_names
from ops.sample_events import delivery_item, sample_delivery_id
from stack_model.template import table_definition
from support_tickets.core import keys
from support_tickets.data.cursor import encode_cursor, query_fingerprint
from tests.conftest import (
    INT_ODDITIES,
    NOT_ASCII_NUMBERS,
    REGION,
    all_items,
    mocked_aws,
    random_tenant_id,
    token_for_claims,
    webhook_key_arn,
)
from tests.functional.api_harness import Api, ApiResponse, User, assert_error

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

OWN, OWN_B, FOREIGN, MISSING = "<own>", "<own-b>", "<foreign>", "01JD3ZZZZZZZZZZZZZZZZZZZZZ"
# A webhook of each tenant (the {webhook_id} routes' subject), and a delivery of each.
OWN_WEBHOOK, FOREIGN_WEBHOOK = "<own-webhook>", "<foreign-webhook>"
OWN_DELIVERY, FOREIGN_DELIVERY = "<own-delivery>", "<foreign-delivery>"
LIST_CURSOR, FOREIGN_LIST_CURSOR, COMMENT_CURSOR, FOREIGN_COMMENT_CURSOR = (
    "<list-cursor>",
    "<foreign-list-cursor>",
    "<comment-cursor>",
    "<foreign-comment-cursor>",
)
TRUNCATED_LIST_CURSOR, TRUNCATED_COMMENT_CURSOR = "<truncated-list-cursor>", "<truncated-comment-cursor>"
KIB64 = 64 * 1024


@dataclass
class World:
    client: Any
    table_name: str
    me: User = field(default_factory=lambda: User("unset"))
    foreign: User = field(default_factory=lambda: User("unset"))
    values: dict[str, str] = field(default_factory=dict)

    def fill(self, value: Any) -> Any:
        """``value`` with the placeholders replaced by this world's ids and cursors."""
        if isinstance(value, str):
            for name, real in self.values.items():
                value = value.replace(name, real)
            return value
        if isinstance(value, list):
            return [self.fill(item) for item in value]
        if isinstance(value, dict):
            return {self.fill(key): self.fill(item) for key, item in value.items()}
        return value

    def dump(self) -> list[dict[str, Any]]:
        return all_items(self.client, self.table_name)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    """Tenant ``<t>`` and ``<t>0``, each with two tickets (one with two
    comments), and real cursors of both: the material forged requests use."""
    with mocked_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        yield World(client, str(table_definition()["TableName"]))


@pytest.fixture
def seeded(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    # Seeded inside a test (the autouse environment fixture is function-scoped), once.
    monkeypatch.setenv("WEBHOOK_KEY_ARN", webhook_key_arn())
    if world.values:
        return world
    api = Api()
    me = User(random_tenant_id(), "alice")
    foreign = User(me.tenant_id + "0", "mallory")
    values: dict[str, str] = {}
    for user, own, other in ((me, OWN, OWN_B), (foreign, FOREIGN, "<foreign-b>")):
        values[own] = api.new_ticket(user, title="first")["ticket_id"]
        values[other] = api.new_ticket(user, title="second")["ticket_id"]
        for n in range(2):
            assert api.comment(user, values[own], {"body": f"comment {n}"}).status == 201
    for user, webhook, delivery in ((me, OWN_WEBHOOK, OWN_DELIVERY), (foreign, FOREIGN_WEBHOOK, FOREIGN_DELIVERY)):
        created = api.call("webhook_create", user.as_admin(), body=by_name()["webhook_create"].body(""))
        assert created.status == 201, created.body
        values[webhook] = created.body["webhook_id"]
        world.client.put_item(TableName=world.table_name, Item=delivery_item(user.tenant_id, values[webhook]))
        values[delivery] = sample_delivery_id(values[webhook])
    values[LIST_CURSOR] = api.list_tickets(me, limit="1").body["next_cursor"]
    values[FOREIGN_LIST_CURSOR] = api.list_tickets(foreign, limit="1").body["next_cursor"]
    values[COMMENT_CURSOR] = api.get(me, values[OWN], limit="1").body["next_cursor"]
    values[FOREIGN_COMMENT_CURSOR] = api.get(foreign, values[FOREIGN], limit="1").body["next_cursor"]
    assert all(values.values())
    values[TRUNCATED_LIST_CURSOR] = values[LIST_CURSOR][: len(values[LIST_CURSOR]) // 2]
    values[TRUNCATED_COMMENT_CURSOR] = values[COMMENT_CURSOR][:-3]
    world.me, world.foreign = me, foreign
    world.values.update(values)
    return world


@dataclass(frozen=True)
class Case:
    route: str
    status: int
    code: str | None = None  # error code, for a 4xx
    body: Any = None
    raw: str | None = None
    query: dict[str, str] | None = None
    headers: dict[str, str] | None = None
    ticket_id: str | None = None
    claims: dict[str, str] = field(default_factory=dict)  # merged over the caller's
    admin: bool = False
    echo: dict[str, str] | None = None  # fields a success must hand back exactly


def case(name: str, *args: Any, **kwargs: Any) -> Any:
    return pytest.param(Case(*args, **kwargs), id=name)


# From the route table (ops/routes.py): a new route gets every generic case below.
ROUTES = by_name()
ALL_ROUTES = route_names()
TICKET_ROUTES = [name for name in ALL_ROUTES if ROUTES[name].takes_ticket]
WEBHOOK_ROUTES = [name for name in ALL_ROUTES if ROUTES[name].takes_webhook]
DELIVERY_ROUTES = [name for name in ALL_ROUTES if ROUTES[name].takes_delivery]
VALID_BODY = {name: ROUTES[name].body(OWN) for name in ALL_ROUTES if ROUTES[name].has_body}
ADMIN_ROUTES = [name for name in ALL_ROUTES if ROUTES[name].needs.admin]
# The routes that take free text, and the field that holds most of it (sized bodies).
TEXT_FIELD = {"create": "description", "update": "description", "comment": "body"}


def path_id(route: str) -> str | None:
    """The id a valid request of ``route`` names in its path: the caller's ticket or webhook."""
    if route in DELIVERY_ROUTES:
        return f"{OWN_WEBHOOK}/{OWN_DELIVERY}"
    return OWN if route in TICKET_ROUTES else OWN_WEBHOOK if route in WEBHOOK_ROUTES else None


def ticket_route_defaults(route: str) -> dict[str, Any]:
    return {"ticket_id": path_id(route), "admin": route in ADMIN_ROUTES}


# ---------------------------------------------------------------- bodies
MALFORMED = {
    "unclosed": '{"title": "t"',
    "single-quotes": "{'title': 't'}",
    "trailing-garbage": '{"title": "t"} x',
    "byte-order-mark": '\ufeff{"title": "t"}',
    "whitespace-only": "   ",
    "bare-word": "undefined",
    "nested-30000-deep": "[" * 30000 + "]" * 30000,
    "integer-of-5000-digits": '{"title": ' + "1" * 5000 + "}",
}
CASES = [
    case(f"{route}-malformed-{name}", route, 400, "INVALID_JSON", raw=raw, **ticket_route_defaults(route))
    for route in VALID_BODY
    for name, raw in MALFORMED.items()
]

WRONG_TYPES: dict[str, list[Any]] = {
    "create": [
        {"title": 5},
        {"title": None},
        {"title": ["t"]},
        {"title": {"t": 1}},
        {"title": True},
        {"title": "t", "description": 5},
        {"title": "t", "resolver": 5},
        [{"title": "t"}],
        "title",
        5,
        None,
    ],
    "update": [
        {"status": 1},
        {"status": "open"},
        {"status": None},
        {"title": None},
        {"description": None},
        {"resolver": ["johnd"]},
        {},
        [],
    ],
    "comment": [{"body": 1}, {"body": None}, {"body": ["b"]}, {}, "b"],
    "batch": [
        {"ticket_ids": OWN, "status": "CLOSED"},
        {"ticket_ids": [1], "status": "CLOSED"},
        {"ticket_ids": [[OWN]], "status": "CLOSED"},
        {"ticket_ids": None, "status": "CLOSED"},
        {"ticket_ids": [OWN], "status": "DONE"},
        {"ticket_ids": [OWN], "status": 2},
        {"ticket_ids": [OWN]},
    ],
}
CASES += [
    case(f"{route}-wrong-type-{n}", route, 400, "VALIDATION_ERROR", body=body, **ticket_route_defaults(route))
    for route, bodies in WRONG_TYPES.items()
    for n, body in enumerate(bodies)
]

UNKNOWN_FIELDS: dict[str, list[dict[str, Any]]] = {
    "create": [
        {"title": "t", "tenant_id": "other"},
        {"title": "t", "status": "CLOSED"},
        {"title": "t", "created_by": "mallory"},
        {"title": "t", "ticket_id": "chosen"},
        {"title": "t", "pk": "TENANT#other|TICKET#1"},
    ],
    "update": [{"title": "t", "version": 7}, {"tenant_status": "TENANT#other|OPEN"}, {"title": "t", "created_by": "m"}],
    "comment": [{"body": "b", "author": "mallory"}, {"body": "b", "tenant_id": "other"}],
    "batch": [{"ticket_ids": [OWN], "status": "CLOSED", "tenant_id": "other"}],
}
CASES += [
    case(f"{route}-unknown-field-{n}", route, 400, "VALIDATION_ERROR", body=body, **ticket_route_defaults(route))
    for route, bodies in UNKNOWN_FIELDS.items()
    for n, body in enumerate(bodies)
]

EMPTY_AND_OVERSIZED: dict[str, list[dict[str, Any]]] = {
    "create": [
        {"title": ""},
        {"title": "t", "resolver": ""},
        {"title": "x" * 201},
        {"title": "t", "description": "x" * 10_001},
        {"title": "t", "resolver": "r" * 129},
    ],
    "update": [{"title": ""}, {"status": ""}, {"title": "x" * 201}, {"description": "x" * 10_001}],
    "comment": [{"body": ""}, {"body": "x" * 10_001}],
    "batch": [
        {"ticket_ids": [], "status": "CLOSED"},
        {"ticket_ids": [""], "status": "CLOSED"},
        {"ticket_ids": [OWN], "status": ""},
        {"ticket_ids": [f"id{n}" for n in range(101)], "status": "CLOSED"},
        {"ticket_ids": ["x" * 65], "status": "CLOSED"},
    ],
}
CASES += [
    case(f"{route}-empty-or-oversized-{n}", route, 400, "VALIDATION_ERROR", body=body, **ticket_route_defaults(route))
    for route, bodies in EMPTY_AND_OVERSIZED.items()
    for n, body in enumerate(bodies)
]


def sized_body(route: str, total_bytes: int) -> str:
    """A JSON body of exactly ``total_bytes`` UTF-8 bytes, mostly 2-byte characters,
    so its character count stays well below its byte count."""
    field_name = TEXT_FIELD[route]
    prefix = '{"title": "t", ' if route == "create" else "{"
    shell = prefix + f'"{field_name}": "' + '"}'
    room = total_bytes - len(shell.encode())
    text = "é" * (room // 2) + "x" * (room % 2)
    raw = prefix + f'"{field_name}": "{text}"' + "}"
    assert len(raw.encode()) == total_bytes
    assert len(raw) < KIB64
    return raw


# The limit counts bytes, not characters: 64 KiB + 1 byte of mostly 2-byte text is 413
# before anything is parsed; exactly 64 KiB is parsed (and too long a field, a 400).
for route in TEXT_FIELD:
    CASES += [
        case(
            f"{route}-64KiB+1-bytes",
            route,
            413,
            "PAYLOAD_TOO_LARGE",
            raw=sized_body(route, KIB64 + 1),
            **ticket_route_defaults(route),
        ),
        case(
            f"{route}-64KiB-bytes",
            route,
            400,
            "VALIDATION_ERROR",
            raw=sized_body(route, KIB64),
            **ticket_route_defaults(route),
        ),
    ]

# ---------------------------------------------------------------- unicode
EMOJI, CLEF, FAMILY = "\U0001f600", "\U0001d11e", "\U0001f468\u200d\U0001f469\u200d\U0001f467"
UNICODE_OK = {
    "nul": {"title": "a\u0000b"},
    "rtl-override": {"title": "\u202eevil.exe", "description": "\u05e9\u05dc\u05d5\u05dd"},
    "emoji-title-at-200": {"title": EMOJI * 200},
    "combining-at-200": {"title": "e\u0301" * 100},
    "zwj-sequences": {"title": FAMILY * 40},  # 5 code points each: 200
    "4-byte-description-at-10000": {"title": "t", "description": CLEF * 10_000},
    "noncharacters": {"title": "\ufffe\uffff\U0010ffff"},
}
CASES += [case(f"create-unicode-{name}", "create", 201, body=body, echo=body) for name, body in UNICODE_OK.items()]
CASES += [
    case(
        "update-emoji-title-at-200",
        "update",
        200,
        body={"title": EMOJI * 200},
        ticket_id=OWN,
        echo={"title": EMOJI * 200},
    ),
    case(
        "comment-4-byte-body-at-10000",
        "comment",
        201,
        body={"body": EMOJI * 10_000},
        ticket_id=OWN,
        echo={"body": EMOJI * 10_000},
    ),
]
UNICODE_TOO_LONG = {
    "create": [{"title": EMOJI * 201}, {"title": "e\u0301" * 100 + "e"}, {"title": "t", "description": CLEF * 10_001}],
    "update": [{"title": EMOJI * 201}],
    "comment": [{"body": EMOJI * 10_001}],
}
CASES += [
    case(
        f"{route}-unicode-over-the-limit-{n}", route, 400, "VALIDATION_ERROR", body=body, **ticket_route_defaults(route)
    )
    for route, bodies in UNICODE_TOO_LONG.items()
    for n, body in enumerate(bodies)
]
# Lone surrogates, escaped in the JSON text ("\ud800"): not text, so not storable.
LONE_SURROGATES = {
    "create": [
        '{"title": "\\ud800"}',
        '{"title": "t", "description": "\\udfff"}',
        '{"title": "t", "resolver": "\\ud83d"}',
        '{"title": "\\ude00\\ud83d"}',
    ],
    "update": ['{"title": "\\ud800"}'],
    "comment": ['{"body": "\\ud83d"}'],
    "batch": ['{"ticket_ids": ["\\ud800"], "status": "CLOSED"}'],
}
CASES += [
    case(f"{route}-lone-surrogate-{n}", route, 400, "VALIDATION_ERROR", raw=raw, **ticket_route_defaults(route))
    for route, raws in LONE_SURROGATES.items()
    for n, raw in enumerate(raws)
]

# ---------------------------------------------------------------- ids
HOSTILE_IDS = {
    "pipe": "a|b",
    "hash": "TICKET#1",
    "star": "*",
    "percent": "%",
    "percent-encoded-star": "%2A",
    "dot-dot-slash": "../aggregates",
    "encoded-traversal": "%2e%2e%2f",
    "dot-dot": "..",
    "nul": "\u0000",
    "space": " ",
    "non-ascii": "\u00e9",
    "lone-surrogate": "\ud800",
    "too-long": "x" * 65,
    "foreign-tenants-ticket": FOREIGN,
    "missing": MISSING,
}
CASES += [
    case(
        f"{route}-id-{name}",
        route,
        404,
        "TICKET_NOT_FOUND",
        ticket_id=ticket_id,
        body=VALID_BODY.get(route),
        admin=ROUTES[route].needs.admin,
    )
    for route in TICKET_ROUTES
    for name, ticket_id in HOSTILE_IDS.items()
]
CASES += [
    case(
        f"{route}-id-{name}",
        route,
        404,
        "WEBHOOK_NOT_FOUND",
        ticket_id=f"{webhook_id}/{OWN_DELIVERY}" if route in DELIVERY_ROUTES else webhook_id,
        body=VALID_BODY.get(route),
        admin=True,
    )
    for route in WEBHOOK_ROUTES
    for name, webhook_id in {**HOSTILE_IDS, "foreign-tenants-webhook": FOREIGN_WEBHOOK}.items()
]
CASES += [
    case(
        f"{route}-delivery-id-{name}",
        route,
        404,
        "DELIVERY_NOT_FOUND",
        ticket_id=f"{OWN_WEBHOOK}/{delivery_id}",
        admin=True,
    )
    for route in DELIVERY_ROUTES
    for name, delivery_id in {
        **{name: value for name, value in HOSTILE_IDS.items() if "/" not in value and value},
        "foreign-tenants-delivery": FOREIGN_DELIVERY,
    }.items()
]
CASES += [
    case(
        f"batch-id-{name}", "batch", 400, "VALIDATION_ERROR", body={"ticket_ids": [OWN, ticket_id], "status": "CLOSED"}
    )
    for name, ticket_id in HOSTILE_IDS.items()
    if ticket_id != FOREIGN and not keys.is_valid_ticket_id(ticket_id)
]
CASES += [
    case(
        "batch-own-and-foreign-ids",
        "batch",
        404,
        "TICKET_NOT_FOUND",
        body={"ticket_ids": [OWN, FOREIGN, OWN_B], "status": "CLOSED"},
    ),
]


# ---------------------------------------------------------------- cursors
def forge(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


CURSORS = {
    "truncated": TRUNCATED_LIST_CURSOR,
    "another-tenants": FOREIGN_LIST_CURSOR,
    "a-comment-cursor": COMMENT_CURSOR,
    "not-base64": "!!!!",
    "empty": "",
    "json-array": forge([1, 2]),
    "over-2048": "A" * 2049,
    "nul": "\u0000",
    "lone-surrogate": "\ud800",
}
CASES += [
    case(f"list-cursor-{name}", "list", 400, "INVALID_CURSOR", query={"cursor": c}) for name, c in CURSORS.items()
]
CASES += [
    case(
        "get-cursor-truncated", "get", 400, "INVALID_CURSOR", ticket_id=OWN, query={"cursor": TRUNCATED_COMMENT_CURSOR}
    ),
    case(
        "get-cursor-another-tenants",
        "get",
        400,
        "INVALID_CURSOR",
        ticket_id=OWN,
        query={"cursor": FOREIGN_COMMENT_CURSOR},
    ),
    case("get-cursor-a-list-cursor", "get", 400, "INVALID_CURSOR", ticket_id=OWN, query={"cursor": LIST_CURSOR}),
    case(
        "get-cursor-of-another-ticket", "get", 400, "INVALID_CURSOR", ticket_id=OWN_B, query={"cursor": COMMENT_CURSOR}
    ),
]
CASES += [
    case(f"{route}-cursor-{name}", route, 400, "INVALID_CURSOR", query={"cursor": c}, **ticket_route_defaults(route))
    for route in ("history", "audit")
    for name, c in {**CURSORS, "a-list-cursor": LIST_CURSOR}.items()
    if (route, name) != ("history", "a-comment-cursor")
]
CASES += [  # a comment cursor has the history cursor's shape ({pk, sk}): its fingerprint and key still differ
    case(
        "history-cursor-a-comment-cursor",
        "history",
        400,
        "INVALID_CURSOR",
        ticket_id=OWN,
        query={"cursor": COMMENT_CURSOR},
    )
]

# ---------------------------------------------------------------- query and headers
BAD_QUERIES = {
    "list": [
        {"limit": "0"},
        {"limit": "-1"},
        {"limit": "1e3"},
        {"limit": "99999999999999999999"},
        {"status": "DELETED"},
        {"resolver": "a|b"},
        {"resolver": "*"},
        {"resolver": "%"},
        {"resolver": "../x"},
        {"resolver": "\ud800"},
    ],
    "get": [{"limit": "0"}, {"limit": "abc"}],
    "history": [{"limit": "0"}, {"limit": "101"}],
    "audit": [
        {"limit": "0"},
        {"from": "x"},
        {"from": "2026-11-21", "to": "2026-11-20"},
        {"from": "2026-11-20T10:00:00+01:00", "to": "2026-11-20T12:00:00+01:00"},
        {"from": "2026-01-01", "to": "2026-12-31"},
        {"to": "\ud800"},
        {"from": "2026-11-20T10:00:00"},
        {"from": "9" * 41},
    ],
}
CASES += [
    case(f"{route}-query-{n}", route, 400, "VALIDATION_ERROR", query=query, **ticket_route_defaults(route))
    for route, queries in BAD_QUERIES.items()
    for n, query in enumerate(queries)
]
# Numbers are ASCII digits: what int() or a Unicode \d would still read as a number is a 400.
PAGED_ROUTES = [name for name in ALL_ROUTES if "limit" in ROUTES[name].needs.query]
CASES += [
    case(
        f"{route}-limit-{text.encode('unicode_escape').decode()}",
        route,
        400,
        "VALIDATION_ERROR",
        query={"limit": text},
        **ticket_route_defaults(route),
    )
    for route in PAGED_ROUTES
    for text in (*NOT_ASCII_NUMBERS, *INT_ODDITIES)
]
# The ticket is at version 1: each of these reads as 1 to int() or a Unicode \d and \s.
CASES += [
    case(
        f"update-if-match-{text.encode('unicode_escape').decode()}",
        "update",
        400,
        "VALIDATION_ERROR",
        body={"title": "t"},
        ticket_id=OWN,
        headers={"If-Match": text},
    )
    for text in ("\u0661", "\uff11", '"\u0661"', 'W/"\U0001d7cf"', "+1", "0_1", "\u20031", "1\u00a0")
]
CASES += [
    case(
        "update-if-match-not-a-number",
        "update",
        400,
        "VALIDATION_ERROR",
        body={"title": "t"},
        ticket_id=OWN,
        headers={"If-Match": "abc"},
    ),
    case(
        "update-if-match-star",
        "update",
        400,
        "VALIDATION_ERROR",
        body={"title": "t"},
        ticket_id=OWN,
        headers={"If-Match": "*"},
    ),
    case(
        "update-if-match-stale",
        "update",
        412,
        "VERSION_MISMATCH",
        body={"title": "t"},
        ticket_id=OWN,
        headers={"If-Match": "0"},
    ),
    case(
        "create-idempotency-key-non-ascii",
        "create",
        400,
        "VALIDATION_ERROR",
        body={"title": "t"},
        headers={"Idempotency-Key": "cl\u00e9"},
    ),
    case(
        "create-content-type-upper-case",
        "create",
        201,
        raw='{"title": "t"}',
        headers={"Content-Type": "APPLICATION/JSON"},
        echo={"title": "t"},
    ),
]


# ---------------------------------------------------------------- the largest answers
def largest_fitting(make: Callable[[int], Any], limit: int = KIB64 - 256) -> Any:
    """``make(n)`` for the largest ``n`` whose body, as :func:`call` sends it, fits ``limit`` bytes."""
    low, high = 1, limit
    while low < high:
        middle = (low + high + 1) // 2
        if len(json.dumps(make(middle), ensure_ascii=False).encode()) <= limit:
            low = middle
        else:
            high = middle - 1
    return make(low)


def with_lists_of(body: Any, item: Any, n: int) -> Any:
    """``body`` with every list in it holding ``n`` times ``item``."""
    if isinstance(body, list):
        return [item] * n
    if isinstance(body, dict):
        return {key: with_lists_of(value, item, n) for key, value in body.items()}
    return body


def worst_bodies(route: str) -> dict[str, Any]:
    """Bodies of at most 64 KiB that make the most and the longest problems for ``route``."""
    valid = VALID_BODY[route]
    bodies = {
        "unknown-fields": largest_fitting(lambda n: {**valid, **{f"x{k}": 0 for k in range(n)}}),
        "unknown-emoji-fields": largest_fitting(lambda n: {**valid, **{f"{EMOJI * 5}{k}": 0 for k in range(n)}}),
        "one-long-unknown-field": largest_fitting(lambda n: {**valid, EMOJI * n: 0}),
        "long-wrong-values": largest_fitting(lambda n: dict.fromkeys(valid, "\x00" * n)),
    }
    if with_lists_of(valid, 0, 1) != valid:
        bodies["lists-of-wrong-items"] = largest_fitting(lambda n: with_lists_of(valid, 0, n))
        bodies["lists-of-long-wrong-items"] = largest_fitting(lambda n: with_lists_of(valid, EMOJI * n, 2))
    return bodies


WORST_QUERIES = {
    "unknown-parameters": {f"q{k}": "" for k in range(4000)},
    "one-long-unknown-parameter": {EMOJI * 2000: "1"},
    "long-wrong-values": {"limit": "\u0000" * 8000, "status": "x" * 8000, "resolver": "\u00e9" * 8000},
}
CASES += [
    case(f"{route}-largest-answer-{name}", route, 400, "VALIDATION_ERROR", body=body, **ticket_route_defaults(route))
    for route in VALID_BODY
    for name, body in worst_bodies(route).items()
]
CASES += [
    case(
        f"{route}-largest-answer-query-{name}",
        route,
        400,
        "VALIDATION_ERROR",
        query=query,
        body=VALID_BODY.get(route),
        **ticket_route_defaults(route),
    )
    for route in ALL_ROUTES
    for name, query in WORST_QUERIES.items()
]


# ---------------------------------------------------------------- identity
CASES += [
    case(
        f"{route}-tenant-claim-{name}",
        route,
        403,
        "FORBIDDEN",
        body=VALID_BODY.get(route),
        claims={"custom:tenant_id": tenant},
        **ticket_route_defaults(route),
    )
    for route in ALL_ROUTES
    for name, tenant in {"empty": "", "wildcard": "*", "pipe-wildcard": "<t>|*"}.items()
]
CASES += [
    case(
        f"{route}-groups-{groups or 'none'}",
        route,
        403,
        "FORBIDDEN",
        claims={"cognito:groups": groups},
        ticket_id=path_id(route),
        body=VALID_BODY.get(route),  # a valid request but for the group
    )
    for route in ADMIN_ROUTES
    for groups in ["", "Admin", "admins", "admin-x"]
]


# ---------------------------------------------------------------- the test
def call(world: World, spec: Case) -> tuple[ApiResponse, int]:
    user = User(world.me.tenant_id, "alice-admin" if spec.admin else "alice", admin=spec.admin)
    claims = {**user.claims(), **{k: v.replace("<t>", user.tenant_id) for k, v in spec.claims.items()}}
    raw = spec.raw
    if raw is None and spec.body is not None:
        # As a client sends it: UTF-8 text; only what UTF-8 can't carry (a lone surrogate) escaped.
        raw = json.dumps(world.fill(spec.body), ensure_ascii=False)
        try:
            raw.encode()
        except UnicodeEncodeError:
            raw = json.dumps(world.fill(spec.body))
    # Every request reaches a function with its bearer token (the gateway refuses it otherwise).
    headers = {"Authorization": f"Bearer {token_for_claims(claims)}", **(spec.headers or {})}
    response = Api().call(
        spec.route,
        None,
        ticket_id=world.fill(spec.ticket_id),
        query=world.fill(spec.query),
        headers=headers,
        raw_body=raw,
        claims=claims,
    )
    return response, request_bytes(spec.route, world.fill(spec.ticket_id), world.fill(spec.query), headers, raw)


def request_bytes(
    route: str, ticket_id: str | None, query: dict[str, str] | None, headers: dict[str, str], raw: str | None
) -> int:
    """The size of the HTTP request: request line, headers and body."""
    target = ROUTES[route].url(ticket_id or "") + (
        "?" + "&".join(f"{name}={value}" for name, value in query.items()) if query else ""
    )
    head = f"{ROUTES[route].method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return sum(len(part.encode("utf-8", "surrogatepass")) for part in (head, "\r\n", raw or ""))


def hostile_input_gets_its_documented_answer_and_changes_nothing(seeded: World, spec: Case) -> None:
    before = seeded.dump()
    response, sent = call(seeded, spec)
    assert response.status < 500, response.body
    if not response.ok:
        # An error body is never larger than the request that caused it, nor than 64 KiB.
        answered = len(json.dumps(response.body).encode())
        assert answered <= min(sent, KIB64), (answered, sent, json.dumps(response.body)[:500])
    # Nothing in any answer names the other tenant, or its tickets unless the request did
    text = json.dumps(response.body)
    assert seeded.foreign.tenant_id + "|" not in text
    if FOREIGN not in json.dumps([spec.body, spec.ticket_id]):
        assert seeded.values[FOREIGN] not in text
    if spec.code is not None:
        assert_error(response, spec.status, spec.code)
        assert seeded.dump() == before
        return
    assert response.status == spec.status, response.body
    for name, value in (spec.echo or {}).items():
        assert response.body[name] == value
    if spec.route in {"create", "update"}:
        stored = Api().summary(seeded.me, response.body["ticket_id"]).body
        assert {name: stored[name] for name in spec.echo or {}} == spec.echo


def _route_cases(route: str) -> type:
    """The cases of one route, as a class: `make test` runs pytest-xdist with
    --dist loadscope, which keeps a module's tests on one worker but spreads
    its classes, so this table's cases are spread route by route."""

    @pytest.mark.parametrize("spec", [param for param in CASES if param.values[0].route == route])
    def test_hostile_input_gets_its_documented_answer_and_changes_nothing(
        self: object, seeded: World, spec: Case
    ) -> None:
        hostile_input_gets_its_documented_answer_and_changes_nothing(seeded, spec)

    test = test_hostile_input_gets_its_documented_answer_and_changes_nothing
    return type("TestRoute" + route.title().replace("_", ""), (), {test.__name__: test})


for _route in ALL_ROUTES:
    _cases = _route_cases(_route)
    globals()[_cases.__name__] = _cases


def test_the_table_covers_every_route() -> None:
    routes = {param.values[0].route for param in CASES}
    assert routes == set(ALL_ROUTES)


def test_a_forged_cursor_with_the_right_fingerprint_but_a_foreign_key_is_invalid(seeded: World) -> None:
    # The fingerprint is not a secret; the start key is checked against the query.
    me, foreign = seeded.me, seeded.foreign
    fingerprint = query_fingerprint(me.tenant_id, "list", "OPEN", "")
    foreign_key = {
        "pk": keys.ticket_pk(foreign.tenant_id, seeded.values[FOREIGN]),
        "sk": "SUMMARY",
        "tenant_status": keys.tenant_status(foreign.tenant_id, "OPEN"),
        "resolver": keys.UNASSIGNED_RESOLVER,
    }
    before = seeded.dump()
    for key in (foreign_key, {**foreign_key, "tenant_status": keys.tenant_status(me.tenant_id, "OPEN")}):
        response = Api().list_tickets(me, cursor=encode_cursor(fingerprint, key))
        assert_error(response, 400, "INVALID_CURSOR")
    assert seeded.dump() == before
