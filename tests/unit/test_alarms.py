"""Operating the pool, read from the SAM-translated template: every queue and
function the template declares has its alarms, every alarm notifies the one
topic, the dashboard shows every function, the logs are JSON in a log group of
the stack, and the Contributor Insights rules read fields the code writes.

Coverage is derived from the template's own resource list: a function or a
queue added without its alarm fails here."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from support_tickets.api.resolver import REQUEST_OUTCOME_MESSAGE
from tests.unit.test_template import API_FUNCTIONS, resources, translated

TOPIC = {"Ref": "AlarmTopic"}


def alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: res["Properties"]
        for name, res in template["Resources"].items()
        if res["Type"] == "AWS::CloudWatch::Alarm"
    }


def of_type(template: dict[str, Any], kind: str) -> list[str]:
    return [name for name, res in template["Resources"].items() if res["Type"] == kind]


def stream_functions(template: dict[str, Any]) -> set[str]:
    """The functions a DynamoDB stream feeds (an SQS event source has no iterator age)."""
    return {
        res["Properties"]["FunctionName"]["Ref"]
        for res in template["Resources"].values()
        if res["Type"] == "AWS::Lambda::EventSourceMapping"
        and "StreamArn" in json.dumps(res["Properties"]["EventSourceArn"])
    }


def work_queues(template: dict[str, Any]) -> set[str]:
    """Queues a function works through (they have a dead-letter queue): messages in
    them are normal, a backlog is not. Every other queue holds only what was given up on."""
    return {
        name
        for name in of_type(template, "AWS::SQS::Queue")
        if "RedrivePolicy" in template["Resources"][name]["Properties"]
    }


def watches(alarm: dict[str, Any], namespace: str, metric: str, dimension: str, value: Any) -> bool:
    return (
        alarm.get("Namespace") == namespace
        and alarm.get("MetricName") == metric
        and alarm.get("Dimensions") == [{"Name": dimension, "Value": value}]
    )


# The functions' alarms select them by this tag (Globals' Tags), one contributor per function.
STACK_TAG = {"Key": "SupportTicketsStack", "Value": {"Ref": "AWS::StackName"}}


def stack_query(function: str, metric: str) -> str:
    """A Metrics Insights query of one Lambda metric per function of this stack."""
    return (
        f'SELECT {function}({metric}) FROM SCHEMA("AWS/Lambda", FunctionName) '  # noqa: S608 - a CloudWatch query the test compares, run nowhere
        "WHERE tag.SupportTicketsStack = '${AWS::StackName}' GROUP BY FunctionName"
    )


def watches_every_function(alarm: dict[str, Any], metric: str) -> bool:
    """A Metrics Insights alarm on ``metric`` of each of the stack's functions."""
    queries = [query for query in alarm.get("Metrics", []) if query.get("ReturnData")]
    return [query.get("Expression") for query in queries] == [{"Fn::Sub": stack_query("SUM", metric)}]


def uncovered(template: dict[str, Any]) -> list[str]:
    """What the template declares without the alarm it needs."""
    found = list(alarms(template).values())
    needed: list[tuple[str, str, str, str, Any]] = []
    for queue in of_type(template, "AWS::SQS::Queue"):
        value = {"Fn::GetAtt": [queue, "QueueName"]}
        needed.append((queue, "AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", value))
    for function in stream_functions(template):
        needed.append((function, "AWS/Lambda", "IteratorAge", "FunctionName", {"Ref": function}))
    missing = [
        f"{name} {metric}"
        for name, namespace, metric, dimension, value in needed
        if not any(watches(alarm, namespace, metric, dimension, value) for alarm in found)
    ]
    for function in of_type(template, "AWS::Lambda::Function"):
        tagged = STACK_TAG in template["Resources"][function]["Properties"].get("Tags", [])
        for metric in ("Errors", "Throttles"):
            if not (tagged and any(watches_every_function(alarm, metric) for alarm in found)):
                missing.append(f"{function} {metric}")
    return missing


def test_every_queue_and_every_function_has_its_alarms() -> None:
    template = translated()
    # What the coverage is derived from: the stack's 23 functions (the API's, the
    # authorizer, both stream functions, the metering and webhook delivery
    # functions), both stream functions, the three failure queues, the webhook
    # queue and its dead-letter queue.
    assert len(of_type(template, "AWS::Lambda::Function")) == len(API_FUNCTIONS) + 5
    assert stream_functions(template) == {"AggregateCountsFunction", "AuditTrailFunction"}
    assert set(of_type(template, "AWS::SQS::Queue")) == {
        "AggregateCountsFailureQueue",
        "AuditTrailFailureQueue",
        "MeteringFailureQueue",
        "WebhookEventsQueue",
        "WebhookEventsDeadLetterQueue",
    }
    assert work_queues(template) == {"WebhookEventsQueue"}
    assert uncovered(template) == []


def test_the_coverage_check_would_catch_a_function_or_queue_without_its_alarm() -> None:
    template = copy.deepcopy(translated())
    del template["Resources"]["AuditTrailFailureQueueDepthAlarm"]
    # A function without the stack's tag is in no function alarm's query.
    template["Resources"]["NewFunction"] = {"Type": "AWS::Lambda::Function", "Properties": {}}
    assert sorted(uncovered(template)) == [
        "AuditTrailFailureQueue ApproximateNumberOfMessagesVisible",
        "NewFunction Errors",
        "NewFunction Throttles",
    ]
    # Without the throttles alarm, no function is watched for throttles.
    del template["Resources"]["FunctionThrottlesAlarm"]
    missing = uncovered(template)
    assert "GetTicketFunction Throttles" in missing
    assert "GetTicketFunction Errors" not in missing


def test_thresholds_page_on_the_first_failure() -> None:
    for name, alarm in alarms(translated()).items():
        if any(watches_every_function(alarm, metric) for metric in ("Errors", "Throttles")):
            # Each function, one contributor: its first failure in five minutes.
            assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold"), name
            assert (alarm["Metrics"][0]["Period"], alarm["EvaluationPeriods"]) == (300, 1), name
            continue
        if "MetricName" not in alarm:
            continue
        expected = 600_000 if alarm["MetricName"] == "IteratorAge" else 0
        watched = [dimension["Value"] for dimension in alarm.get("Dimensions", [])]
        if any(
            value == {"Fn::GetAtt": [queue, "QueueName"]} for queue in work_queues(translated()) for value in watched
        ):
            # A work queue: a backlog that lasts (the minimum of three periods), not a message.
            expected = 1000
            assert (alarm["Statistic"], alarm["EvaluationPeriods"]) == ("Minimum", 3), name
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (expected, "GreaterThanThreshold"), name
    # Ten minutes behind leaves fifty before the stream gives records up (MaximumRecordAgeInSeconds).
    for mapping in resources("AWS::Lambda::EventSourceMapping").values():
        if "StreamArn" in json.dumps(mapping["Properties"]["EventSourceArn"]):
            assert mapping["Properties"]["MaximumRecordAgeInSeconds"] * 1000 > 600_000 * 5


def test_every_alarm_notifies_the_topic_both_ways_and_ignores_missing_data() -> None:
    found = alarms(translated())
    # A queue's each, a stream function's iterator age each, the functions' errors and
    # throttles (one alarm each, every function a contributor), the API's 5xx share.
    assert len(found) == 5 + 2 + 2 + 1
    for name, alarm in found.items():
        assert alarm["AlarmActions"] == [TOPIC], name
        assert alarm["OKActions"] == [TOPIC], name
        assert alarm["TreatMissingData"] == "notBreaching", name
        assert alarm["AlarmDescription"], name


def test_the_api_5xx_alarm_is_a_share_of_this_stages_requests() -> None:
    alarm = alarms(translated())["Api5xxRateAlarm"]
    by_id = {metric["Id"]: metric for metric in alarm["Metrics"]}
    assert by_id["rate"]["ReturnData"] is True
    assert re.fullmatch(r"IF\(requests >= \d+, errors / requests, 0\)", by_id["rate"]["Expression"])
    dimensions = [
        {"Name": "ApiName", "Value": {"Ref": "AWS::StackName"}},
        {"Name": "Stage", "Value": {"Ref": "StageName"}},
    ]
    for metric_id, metric_name in (("errors", "5XXError"), ("requests", "Count")):
        stat = by_id[metric_id]["MetricStat"]
        assert stat["Metric"] == {"Namespace": "AWS/ApiGateway", "MetricName": metric_name, "Dimensions": dimensions}
        assert stat["Stat"] == "Sum"
    # SAM names the REST API after the stack: the ApiName dimension is that name.
    ((_, rest_api),) = resources("AWS::ApiGateway::RestApi").items()
    assert rest_api["Properties"]["Body"]["info"]["title"] == {"Ref": "AWS::StackName"}


def test_the_topic_is_encrypted_with_a_key_cloudwatch_may_use_and_the_email_is_optional() -> None:
    template = translated()
    topic = template["Resources"]["AlarmTopic"]["Properties"]
    assert topic["KmsMasterKeyId"] == {"Ref": "OperationsKey"}
    key = template["Resources"]["OperationsKey"]["Properties"]
    assert key["EnableKeyRotation"] is True
    cloudwatch = [
        statement
        for statement in key["KeyPolicy"]["Statement"]
        if statement["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert [set(statement["Action"]) for statement in cloudwatch] == [{"kms:Decrypt", "kms:GenerateDataKey*"}]
    subscription = template["Resources"]["AlarmEmailSubscription"]
    assert subscription["Condition"] == "HasAlarmEmail"
    assert subscription["Properties"]["Endpoint"] == {"Ref": "AlarmEmail"}
    assert template["Conditions"]["HasAlarmEmail"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]}
    assert template["Parameters"]["AlarmEmail"]["Default"] == ""


def substituted(text: str) -> str:
    """A ``Fn::Sub`` string with each ``${Name}`` or ``${Name.Attr}`` replaced by its name."""
    return re.sub(r"\$\{([A-Za-z0-9:.]+)\}", lambda match: match.group(1), text)


def dashboard_body() -> dict[str, Any]:
    (dashboard,) = resources("AWS::CloudWatch::Dashboard").values()
    body: dict[str, Any] = json.loads(substituted(dashboard["Properties"]["DashboardBody"]["Fn::Sub"]))
    return body


def test_the_dashboard_names_every_function_queue_and_the_table() -> None:
    rows = [row for widget in dashboard_body()["widgets"] for row in widget["properties"].get("metrics", [])]
    # Every function of the stack (tagged with it), one line each: the alarms' queries.
    queries = {row[0]["expression"] for row in rows if isinstance(row[0], dict)}
    assert queries == {
        substituted(stack_query("SUM", "Errors")),
        substituted(stack_query("SUM", "Throttles")),
        substituted(stack_query("MAX", "Duration")),
    }
    for function in of_type(translated(), "AWS::Lambda::Function"):
        assert STACK_TAG in translated()["Resources"][function]["Properties"]["Tags"], function
    rows = [row for row in rows if not isinstance(row[0], dict)]
    by_metric: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        by_metric.setdefault((row[0], row[1]), set()).add(row[3])
    assert by_metric[("AWS/Lambda", "IteratorAge")] == stream_functions(translated())
    queues = {f"{queue}.QueueName" for queue in of_type(translated(), "AWS::SQS::Queue")}
    assert by_metric[("AWS/SQS", "ApproximateNumberOfMessagesVisible")] == queues
    for metric in (
        "ConsumedReadCapacityUnits",
        "ConsumedWriteCapacityUnits",
        "ReadThrottleEvents",
        "WriteThrottleEvents",
    ):
        assert by_metric[("AWS/DynamoDB", metric)] == {"SupportTicketTable"}, metric
    for metric in ("Count", "4XXError", "5XXError", "Latency"):
        assert ("AWS/ApiGateway", metric) in by_metric, metric
    stats = {row[-1]["stat"] for row in rows if row[1] == "Latency"}
    assert stats == {"p50", "p99"}
    rules = {
        widget["properties"]["insightRule"]["ruleName"]
        for widget in dashboard_body()["widgets"]
        if "insightRule" in widget["properties"]
    }
    assert rules == {f"{name}.RuleName" for name in resources("AWS::CloudWatch::InsightRule")}


def test_every_function_logs_json_to_a_log_group_of_the_stack_kept_and_encrypted() -> None:
    template = translated()
    groups = resources("AWS::Logs::LogGroup")
    seen = set()
    for name in of_type(template, "AWS::Lambda::Function"):
        config = template["Resources"][name]["Properties"]["LoggingConfig"]
        assert config["LogFormat"] == "JSON", name
        group = config["LogGroup"]["Ref"]
        seen.add(group)
        assert groups[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionInDays"}, name
        assert groups[group]["Properties"]["KmsKeyId"] == {"Fn::GetAtt": ["OperationsKey", "Arn"]}, name
    # Shared: Lambda names a shared group's streams after the function. The metering
    # function alone has its own (it is subscribed to the shared one).
    assert seen == {"FunctionsLogGroup", "MeteringFunctionLogGroup"}
    access = groups["ApiAccessLogGroup"]["Properties"]
    assert access["KmsKeyId"] == {"Fn::GetAtt": ["OperationsKey", "Arn"]}
    assert set(groups) == seen | {"ApiAccessLogGroup"}


def insight_rules() -> dict[str, dict[str, Any]]:
    return {
        name: json.loads(substituted(rule["Properties"]["RuleBody"]["Fn::Sub"]))
        for name, rule in resources("AWS::CloudWatch::InsightRule").items()
    }


def access_log_fields() -> set[str]:
    (stage,) = resources("AWS::ApiGateway::Stage").values()
    fields: dict[str, str] = json.loads(stage["Properties"]["AccessLogSetting"]["Format"])
    return set(fields)


def test_the_top_tenant_rules_read_what_the_functions_and_the_access_log_write() -> None:
    rules = insight_rules()
    assert set(rules) == {"TopTenantsByRequestsRule", "TopTenantsByErrorsRule", "TopTenantsByThrottlesRule"}
    api_groups = sorted(
        {translated()["Resources"][name]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"] for name in API_FUNCTIONS}
    )
    outcome = {"Match": "$.message", "In": [REQUEST_OUTCOME_MESSAGE]}
    for rule in rules.values():
        assert rule["Schema"] == {"Name": "CloudWatchLogRule", "Version": 1}
        assert (rule["LogFormat"], rule["AggregateOn"]) == ("JSON", "Count")
    for name in ("TopTenantsByRequestsRule", "TopTenantsByErrorsRule"):
        assert sorted(rules[name]["LogGroupNames"]) == api_groups
        assert rules[name]["Contribution"]["Keys"] == ["$.tenant_id"]
        assert rules[name]["Contribution"]["Filters"][0] == outcome
    assert rules["TopTenantsByErrorsRule"]["Contribution"]["Filters"][1] == {"Match": "$.status", "GreaterThan": 499}
    # 429s never reach a function: the access log records them with the authorizer's tenant.
    throttles = rules["TopTenantsByThrottlesRule"]
    assert throttles["LogGroupNames"] == ["ApiAccessLogGroup"]
    assert throttles["Contribution"] == {"Keys": ["$.tenant"], "Filters": [{"Match": "$.status", "In": ["429"]}]}
    assert {"tenant", "status"} <= access_log_fields()
    (stage,) = resources("AWS::ApiGateway::Stage").values()
    fields = json.loads(stage["Properties"]["AccessLogSetting"]["Format"])
    assert (fields["tenant"], fields["status"]) == ("$context.authorizer.tenant_id", "$context.status")
