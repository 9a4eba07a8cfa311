"""``python -m ops.dedicated`` against a deployed stack, on moto's CloudFormation:
the tenant's stack is made beside the pool stack from the dedicated template,
importing the pool stack's exports; its outputs name the table, its stream
and its key; the table is tagged and protected, and its stream's mappings
invoke the pool's functions with the template's filters and failure queues.
Run again, it changes nothing. A bad tenant id changes nothing either.

moto's CloudFormation makes no CloudWatch alarm (it skips the type with a
warning) and ignores a table's ``SSESpecification``: those are the template
tests' (tests/unit/test_dedicated_template.py)."""

from __future__ import annotations

import warnings

import boto3
import pytest

from ops import dedicated as ops_dedicated
from stack_model.dedicated import imported_names, stack_name
from stack_model.functions import function_specs
from stack_model.template import REGION

POOL_STACK = "pool"
# A pool stack's stand-ins, one resource per kind the dedicated template imports.
STAND_INS = """
AWSTemplateFormatVersion: "2010-09-09"
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement: [{Effect: Allow, Principal: {Service: lambda.amazonaws.com}, Action: sts:AssumeRole}]
  Topic:
    Type: AWS::SNS::Topic
  Queue:
    Type: AWS::SQS::Queue
  AggregateCountsFunction:
    Type: AWS::Lambda::Function
    Properties: {Runtime: python3.13, Handler: app.handler, Role: !GetAtt Role.Arn, Code: {ZipFile: "x = 1"}}
  AuditTrailFunction:
    Type: AWS::Lambda::Function
    Properties: {Runtime: python3.13, Handler: app.handler, Role: !GetAtt Role.Arn, Code: {ZipFile: "x = 1"}}
"""


def stand_in_value(export: str) -> str:
    """What the pool stack's output of that name stands for here."""
    if export == "TableName":
        return "SupportTicket"
    if export.endswith("FunctionArn"):
        return f"!GetAtt {export.removesuffix('Arn')}.Arn"
    if export.endswith("QueueArn"):
        return "!GetAtt Queue.Arn"
    if export.endswith("TopicArn"):
        return "!Ref Topic"
    assert export.endswith("RoleArn"), export
    return "!GetAtt Role.Arn"


def pool_template() -> str:
    outputs = ["Outputs:"]
    for name in sorted(imported_names()):
        export = name.removeprefix("${PoolStackName}-")
        outputs += [
            f"  {export}:",
            f"    Value: {stand_in_value(export)}",
            f"    Export: {{Name: {POOL_STACK}-{export}}}",
        ]
    return STAND_INS + "\n".join(outputs) + "\n"


def test_the_tenants_stack_is_made_beside_the_pool_stack_once(aws: None) -> None:
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(StackName=POOL_STACK, TemplateBody=pool_template())
    (pool,) = cloudformation.describe_stacks(StackName=POOL_STACK)["Stacks"]
    exported = {output["OutputKey"]: output["OutputValue"] for output in pool["Outputs"]}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*CloudWatch::Alarm.*")
        outputs = ops_dedicated.deploy_to_aws(cloudformation, POOL_STACK, "acme")
        assert ops_dedicated.deploy_to_aws(cloudformation, POOL_STACK, "acme") == outputs

    (stack,) = cloudformation.describe_stacks(StackName=stack_name(POOL_STACK, "acme"))["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    assert {(p["ParameterKey"], p["ParameterValue"]) for p in stack["Parameters"]} == {
        ("TenantId", "acme"),
        ("PoolStackName", POOL_STACK),
    }
    assert set(outputs) == {"TableName", "TableArn", "StreamArn", "KeyArn"}
    assert outputs["TableName"] == "SupportTicket-dedicated-acme"

    dynamodb = boto3.client("dynamodb", region_name=REGION)
    table = dynamodb.describe_table(TableName=outputs["TableName"])["Table"]
    assert table["LatestStreamArn"] == outputs["StreamArn"]
    assert table["DeletionProtectionEnabled"] is True
    assert dynamodb.list_tags_of_resource(ResourceArn=outputs["TableArn"])["Tags"] == [
        {"Key": "TenantId", "Value": "acme"}
    ]
    # (moto's CloudFormation keeps the key policy unserialized: DescribeKey fails there, ListKeys does not.)
    assert outputs["KeyArn"] in {key["KeyArn"] for key in boto3.client("kms", region_name=REGION).list_keys()["Keys"]}

    mappings = boto3.client("lambda", region_name=REGION).list_event_source_mappings(
        EventSourceArn=outputs["StreamArn"]
    )["EventSourceMappings"]
    by_function = {mapping["FunctionArn"]: mapping for mapping in mappings}
    assert set(by_function) == {exported["AggregateCountsFunctionArn"], exported["AuditTrailFunctionArn"]}
    aggregator = by_function[exported["AggregateCountsFunctionArn"]]
    assert aggregator["DestinationConfig"]["OnFailure"]["Destination"] == exported["AggregateCountsFailureQueueArn"]
    assert aggregator["BatchSize"] == 250
    audit = by_function[exported["AuditTrailFunctionArn"]]
    assert audit["DestinationConfig"]["OnFailure"]["Destination"] == exported["AuditTrailFailureQueueArn"]
    # The same filters as the pool table's stream gives the audit trail (a deleted ticket's tombstone included).
    (pool_stream,) = [e for e in function_specs()["AuditTrailFunction"].events.values() if e["Type"] == "DynamoDB"]
    assert audit["FilterCriteria"]["Filters"] == pool_stream["Properties"]["FilterCriteria"]["Filters"]


def test_a_bad_tenant_id_makes_nothing(aws: None) -> None:
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    result = ops_dedicated.main(["--tenant", "Acme|1", "--stack", POOL_STACK, "--region", REGION])
    assert result == 1
    assert cloudformation.describe_stacks()["Stacks"] == []
    with pytest.raises(ValueError, match="tenant id"):
        ops_dedicated.deploy_to_aws(cloudformation, POOL_STACK, "*")
