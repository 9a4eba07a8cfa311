"""The list prices of the usage object and the benchmark, in one copy.

``GET /usage`` and ``make usage`` price with them, and so does the benchmark.

us-east-1, on-demand, x86, the first pricing tier of each service, from the
public price pages (not fetched live: check them before quoting a figure):

- Lambda: https://aws.amazon.com/lambda/pricing/ ($0.20 per million requests,
  $0.0000166667 per GB-second, x86, first 6 billion GB-seconds a month);
- Lambda's tenant isolation mode: the same page, "Tenant isolation mode": a
  charge for each execution environment Lambda creates for a tenant, by the
  function's memory, $0.000167 per GB (the page's example: a 1,024 MB function
  creating 200,000 tenant environments in a month, $33.40). Read from summaries
  of that page (third-party price references), not from the page itself: check
  it before quoting a figure. The environment's init is billed as duration on
  top (since 2025-08-01);
- API Gateway: https://aws.amazon.com/api-gateway/pricing/ (REST APIs, $3.50
  per million requests, first 333 million a month);
- DynamoDB: https://aws.amazon.com/dynamodb/pricing/on-demand/ (Standard table
  class, after the 2024-11-01 price cut: $0.625 per million write request
  units, $0.125 per million read request units);
- STS and Cognito identity pools' AWS credentials: no charge
  (https://aws.amazon.com/iam/faqs/, https://aws.amazon.com/cognito/pricing/);
- SQS: https://aws.amazon.com/sqs/pricing/ (FIFO queues, $0.50 per million
  requests, each 64 KB chunk of a payload one request, first 100 billion a month);
- DynamoDB storage: the same page, "Data storage" ($0.25 per GB-month, Standard table
  class, after the first 25 GB a month free per account, which no tenant's figure counts);
- KMS: https://aws.amazon.com/kms/pricing/ ($0.03 per 10,000 symmetric-key
  requests: $3.00 per million); a customer managed key costs $1 a month,
  prorated hourly, and with automatic rotation each of its first two
  rotations adds $1 a month (later rotations add nothing: the price change
  AWS announced on 2024-04-12; before it every rotation added $1). A key
  scheduled for deletion costs nothing during its waiting period.

Exact decimals: a day's cost is the sum of many tiny amounts.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Final

REGION: Final = "us-east-1"
AS_OF: Final = "2025 public price pages (DynamoDB on-demand after its 2024-11-01 price cut)"
MILLION: Final = Decimal(1_000_000)

LAMBDA_PER_MILLION_REQUESTS_USD: Final = Decimal("0.20")
LAMBDA_X86_PER_GB_SECOND_USD: Final = Decimal("0.0000166667")
# Per execution environment created in tenant isolation mode, per GB of the function's memory.
LAMBDA_TENANT_ENVIRONMENT_PER_GB_USD: Final = Decimal("0.000167")
API_GATEWAY_REST_PER_MILLION_USD: Final = Decimal("3.50")
DYNAMODB_ON_DEMAND_PER_MILLION_WRU_USD: Final = Decimal("0.625")
DYNAMODB_ON_DEMAND_PER_MILLION_RRU_USD: Final = Decimal("0.125")
STS_PER_CALL_USD: Final = Decimal(0)
SQS_FIFO_PER_MILLION_REQUESTS_USD: Final = Decimal("0.50")
DYNAMODB_STORAGE_PER_GB_MONTH_USD: Final = Decimal("0.25")
# A GB-month as AWS bills it: a GB (2^30 bytes) for a month of 730 hours; storage counted in KB-days.
KB_DAYS_PER_GB_MONTH: Final = Decimal(1024 * 1024) * Decimal(730) / Decimal(24)
KMS_PER_MILLION_REQUESTS_USD: Final = Decimal("3.00")
KMS_KEY_PER_MONTH_USD: Final = Decimal("1.00")
KMS_ROTATION_PER_MONTH_USD: Final = Decimal("1.00")
# Rotations that add to a key's monthly price (none after the second).
KMS_BILLED_ROTATIONS: Final = 2

SOURCES: Final = (
    "https://aws.amazon.com/lambda/pricing/ (x86, first pricing tier)",
    "https://aws.amazon.com/lambda/pricing/ (tenant isolation mode, per environment created, per GB)",
    "https://aws.amazon.com/api-gateway/pricing/ (REST APIs, first 333 million)",
    "https://aws.amazon.com/dynamodb/pricing/on-demand/ (Standard table class)",
    "https://aws.amazon.com/iam/faqs/ (STS: no additional charge)",
    "https://aws.amazon.com/cognito/pricing/ (identity pools: no charge for AWS credentials)",
    "https://aws.amazon.com/sqs/pricing/ (FIFO queues, per 64 KB request)",
    "https://aws.amazon.com/dynamodb/pricing/on-demand/ (data storage, Standard table class)",
    "https://aws.amazon.com/kms/pricing/ (symmetric-key requests)",
    "https://aws.amazon.com/kms/pricing/ (key storage: a customer managed key and its first two rotations)",
)


def api_gateway_usd(requests: int) -> Decimal:
    return requests * API_GATEWAY_REST_PER_MILLION_USD / MILLION


def lambda_usd(invocations: int, gb_seconds: Decimal) -> Decimal:
    return invocations * LAMBDA_PER_MILLION_REQUESTS_USD / MILLION + gb_seconds * LAMBDA_X86_PER_GB_SECOND_USD


def tenant_environment_usd(memory_mb: int) -> Decimal:
    """Lambda's charge for one execution environment created in tenant isolation
    mode, for a function of ``memory_mb`` (its init is billed as duration besides)."""
    return Decimal(memory_mb) / 1024 * LAMBDA_TENANT_ENVIRONMENT_PER_GB_USD


def dynamodb_usd(read_units: Decimal, write_units: Decimal) -> Decimal:
    return (
        read_units * DYNAMODB_ON_DEMAND_PER_MILLION_RRU_USD + write_units * DYNAMODB_ON_DEMAND_PER_MILLION_WRU_USD
    ) / MILLION


def sqs_fifo_usd(requests: int) -> Decimal:
    """SQS FIFO requests (each a request of at most 64 KB: the delivery function's calls are)."""
    return requests * SQS_FIFO_PER_MILLION_REQUESTS_USD / MILLION


def kms_usd(requests: int) -> Decimal:
    return requests * KMS_PER_MILLION_REQUESTS_USD / MILLION


def dynamodb_storage_usd(kb_days: int) -> Decimal:
    """DynamoDB storage of ``kb_days`` (KB held x days held)."""
    return kb_days * DYNAMODB_STORAGE_PER_GB_MONTH_USD / KB_DAYS_PER_GB_MONTH


def kms_key_month_usd(rotations: int) -> Decimal:
    """What a customer managed key costs a month after ``rotations`` automatic rotations."""
    return KMS_KEY_PER_MONTH_USD + min(rotations, KMS_BILLED_ROTATIONS) * KMS_ROTATION_PER_MONTH_USD
