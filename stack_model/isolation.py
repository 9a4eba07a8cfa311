"""The tenant isolation variant of the template: `template.yaml` with every API
function in Lambda's tenant isolation mode (docs/isolation.md, "Compute
isolation"). Two additions, nothing else:

- each function an API route invokes gets ``TenancyConfig:
  {TenantIsolationMode: PER_TENANT}``, and no other function (Lambda takes
  the mode only where the invocation names the tenant);
- each route's integration maps ``X-Amz-Tenant-Id`` from the tenant the
  authorizer verified (``context.authorizer.tenant_id``), the header Lambda
  routes a tenant-isolated invocation by
  (https://docs.aws.amazon.com/lambda/latest/dg/tenant-isolation-invoke.html).

Why a variant rather than a stack parameter: SAM CLI's intrinsic resolver
(``samcli/lib/intrinsic_resolver/intrinsic_property_resolver.py``,
``handle_fn_if``, SAM CLI 1.170) resolves an ``Fn::If``'s arguments, then
resolves each branch again, and ``AWS::NoValue`` (Python ``None`` after the
first pass) fails the second: it keeps such a property as written. A
``TenancyConfig: !If [..., !Ref AWS::NoValue]`` is then a mapping to
``sam local``, which takes the function for a tenant-isolated one
(``LocalLambdaRunner.get_function``) whatever the parameter: ``sam local
invoke`` demands ``--tenant-id`` and ``sam local start-api`` a client's
``X-Amz-Tenant-Id``. A template without the property is plain to SAM CLI as
to Lambda.

``python -m stack_model.isolation TEMPLATE [--output PATH]`` writes the variant
of a template: ``make build TENANT_ISOLATION=1`` runs it on the template ``sam
build`` wrote (``.aws-sam/build/template.yaml``), which ``sam deploy`` and
``sam local`` then read. The local stack reads the variant with
``--tenant-isolation`` (:func:`stack_model.template.template`).
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stack_model.api_body import API_RESOURCE, INTEGRATION_HEADER, TENANT_ID_HEADER, operations

TENANCY_CONFIG = {"TenantIsolationMode": "PER_TENANT"}
# The tenant an isolated invocation names: the authorizer's, never a client's header.
TENANT_MAPPING = {f"{INTEGRATION_HEADER}{TENANT_ID_HEADER}": "context.authorizer.tenant_id"}


def with_tenant_isolation(source: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``source`` (a template as written, or as ``sam build`` wrote
    it) with every API route's function in the tenant isolation mode and the
    tenant mapped on every route's integration. Applying it twice changes
    nothing more."""
    isolated: dict[str, Any] = copy.deepcopy(dict(source))
    resources = isolated["Resources"]
    body = resources[API_RESOURCE]["Properties"]["DefinitionBody"]
    for _, _, integration, function in operations(body):
        integration["requestParameters"] = {**(integration.get("requestParameters") or {}), **TENANT_MAPPING}
        resources[function]["Properties"]["TenancyConfig"] = dict(TENANCY_CONFIG)
    return isolated


def write_variant(template_path: Path, output: Path | None = None) -> Path:
    """The variant of the template at ``template_path``, written to ``output``
    (the template itself by default), in SAM CLI's own YAML."""
    from samcli.yamlhelper import yaml_dump, yaml_parse

    target = output or template_path
    source = yaml_parse(template_path.read_text(encoding="utf-8"))
    target.write_text(yaml_dump(with_tenant_isolation(source)), encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m stack_model.isolation",
        description="Write the tenant isolation variant of a SAM template (every API function PER_TENANT).",
    )
    parser.add_argument("template", type=Path, help="the template, e.g. .aws-sam/build/template.yaml")
    parser.add_argument("--output", type=Path, help="where to write the variant (default: over the template)")
    args = parser.parse_args(argv)
    print(write_variant(args.template, args.output))


if __name__ == "__main__":
    main()
