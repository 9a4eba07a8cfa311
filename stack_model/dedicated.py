"""`templates/dedicated-table.yaml`, a dedicated tenant's own table, read as a
model of what one of its stacks holds: what the local stack creates for a
dedicated tenant, what ``ops.dedicated`` deploys, and what the tests check.

Why a template of its own and in ``templates/``: it is deployed once per
dedicated tenant, beside the pool stack (``template.yaml``, one per
deployment), and imports the pool stack's exports (:func:`exports`); SAM's
``sam build`` and ``sam deploy`` of the project read ``template.yaml`` only,
so a second template at the root would be one a reader could take for the
stack's. It is plain CloudFormation (no transform), read as written.

A tenant's stack is named :func:`stack_name` (the pool stack's name,
``-tenant-`` and the tenant id); its table :func:`table_name` (the pool
table's name, ``-dedicated-`` and the tenant id): the form
TenantAccessRole's ``ItsOwnDedicatedTable`` statement reaches, by its
``TenantId`` tag.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from stack_model.template import PROJECT_ROOT, Values, exports, load_template, table_arguments

DEDICATED_TEMPLATE_PATH = PROJECT_ROOT / "templates" / "dedicated-table.yaml"
# What the table's name adds to the pool table's (TenantAccessRole's resource pattern).
TABLE_INFIX = "-dedicated-"
# What a tenant's stack name adds to the pool stack's.
STACK_INFIX = "-tenant-"
# The tag DynamoDB's ABAC compares with the caller's TenantId session tag.
TENANT_TAG = "TenantId"


@cache
def dedicated_template() -> dict[str, Any]:
    """The dedicated table's template as written (no transform to apply)."""
    return load_template(DEDICATED_TEMPLATE_PATH)


def dedicated_resources(kind: str) -> dict[str, dict[str, Any]]:
    """The dedicated template's resources of one type, by logical id."""
    return {name: res for name, res in dedicated_template()["Resources"].items() if res["Type"] == kind}


def stack_name(pool_stack: str, tenant_id: str) -> str:
    return f"{pool_stack}{STACK_INFIX}{tenant_id}"


def table_name(pool_table: str, tenant_id: str) -> str:
    return f"{pool_table}{TABLE_INFIX}{tenant_id}"


def dedicated_values(tenant_id: str, pool: Values, pool_exports: Mapping[str, str] | None = None) -> Values:
    """The values a tenant's stack is read with: its parameters (the tenant and
    the pool stack's name), the pool's account, Region and partition, its own
    stack name, and the pool stack's exports (``pool``'s reading of
    ``template.yaml``'s outputs, unless ``pool_exports`` gives them)."""
    pool_stack = pool.ref("AWS::StackName")
    values = Values()
    values.refs.update({name: pool.ref(name) for name in ("AWS::Region", "AWS::AccountId", "AWS::Partition")})
    values.refs.update(
        {
            "AWS::URLSuffix": pool.refs.get("AWS::URLSuffix", "amazonaws.com"),
            "AWS::StackName": stack_name(pool_stack, tenant_id),
            "TenantId": tenant_id,
            "PoolStackName": pool_stack,
        }
    )
    values.imports.update(exports(pool) if pool_exports is None else pool_exports)
    return values


def table_definition(values: Values) -> dict[str, Any]:
    """The dedicated table's CreateTable arguments for its shape (name, keys,
    indexes, stream, billing) as ``values`` read them: what the guard learns of
    it, without the key or anything made before it."""
    (table,) = dedicated_resources("AWS::DynamoDB::Table").values()
    props = table["Properties"]
    shape = ("TableName", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "BillingMode")
    return table_arguments(
        {name: values.resolve(props[name]) for name in (*shape, "StreamSpecification") if name in props}
    )


def imported_names() -> set[str]:
    """The export names the dedicated template imports, as ``${PoolStackName}-<name>`` strings."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "Fn::ImportValue":
                    found.add(str(item.get("Fn::Sub") if isinstance(item, dict) else item))
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(dedicated_template()["Resources"])
    return found
