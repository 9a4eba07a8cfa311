"""The router's store on this machine (``make dev CELLS=<n>``): a JSON file of
``{key: value}`` that ``router/local_router.cjs`` reads again whenever it changes,
written through :mod:`ops.cell_routes` as the control plane's KeyValueStore is.

:class:`FileKeyValueStore` answers the four calls of the cloudfront-keyvaluestore
API that :mod:`ops.cell_routes` makes, with their semantics: the store's version
(``ETag``) is a hash of the file's content, so any write changes it; a ``PutKey``
or ``DeleteKey`` whose ``IfMatch`` is not the current version fails with ``ConflictException``; a
missing key is a ``ResourceNotFoundException``. A write replaces the file at once
(a new file renamed over the old one: a reader sees the old content or the new,
never half), under a lock that makes its version check and its write one step for
every process that writes through this class.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from botocore.exceptions import ClientError

# What the local store is called where the API names a store by its ARN.
LOCAL_STORE_ARN: Final = "arn:aws:cloudfront::123456789012:key-value-store/local-routes"


def _error(code: str, operation: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


class FileKeyValueStore:
    """A KeyValueStore held in ``path`` (see the module), for :mod:`ops.cell_routes`."""

    def __init__(self, path: Path, arn: str = LOCAL_STORE_ARN) -> None:
        self.path = path
        self.arn = arn

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def describe_key_value_store(self, **kwargs: str) -> Mapping[str, Any]:
        self._check_arn("DescribeKeyValueStore", kwargs)
        content = self._content()
        return {"KvsARN": self.arn, "ETag": version_of(content), "ItemCount": len(_items(content))}

    def get_key(self, **kwargs: str) -> Mapping[str, Any]:
        self._check_arn("GetKey", kwargs)
        items = _items(self._content())
        key = kwargs["Key"]
        if key not in items:
            raise _error("ResourceNotFoundException", "GetKey", f"{key}: no such key")
        return {"Key": key, "Value": items[key]}

    def put_key(self, **kwargs: str) -> Mapping[str, Any]:
        self._check_arn("PutKey", kwargs)
        with self._locked():
            content = self._content()
            if kwargs.get("IfMatch") != version_of(content):
                raise _error("ConflictException", "PutKey", "the store changed since its version was read")
            items = {**_items(content), kwargs["Key"]: kwargs["Value"]}
            written = self._replace(items)
        return {"ETag": version_of(written), "ItemCount": len(items)}

    def delete_key(self, **kwargs: str) -> Mapping[str, Any]:
        self._check_arn("DeleteKey", kwargs)
        with self._locked():
            content = self._content()
            if kwargs.get("IfMatch") != version_of(content):
                raise _error("ConflictException", "DeleteKey", "the store changed since its version was read")
            items = _items(content)
            if kwargs["Key"] not in items:
                raise _error("ResourceNotFoundException", "DeleteKey", f"{kwargs['Key']}: no such key")
            del items[kwargs["Key"]]
            written = self._replace(items)
        return {"ETag": version_of(written), "ItemCount": len(items)}

    def _replace(self, items: dict[str, str]) -> bytes:
        """The file replaced at once by ``items`` (under the lock); its new content."""
        written = json.dumps(items, indent=2, sort_keys=True).encode() + b"\n"
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temporary.write_bytes(written)
        temporary.replace(self.path)
        return written

    def items(self) -> dict[str, str]:
        """Every key and its value."""
        return _items(self._content())

    def remove(self) -> None:
        """The store's file and its lock gone (the local set stopping)."""
        self.path.unlink(missing_ok=True)
        self.lock_path.unlink(missing_ok=True)

    def _content(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self.lock_path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _check_arn(self, operation: str, kwargs: Mapping[str, str]) -> None:
        if kwargs.get("KvsARN") != self.arn:
            raise _error("ResourceNotFoundException", operation, f"no key value store {kwargs.get('KvsARN')!r}")


def version_of(content: bytes) -> str:
    """The store's version for this file content (an empty or missing file included)."""
    return hashlib.sha256(content).hexdigest()[:32]


def _items(content: bytes) -> dict[str, str]:
    if not content.strip():
        return {}
    loaded = json.loads(content)
    if not isinstance(loaded, dict) or not all(isinstance(value, str) for value in loaded.values()):
        raise ValueError("the router's store file is not a JSON object of strings")
    return {str(key): value for key, value in loaded.items()}
