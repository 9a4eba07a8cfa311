"""The banner `make dev` prints (``local_stack.__main__.quickstart``) says whether
Lambda's tenant isolation mode is on, and when it is off, how to turn it on:
the option it names is one that turns it on."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from local_stack.__main__ import ISOLATION_OPTION, command_line, quickstart, tenant_isolation_line
from stack_model.functions import FunctionSpec, function_specs
from stack_model.template import template_values

if TYPE_CHECKING:
    from local_stack.stack import LocalStack


def serve_options() -> argparse.Namespace:
    """What ``python -m local_stack serve`` makes of the ARGS that ISOLATION_OPTION passes."""
    words = shlex.split(ISOLATION_OPTION)
    assert words[:2] == ["make", "dev"]
    (args,) = [word.removeprefix("ARGS=") for word in words[2:] if word.startswith("ARGS=")]
    return command_line().parse_args(["serve", *shlex.split(args)])


def banner(specs: dict[str, FunctionSpec]) -> str:
    """The banner of a stack whose functions are ``specs`` (what ``quickstart`` reads of it)."""
    stack = SimpleNamespace(
        api_url="http://127.0.0.1:3000",
        emulator=SimpleNamespace(url="http://127.0.0.1:4566"),
        options=SimpleNamespace(seed=True, demo_tenants={"acme": ("alice", "ada")}),
        runtime=SimpleNamespace(specs=specs),
    )
    return quickstart(cast("LocalStack", stack), Path(".local"))


def isolation_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "tenant isolation mode" in line]


def test_the_banner_says_the_mode_is_off_and_how_to_turn_it_on() -> None:
    specs = function_specs(template_values())
    assert not any(spec.tenant_isolation for spec in specs.values())
    assert isolation_lines(banner(specs)) == [
        f"Lambda tenant isolation mode: off (an environment may serve several tenants; {ISOLATION_OPTION} turns it on)"
    ]


def test_the_option_it_names_turns_the_mode_on_and_the_banner_then_says_so() -> None:
    specs = function_specs(template_values(), tenant_isolation=serve_options().tenant_isolation)
    isolated = [spec for spec in specs.values() if spec.tenant_isolation]
    assert isolated, f"{ISOLATION_OPTION} puts no function in tenant isolation mode"
    assert isolation_lines(banner(specs)) == [
        f"Lambda tenant isolation mode: ON for {len(isolated)} functions "
        "(one tenant per execution environment, a cold start per tenant and function)"
    ]


def test_a_stack_that_has_not_started_its_functions_says_off() -> None:
    assert tenant_isolation_line([]).startswith("Lambda tenant isolation mode: off")
