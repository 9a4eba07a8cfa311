"""GET /aggregates (admin) through GetAggregatesFunction's handler, over moto.
The counts themselves are written by the stream aggregator; here they are
arranged directly, as that function would store them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from support_tickets.core import keys
from tests.conftest import FRESH_AWS, SHARED_AWS
from tests.functional.api_harness import Api, User, assert_error
from tests.functional.conftest import TENANT_PAIRS

pytestmark = SHARED_AWS  # tenants of their own; tests with fixed ones are FRESH_AWS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def store_count(dynamodb: DynamoDBClient, table_name: str, tenant_id: str, status: str, count: int) -> None:
    dynamodb.put_item(
        TableName=table_name,
        Item={"pk": {"S": keys.aggregate_pk(tenant_id)}, "sk": {"S": status}, "count": {"N": str(count)}},
    )


def test_every_status_is_present_zero_included(api: Api, admin: User) -> None:
    response = api.aggregates(admin)
    assert response.status == 200
    assert response.body == {"counts": {"OPEN": 0, "IN_PROGRESS": 0, "CLOSED": 0}, "total": 0}


def test_counts_and_total(api: Api, admin: User, dynamodb: DynamoDBClient, table_name: str) -> None:
    store_count(dynamodb, table_name, admin.tenant_id, "OPEN", 4)
    store_count(dynamodb, table_name, admin.tenant_id, "CLOSED", 2)
    assert api.aggregates(admin).body == {"counts": {"OPEN": 4, "IN_PROGRESS": 0, "CLOSED": 2}, "total": 6}


def test_a_non_admin_is_403(api: Api, user: User, dynamodb: DynamoDBClient, table_name: str) -> None:
    store_count(dynamodb, table_name, user.tenant_id, "OPEN", 4)
    assert_error(api.aggregates(user), 403, "FORBIDDEN")


@FRESH_AWS
@pytest.mark.parametrize(("owner", "other"), TENANT_PAIRS)
def test_only_the_callers_tenant_is_counted(
    api: Api, dynamodb: DynamoDBClient, table_name: str, owner: str, other: str
) -> None:
    # Given counts for `owner` only
    store_count(dynamodb, table_name, owner, "OPEN", 9)
    # When an admin of `other` reads the aggregates
    body = api.aggregates(User(other, "root", admin=True)).body
    # Then they see zeros, and `owner`'s admin sees its own
    assert body == {"counts": {"OPEN": 0, "IN_PROGRESS": 0, "CLOSED": 0}, "total": 0}
    assert api.aggregates(User(owner, "root", admin=True)).body["counts"]["OPEN"] == 9
