"""How a command reaches a running local stack's control endpoints
(``/_local/...`` on its emulator's port): with the stack's own token, which
only its state file gives (``control_url`` and ``control_token`` there).

Here in ``ops`` because operator commands that work on the local stack too
(``ops.dedicated --local``) call them, and ``ops`` never imports the local
stack; :mod:`local_stack.running_stack` uses the same header and call.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import Any

# The control endpoints answer only requests that carry this header with the running stack's
# own token (``control_token`` in the state file, random at every start): the stack's tools and
# tests read it; a webhook delivery pointed at the port never has it.
CONTROL_TOKEN_HEADER = "X-Local-Control-Token"  # noqa: S105 - a header name, not a secret


def control_call(state: Mapping[str, Any], path: str, *, timeout: float, method: str = "POST") -> dict[str, Any]:
    """The running stack's answer to ``<method> /_local/<path>`` (its control endpoint, with its token)."""
    request = urllib.request.Request(  # noqa: S310 - the local control endpoint
        f"{state['control_url']}/{path}", method=method, headers={CONTROL_TOKEN_HEADER: str(state["control_token"])}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
        result: dict[str, Any] = json.load(response)
    return result
