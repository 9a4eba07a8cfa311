"""The data perimeter's fixed monthly cost, read from the template (bench/cost.py)."""

from __future__ import annotations

import copy

from bench.cost import HOURS_PER_MONTH, NETWORK_PRICES, perimeter_fixed_cost
from stack_model.template import load_template

ENDPOINT_IN_TWO_AZS = round(2 * NETWORK_PRICES["interface_endpoint_per_az_hour_usd"] * HOURS_PER_MONTH, 2)


def test_the_perimeter_as_deployed_costs_the_kms_endpoint_a_month() -> None:
    # The DynamoDB gateway endpoint, the VPC and its subnets are free; the KMS
    # interface endpoint (webhook secrets, docs/webhooks.md) is not: $14.60 for two AZs.
    ours, interface, nat = perimeter_fixed_cost()["designs"]
    assert ENDPOINT_IN_TWO_AZS == 14.60
    assert ours["usd_per_month"] == ENDPOINT_IN_TWO_AZS
    assert "2 private subnets" in ours["resources"]
    assert "1 interface endpoints" in ours["resources"]
    # The alternatives, in the same two AZs, on top: an interface endpoint each, or a NAT gateway each.
    assert interface["usd_per_month"] == round(ours["usd_per_month"] + ENDPOINT_IN_TWO_AZS, 2)
    nat_month = 2 * NETWORK_PRICES["nat_gateway_per_hour_usd"] * HOURS_PER_MONTH
    assert nat["usd_per_month"] == round(ours["usd_per_month"] + nat_month, 2)


def test_an_interface_endpoint_or_a_nat_in_the_template_shows_in_the_cost() -> None:
    template = copy.deepcopy(load_template())
    template["Resources"]["CognitoEndpoint"] = {
        "Type": "AWS::EC2::VPCEndpoint",
        "Properties": {"VpcEndpointType": "Interface"},
    }
    template["Resources"]["Nat"] = {"Type": "AWS::EC2::NatGateway", "Properties": {}}
    (ours, _, _) = perimeter_fixed_cost(template)["designs"]
    # Two interface endpoints (KMS's and the added one) in two AZs, and one NAT gateway.
    expected = 2 * 2 * NETWORK_PRICES["interface_endpoint_per_az_hour_usd"] + NETWORK_PRICES["nat_gateway_per_hour_usd"]
    assert ours["usd_per_month"] == round(expected * HOURS_PER_MONTH, 2)
