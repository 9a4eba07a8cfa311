"""A function for tests/functional/test_execution_environments.py: it leaves
state behind in its modules when asked (``os.environ``, an attribute of a
shared-layer module, ``sys.modules``, the layer's cached failure-queue client)
and reports what it finds of anyone's (the marks earlier invocations of its
environment were given, its context's tenant), or it sleeps, waits, raises or exits."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

from support_tickets.streams import records

COLD = {"start": True}
# What this environment's invocations were given to remember (module state).
MARKS: list[str] = []


def _queue_client_key() -> str | None:
    if records.failure_queue_client.cache_info().currsize == 0:
        return None
    key: str = records.failure_queue_client()._request_signer._credentials.access_key
    return key


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
    cold, COLD["start"] = COLD["start"], False
    if "mark" in event:
        MARKS.append(event["mark"])
    action = event.get("action")
    if action == "leave":
        os.environ["LEFT_BY"] = name
        records.left_by = name  # type: ignore[attr-defined]
        sys.modules[f"left_by_{name}"] = types.ModuleType(f"left_by_{name}")
        records.failure_queue_client()
    elif action == "raise":
        raise RuntimeError(event["message"])
    elif action == "exit":
        os._exit(int(event["code"]))
    elif action == "sleep":
        time.sleep(float(event["seconds"]))
    elif action == "wait_for":
        # Returns once another invocation has created the file (or the function's timeout ends it).
        if "started" in event:
            Path(event["started"]).touch()
        while not Path(event["path"]).exists():
            time.sleep(0.01)
    elif action == "create":
        Path(event["path"]).touch()
    elif action == "unserializable":
        return {"value": object()}
    return {
        "function": name,
        "pid": os.getpid(),
        "cold_start": cold,
        "left_by_env": os.environ.get("LEFT_BY"),
        "left_in_layer": getattr(records, "left_by", None),
        "left_modules": sorted(module for module in sys.modules if module.startswith("left_by_")),
        "queue_client_key": _queue_client_key(),
        "access_key": os.environ.get("AWS_ACCESS_KEY_ID"),
        "profile": os.environ.get("AWS_PROFILE"),
        "sys_path": sys.path[:2],
        "stack_importable": [
            module for module in ("local_stack", "stack_model", "tests") if importlib.util.find_spec(module)
        ],
        "remaining_ms": context.get_remaining_time_in_millis(),
        "request_id": context.aws_request_id,
        "memory": context.memory_limit_in_mb,
        "tenant_id": context.tenant_id,
        "marks": list(MARKS),
    }
