"""The data perimeter's fixed monthly cost, read from the template (bench/cost.py)."""

from __future__ import annotations

import copy

from bench.cost import HOURS_PER_MONTH, NETWORK_PRICES, perimeter_fixed_cost
from stack_model.template import load_template


def test_the_perimeter_as_deployed_costs_nothing_a_month() -> None:
    ours, interface, nat = perimeter_fixed_cost()["designs"]
    assert ours["usd_per_month"] == 0.0
    assert "2 private subnets" in ours["resources"]
    # The alternatives, in the same two AZs: an interface endpoint each, or a NAT gateway each.
    assert interface["usd_per_month"] == round(2 * NETWORK_PRICES["interface_endpoint_per_az_hour_usd"] * 730, 2)
    assert nat["usd_per_month"] == round(2 * NETWORK_PRICES["nat_gateway_per_hour_usd"] * 730, 2)


def test_an_interface_endpoint_or_a_nat_in_the_template_shows_in_the_cost() -> None:
    template = copy.deepcopy(load_template())
    template["Resources"]["CognitoEndpoint"] = {
        "Type": "AWS::EC2::VPCEndpoint",
        "Properties": {"VpcEndpointType": "Interface"},
    }
    template["Resources"]["Nat"] = {"Type": "AWS::EC2::NatGateway", "Properties": {}}
    (ours, _, _) = perimeter_fixed_cost(template)["designs"]
    expected = 2 * NETWORK_PRICES["interface_endpoint_per_az_hour_usd"] + NETWORK_PRICES["nat_gateway_per_hour_usd"]
    assert ours["usd_per_month"] == round(expected * HOURS_PER_MONTH, 2)
