"""A test-only SQS-triggered function for the local stack's SQS event source
(tests/functional/test_sqs_poller.py): it hangs on a batch whose first body is
``hang`` (until its Timeout kills the environment) and answers every other
batch with an empty partial batch response. It reaches no AWS service."""

import time
from typing import Any


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event["Records"][0]["body"] == "hang":
        time.sleep(600)
    return {"batchItemFailures": []}
