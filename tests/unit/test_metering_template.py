"""The metering function in the SAM-translated template: every API function's
log group (one, shared) subscribes it to its usage lines, it may write usage items only, and
what it can't deliver is kept."""

from __future__ import annotations

import json
from typing import Any

from support_tickets.api.resolver import REQUEST_OUTCOME_MESSAGE
from support_tickets.core import keys
from support_tickets.usage import meter
from support_tickets.usage.metering import INVOCATION_MESSAGE, USAGE_MESSAGE
from tests.unit.test_template import (
    API_FUNCTIONS,
    ITEM_ACTIONS,
    all_role_statements,
    as_list,
    resources,
    role_grants,
    role_of,
    translated,
)

METERING = "MeteringFunction"
AUTHORIZER = "AuthorizerFunction"
# Functions whose "usage" lines attribute an invocation (or its share) to a tenant.
INVOCATION_FUNCTIONS = (AUTHORIZER, "AggregateCountsFunction", "AuditTrailFunction", "DeliverWebhookFunction")


def log_group_of(function: str) -> str:
    config = translated()["Resources"][function]["Properties"]["LoggingConfig"]
    ref: str = config["LogGroup"]["Ref"]
    return ref


def test_every_api_functions_log_group_sends_its_usage_lines_to_the_metering_function() -> None:
    filters = resources("AWS::Logs::SubscriptionFilter")
    by_group = {}
    for name, subscription in filters.items():
        props = subscription["Properties"]
        assert props["DestinationArn"] == {"Fn::GetAtt": [METERING, "Arn"]}, name
        by_group[props["LogGroupName"]["Ref"]] = props["FilterPattern"]
    # Every API function's "request handled" lines, and the authorizer's usage lines
    # (one per verified token), the stream functions' and the delivery function's
    # (one per tenant and invocation): their log groups, and only theirs, are subscribed.
    subscribed = {log_group_of(function) for function in (*API_FUNCTIONS, *INVOCATION_FUNCTIONS)}
    assert set(by_group) == subscribed
    assert log_group_of(METERING) not in subscribed  # its own lines would invoke it
    for group, pattern in by_group.items():
        terms = {term.strip() for term in pattern.strip("{} ").split("||")}
        assert terms == {'$.message = "request handled"', '$.message = "usage"'}, group
    # The lines the functions write are the lines the metering function reads.
    assert USAGE_MESSAGE == REQUEST_OUTCOME_MESSAGE == "request handled"
    assert INVOCATION_MESSAGE == meter.USAGE_MESSAGE == "usage"


def test_logs_may_invoke_it_from_the_subscribed_log_groups_only() -> None:
    permissions = [
        res["Properties"]
        for res in resources("AWS::Lambda::Permission").values()
        if res["Properties"]["FunctionName"] in ({"Ref": METERING}, {"Fn::GetAtt": [METERING, "Arn"]})
    ]
    subscribed = {log_group_of(function) for function in (*API_FUNCTIONS, *INVOCATION_FUNCTIONS)}
    assert len(permissions) == len(subscribed)
    groups: set[str] = set()
    for permission in permissions:
        assert permission["Action"] == "lambda:InvokeFunction"
        assert "logs." in json.dumps(permission["Principal"])
        source = json.dumps(permission["SourceArn"])
        assert ":logs:" in source, source
        assert "log-group:" in source, source
        groups.update(group for group in subscribed if f'"{group}"' in source)
    assert groups == subscribed


def test_the_metering_role_writes_usage_items_only_and_reads_nothing() -> None:
    role = role_of(METERING)
    granted = all_role_statements(role)
    table = [s for s in granted if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))]
    (items,) = [s for s in table if "dynamodb:ConditionCheckItem" not in as_list(s["Action"])]
    # and a condition check on tenant records only (is the tenant being offboarded?)
    (check,) = [s for s in table if "dynamodb:ConditionCheckItem" in as_list(s["Action"])]
    assert as_list(check["Action"]) == ["dynamodb:ConditionCheckItem"]
    assert check["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == ["TENANT#*|CONFIG"]
    assert check["Condition"]["Null"] == {"dynamodb:LeadingKeys": "false"}
    assert check["Resource"] == {"Fn::GetAtt": ["SupportTicketTable", "Arn"]}
    assert set(items["Action"]) == {"dynamodb:PutItem", "dynamodb:UpdateItem"}
    assert items["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == [
        "TENANT#*|USAGE",
        "TENANT#*|USAGE#JOURNAL",
    ]
    assert items["Condition"]["Null"] == {"dynamodb:LeadingKeys": "false"}
    assert items["Resource"] == {"Fn::GetAtt": ["SupportTicketTable", "Arn"]}
    everything = {action for s in role_grants(role_of_name(METERING)) for action in as_list(s["Action"])}
    assert not ({"dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem"} & everything)
    assert {a for a in everything if a.startswith("dynamodb:")} <= ITEM_ACTIONS
    (queue,) = [s for s in granted if "sqs:SendMessage" in as_list(s["Action"])]
    assert queue["Resource"] == {"Fn::GetAtt": ["MeteringFailureQueue", "Arn"]}


def role_of_name(function: str) -> str:
    name: str = translated()["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0]
    return name


def test_the_roles_patterns_cover_the_usage_keys_and_nothing_else() -> None:
    import fnmatch

    patterns = ["TENANT#*|USAGE", "TENANT#*|USAGE#JOURNAL"]

    def allowed(pk: str) -> bool:
        return any(fnmatch.fnmatchcase(pk, pattern) for pattern in patterns)

    for tenant in ("1", "10", "acme"):
        assert allowed(keys.usage_pk(tenant))
        assert allowed(keys.usage_journal_pk(tenant))
        others = [
            keys.ticket_pk(tenant, "USAGE"),
            keys.history_pk(tenant, "USAGE"),
            keys.aggregate_pk(tenant),
            *keys.aggregate_journal_partitions(tenant),
            keys.webhooks_pk(tenant),
            keys.tenant_config_key(tenant)["pk"]["S"],
            keys.tenant_status(tenant, keys.TicketStatus.OPEN),
            *keys.idempotency_partitions(tenant),
            keys.audit_days_pk(tenant),
        ]
        assert not any(allowed(pk) for pk in others)


def test_it_runs_outside_the_vpc_and_keeps_what_it_gives_up_on() -> None:
    props: dict[str, Any] = translated()["Resources"][METERING]["Properties"]
    assert "VpcConfig" not in props
    assert props["DeadLetterConfig"] == {"TargetArn": {"Fn::GetAtt": ["MeteringFailureQueue", "Arn"]}}
    assert props["LoggingConfig"]["LogGroup"] == {"Ref": "MeteringFunctionLogGroup"}
    assert translated()["Resources"]["MeteringFailureQueue"]["DeletionPolicy"] == "Retain"
    assert "MeteringFailureQueueUrl" in translated()["Outputs"]
