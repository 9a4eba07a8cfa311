"""The floor for cold starts: a handler that imports only boto3 and does one
GetItem (the least any Python function reading DynamoDB pays). Credentials
come from the environment, already scoped to one tenant."""

import json
import os
from typing import Any

import boto3


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    client = boto3.client("dynamodb", endpoint_url=os.environ.get("AWS_ENDPOINT_OVERRIDE") or None)
    response = client.get_item(
        TableName=os.environ["TABLE_NAME"],
        Key={"pk": {"S": event["pk"]}, "sk": {"S": event["sk"]}},
        ConsistentRead=True,
    )
    return {"statusCode": 200 if "Item" in response else 404, "body": json.dumps({"found": "Item" in response})}
