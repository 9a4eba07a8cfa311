"""DynamoDB Streams → TENANT#<t>|AGGREGATE counts. Work in progress (issue 4)."""

from typing import Any


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    raise NotImplementedError("the aggregator lands with issue 4")
