"""The router at the edge (router/edge_router.js), run under Node as CloudFront
Functions runs it (tests/unit/edge_router_harness.cjs: a stand-in ``cloudfront``
module with an in-memory KeyValueStore, a fresh context per case holding nothing
the runtime lacks), over a table of requests: each either reaches the cell its
token's tenant is placed in, or goes on untouched to the default cell (the
distribution's own origin), whose authorizer answers as any cell does. The router
never answers a request itself and never changes anything but the origin.

One Node process runs every case (well under a second)."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from stack_model.template import PROJECT_ROOT, template
from support_tickets.core.identity import BEARER_HEADER, TENANT_CLAIM
from support_tickets.core.keys import TENANT_ID_PATTERN

ROUTER = PROJECT_ROOT / "router" / "edge_router.js"
HARNESS = Path(__file__).with_name("edge_router_harness.cjs")
# CloudFront Functions' quota on a function's code, comments included.
MAX_FUNCTION_BYTES = 10 * 1024
# A cell's API Gateway refuses a request whose headers exceed this (the router's MAX_AUTHORIZATION).
MAX_AUTHORIZATION = 10240

CELL_A = {"domain": "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com", "path": "/v1"}
CELL_B = {"domain": "f6g7h8i9j0.execute-api.us-east-2.amazonaws.com", "path": "/prod"}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(claims: Any, *, signature: str = "c2lnbmF0dXJl") -> str:
    """An ID token's shape with ``claims`` as its payload; the signature is whatever
    it is told (the router verifies nothing)."""
    header = b64url(json.dumps({"alg": "RS256", "kid": "key-1"}).encode())
    return f"{header}.{b64url(json.dumps(claims, ensure_ascii=False).encode())}.{signature}"


def bearer(tenant: Any, **extra: Any) -> dict[str, Any]:
    claims = {"sub": "0f6c", "token_use": "id", TENANT_CLAIM: tenant, **extra}
    return {"authorization": {"value": f"Bearer {token(claims)}"}}


def raw(value: str) -> dict[str, Any]:
    return {"authorization": {"value": value}}


def placed(tenant: str, cell: str, epoch: int = 1) -> dict[str, str]:
    return {f"tenant/{tenant}": json.dumps({"cell": cell, "epoch": epoch})}


def cell(cell_id: str, origin: dict[str, str]) -> dict[str, str]:
    return {f"cell/{cell_id}": json.dumps(origin)}


# Tenants 1 and 10 in different cells (a prefix of one id is another id), acme beside them.
STORE = {
    **placed("1", "cell-a"),
    **placed("10", "cell-b", epoch=7),
    **placed("acme", "cell-a", epoch=3),
    **cell("cell-a", CELL_A),
    **cell("cell-b", CELL_B),
}


def to(origin: dict[str, str]) -> list[dict[str, str]]:
    return [{"domainName": origin["domain"], "originPath": origin["path"]}]


DEFAULT: list[dict[str, str]] = []  # no origin update: the distribution's own origin, the default cell


@dataclass(frozen=True)
class Case:
    name: str
    headers: dict[str, Any]
    origin: list[dict[str, str]]
    reads: list[str]
    store: dict[str, str] = field(default_factory=lambda: STORE)


def routed(tenant: str, cell_id: str) -> list[str]:
    return [f"tenant/{tenant}", f"cell/{cell_id}"]


def acme_placed_as(value: str) -> dict[str, str]:
    """acme's store value written as ``value``, cell-a beside it."""
    return {"tenant/acme": value, **cell("cell-a", CELL_A)}


def acme_in_cell_a(origin: dict[str, str] | str) -> dict[str, str]:
    """acme placed in cell-a, whose store value is ``origin`` (as JSON, or a string as it is)."""
    return {**placed("acme", "cell-a"), "cell/cell-a": origin if isinstance(origin, str) else json.dumps(origin)}


ACME_ROUTE = ["tenant/acme", "cell/cell-a"]
CELL_ID_ESCAPING = json.dumps({"cell": "../cell-a", "epoch": 1})
NO_PATH = {"domain": CELL_A["domain"]}
PATH_ESCAPING = {**CELL_A, "path": "/v1/../admin"}
ELSEWHERE = {**CELL_A, "domain": "tokens.example.com"}
SUFFIXED = {**CELL_A, "domain": CELL_A["domain"] + ".example.com"}
WITH_PORT = {**CELL_A, "domain": CELL_A["domain"] + ":8443"}


def big_token_header(length: int) -> dict[str, Any]:
    """A well-formed token for acme whose header is exactly ``length`` characters long."""
    base = len(raw(f"Bearer {token({TENANT_CLAIM: 'acme', 'pad': ''})}")["authorization"]["value"])
    # Every 3 bytes of padding claim add 4 base64url characters.
    pad, rest = divmod(length - base, 4)
    assert rest == 0, "pick a length the payload's base64 can reach"
    value = f"Bearer {token({TENANT_CLAIM: 'acme', 'pad': 'x' * (3 * pad)})}"
    assert len(value) == length
    return raw(value)


CASES = [
    # ---- routed: the tenant's own cell, whatever the other ids
    Case("tenant 1 to its cell", bearer("1"), to(CELL_A), routed("1", "cell-a")),
    Case("tenant 10 to its own cell, not tenant 1's", bearer("10"), to(CELL_B), routed("10", "cell-b")),
    Case("acme beside them", bearer("acme"), to(CELL_A), routed("acme", "cell-a")),
    Case(
        "groups and a non-ASCII name (UTF-8) in the token",
        bearer("10", **{"cognito:groups": ["admin"], "name": "Zoë Ñ"}),
        to(CELL_B),
        routed("10", "cell-b"),
    ),
    # The router does not verify: a forged token reaches the tenant's cell, which refuses it (401).
    Case(
        "forged signature",
        raw(f"Bearer {token({TENANT_CLAIM: '10'}, signature='Zm9yZ2Vk')}"),
        to(CELL_B),
        routed("10", "cell-b"),
    ),
    Case(
        "one header, also listed as multiValue",
        {
            "authorization": {
                "value": f"Bearer {token({TENANT_CLAIM: '1'})}",
                "multiValue": [{"value": f"Bearer {token({TENANT_CLAIM: '1'})}"}],
            }
        },
        to(CELL_A),
        routed("1", "cell-a"),
    ),
    # ---- unknown tenants: the default cell answers (401 if forged, 503 TENANT_MOVING if not there)
    Case("tenant 100 is placed nowhere (prefix of none matters)", bearer("100"), DEFAULT, ["tenant/100"]),
    Case("tenant 0, placed nowhere", bearer("0"), DEFAULT, ["tenant/0"]),
    Case("an empty store", bearer("acme"), DEFAULT, ["tenant/acme"], store={}),
    # ---- no token, or not a token any cell accepts: the default cell answers, nothing is read
    Case("no Authorization header", {}, DEFAULT, []),
    Case("empty header", raw(""), DEFAULT, []),
    Case(
        "two Authorization headers",
        {
            "authorization": {
                "value": f"Bearer {token({TENANT_CLAIM: '1'})}",
                "multiValue": [
                    {"value": f"Bearer {token({TENANT_CLAIM: '1'})}"},
                    {"value": f"Bearer {token({TENANT_CLAIM: '10'})}"},
                ],
            }
        },
        DEFAULT,
        [],
    ),
    Case("bare token", raw(token({TENANT_CLAIM: "acme"})), DEFAULT, []),
    Case("lowercase bearer", raw(f"bearer {token({TENANT_CLAIM: 'acme'})}"), DEFAULT, []),
    Case("two spaces", raw(f"Bearer  {token({TENANT_CLAIM: 'acme'})}"), DEFAULT, []),
    Case("trailing space", raw(f"Bearer {token({TENANT_CLAIM: 'acme'})} "), DEFAULT, []),
    Case("Basic credentials", raw("Basic YWxpY2U6c2VjcmV0"), DEFAULT, []),
    Case("one segment", raw("Bearer abc"), DEFAULT, []),
    Case("two segments", raw(f"Bearer a.{b64url(json.dumps({TENANT_CLAIM: 'acme'}).encode())}"), DEFAULT, []),
    Case("four segments", raw(f"Bearer {token({TENANT_CLAIM: 'acme'})}.x"), DEFAULT, []),
    Case("base64 padding", raw(f"Bearer a.{base64.urlsafe_b64encode(b'{}').decode()}.c"), DEFAULT, []),
    Case("standard base64 alphabet", raw("Bearer a.eyJ+Ijoi/w.c"), DEFAULT, []),
    Case("payload not JSON", raw(f"Bearer a.{b64url(b'not json')}.c"), DEFAULT, []),
    Case("payload not UTF-8 JSON", raw(f"Bearer a.{b64url(bytes([0xFF, 0xFE, 0x7B]))}.c"), DEFAULT, []),
    Case("payload a JSON array", raw(f"Bearer a.{b64url(b'[1]')}.c"), DEFAULT, []),
    Case("payload JSON null", raw(f"Bearer a.{b64url(b'null')}.c"), DEFAULT, []),
    Case("payload a JSON string", raw(f"Bearer a.{b64url(json.dumps('acme').encode())}.c"), DEFAULT, []),
    Case("no tenant claim", raw(f"Bearer {token({'sub': 'x'})}"), DEFAULT, []),
    Case("tenant claim spelt otherwise", raw(f"Bearer {token({'tenant_id': 'acme'})}"), DEFAULT, []),
    # ---- a claim with odd characters never reaches a store key
    Case("claim a number", bearer(10), DEFAULT, []),
    Case("claim a list", bearer(["10"]), DEFAULT, []),
    Case("claim an object", bearer({"cell": "cell-a"}), DEFAULT, []),
    Case("claim null", bearer(None), DEFAULT, []),
    Case("claim empty", bearer(""), DEFAULT, []),
    Case("claim uppercase", bearer("ACME"), DEFAULT, []),
    Case("claim with a slash (another key)", bearer("acme/../cell/cell-a"), DEFAULT, []),
    Case("claim naming a cell key", bearer("../cell/cell-a"), DEFAULT, []),
    Case("claim with a pipe", bearer("1|0"), DEFAULT, []),
    Case("claim with a wildcard", bearer("1*"), DEFAULT, []),
    Case("claim with a space", bearer("acme "), DEFAULT, []),
    Case("claim with a newline", bearer("acme\n"), DEFAULT, []),
    Case("claim with a NUL", bearer("acme\u0000"), DEFAULT, []),
    Case("claim non-ASCII", bearer("acmé"), DEFAULT, []),
    Case("claim of 64 characters", bearer("a" * 64), DEFAULT, []),
    Case("claim __proto__", bearer("__proto__"), DEFAULT, []),
    Case("claim of 63 characters, placed nowhere", bearer("a" * 63), DEFAULT, [f"tenant/{'a' * 63}"]),
    # ---- a store the router cannot use: the default cell, never a guess
    Case("tenant value not JSON", bearer("acme"), DEFAULT, ["tenant/acme"], store=acme_placed_as("cell-a")),
    Case("tenant value without a cell", bearer("acme"), DEFAULT, ["tenant/acme"], store=acme_placed_as('{"epoch": 3}')),
    Case("tenant value JSON null", bearer("acme"), DEFAULT, ["tenant/acme"], store=acme_placed_as("null")),
    Case("cell id with a slash", bearer("acme"), DEFAULT, ["tenant/acme"], store=acme_placed_as(CELL_ID_ESCAPING)),
    Case("cell not in the store", bearer("acme"), DEFAULT, ACME_ROUTE, store=placed("acme", "cell-a")),
    Case("cell value not JSON", bearer("acme"), DEFAULT, ACME_ROUTE, store=acme_in_cell_a(CELL_A["domain"])),
    Case("cell value without a path", bearer("acme"), DEFAULT, ACME_ROUTE, store=acme_in_cell_a(NO_PATH)),
    Case("cell path escaping the stage", bearer("acme"), DEFAULT, ACME_ROUTE, store=acme_in_cell_a(PATH_ESCAPING)),
    Case("cell on another kind of host", bearer("acme"), DEFAULT, ACME_ROUTE, store=acme_in_cell_a(ELSEWHERE)),
    Case("cell host under another domain", bearer("acme"), DEFAULT, ACME_ROUTE, store=acme_in_cell_a(SUFFIXED)),
    Case("cell host with a port", bearer("acme"), DEFAULT, ACME_ROUTE, store=acme_in_cell_a(WITH_PORT)),
    # ---- big headers: up to what a cell accepts, decoded; beyond it, not even decoded
    Case(
        "header of exactly the cells' limit", big_token_header(MAX_AUTHORIZATION), to(CELL_A), routed("acme", "cell-a")
    ),
    Case(
        "header one character over",
        raw(big_token_header(MAX_AUTHORIZATION)["authorization"]["value"] + "A"),
        DEFAULT,
        [],
    ),
    Case("a 20 KB header", raw("Bearer " + "A" * 20_000), DEFAULT, []),
]


def run_router(cases: list[Case]) -> list[dict[str, Any]]:
    node = shutil.which("node")
    assert node is not None, "Node.js runs the edge router's tests (it also runs tests/oracle)"
    payload = {"source": str(ROUTER), "cases": [{"store": case.store, "headers": case.headers} for case in cases]}
    completed = subprocess.run(  # noqa: S603 - our own harness, our own input
        [node, str(HARNESS)], input=json.dumps(payload), capture_output=True, text=True, check=False, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    results: list[dict[str, Any]] = json.loads(completed.stdout)
    assert len(results) == len(cases)
    return results


@pytest.fixture(scope="module")
def outcomes() -> dict[str, dict[str, Any]]:
    names = [case.name for case in CASES]
    assert len(set(names)) == len(names)
    return dict(zip(names, run_router(CASES), strict=True))


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_request_reaches_its_tenants_cell_or_the_default_cell(
    case: Case, outcomes: dict[str, dict[str, Any]]
) -> None:
    outcome = outcomes[case.name]
    assert outcome["error"] is None
    assert outcome["origin_updates"] == case.origin
    assert outcome["reads"] == case.reads
    # Never an answer of its own, never a change to what the cell receives, one store handle.
    assert outcome["returned_request"] is True
    assert outcome["request_unchanged"] is True
    assert outcome["origin_selections"] == []
    assert outcome["kvs_arguments"] == [[]]


def test_a_store_change_moves_the_tenant_at_its_next_request() -> None:
    """What the operator's move writes (tenant 10 to cell-a, a new epoch) is what the next
    request reads: nothing is cached across requests in the function."""
    moved = {**STORE, **placed("10", "cell-a", epoch=8)}
    before, after = run_router([Case("before", bearer("10"), [], []), Case("after", bearer("10"), [], [], store=moved)])
    assert before["origin_updates"] == to(CELL_B)
    assert after["origin_updates"] == to(CELL_A)


# ---------------------------------------------------------------- the function as CloudFront takes it
def source() -> str:
    return ROUTER.read_text(encoding="utf-8")


def test_the_function_fits_cloudfront_functions_size_quota() -> None:
    assert len(source().encode("utf-8")) <= MAX_FUNCTION_BYTES


def test_the_function_is_a_runtime_2_module_importing_only_cloudfront() -> None:
    """The KeyValueStore and the origin helpers need cloudfront-js-2.0 and its one module."""
    lines = source().splitlines()
    assert lines[0] == "import cf from 'cloudfront';"
    assert [line for line in lines if re.match(r"\s*(import|export)\b", line)] == [lines[0]]
    assert "require(" not in source()
    assert re.search(r"^async function handler\(event\)", source(), re.MULTILINE)


def test_the_function_accepts_what_the_cells_accept() -> None:
    """The header form, the claim, the tenant id and the stage path are the cells' own,
    so no token a cell would accept is sent to the default cell instead of its own."""
    text = source()
    assert f"const BEARER = /^{BEARER_HEADER}$/;" in text
    assert f"const TENANT_CLAIM = '{TENANT_CLAIM}';" in text
    assert f"const ID = /{TENANT_ID_PATTERN}/;" in text
    stage = template()["Parameters"]["StageName"]["AllowedPattern"]
    assert stage.startswith("^")
    assert f"const STAGE_PATH = /^\\/{stage[1:]}/;" in text
    assert f"const MAX_AUTHORIZATION = {MAX_AUTHORIZATION};" in text
