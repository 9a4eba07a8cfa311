"""What a dedicated table's unusable KMS key means to the caller: DynamoDB
answers ``ValidationException`` ("KMS key disabled error", "KMS validation
error": pending deletion) or ``AccessDeniedException`` ("KMS key access denied
error"), as the local stack's guard answers them (local_stack/iam/kms_via_dynamodb.py);
the tenant gets 503 ``UNAVAILABLE``, never a 500, a 403 or a bad cursor."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from support_tickets.core.errors import Forbidden, Unavailable
from support_tickets.data.table import OwnClient, TenantTable

KEY = "arn:aws:kms:us-east-1:123456789012:key/k"
KEY_FAILURES = [
    ("ValidationException", f"KMS key disabled error: com.amazonaws.services.kms.model.DisabledException: {KEY}"),
    ("ValidationException", f"KMS validation error: com.amazonaws.services.kms.model.KMSInvalidStateException: {KEY}"),
    ("AccessDeniedException", "KMS key access denied error: com.amazonaws.services.kms.model.AWSKMSException: no"),
]


class Failing:
    def __init__(self, code: str, message: str) -> None:
        self.error = ClientError({"Error": {"Code": code, "Message": message}}, "Query")

    def get_item(self, **kwargs: Any) -> Any:
        raise self.error

    def query(self, **kwargs: Any) -> Any:
        raise self.error


@pytest.mark.parametrize("tenant", ["1", "10"])
@pytest.mark.parametrize(("code", "message"), KEY_FAILURES)
def test_an_unusable_table_key_is_unavailable_for_a_read_and_a_query_from_a_cursor(
    tenant: str, code: str, message: str
) -> None:
    table = TenantTable(tenant, f"SupportTicket-dedicated-{tenant}", OwnClient(Failing(code, message)))  # type: ignore[arg-type]
    with pytest.raises(Unavailable):
        table.call("get_item", TableName=table.table_name, Key={})
    with pytest.raises(Unavailable):
        table.query_from_cursor({"TableName": table.table_name}, from_cursor=True)


def test_iams_refusal_is_still_forbidden_and_another_validation_error_the_callers() -> None:
    denied = TenantTable("1", "SupportTicket", OwnClient(Failing("AccessDeniedException", "User: x is not authorized")))  # type: ignore[arg-type]
    with pytest.raises(Forbidden):
        denied.call("get_item", TableName="SupportTicket", Key={})
    invalid = TenantTable("1", "SupportTicket", OwnClient(Failing("ValidationException", "The provided key element")))  # type: ignore[arg-type]
    with pytest.raises(ClientError):
        invalid.call("get_item", TableName="SupportTicket", Key={})
