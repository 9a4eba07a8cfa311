"""Every file in events/ through the function template.yaml maps it to, as
`sam build` packaged it (tests/functional/event_runner.py runs them in a clean
interpreter with only the build output importable), against moto.

A REST event needs a real token now: the function exchanges the
``Authorization`` header's token with the identity pool for its tenant's
credentials. As ``make dev`` does for ``.local/events/``, each event is run
with a fresh token of its user (``ops.sample_events.with_fresh_tokens``),
here signed by the tests' user-pool key, and moto serves the template's
identity pool for that key (``local_stack.cognito.identity_pool.in_process``,
registered in the runner's ``mock_aws``).

Naming convention: ``events/<function directory>[_<variant>].json`` belongs to
the function whose ``CodeUri`` is ``functions/<function directory>``.
"""

from __future__ import annotations

import filecmp
import json
import re
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from local_stack.cognito.user_pool import public_jwks
from ops import sample_events
from ops.routes import api_routes
from stack_model.events import SAMPLE_CLIENT_ID
from stack_model.functions import FunctionSpec, function_specs
from stack_model.template import PROJECT_ROOT, table_definition
from support_tickets.core import keys
from support_tickets.core.models import TicketItem
from support_tickets.data.table import to_item
from support_tickets.data.tenant_registry import TenantConfig
from tests.conftest import (
    IDENTITY_POOL_ID,
    SIGNING_KEY,
    USER_POOL_ID,
    USER_POOL_PROVIDER,
    tenant_claims,
    token_for_claims,
)

EVENTS_DIR = PROJECT_ROOT / "events"
BUILD_DIR = PROJECT_ROOT / ".aws-sam" / "build"
LAYER_DIR = BUILD_DIR / "SharedLayer" / "python"
RUNTIME_DIR = PROJECT_ROOT / ".aws-sam" / "lambda-runtime" / "python"
LAYER_SOURCE = PROJECT_ROOT / "layers" / "shared" / "support_tickets"
RUNNER = Path(__file__).with_name("event_runner.py")
EVENT_FILES = sorted(path.name for path in EVENTS_DIR.glob("*.json"))
SAMPLE_API_KEY = "sampletenantapikey0123456789"

Check = Callable[[dict[str, Any]], bool]


def body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"]) if response.get("body") else None


# What each event does against a table holding the tickets the events name:
# at least its route's success status (ops/routes.py), and more where written here.
EXPECTED: dict[str, tuple[int | None, Check]] = {
    **{f"{sample_events.route_stem(route)}.json": (route.needs.success, lambda r: True) for route in api_routes()},
    "create_ticket.json": (201, lambda r: body(r)["title"] == "Printer on fire"),
    "create_ticket_idempotent.json": (201, lambda r: body(r)["resolver"] == "johnd"),
    "list_tickets.json": (200, lambda r: len(body(r)["items"]) == 3),
    "list_tickets_by_resolver.json": (200, lambda r: {i["resolver"] for i in body(r)["items"]} == {"johnd"}),
    "get_ticket.json": (200, lambda r: body(r)["ticket"]["ticket_id"] == sample_events.TICKET_ID),
    "get_ticket_summary.json": (200, lambda r: body(r)["ticket_id"] == sample_events.TICKET_ID),
    "update_ticket.json": (200, lambda r: (body(r)["status"], body(r)["version"]) == ("IN_PROGRESS", 2)),
    "update_ticket_unassign.json": (200, lambda r: body(r)["resolver"] is None),
    "add_comment.json": (201, lambda r: body(r)["author"] == "alice"),
    "batch_update_status.json": (200, lambda r: len(body(r)["updated"]) == 3),
    "delete_ticket_admin.json": (204, lambda r: body(r) is None),
    "delete_ticket_non_admin.json": (403, lambda r: body(r)["error"]["code"] == "FORBIDDEN"),
    "get_aggregates_admin.json": (200, lambda r: set(body(r)["counts"]) == {"OPEN", "IN_PROGRESS", "CLOSED"}),
    "get_ticket_history.json": (200, lambda r: body(r) == {"events": [], "next_cursor": None}),
    "get_audit_trail_admin.json": (200, lambda r: body(r) == {"events": [], "next_cursor": None}),
    # The authorizer: the caller's tenant's API key and an Allow for the whole stage.
    "authorizer.json": (
        None,
        lambda r: (
            r["usageIdentifierKey"] == SAMPLE_API_KEY
            and r["context"]["tenant_id"] == sample_events.TENANT
            and r["policyDocument"]["Statement"][0]["Effect"] == "Allow"
        ),
    ),
    # The stream functions answer a partial-batch response, not an HTTP one.
    "aggregate_counts_stream.json": (None, lambda r: r == {"batchItemFailures": []}),
    "audit_trail_stream.json": (None, lambda r: r == {"batchItemFailures": []}),
    # The metering function: both usage lines counted, in one group (one tenant, one day).
    # The delivery function: the sample's webhook is not in the runner's table, so the message is dropped.
    "deliver_webhook_sqs.json": (None, lambda r: r == {"batchItemFailures": []}),
    "metering_logs.json": (None, lambda r: (r["lines"], r["applied"], r["malformed"]) == (2, 1, 0)),
}


def function_for(event_file: str, specs: dict[str, FunctionSpec]) -> FunctionSpec | None:
    """The function an event file belongs to: the longest function directory name
    that is the file's stem or a prefix of it followed by "_"."""
    stem = event_file.removesuffix(".json")
    matches = [
        spec for spec in specs.values() if stem == spec.code_uri.name or stem.startswith(spec.code_uri.name + "_")
    ]
    return max(matches, key=lambda spec: len(spec.code_uri.name), default=None)


def seed_items(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The tickets the sample events name, OPEN and assigned to johnd, in the caller's tenant."""
    if event.get("type") == "TOKEN":  # the authorizer reads the tenant record for its API key
        record = TenantConfig(tenant_id=sample_events.TENANT, api_key_id="k1", api_key=SAMPLE_API_KEY, version=1)
        return [to_item(record.item())]
    context = (event.get("requestContext") or {}).get("authorizer") or {}
    if not context:
        return []
    tenant = context["tenant_id"]
    # The webhook the {webhook_id} routes' events name (its secret: a ciphertext stand-in), and the count.
    webhook = {
        "pk": keys.webhooks_pk(tenant),
        "sk": keys.WEBHOOK_SK_PREFIX + sample_events.WEBHOOK_ID,
        "webhook_id": sample_events.WEBHOOK_ID,
        "url": "https://hooks.example.com/in",
        "events": ["ticket.created"],
        "description": "",
        "status": "ACTIVE",
        "created_at": "2026-11-21T10:00:00.000Z",
        "secret": "Y2lwaGVydGV4dA==",
    }
    count = {"pk": keys.webhooks_pk(tenant), "sk": keys.WEBHOOK_COUNT_SK, "count": 1}
    # The delivery the redeliver route's event names.
    delivery = sample_events.delivery_item(tenant, sample_events.WEBHOOK_ID)
    return [to_item(webhook), to_item(count), delivery] + [
        to_item(
            TicketItem(
                pk=keys.ticket_pk(tenant, ticket_id),
                sk=keys.SUMMARY_SK,
                tenant_status=keys.tenant_status(tenant, keys.TicketStatus.OPEN),
                resolver="johnd",
                ticket_id=ticket_id,
                title="Printer on fire",
                description="Third floor",
                created_by="alice",
                created_at="2026-11-21T10:00:00.000Z",
                updated_at="2026-11-21T10:00:00.000Z",
                version=1,
            ).stored()
        )
        for ticket_id in (sample_events.TICKET_ID, *sample_events.OTHER_TICKET_IDS)
    ]


def stale_build_files(specs: dict[str, FunctionSpec]) -> list[str]:
    """Source files whose copy in .aws-sam/build is missing or different."""
    pairs = [(LAYER_SOURCE, LAYER_DIR / "support_tickets")]
    pairs += [(spec.code_uri, BUILD_DIR / spec.logical_id) for spec in specs.values()]
    stale = []
    for source_dir, built_dir in pairs:
        for source in sorted(source_dir.glob("*.py")):
            built = built_dir / source.name
            if not built.is_file() or not filecmp.cmp(source, built, shallow=False):
                stale.append(str(source.relative_to(PROJECT_ROOT)))
    return stale


@pytest.fixture(scope="module")
def specs() -> dict[str, FunctionSpec]:
    return function_specs()


@pytest.fixture(scope="module")
def report(specs: dict[str, FunctionSpec], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run every event once against the build, in one clean subprocess."""
    built = [LAYER_DIR, RUNTIME_DIR, *(BUILD_DIR / logical_id for logical_id in specs)]
    if not all(path.is_dir() for path in built):
        pytest.fail("no `sam build` output in .aws-sam/build: run `make build` (make test does it first)")
    stale = stale_build_files(specs)
    if stale:
        pytest.fail(f".aws-sam/build is older than the source ({', '.join(stale)}): run `make build`")
    workdir = tmp_path_factory.mktemp("events")
    cases = []
    authorized = sample_events.with_fresh_tokens(
        lambda username, admin: token_for_claims(tenant_claims(sample_events.TENANT, username, admin=admin)),
        # The runner exchanges each token in its own mock, as the authorizer would.
        lambda token: sample_events.PLACEHOLDER_CREDENTIALS,
    )
    for event_file in EVENT_FILES:
        spec = function_for(event_file, specs)
        assert spec is not None, event_file
        event = authorized[event_file.removesuffix(".json")]
        environment = {
            **spec.environment,
            "IDENTITY_POOL_ID": IDENTITY_POOL_ID,
            "USER_POOL_PROVIDER_NAME": USER_POOL_PROVIDER,
            # The tests' app client (the template's UserPoolClient, deployed).
            "ALLOWED_CLIENT_IDS": SAMPLE_CLIENT_ID,
            "AWS_ENDPOINT_OVERRIDE": "",
            "AWS_LAMBDA_FUNCTION_NAME": spec.logical_id,
            "POWERTOOLS_TRACE_DISABLED": "1",
        }
        cases.append(
            {
                "name": event_file,
                "function": spec.logical_id,
                "function_dir": str(BUILD_DIR / spec.logical_id),
                "handler": spec.handler,
                "environment": environment,
                "event": event,
                "seed": seed_items(event),
            }
        )
    site_packages = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    output = workdir / "report.json"
    job = {
        "build_root": str(BUILD_DIR),
        "layer_dir": str(LAYER_DIR),
        "runtime_dir": str(RUNTIME_DIR),
        "site_packages": site_packages,
        "table": table_definition(),
        "project_root": str(PROJECT_ROOT),
        "identity_pool": {
            "identity_pool_id": IDENTITY_POOL_ID,
            "user_pool_id": USER_POOL_ID,
            "client_id": SAMPLE_CLIENT_ID,
            "jwks": public_jwks(SIGNING_KEY),
        },
        "output": str(output),
        "cases": cases,
    }
    completed = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-I", "-S", str(RUNNER)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        cwd=workdir,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        timeout=240,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    result: dict[str, Any] = json.loads(output.read_text(encoding="utf-8"))
    return result


def test_every_function_has_an_event_and_every_event_a_function(specs: dict[str, FunctionSpec]) -> None:
    unmapped = [name for name in EVENT_FILES if function_for(name, specs) is None]
    assert unmapped == [], "events that belong to no function of template.yaml"
    covered = {spec.logical_id for name in EVENT_FILES if (spec := function_for(name, specs))}
    assert covered == set(specs), "functions without a sample event"
    assert set(EVENT_FILES) == set(EXPECTED), "every event file needs an expectation here"


def test_events_are_what_the_generator_writes() -> None:
    generated = {f"{stem}.json": sample_events.render(event) for stem, event in sample_events.sample_events().items()}
    on_disk = {name: (EVENTS_DIR / name).read_text(encoding="utf-8") for name in EVENT_FILES}
    assert on_disk == generated, "events/ is stale: run `python -m ops.sample_events`"


def documented_events() -> dict[str, set[str]]:
    """docs/local-stack.md's "Sample events" table: function → the event files its row names."""
    page = (PROJECT_ROOT / "docs" / "local-stack.md").read_text(encoding="utf-8")
    section = page.split("\n## Sample events\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) == 4 and (function := re.fullmatch(r"\s*`(\w+Function)`\s*", cells[1])):
            rows.setdefault(function[1], set()).update(re.findall(r"`([\w.]+\.json)`", cells[2]))
    return rows


def test_the_sample_events_table_names_every_file_make_events_writes_under_its_function(
    specs: dict[str, FunctionSpec],
) -> None:
    """The table a developer picks a `sam local invoke -e` file from: every file the
    generator writes (``make events`` writes the same names), under the function it belongs to."""
    written: dict[str, set[str]] = {}
    for stem in sample_events.sample_events():
        spec = function_for(f"{stem}.json", specs)
        assert spec is not None, stem
        written.setdefault(spec.logical_id, set()).add(f"{stem}.json")
    assert documented_events() == written, "docs/local-stack.md's sample events table is stale"


def test_rest_events_carry_the_authorizers_context_as_api_gateway_sends_it() -> None:
    for name in EVENT_FILES:
        event = json.loads((EVENTS_DIR / name).read_text(encoding="utf-8"))
        if "Records" in event or "awslogs" in event or event.get("type") == "TOKEN":
            continue
        context = event["requestContext"]["authorizer"]
        assert {"principalId", "integrationLatency", "tenant_id", "username", "groups", "sub", "jti"} <= set(context)
        assert all(isinstance(value, str) for key, value in context.items() if key != "integrationLatency"), name
        assert context["tenant_id"] == sample_events.TENANT
        is_admin_event = name.endswith("_admin.json") and not name.endswith("_non_admin.json")
        assert is_admin_event == (json.loads(context["groups"]) == ["admin"]), name
        assert event["resource"] == event["requestContext"]["resourcePath"]


def test_the_build_alone_imports_every_handler(report: dict[str, Any]) -> None:
    # support_tickets comes from the built layer, and importing the handlers
    # needed nothing but the stdlib and the build output.
    assert Path(report["support_tickets_file"]).is_relative_to(LAYER_DIR)
    assert report["import_errors"] == {}
    assert report["outside_build"] == []


@pytest.mark.parametrize("event_file", EVENT_FILES)
def test_event_runs_through_its_built_function(report: dict[str, Any], event_file: str) -> None:
    outcome = report["results"].get(event_file)
    assert outcome is not None, report["import_errors"].get(event_file)
    assert "error" not in outcome, outcome.get("error")
    response = outcome["response"]
    status, check = EXPECTED[event_file]
    if status is not None:
        assert response["statusCode"] == status, response
    assert check(response), response


def test_the_local_stream_events_name_the_running_stacks_stream() -> None:
    """A stack whose table is not named SupportTicket (TableName is a parameter): the
    sample stream events must name its stream, or its stream functions take them for poison."""
    from ops.sample_events import TABLE_STREAM_ARN, from_stream, sample_events
    from support_tickets.streams.routing import source_table

    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/Tickets-dev/stream/2026-11-27T06:00:00.000"
    events = sample_events()
    moved = from_stream(events, arn)
    streams = [stem for stem, event in events.items() if event.get("Records") and "dynamodb" in event["Records"][0]]
    assert streams
    for stem in streams:
        assert {record["eventSourceARN"] for record in events[stem]["Records"]} == {TABLE_STREAM_ARN}
        assert {source_table(record["eventSourceARN"]) for record in moved[stem]["Records"]} == {"Tickets-dev"}
    for stem in set(events) - set(streams):
        assert moved[stem] == events[stem]
