"""What a warm request of each route costs in AWS calls, in-process over moto
(the benchmark's fixed claims, bench/warm.py, without its own stack): no
credential call once the caller's token was exchanged, and the route's own
DynamoDB call (ops/routes.py) once per request, a read's only call; the trail
reads the 8 partitions of each day of its window. Every route of the route
table is here."""

from __future__ import annotations

from collections import Counter

import pytest

from ops.routes import by_name, route_names
from tests.conftest import SHARED_AWS
from tests.functional.api_harness import Api, User, aws_calls, new_subject, sample_request

pytestmark = SHARED_AWS  # tenants of their own


@pytest.mark.parametrize("route", route_names())
def test_a_warm_request_makes_no_credential_call_and_one_dynamodb_call(api: Api, user: User, route: str) -> None:
    spec = by_name()[route]
    # Given a warm container: the caller's token exchanged and the tenant's record read
    first, second = new_subject(api, route, user), new_subject(api, route, user)
    assert sample_request(api, route, user, first).status == spec.needs.success
    # When the same caller makes the request again
    with aws_calls() as calls:
        response = sample_request(api, route, user, second)
    assert response.status == spec.needs.success, response.body
    # Then no credential call: neither Cognito nor STS
    services = Counter(service for service, _, _ in calls)
    if spec.needs.encrypts:
        # The new webhook secret: one Encrypt, with the caller's own credentials.
        assert [operation for service, operation, _ in calls if service == "kms"] == ["Encrypt"], calls
        calls = [call for call in calls if call[0] != "kms"]
        services = Counter(service for service, _, _ in calls)
    assert services.keys() <= {"dynamodb"}, calls
    operations = Counter(operation for _, operation, _ in calls)
    if spec.needs.scatter:
        # one Query per partition (8) of each day of the window: one or two dates
        assert set(operations) == {"Query"}
        assert operations["Query"] in {8, 16}
        return
    # The route's own call, once; a read makes no other call, unless it finds an
    # empty trail (no stream runs here): then a GetItem tells it from a missing ticket.
    assert operations[spec.needs.operation] == 1, operations
    if spec.read_only:
        expected = {spec.needs.operation: 1}
        if route == "history" and response.body["events"] == []:
            expected["GetItem"] = 1
        if route == "webhook_deliveries" and response.body["items"] == []:
            expected["GetItem"] = 1  # likewise: a webhook without deliveries, or none at all
        assert operations == expected, operations
