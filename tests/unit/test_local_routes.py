"""The router's store on this machine (ops.local_routes, make dev CELLS=<n>): a JSON
file with the cloudfront-keyvaluestore API's semantics that ops.cell_routes relies on.
Its version (ETag) is a hash of the file's content, so every write changes it; a write
naming a version that is no longer the file's (another writer came first) fails with
ConflictException and changes nothing; a missing key is ResourceNotFoundException. And
ops.cell_routes, writing through it, keeps its guarantees: a racing writer's change
retried over, never an older epoch over a newer one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from ops.cell_routes import drop_tenant_route, publish_cell_origin, publish_tenant_route, tenant_route
from ops.local_routes import LOCAL_STORE_ARN, FileKeyValueStore

DOMAIN = "cella0000.execute-api.us-east-1.amazonaws.com"


@pytest.fixture
def store(tmp_path: Path) -> FileKeyValueStore:
    return FileKeyValueStore(tmp_path / "router-store.json")


def version(store: FileKeyValueStore) -> str:
    return str(store.describe_key_value_store(KvsARN=LOCAL_STORE_ARN)["ETag"])


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_a_write_naming_the_current_version_lands_and_changes_the_version(store: FileKeyValueStore) -> None:
    empty = version(store)
    store.put_key(KvsARN=LOCAL_STORE_ARN, Key="tenant/1", Value=tenant_route("cell-a", 1), IfMatch=empty)
    assert version(store) != empty
    assert store.get_key(KvsARN=LOCAL_STORE_ARN, Key="tenant/1")["Value"] == tenant_route("cell-a", 1)
    # the file is what the router reads: one JSON object of strings
    assert json.loads(store.path.read_text()) == {"tenant/1": tenant_route("cell-a", 1)}


def test_a_stale_version_fails_and_changes_nothing(store: FileKeyValueStore, tmp_path: Path) -> None:
    stale = version(store)
    other = FileKeyValueStore(store.path)  # another process's client of the same file
    other.put_key(KvsARN=LOCAL_STORE_ARN, Key="tenant/10", Value=tenant_route("cell-b", 1), IfMatch=stale)
    before = store.path.read_bytes()
    with pytest.raises(ClientError) as refused:
        store.put_key(KvsARN=LOCAL_STORE_ARN, Key="tenant/1", Value=tenant_route("cell-a", 1), IfMatch=stale)
    assert code(refused) == "ConflictException"
    assert store.path.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["router-store.json", "router-store.json.lock"]


def test_the_same_content_is_the_same_version_and_a_rewrite_of_other_content_is_not(store: FileKeyValueStore) -> None:
    first = version(store)
    store.put_key(KvsARN=LOCAL_STORE_ARN, Key="k", Value="1", IfMatch=first)
    written = version(store)
    assert FileKeyValueStore(store.path).describe_key_value_store(KvsARN=LOCAL_STORE_ARN)["ETag"] == written
    store.put_key(KvsARN=LOCAL_STORE_ARN, Key="k", Value="2", IfMatch=written)
    assert version(store) not in (first, written)


def test_a_missing_key_and_another_store_are_not_found(store: FileKeyValueStore) -> None:
    with pytest.raises(ClientError) as missing:
        store.get_key(KvsARN=LOCAL_STORE_ARN, Key="tenant/1")
    assert code(missing) == "ResourceNotFoundException"
    with pytest.raises(ClientError) as elsewhere:
        store.describe_key_value_store(KvsARN=LOCAL_STORE_ARN + "-other")
    assert code(elsewhere) == "ResourceNotFoundException"


def test_a_key_is_deleted_only_at_the_current_version_and_a_missing_one_is_not_found(
    store: FileKeyValueStore,
) -> None:
    for tenant in ("1", "10"):
        publish_tenant_route(store, LOCAL_STORE_ARN, tenant, "cell-a", 1)
    before = store.path.read_bytes()
    with pytest.raises(ClientError) as stale:
        store.delete_key(KvsARN=LOCAL_STORE_ARN, Key="tenant/1", IfMatch="stale")
    assert code(stale) == "ConflictException"
    assert store.path.read_bytes() == before
    store.delete_key(KvsARN=LOCAL_STORE_ARN, Key="tenant/1", IfMatch=version(store))
    assert store.items() == {"tenant/10": tenant_route("cell-a", 1)}
    with pytest.raises(ClientError) as missing:
        store.delete_key(KvsARN=LOCAL_STORE_ARN, Key="tenant/1", IfMatch=version(store))
    assert code(missing) == "ResourceNotFoundException"
    # through ops.cell_routes: once, whatever the entry's epoch; the tenant beside it kept
    publish_tenant_route(store, LOCAL_STORE_ARN, "1", "cell-b", 5)
    assert drop_tenant_route(store, LOCAL_STORE_ARN, "1") is True
    assert drop_tenant_route(store, LOCAL_STORE_ARN, "1") is False
    assert store.items() == {"tenant/10": tenant_route("cell-a", 1)}


def test_cell_routes_writes_through_it_with_its_guarantees(store: FileKeyValueStore) -> None:
    assert publish_cell_origin(store, LOCAL_STORE_ARN, "cell-a", DOMAIN, "v1") is True
    assert publish_tenant_route(store, LOCAL_STORE_ARN, "1", "cell-a", 1) is True
    assert publish_tenant_route(store, LOCAL_STORE_ARN, "1", "cell-a", 1) is False  # the same: no write
    assert publish_tenant_route(store, LOCAL_STORE_ARN, "1", "cell-b", 2) is True
    assert publish_tenant_route(store, LOCAL_STORE_ARN, "1", "cell-a", 1) is False  # never back to an older epoch
    assert store.items() == {
        "cell/cell-a": json.dumps({"domain": DOMAIN, "path": "/v1"}, separators=(",", ":")),
        "tenant/1": tenant_route("cell-b", 2),
    }


def test_a_racing_writer_between_the_read_and_the_write_is_retried_over(
    store: FileKeyValueStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another command writes tenant 10 after this one read the version: this write fails its
    condition, is tried again on the new version and lands; both entries are there."""
    other = FileKeyValueStore(store.path)
    put = FileKeyValueStore.put_key
    raced: list[str] = []

    attempts: list[str] = []

    def racing_put(self: FileKeyValueStore, **kwargs: str) -> object:
        if self is not store:
            return put(self, **kwargs)
        if not raced:
            raced.append(kwargs["Key"])
            publish_tenant_route(other, LOCAL_STORE_ARN, "10", "cell-b", 1)
        try:
            answer = put(self, **kwargs)
        except ClientError as exc:
            attempts.append(str(exc.response["Error"]["Code"]))
            raise
        attempts.append("written")
        return answer

    monkeypatch.setattr(FileKeyValueStore, "put_key", racing_put)
    assert publish_tenant_route(store, LOCAL_STORE_ARN, "1", "cell-a", 1) is True
    assert (raced, attempts) == (["tenant/1"], ["ConflictException", "written"])
    assert store.items() == {"tenant/1": tenant_route("cell-a", 1), "tenant/10": tenant_route("cell-b", 1)}


def test_removed_with_its_lock(store: FileKeyValueStore, tmp_path: Path) -> None:
    store.put_key(KvsARN=LOCAL_STORE_ARN, Key="k", Value="v", IfMatch=version(store))
    store.remove()
    assert list(tmp_path.iterdir()) == []
    assert store.items() == {}
