"""The DynamoDB stream event sources of `template.yaml`'s functions (the
aggregator, the audit writer), as SAM deploys them (event source mappings),
and those a dedicated tenant's stack adds for its own table's stream
(``templates/dedicated-table.yaml``: the same functions, :func:`dedicated_stream_sources`).

``FilterCriteria`` patterns are read from the template itself (not copied) and
evaluated with moto's EventBridge event-pattern matcher, the same pattern
language Lambda event filtering uses. Lambda ORs the filters of a source:
a record is delivered when any pattern matches it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from moto.events.models import EventPattern

from stack_model.dedicated import dedicated_resources
from stack_model.template import Values, resources

AGGREGATOR_FUNCTION = "AggregateCountsFunction"


@dataclass(frozen=True)
class StreamSource:
    function: str
    patterns: tuple[str, ...]
    batch_size: int
    batching_window_s: int
    maximum_retry_attempts: int
    bisect_on_error: bool
    report_batch_item_failures: bool
    # The on-failure destination as the template names it (e.g. {"Fn::GetAtt": [...]}), if any.
    on_failure: Any = None

    def matches(self, record: dict[str, Any]) -> bool:
        """Whether Lambda would deliver this stream record to the function."""
        if not self.patterns:
            return True
        return any(
            EventPattern(raw, json.loads(raw)).matches_event(record)  # type: ignore[arg-type]
            for raw in self.patterns
        )


def _mappings() -> dict[str, dict[str, Any]]:
    """The translated template's event source mappings of a DynamoDB stream, by function."""
    return {
        resource["Properties"]["FunctionName"]["Ref"]: resource["Properties"]
        for resource in resources("AWS::Lambda::EventSourceMapping").values()
        if "StreamArn" in str(resource["Properties"].get("EventSourceArn"))
    }


def stream_functions() -> list[str]:
    """Every function of the template with a DynamoDB stream event, by logical id."""
    return list(_mappings())


def stream_source(function: str = AGGREGATOR_FUNCTION) -> StreamSource:
    return source_of_mapping(function, _mappings()[function])


def dedicated_stream_sources(values: Values) -> list[StreamSource]:
    """A dedicated tenant's stack's stream mappings (``values``: its reading),
    each for the pool function its ``FunctionName`` names (an ARN ending in the
    function's logical id, as the local stack names functions)."""
    found = []
    for resource in dedicated_resources("AWS::Lambda::EventSourceMapping").values():
        props = values.resolve(resource["Properties"])
        found.append(source_of_mapping(str(props["FunctionName"]).rsplit(":", 1)[-1], props))
    return found


def source_of_mapping(function: str, props: dict[str, Any]) -> StreamSource:
    """A stream mapping's settings, from its properties (translated or resolved)."""
    filters = props.get("FilterCriteria", {}).get("Filters", [])
    return StreamSource(
        function=function,
        patterns=tuple(str(item["Pattern"]) for item in filters),
        batch_size=int(props.get("BatchSize", 100)),
        batching_window_s=int(props.get("MaximumBatchingWindowInSeconds", 0)),
        maximum_retry_attempts=int(props.get("MaximumRetryAttempts", -1)),
        bisect_on_error=bool(props.get("BisectBatchOnFunctionError", False)),
        report_batch_item_failures="ReportBatchItemFailures" in props.get("FunctionResponseTypes", []),
        on_failure=props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination"),
    )


def lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A DynamoDB Streams ``GetRecords`` record as Lambda delivers it: the same
    fields plus ``eventSourceARN`` (``stream_arn``: the stream the poller reads,
    a dedicated table's own for its mappings; the stream functions take the
    record's table from it), ``ApproximateCreationDateTime`` as whole epoch
    seconds, rounded down as DynamoDB rounds it ("rounded down to the closest
    second", API_streams_StreamRecord; moto keeps microseconds, boto3 hands
    them back as a datetime), JSON-safe throughout."""
    stream = dict(record["dynamodb"])
    created = stream.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        stream["ApproximateCreationDateTime"] = int(created.timestamp())
    converted = {key: value for key, value in record.items() if key != "dynamodb"}
    converted["dynamodb"] = stream
    converted["eventSourceARN"] = stream_arn
    return converted
