"""The values only a local run gives the template's references: the local
API's id, the id of the DynamoDB gateway endpoint the emulator's second
listener stands for, and, offline (tests, the in-process identity pool), the
ARNs and ids the emulator would give its resources.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from stack_model.template import ACCOUNT_ID, REGION, Values, resources, template_values

LOCAL_API_ID = "local"

# The id the local stack gives the template's DynamoDB gateway endpoint (its
# Ref, hence TenantAccessRole's aws:SourceVpce condition): what requests to the
# emulator's endpoint listener carry.
LOCAL_VPC_ENDPOINT_ID = "vpce-0dd0000000000000a"
# The id of the template's KMS interface endpoint (the webhook functions' way to KMS).
LOCAL_KMS_ENDPOINT_ID = "vpce-0cc0000000000000b"

# What a local run sets differently in the functions' environments (only where
# the template declares the variable): webhooks may point at
# http://127.0.0.1:<port> receivers on the laptop (docs/webhooks.md, "URLs";
# deployed it is "false" and no parameter turns it on).
LOCAL_ENVIRONMENT = {"WEBHOOK_ALLOW_LOCAL_HTTP": "true"}

# A stream label of :func:`offline_values` (an emulator gives a real one).
OFFLINE_STREAM_LABEL = "2026-11-21T10:00:00.000"


def local_values(parameters: Mapping[str, str] | None = None) -> Values:
    """What a local run knows before the emulator creates anything: the
    template's own values, the API's id and stage (SAM's ``<Api>Stage``),
    and the gateway endpoint's id."""
    values = template_values(parameters)
    for api in resources("AWS::ApiGateway::RestApi"):
        values.refs[api] = LOCAL_API_ID
    for stage, resource in resources("AWS::ApiGateway::Stage").items():
        values.refs[stage] = str(values.resolve(resource["Properties"]["StageName"]))
    for endpoint, resource in resources("AWS::EC2::VPCEndpoint").items():
        interface = resource["Properties"].get("VpcEndpointType") == "Interface"
        values.refs[endpoint] = LOCAL_KMS_ENDPOINT_ID if interface else LOCAL_VPC_ENDPOINT_ID
    # No topic exists locally (no alarm fires here); what exports and alarms name.
    for topic in resources("AWS::SNS::Topic"):
        values.add(topic, f"arn:aws:sns:{REGION}:{ACCOUNT_ID}:{topic}", TopicName=topic)
    return values


# The template's queue properties SQS takes as CreateQueue attributes (the rest,
# e.g. SqsManagedSseEnabled, moto ignores or does not model).
# The queue attributes a template's AWS::SQS::Queue may set that moto keeps (CreateQueue's names).
QUEUE_ATTRIBUTES = frozenset(
    {
        "ContentBasedDeduplication",
        "DeduplicationScope",
        "DelaySeconds",
        "FifoQueue",
        "FifoThroughputLimit",
        "MaximumMessageSize",
        "MessageRetentionPeriod",
        "ReceiveMessageWaitTimeSeconds",
        "RedrivePolicy",
        "VisibilityTimeout",
    }
)


def queue_name(logical_id: str, props: Mapping[str, Any]) -> str:
    """The local name of a template queue: its ``QueueName``, else its logical id
    with ``.fifo`` for a FIFO queue (SQS requires it; CloudFormation names it so)."""
    if props.get("QueueName"):
        return str(props["QueueName"])
    return f"{logical_id}.fifo" if str(props.get("FifoQueue", "")).lower() == "true" else logical_id


def offline_values(
    *, user_pool_id: str, client_id: str, identity_pool_id: str, parameters: Mapping[str, str] | None = None
) -> Values:
    """Every value the roles and the identity pool name, as the emulator's
    account would have them (the template's ``parameters`` overriding its
    defaults): for reading the template's policies and pools without an emulator."""
    values = local_values(parameters)
    ((table, _),) = resources("AWS::DynamoDB::Table").items()
    table_arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{values.ref(table)}"
    values.add(table, values.ref(table), Arn=table_arn, StreamArn=f"{table_arn}/stream/{OFFLINE_STREAM_LABEL}")
    ((pool, _),) = resources("AWS::Cognito::UserPool").items()
    values.add(pool, user_pool_id, ProviderName=f"cognito-idp.{REGION}.amazonaws.com/{user_pool_id}")
    for client in resources("AWS::Cognito::UserPoolClient"):
        values.add(client, client_id)
    for identity_pool in resources("AWS::Cognito::IdentityPool"):
        values.add(identity_pool, identity_pool_id)
    for number, key in enumerate(resources("AWS::KMS::Key")):
        key_id = f"00000000-0000-4000-8000-{number:012d}"
        values.add(key, key_id, Arn=f"arn:aws:kms:{REGION}:{ACCOUNT_ID}:key/{key_id}")
    # Queues are named by their logical ids, as the emulator creates them.
    for queue, resource in resources("AWS::SQS::Queue").items():
        name = queue_name(queue, resource["Properties"])
        url = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT_ID}/{name}"
        values.add(queue, url, Arn=f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}")
    return values


def local_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """A function's declared environment as the local stack runs it: the
    variables of :data:`LOCAL_ENVIRONMENT` it declares set to their local value."""
    return {name: LOCAL_ENVIRONMENT.get(name, value) for name, value in environment.items()}


def stack_port_environment(environment: Mapping[str, str], stack_ports: Iterable[int]) -> dict[str, str]:
    """What the local stack adds to a function that admits local http webhooks: its own
    ports (``WEBHOOK_LOCAL_STACK_PORTS``), never a receiver (not a template variable, so
    not in ``env.json`` either)."""
    if "WEBHOOK_ALLOW_LOCAL_HTTP" not in environment:
        return {}
    return {"WEBHOOK_LOCAL_STACK_PORTS": ",".join(str(port) for port in sorted(set(stack_ports)))}


def key_policies(values: Values) -> dict[str, Any]:
    """The template's KMS key policies by key ARN, resolved with ``values``."""
    return {
        str(values.get_att(f"{key}.Arn")): values.resolve(resource["Properties"]["KeyPolicy"])
        for key, resource in resources("AWS::KMS::Key").items()
        if "KeyPolicy" in resource["Properties"]
    }
