"""The layer package's layers, and which layer each of its modules is in: one
table, read by the import-direction test (``tests/unit/test_import_direction.py``)
and by the cold-import test (``tests/functional/test_cold_imports.py``).

Two kinds of folders. A folder *by kind* is wholly one layer (``data`` is
data access, ``streams`` the table's stream consumers...). A folder *by
feature* (``usage``, ``webhooks``) holds one feature across the layers, from
its pure functions to the consumer that runs it: each of its modules names its
layer here, and a new module that does not fails the import-direction test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

PACKAGE: Final = Path(__file__).parents[1] / "layers" / "shared" / "support_tickets"

# Lowest first. A module imports modules of lower layers and of its own; the
# layers of equal rank (domain, auth, consumer) are siblings that don't meet.
RANK: Final = {"core": 0, "data": 1, "domain": 2, "auth": 2, "consumer": 2, "api": 3}

# Folders by kind: the layer of every module in them.
KIND_FOLDERS: Final = {
    "core": "core",
    "data": "data",
    "domain": "domain",  # the REST functions' operations
    "auth": "auth",  # the Lambda TOKEN authorizer
    "streams": "consumer",  # the table's stream consumers
    "api": "api",
}

# Folders by feature, in the order they may import each other (a feature imports
# only those before it: webhooks meters its deliveries, usage knows no webhook code),
# and the layer of each module (its file name without ``.py``).
FEATURE_FOLDERS: Final = {
    "usage": {
        "meter": "core",  # every DynamoDB call of a TenantTable adds to it
        "prices": "core",
        "counters": "data",
        "report": "domain",
        "lines": "consumer",  # the stream functions' usage lines (the aggregator's shares)
        "metering": "consumer",  # the CloudWatch Logs consumer
    },
    "webhooks": {
        "events": "core",
        "urls": "core",
        "post": "core",
        "slots": "data",
        "delivery_records": "data",
        "admin_repository": "data",
        "parking": "data",
        "operations": "domain",
        "fanout": "consumer",  # the audit-trail function's second job, on the table's stream
        "delivery": "consumer",  # the webhook queue's (SQS) consumer
        "metered_delivery": "consumer",
    },
}


def folder_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0]


def layer_of(path: Path) -> str:
    """The layer of a module of the package (``KeyError``: a module no table names)."""
    folder = folder_of(path)
    if folder in KIND_FOLDERS:
        return KIND_FOLDERS[folder]
    if path.stem == "__init__":
        return "core"  # a feature's docstring: it imports nothing
    return FEATURE_FOLDERS[folder][path.stem]


def modules() -> list[Path]:
    """Every module of the package but its own ``__init__`` (the folders' ``__init__`` included)."""
    return sorted(path for path in PACKAGE.rglob("*.py") if path.parent != PACKAGE)


def dotted(path: Path) -> str:
    return ".".join(("support_tickets", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


def modules_of(*layers: str) -> tuple[str, ...]:
    """The dotted names of the package's modules in ``layers`` (a folder of one layer: the folder)."""
    found = {f"support_tickets.{folder}" for folder, layer in KIND_FOLDERS.items() if layer in layers}
    for folder, members in FEATURE_FOLDERS.items():
        found |= {f"support_tickets.{folder}.{name}" for name, layer in members.items() if layer in layers}
    return tuple(sorted(found))
