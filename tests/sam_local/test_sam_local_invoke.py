"""``sam local invoke`` in Lambda containers, on what ``make build`` writes:
the part of tenant isolation SAM CLI decides, and that a function then runs.

- The build of the template as written (``make build``): an API function
  runs with an event of ``events/`` and no ``--tenant-id`` (its answer to the
  sample's placeholder token is its own 401), and SAM CLI refuses a tenant id
  for it, as Lambda does for a function not in the mode.
- The tenant isolation variant of that build (``make build
  TENANT_ISOLATION=1`` writes the same over the build): SAM CLI refuses the
  invocation without ``--tenant-id`` and runs it with one.

Needs a container engine: ``SAM_LOCAL`` is the command that runs ``sam`` with
one (``.venv/bin/sam`` with Docker; a wrapper that serves podman as Docker and
adds ``--skip-pull-image``, e.g. ``<wrapper> run --``). Skipped without it, and
so in ``make test`` (a container start costs seconds; docs/testing.md lists the tiers). The
functions call nothing: their endpoint is a closed local port."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stack_model.isolation import TENANCY_CONFIG, write_variant
from stack_model.template import PROJECT_ROOT, load_template

SAM_LOCAL = os.environ.get("SAM_LOCAL", "")
BUILD_DIR = PROJECT_ROOT / ".aws-sam" / "build"
TENANCY_REQUIRED = "The invoked function is enabled with tenancy configuration"
TENANCY_REFUSED = "The invoked function is not enabled with tenancy configuration"

pytestmark = pytest.mark.skipif(not SAM_LOCAL, reason="SAM_LOCAL names no sam with a container engine")

# What the functions' settings require (sam local leaves the template's GetAtt values empty),
# and an endpoint nothing listens on: whatever a function would call, nothing is reached.
ENVIRONMENT = {
    "USER_POOL_PROVIDER_NAME": "cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE",
    "ALLOWED_CLIENT_IDS": "exampleclientid",
    "AWS_ENDPOINT_OVERRIDE": "http://127.0.0.1:9",
}


def sam_local_invoke(tmp_path: Path, template: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env_vars = tmp_path / "env.json"
    env_vars.write_text(json.dumps({"Parameters": ENVIRONMENT}))
    command = [
        *shlex.split(SAM_LOCAL),
        "local",
        "invoke",
        "--template",
        str(template),
        "--env-vars",
        str(env_vars),
        "--region",
        "us-east-1",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=PROJECT_ROOT, timeout=300)  # noqa: S603 - the developer's own command


def answer(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The function's response: sam local invoke's stdout."""
    assert result.returncode == 0, result.stderr
    response: dict[str, Any] = json.loads(result.stdout)
    return response


def plain_build() -> Path:
    built = BUILD_DIR / "template.yaml"
    assert built.exists(), "run make build"
    # not the variant make build TENANT_ISOLATION=1 writes over it
    isolated = [
        name
        for name, resource in load_template(built)["Resources"].items()
        if resource.get("Properties", {}).get("TenancyConfig") == TENANCY_CONFIG
    ]
    assert not isolated, "run make build without TENANT_ISOLATION"
    return built


def test_an_api_function_of_the_template_runs_without_a_tenant_id(tmp_path: Path) -> None:
    # Given: the build of the template as written
    built = plain_build()
    # When an API function is invoked with its sample event, as SAM teaches, and once with a tenant id
    plain = sam_local_invoke(tmp_path, built, "CreateTicketFunction", "-e", "events/create_ticket.json")
    with_tenant = sam_local_invoke(
        tmp_path, built, "CreateTicketFunction", "--tenant-id", "acme", "-e", "events/create_ticket.json"
    )
    # Then it runs (its own 401: the sample's token is a placeholder), and a tenant id is refused
    assert answer(plain)["statusCode"] == 401
    assert TENANCY_REQUIRED not in plain.stderr
    assert with_tenant.returncode != 0
    assert TENANCY_REFUSED in with_tenant.stderr + with_tenant.stdout


def test_an_api_function_of_the_isolation_variant_needs_a_tenant_id(tmp_path: Path) -> None:
    # Given: the tenant isolation variant of the build, its code where the build put it
    variant = write_variant(plain_build(), tmp_path / "template.yaml")
    text = variant.read_text()
    for name in ("CodeUri", "ContentUri"):
        text = text.replace(f"{name}: ", f"{name}: {BUILD_DIR}/")
    variant.write_text(text)
    # When an API function is invoked without a tenant id, then with the event's
    without = sam_local_invoke(tmp_path, variant, "CreateTicketFunction", "-e", "events/create_ticket.json")
    with_tenant = sam_local_invoke(
        tmp_path, variant, "CreateTicketFunction", "--tenant-id", "acme", "-e", "events/create_ticket.json"
    )
    # Then SAM CLI refuses the first, and runs the second
    assert without.returncode != 0
    assert TENANCY_REQUIRED in without.stderr + without.stdout
    assert answer(with_tenant)["statusCode"] == 401
