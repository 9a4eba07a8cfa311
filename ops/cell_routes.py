"""The router's store with cells: what the operator's commands write into the control
plane's KeyValueStore (templates/control-plane.yaml's ``RoutesStore``) right after the
directory, and what the edge router (router/edge_router.js) reads at every request::

    tenant/<tenant id>  {"cell": "<cell id>", "epoch": <n>}
    cell/<cell id>      {"domain": "<api id>.execute-api.<region>.amazonaws.com", "path": "/<stage>"}

The directory is the truth; the store is its projection at the edge, written by the
same command that wrote the directory (no stream or function between them), after it.
Each write is conditional on the store's version (the cloudfront-keyvaluestore API's
``IfMatch`` ETag): read the version, read the entry, write; a write by anyone else in
between fails the condition, and the whole is tried again. A tenant's entry is never
replaced by one of a lower epoch, so two commands racing, or a command resumed after
another moved the tenant again, cannot leave an older route behind; the same epoch
again is a no-op, so a command interrupted between the directory and the store is
finished by running it again. An offboarded tenant's entry is deleted, after the
directory's last placement of it and before the directory forgets it.

A route that is stale for any reason (not written yet, not propagated to the edge yet)
is safe: it sends the tenant's requests to a cell that refuses them (503
``TENANT_MOVING`` with ``Retry-After``), never to data the cell does not own.

The API signs with SigV4A: boto3 needs the AWS CRT (``awscrt``, botocore's ``crt``
extra) for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from botocore.exceptions import ClientError

from support_tickets.core.keys import TENANT_ID_PATTERN

TENANT_KEY: Final = "tenant/"
CELL_KEY: Final = "cell/"
# Cell ids are written as tenant ids are: lowercase letters, digits and "-".
_ID: Final = re.compile(TENANT_ID_PATTERN)
# The router sends tokens to a regional API Gateway endpoint and nothing else.
API_DOMAIN_PATTERN: Final = r"^[a-z0-9]{1,63}\.execute-api\.[a-z0-9-]{1,32}\.amazonaws\.com$"
_API_DOMAIN: Final = re.compile(API_DOMAIN_PATTERN)
# template.yaml's StageName.
_STAGE: Final = re.compile(r"^[A-Za-z0-9_]{1,64}$")
# Writes that lost the race for the store's version, tried again before giving up.
ATTEMPTS: Final = 8


class KeyValueStoreClient(Protocol):
    """The calls of boto3's ``cloudfront-keyvaluestore`` client used here."""

    def describe_key_value_store(self, **kwargs: str) -> Mapping[str, Any]: ...

    def get_key(self, **kwargs: str) -> Mapping[str, Any]: ...

    def put_key(self, **kwargs: str) -> Mapping[str, Any]: ...

    def delete_key(self, **kwargs: str) -> Mapping[str, Any]: ...


class RouteConflict(RuntimeError):
    """The store's version kept changing under every attempt (others writing it)."""


def _checked_id(kind: str, value: str) -> str:
    if not _ID.fullmatch(value):
        raise ValueError(f"not a {kind} id ([a-z0-9-], 1 to 63 characters): {value!r}")
    return value


def tenant_route_key(tenant_id: str) -> str:
    return TENANT_KEY + _checked_id("tenant", tenant_id)


def cell_origin_key(cell_id: str) -> str:
    return CELL_KEY + _checked_id("cell", cell_id)


def tenant_route(cell_id: str, epoch: int) -> str:
    """A tenant's entry: its cell and the directory's epoch that placed it there."""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"not an epoch: {epoch!r}")
    return json.dumps({"cell": _checked_id("cell", cell_id), "epoch": epoch}, separators=(",", ":"))


def cell_origin(api_domain: str, stage: str) -> str:
    """A cell's entry: its API's regional domain and stage, as the router's origin."""
    if not _API_DOMAIN.fullmatch(api_domain):
        raise ValueError(f"not a regional API Gateway domain: {api_domain!r}")
    if not _STAGE.fullmatch(stage):
        raise ValueError(f"not a stage name: {stage!r}")
    return json.dumps({"domain": api_domain, "path": f"/{stage}"}, separators=(",", ":"))


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _current(client: KeyValueStoreClient, kvs_arn: str, key: str) -> str | None:
    try:
        return str(client.get_key(KvsARN=kvs_arn, Key=key)["Value"])
    except ClientError as exc:
        if _error_code(exc) == "ResourceNotFoundException":
            return None
        raise


def _epoch_of(value: str | None) -> int | None:
    """The epoch of a stored tenant entry; None when there is none (or it is unreadable,
    which any well-formed entry replaces)."""
    if value is None:
        return None
    try:
        epoch = json.loads(value).get("epoch")
    except (ValueError, AttributeError):
        return None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def _put_if_unchanged(
    client: KeyValueStoreClient, kvs_arn: str, key: str, value: str, replaces: Callable[[str | None], bool]
) -> bool:
    """Writes ``value`` at ``key`` if it is not there and ``replaces(current value)``;
    conditional on the store's version, tried again when it moved. Whether it wrote."""

    def put(version: str) -> None:
        client.put_key(KvsARN=kvs_arn, Key=key, Value=value, IfMatch=version)

    return _on_version(client, kvs_arn, key, lambda current: current != value and replaces(current), put)


def _on_version(
    client: KeyValueStoreClient,
    kvs_arn: str,
    key: str,
    wanted: Callable[[str | None], bool],
    write: Callable[[str], None],
) -> bool:
    """``write(version)`` if ``wanted(the key's current value)``, conditional on the store's
    version (``IfMatch``), read again and retried when another writer moved it. Whether it wrote."""
    for _ in range(ATTEMPTS):
        version = str(client.describe_key_value_store(KvsARN=kvs_arn)["ETag"])
        if not wanted(_current(client, kvs_arn, key)):
            return False
        try:
            write(version)
        except ClientError as exc:
            if _error_code(exc) == "ConflictException":
                continue
            raise
        return True
    raise RouteConflict(f"{key}: the store's version changed under {ATTEMPTS} attempts; run the command again")


def publish_tenant_route(client: KeyValueStoreClient, kvs_arn: str, tenant_id: str, cell_id: str, epoch: int) -> bool:
    """Routes ``tenant_id`` to ``cell_id`` as of the directory's ``epoch``, unless the store
    already holds this epoch or a later one. Whether it wrote."""
    value = tenant_route(cell_id, epoch)

    def older(current: str | None) -> bool:
        stored = _epoch_of(current)
        return stored is None or stored < epoch

    return _put_if_unchanged(client, kvs_arn, tenant_route_key(tenant_id), value, older)


def drop_tenant_route(client: KeyValueStoreClient, kvs_arn: str, tenant_id: str) -> bool:
    """The tenant's entry deleted, whatever its epoch: the directory forgot the tenant
    (offboarded), so the router sends its requests to the default cell, which refuses
    them. Left there, its epoch would refuse every later one, and a placement the
    directory makes again starts at 1. Conditional on the store's version, as a write
    is. Whether it deleted."""
    key = tenant_route_key(tenant_id)

    def delete(version: str) -> None:
        client.delete_key(KvsARN=kvs_arn, Key=key, IfMatch=version)

    return _on_version(client, kvs_arn, key, lambda current: current is not None, delete)


def publish_cell_origin(client: KeyValueStoreClient, kvs_arn: str, cell_id: str, api_domain: str, stage: str) -> bool:
    """Names ``cell_id``'s API origin (once per cell, and when its API is replaced).
    Whether it wrote."""
    value = cell_origin(api_domain, stage)
    return _put_if_unchanged(client, kvs_arn, cell_origin_key(cell_id), value, lambda _current: True)
